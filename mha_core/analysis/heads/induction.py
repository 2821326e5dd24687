"""Induction and duplicate-token heads (Olsson et al., 2022), on repeated random token sequences.

A random sequence of 20-50 ordinary tokens is repeated once after the first special token ([BOS] / [CLS]):
    [BOS] t_1 ... t_n t_1 ... t_n   (encoders end with [SEP] as they always do)
For each token of the repeat (query at position n + 1 + i), an induction head attends to the token right after
that token's earlier occurrence (position 2 + i: "what came next last time"); a duplicate-token head attends to
the earlier occurrence itself (position 1 + i). Scores are mean attention over every token of the repeat and
INDUCTION_SEQUENCES sequences (fixed seed); the baseline is uniform attention over the positions each query
can see (causal: 1/(p + 1); an encoder: 1/T).

Shapes: L layers, H heads, N sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from mha_core.engine.batching import map_batches
from mha_core.engine.forward import forward
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import ids_batch

INDUCTION_SEQUENCES = 32
INDUCTION_LENGTHS = (20, 50)  # each sequence's length is drawn from this range (inclusive)
INDUCTION_SEED = 0
INDUCTION_BATCH_PIECES = 1024  # pieces per forward: 8-16 sequences of similar length, little padding
INDUCTION_MIN = 0.4  # a head whose induction score reaches this is labelled "induction"


@dataclass(frozen=True)
class InductionScores:
    induction: np.ndarray  # (L,H) mean attention from the repeat to the token after the earlier occurrence
    duplicate: np.ndarray  # (L,H) mean attention from the repeat to the earlier occurrence itself
    baseline: float  # the same mean under uniform attention over the visible positions
    sequences: int

    def induction_heads(self, threshold: float = INDUCTION_MIN) -> list[tuple[int, int]]:
        layers, heads = np.nonzero(self.induction >= threshold)
        return [(int(layer), int(head)) for layer, head in zip(layers, heads, strict=True)]

    def head_labels(self) -> dict[tuple[int, int], str]:
        """{(layer, head): "induction"} for the heads over INDUCTION_MIN (as SyntaxResult and CorefResult label)."""
        return dict.fromkeys(self.induction_heads(), "induction")


def ordinary_token_ids(tokenizer: object, vocab_rows: int) -> np.ndarray:
    """Ids a random sequence may use: every id the model embeds that is no special token."""
    special = set(tokenizer.all_special_ids)
    return np.array([i for i in range(min(len(tokenizer), vocab_rows)) if i not in special])


def repeated_sequences(model: LoadedModel, n: int, seed: int) -> tuple[list[list[int]], list[list[bool]], list[int]]:
    """(token ids, special flags, sequence length) of n repeated random sequences."""
    tok = model.tokenizer
    rng = np.random.default_rng(seed)
    pool = ordinary_token_ids(tok, model.embeddings.word.shape[0])
    first = model.bos_id if model.bos_id is not None else (tok.cls_token_id if tok.cls_token_id is not None
                                                             else tok.bos_token_id)
    last = [tok.sep_token_id] if not model.causal and tok.sep_token_id is not None else []
    longest = min(INDUCTION_LENGTHS[1], (model.max_length - 2) // 2)  # two copies and the specials must fit
    shortest = min(INDUCTION_LENGTHS[0], longest)
    ids, special, lengths = [], [], []
    for _ in range(n):
        length = int(rng.integers(shortest, longest + 1))
        seq = rng.choice(pool, size=length, replace=False).tolist()
        lead = [first] if first is not None else []
        ids.append(lead + seq + seq + last)
        special.append([True] * len(lead) + [False] * (2 * length) + [True] * len(last))
        lengths.append(length)
    return ids, special, lengths


@torch.inference_mode()
def induction_scores(model: LoadedModel, n: int = INDUCTION_SEQUENCES, seed: int = INDUCTION_SEED) -> InductionScores:
    """Olsson et al.'s induction probe: `n` random sequences repeated once (seeded); each head's mean weight from a
    second-half token to the token after its earlier occurrence (induction) and to that occurrence (duplicate).
    Sequences of similar length share a forward (one batch of all would be a third padding), as in a corpus pass."""
    ids, special, lengths = repeated_sequences(model, n, seed)
    lead = int(special[0][0])  # 1 when a first special token leads every sequence
    induction, duplicate, baseline, count = 0.0, 0.0, 0.0, 0
    for batch in map_batches([len(row) for row in ids], model.n_layers * model.n_heads, budget=INDUCTION_BATCH_PIECES,
                             model=model):  # similar lengths, cut to the maps' and the forward's memory budget
        result = forward(model, ids_batch(model.tokenizer, [ids[i] for i in batch], [special[i] for i in batch]),
                         path="explicit")
        for b, length in enumerate(lengths[i] for i in batch):
            maps = result.text_maps(b)  # (L,H,T,T)
            queries = torch.arange(length) + lead + length  # the repeat
            induction = induction + maps[:, :, queries, queries - length + 1].sum(-1)  # (L,H)
            duplicate = duplicate + maps[:, :, queries, queries - length].sum(-1)
            visible = (queries + 1).float() if model.causal else torch.full((length,), float(maps.shape[-1]))
            baseline += float((1 / visible).sum())
            count += length
    return InductionScores((induction / count).numpy(), (duplicate / count).numpy(), baseline / count, n)
