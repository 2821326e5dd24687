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
def reference_layers(texts: tuple[str, ...]) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Every non-special piece's (sentence, position), every hidden state (L+1,n,D) and every layer's heads' outputs
    (L,n,H,Dh), taken as they enter each layer's output projection: one forward for every layer a test searches. In
    float32 as the model gives them (every layer in float64 would hold twice the memory: about 200 MB for the bundled
    corpus); kept for the next search of the same texts."""
    reference, tokenizer = transformers_encoder()
    config, caught = reference.config, {}
    hooks = [layer.attention.output.dense.register_forward_pre_hook(
        lambda module, args, i=i: caught.update({i: args[0]})) for i, layer in enumerate(reference.encoder.layer)]
    where, hidden, heads = [], [], []
    try:
        with torch.no_grad():
            for start in range(0, len(texts), BATCH):
                enc = tokenizer(texts[start: start + BATCH], return_tensors="pt", padding=True)
                out = reference(**enc, output_hidden_states=True)
                states = torch.stack(out.hidden_states)  # (L+1,B,T,D)
                contexts = torch.stack([caught[i] for i in range(config.num_hidden_layers)])  # (L,B,T,H*Dh)
                for b in range(len(enc.input_ids)):
                    keep = [t for t, w in enumerate(enc.word_ids(b)) if w is not None]
                    where += [(start + b, t) for t in keep]
                    hidden.append(states[:, b, keep].numpy())  # (L+1,k,D)
                    per_head = contexts[:, b, keep].reshape(config.num_hidden_layers, len(keep),
                                                            config.num_attention_heads, -1)
                    heads.append(per_head.numpy())  # (L,k,H,Dh)
    finally:
        for hook in hooks:
            hook.remove()
    return where, np.concatenate(hidden, axis=1), np.concatenate(heads, axis=1)


def reference_pieces(texts: tuple[str, ...], layer: int) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Every non-special piece's (sentence, position), hidden_states[layer] (n,D) and layer `layer`'s heads' outputs
    (n,H,Dh) (the last layer's for `layer` = L), in float64 for the cosines."""
    where, hidden, heads = reference_layers(texts)
    return where, hidden[layer].astype(np.float64), heads[min(layer, len(heads) - 1)].astype(np.float64)


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
