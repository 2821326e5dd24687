"""One forward of a pair in one direction, read every way the alignment methods use: each head's word maps for each
way of reading a translation word's rows (align.ROWS) and of pooling a word's pieces (POOLINGS), and each layer's
similarity between the two sentences' words (hidden.layer_similarity, SimAlign's evidence).

A word's pieces are pooled by one stated rule (POOLINGS): "sum": attention to a word is the sum over its pieces'
columns, attention from a word the mean of its pieces' rows, and a word's vector the mean of its pieces' (the sum's
direction: cosine reads no length); "max": the largest of each; "first": its first piece's alone.

Shapes: L layers, H heads, P pieces of the prompt, k pieces of the shared start, S source words, T target words,
D d_model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.translation.align import ROW_SHIFTS, ROWS, WordMaps, read_pair
from mha_core.analysis.translation.hidden import layer_similarity
from mha_core.engine.cache import layers_after_start
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

POOLINGS = ("sum", "max", "first")


def pooled(x: Tensor, groups: Sequence[Sequence[int]], pooling: str, dim: int, total: bool) -> Tensor:
    """`x`'s pieces along `dim` pooled into one entry per word (groups: each word's pieces) by POOLINGS' rule;
    `total`: "sum" sums (attention to a word), else it averages (rows from a word, a word's vector)."""
    words = []
    for group in groups:
        picked = x.index_select(dim, torch.tensor(list(group), device=x.device))
        if pooling == "first":
            words.append(picked.select(dim, 0))
        elif pooling == "max":
            words.append(picked.amax(dim))
        else:
            words.append(picked.sum(dim) if total else picked.mean(dim))
    return torch.stack(words, dim)


@dataclass(frozen=True)
class DirectionRun:
    """A pair read in one direction: every head's word maps and every layer's word similarity."""

    source_words: tuple[str, ...]  # S
    target_words: tuple[str, ...]  # T
    prompt: str  # what the model read (the translation appended)
    maps: dict[tuple[str, str], np.ndarray]  # (pooling, rows) -> (L,H,T,S) float32 a target word's attention
    similarity: dict[str, np.ndarray]  # pooling -> (L+1,T,S) float32 cosine of the words' standardized states

    def word_maps(self, rows: str = "previous", pooling: str = "sum") -> WordMaps:
        return WordMaps(self.source_words, self.target_words, self.maps[pooling, rows], self.prompt, rows)


def check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise InputError("unknown_pooling", N_("A word's pieces are pooled by {poolings}, not {given!r}."),
                         poolings=", ".join(POOLINGS), given=str(pooling)[:20])
    return pooling


@torch.inference_mode()
def direction_run(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str],
                  source_language: str, target_language: str, poolings: Sequence[str] = POOLINGS) -> DirectionRun:
    """Forced alignment's forward: the prompt with `target` appended as the model's continuation, run once after the
    example pairs every prompt in this direction starts with (computed once: layers_after_start)."""
    for pooling in poolings:
        check_pooling(pooling)
    read = read_pair(model, source, target, source_language, target_language)
    prompted = read.prompted
    first = min(p for group in read.source_groups for p in group)  # the first piece whose state is read
    k, maps, hidden = layers_after_start(model, read.batch, prompted.text[:prompted.examples_end], first)
    source_groups = [[p - k for p in group] for group in read.source_groups]  # rows of `hidden`
    target_groups = [[p - k for p in group] for group in read.target_groups]
    word_maps, similarity = {}, {}
    for pooling in poolings:
        to_source = pooled(maps, read.source_groups, pooling, dim=3, total=True)  # (L,H,P-k,S)
        for rows, shift in zip(ROWS, ROW_SHIFTS, strict=True):
            row_groups = [[p - shift for p in group] for group in target_groups]
            word_maps[pooling, rows] = pooled(to_source, row_groups, pooling, dim=2, total=False).numpy()
        source_vectors = pooled(hidden, source_groups, pooling, dim=1, total=False)  # (L+1,S,D)
        target_vectors = pooled(hidden, target_groups, pooling, dim=1, total=False)  # (L+1,T,D)
        similarity[pooling] = layer_similarity(source_vectors, target_vectors).numpy()
    return DirectionRun(read.source_words, read.target_words, prompted.text, word_maps, similarity)


def both_rows(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str,
              target_language: str, pooling: str = "sum") -> dict[str, WordMaps]:
    """The word maps for each way of reading a target word's rows (ROWS), from one forward."""
    run = direction_run(model, source, target, source_language, target_language, (pooling,))
    return {rows: run.word_maps(rows, pooling) for rows in ROWS}


def word_maps(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str,
              target_language: str, rows: str = "previous", pooling: str = "sum") -> WordMaps:
    """Every head's (T,S) word map of a forced alignment. A sentence is a text (split into words) or its words."""
    if rows not in ROWS:
        raise InputError("unknown_rows", N_("Rows are {rows}, not {given!r}."), rows=", ".join(ROWS), given=rows)
    return both_rows(model, source, target, source_language, target_language, pooling)[rows]
