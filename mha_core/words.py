"""Word pieces <-> words, and the display options that reshape attention maps.

Shapes: L layers, H heads, T word pieces, N display units (pieces or words), W words.
Merging pieces into words follows Clark et al. (2019): attention *to* a word is the sum over its
pieces (keeps each row a distribution), attention *from* a word is the mean over its pieces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mha_core.result import AttentionResult


@dataclass(frozen=True)
class Units:
    """How display units are made of pieces: unit u covers pieces groups[u]."""

    labels: tuple[str, ...]  # N display labels
    groups: tuple[tuple[int, ...], ...]  # N piece index groups (into the text's T pieces)
    special: tuple[bool, ...]  # N True for [CLS]/[SEP]-like units (word id None)


@dataclass(frozen=True)
class AttentionView:
    """One text's attention after the display options, ready for figures and export."""

    labels: tuple[str, ...]  # N
    maps: np.ndarray  # (L,H,N,N) float32; rows sum to 1 over shown keys
    hidden_special: bool
    merged_words: bool


def piece_units(tokens: Sequence[str], word_ids: Sequence[int | None]) -> Units:
    return Units(
        labels=tuple(tokens), groups=tuple((i,) for i in range(len(tokens))),
        special=tuple(w is None for w in word_ids),
    )


def word_units(text: str, tokens: Sequence[str], word_ids: Sequence[int | None],
               offsets: Sequence[tuple[int, int]]) -> Units:
    """Group consecutive pieces of one word; specials stay units of their own."""
    labels, groups, special = [], [], []
    for i, (token, wid) in enumerate(zip(tokens, word_ids, strict=True)):
        if wid is not None and groups and not special[-1] and word_ids[groups[-1][-1]] == wid:
            groups[-1] = (*groups[-1], i)
            start = offsets[groups[-1][0]][0]
            labels[-1] = text[start:offsets[i][1]] or labels[-1] + token.removeprefix("##")
            continue
        groups.append((i,))
        special.append(wid is None)
        labels.append(token if wid is None else (text[offsets[i][0]:offsets[i][1]] or token))
    return Units(tuple(labels), tuple(groups), tuple(special))


def merge_pieces(maps: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., T, T) -> (..., N, N): columns summed within a group, rows averaged within a group."""
    t = maps.shape[-1]
    pool = np.zeros((t, len(groups)), dtype=maps.dtype)  # (T,N) membership
    for u, group in enumerate(groups):
        pool[list(group), u] = 1.0
    to_units = maps @ pool  # (...,T,N) sum over a unit's key pieces
    mean_rows = pool / pool.sum(axis=0, keepdims=True)  # (T,N) averaging weights
    return np.swapaxes(np.swapaxes(to_units, -1, -2) @ mean_rows, -1, -2)  # (...,N,N)


def drop_and_renormalise(maps: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    """Keep rows and columns `keep` of (..., N, N) and rescale each row to sum to 1."""
    idx = np.asarray(keep)
    kept = maps[..., idx[:, None], idx[None, :]]  # (...,K,K)
    sums = kept.sum(axis=-1, keepdims=True)
    return np.divide(kept, sums, out=np.zeros_like(kept), where=sums > 0)


def text_units(result: AttentionResult, b: int, merge_words: bool) -> Units:
    tokens, word_ids = result.tokens[b], result.word_ids[b]
    if merge_words:
        return word_units(result.batch.texts[b], tokens, word_ids, result.batch.offsets[b])
    return piece_units(tokens, word_ids)


def attention_view(result: AttentionResult, b: int = 0, hide_special: bool = False,
                   merge_words: bool = False) -> AttentionView:
    """Text b's maps (L,H,N,N) with specials hidden (rows renormalised) and/or pieces merged."""
    maps = result.text_attention(b)  # (L,H,T,T)
    units = text_units(result, b, merge_words)
    if merge_words:
        maps = merge_pieces(maps, units.groups)
    labels = units.labels
    if hide_special:
        keep = [u for u, s in enumerate(units.special) if not s]
        maps = drop_and_renormalise(maps, keep)
        labels = tuple(labels[u] for u in keep)
    return AttentionView(labels=labels, maps=maps.astype(np.float32, copy=False), hidden_special=hide_special,
                         merged_words=merge_words)
