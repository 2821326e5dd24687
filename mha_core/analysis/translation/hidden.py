"""What the representations say: SimAlign (Jalili Sabet et al. 2020) on the decoder's own run. Each layer's hidden
states of the two sentences' words (run.py pools a word's pieces) compared by cosine, and links read from the
similarity by ArgMax (a link where each word is the other's most similar) or IterMax (ArgMax, then again among the
words left unaligned, their similarity to an aligned word's partner discounted; SimAlign's two rounds, alpha 0.9).

A decoder's hidden states share a few huge dimensions (massive activations) that make every pair of words alike
(cosine near 1): each dimension is first standardized over the pair's own words (mean 0, spread 1), which needs no
corpus and no training. The layers whose similarities are averaged are chosen on the development half
(benchmarks/bench_align.py measures each layer).

Shapes: L layers (L+1 states: the embeddings, then each layer's output), S source words, T target words, D d_model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.translation.gold import Links

MATCHINGS = ("argmax", "itermax")
ITERMAX_ROUNDS = 2  # SimAlign's max_count
ITERMAX_DISCOUNT = 0.9  # SimAlign's alpha_ratio: a word aligned in an earlier round counts this much less


def layer_similarity(source_vectors: Tensor, target_vectors: Tensor) -> Tensor:
    """(L+1,T,S) each layer's similarity in [0, 1] ((cosine + 1) / 2, as SimAlign) between every target word and every
    source word, each dimension standardized over the pair's words first. source (L+1,S,D), target (L+1,T,D)."""
    words = torch.cat([source_vectors, target_vectors], dim=1).float()  # (L+1,S+T,D)
    mean = words.mean(dim=1, keepdim=True)
    spread = words.std(dim=1, keepdim=True, correction=0) + 1e-6
    standard = torch.nn.functional.normalize((words - mean) / spread, dim=-1)
    n_source = source_vectors.shape[1]
    source, target = standard[:, :n_source], standard[:, n_source:]
    return (torch.matmul(target, source.transpose(1, 2)) + 1.0) / 2.0


def pooled_similarity(similarities: Sequence[np.ndarray], layers: Sequence[int]) -> np.ndarray:
    """(T,S) the mean over the given runs' (each (L+1,T,S), one per direction) chosen layers."""
    return np.mean([similarity[list(layers)].mean(axis=0) for similarity in similarities], axis=0)


def mutual_argmax(matrix: np.ndarray) -> np.ndarray:
    """(T,S) bool: where the target word's most similar source word has it as its most similar target word."""
    rows = np.zeros(matrix.shape, dtype=bool)
    rows[np.arange(matrix.shape[0]), matrix.argmax(axis=1)] = True
    columns = np.zeros(matrix.shape, dtype=bool)
    columns[matrix.argmax(axis=0), np.arange(matrix.shape[1])] = True
    return rows & columns


def itermax(matrix: np.ndarray, rounds: int = ITERMAX_ROUNDS, discount: float = ITERMAX_DISCOUNT) -> np.ndarray:
    """(T,S) bool, IterMax: ArgMax, then up to rounds - 1 more ArgMax rounds on the cells with a word not aligned
    yet, each such cell's similarity multiplied by `discount` where one of its words is already aligned (by 1 where
    neither is). A sentence of at most two words takes the first round only."""
    linked = mutual_argmax(matrix)
    if min(matrix.shape) <= 2:
        return linked
    for _ in range(rounds - 1):
        free_rows, free_columns = ~linked.any(axis=1), ~linked.any(axis=0)
        if not free_rows.any() or not free_columns.any():
            break
        either = free_rows[:, None] | free_columns[None, :]  # a cell with at least one word not aligned
        weight = np.clip(discount * free_rows[:, None] + discount * free_columns[None, :], 0.0, 1.0)
        added = mutual_argmax(matrix * weight) & either
        if not (added & ~linked).any():
            break
        linked = linked | added
    return linked


def matched_links(matrix: np.ndarray, matching: str, allowed: np.ndarray | None = None) -> Links:
    """The (source, target) links MATCHINGS[matching] reads from a (T,S) similarity in [0, 1], only where `allowed`."""
    if allowed is not None:
        matrix = np.where(allowed, matrix, -1.0)
    linked = itermax(matrix) if matching == "itermax" else mutual_argmax(matrix)
    return frozenset((int(s), int(t)) for t, s in zip(*np.nonzero(linked), strict=True))
