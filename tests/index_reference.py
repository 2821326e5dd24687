"""Nearest pieces computed plainly from transformers' own BertModel (the bundled encoder, eager): the reference the
corpus index's search (tests/test_corpus_index.py) and the Heads page's search tab (tests/test_app_search.py) are
held to."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from tests.conftest import transformers_encoder

BATCH = 64  # sentences per forward


@lru_cache(maxsize=2)
def reference_pieces(texts: tuple[str, ...], layer: int) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Every non-special piece's (sentence, position), hidden_states[layer] (n,D) and layer `layer`'s heads' outputs
    (n,H,Dh), taken as they enter its output projection (the last layer's for `layer` = L). Kept for the next
    search of the same texts."""
    reference, tokenizer = transformers_encoder()
    config, caught = reference.config, {}
    block = reference.encoder.layer[min(layer, config.num_hidden_layers - 1)].attention.output.dense
    hook = block.register_forward_pre_hook(lambda module, args: caught.update(context=args[0]))
    where, hidden, heads = [], [], []
    try:
        with torch.no_grad():
            for start in range(0, len(texts), BATCH):
                enc = tokenizer(texts[start: start + BATCH], return_tensors="pt", padding=True)
                out = reference(**enc, output_hidden_states=True)
                for b in range(len(enc.input_ids)):
                    keep = [t for t, w in enumerate(enc.word_ids(b)) if w is not None]
                    where += [(start + b, t) for t in keep]
                    hidden.append(out.hidden_states[layer][b, keep].double().numpy())
                    per_head = caught["context"][b, keep].reshape(len(keep), config.num_attention_heads, -1)
                    heads.append(per_head.double().numpy())
    finally:
        hook.remove()
    return where, np.concatenate(hidden), np.concatenate(heads)


def cosines(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    return rows @ query / (np.linalg.norm(rows, axis=-1) * np.linalg.norm(query))


def nearest_pieces(corpus: list[str], text: str, position: int, layer: int, heads: tuple[int, ...]
                   ) -> tuple[list[tuple[int, int]], np.ndarray]:
    """Every piece of `corpus` by its similarity to `text`'s piece at `position`, best first: plain cosines of the
    hidden states, or the mean over `heads` of each head's: (sentence, position) and score."""
    where, hidden, context = reference_pieces((*corpus, text), layer)
    query_row = where.index((len(corpus), position))
    rows = [i for i, (s, _) in enumerate(where) if s < len(corpus)]
    if heads:
        scores = np.mean([cosines(context[rows, h], context[query_row, h]) for h in heads], axis=0)
    else:
        scores = cosines(hidden[rows], hidden[query_row])
    best = np.argsort(-scores, kind="stable")
    return [where[rows[i]] for i in best], scores[best]
