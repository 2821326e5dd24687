"""Word pieces <-> words, and the display options that reshape attention maps.

Shapes: L layers, H heads, T word pieces, N display units (pieces or words), W words.
Merging pieces into words follows Clark et al. (2019): attention *to* a word is the sum over its
pieces (keeps each row a distribution), attention *from* a word is the mean over its pieces.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from mha_core.result import AttentionResult

ArrayLike = TypeVar("ArrayLike")  # a numpy array or a torch tensor


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
    pieces: tuple[tuple[int, ...], ...] = ()  # N: the result's piece indices in each shown unit

    def unit_of(self, result_pieces: Sequence[int], fallback: int = 0) -> int:
        """The shown unit holding the first of `result_pieces` (see tokens.word_pieces); `fallback` (clamped)
        when there is none (the word is absent, or a hidden special)."""
        for unit, pieces in enumerate(self.pieces):
            if result_pieces and result_pieces[0] in pieces:
                return unit
        return max(0, min(fallback, len(self.labels) - 1))


def piece_units(tokens: Sequence[str], word_ids: Sequence[int | None]) -> Units:
    return Units(
        labels=tuple(tokens), groups=tuple((i,) for i in range(len(tokens))),
        special=tuple(w is None for w in word_ids),
    )


def is_wide(char: str) -> bool:
    """A character of a script written without spaces between words (Chinese, Japanese, Korean) or an emoji."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def continues(text: str, offsets: Sequence[tuple[int, int]], last: int, piece: int) -> bool:
    """Piece `piece` of the same word continues the unit that ends with piece `last`: always in spaced scripts; among
    wide characters only while the two pieces share a character (its bytes split over pieces), so text without
    spaces merges into characters, not into whole clauses."""
    (start, end), (next_start, next_end) = offsets[last], offsets[piece]
    if not any(is_wide(c) for c in text[min(start, next_start):max(end, next_end)]):
        return True
    return next_start < end


def unit_label(text: str, pieces: Sequence[int], tokens: Sequence[str], offsets: Sequence[tuple[int, int]],
               unknown: Sequence[bool]) -> str:
    """The text a unit's pieces cover; a piece the model could not read shows as its own label ([UNK]有), never
    hidden behind the text it stands for."""
    if not any(unknown[i] for i in pieces if i < len(unknown)):
        start, end = offsets[pieces[0]][0], offsets[pieces[-1]][1]
        return text[start:end] or "".join(tokens[i].removeprefix("##") for i in pieces)
    return "".join(tokens[i] if unknown[i] else text[offsets[i][0]:offsets[i][1]] or tokens[i] for i in pieces)


def word_units(text: str, tokens: Sequence[str], word_ids: Sequence[int | None],
               offsets: Sequence[tuple[int, int]], unknown: Sequence[bool] = ()) -> Units:
    """Group consecutive pieces of one word (by character in text without spaces); specials stay units of their
    own; labels show [UNK] where the model read nothing."""
    groups, special = [], []
    for i, wid in enumerate(word_ids):
        last = groups[-1][-1] if groups else None
        if (wid is not None and last is not None and not special[-1] and word_ids[last] == wid
                and continues(text, offsets, last, i)):
            groups[-1] = (*groups[-1], i)
            continue
        groups.append((i,))
        special.append(wid is None)
    labels = [tokens[g[0]] if is_special else unit_label(text, g, tokens, offsets, unknown)
              for g, is_special in zip(groups, special, strict=True)]
    return Units(tuple(labels), tuple(groups), tuple(special))


def pool_pieces(maps: ArrayLike, member: ArrayLike) -> ArrayLike:
    """(..., T, T) piece maps -> (..., N, N) unit maps, numpy or torch alike.

    member (T, N) is 1 where piece t belongs to unit n: attention to a unit is the sum over its
    pieces, attention from a unit the mean over its pieces. Pieces in no unit are dropped as keys."""
    mean_from = member / member.sum(0).clip(min=1)  # (T,N) averaging weights
    return mean_from.swapaxes(-1, -2) @ (maps @ member)  # (N,T) @ (...,T,N) -> (...,N,N)


def membership(groups: Sequence[Sequence[int]], n_pieces: int) -> np.ndarray:
    """(T, N) 0/1 matrix from unit -> piece-index groups."""
    member = np.zeros((n_pieces, len(groups)), dtype=np.float32)
    for unit, group in enumerate(groups):
        member[list(group), unit] = 1.0
    return member


def merge_pieces(maps: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """(..., T, T) -> (..., N, N): columns summed within a group, rows averaged within a group."""
    return pool_pieces(maps, membership(groups, maps.shape[-1]).astype(maps.dtype))


def drop_and_renormalise(maps: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    """Keep rows and columns `keep` of (..., N, N) and rescale each row to sum to 1."""
    idx = np.asarray(keep)
    kept = maps[..., idx[:, None], idx[None, :]]  # (...,K,K)
    sums = kept.sum(axis=-1, keepdims=True)
    return np.divide(kept, sums, out=np.zeros_like(kept), where=sums > 0)


def text_units(result: AttentionResult, b: int, merge_words: bool) -> Units:
    tokens, word_ids = result.labels[b], result.word_ids[b]
    if merge_words:
        unknown = result.batch.unknown[b] if result.batch.unknown else ()
        return word_units(result.batch.texts[b], tokens, word_ids, result.batch.offsets[b], unknown)
    return piece_units(tokens, word_ids)


def attention_view(result: AttentionResult, b: int = 0, hide_special: bool = False,
                   merge_words: bool = False, average_heads: bool = False) -> AttentionView:
    """Text b's maps (L,H,N,N) with specials hidden (rows renormalised) and/or pieces merged;
    with `average_heads` each layer's mean over heads, (L,1,N,N)."""
    maps = result.text_attention(b)  # (L,H,T,T)
    units = text_units(result, b, merge_words)
    if merge_words:
        maps = merge_pieces(maps, units.groups)
    labels, pieces = units.labels, units.groups
    if hide_special:
        keep = [u for u, s in enumerate(units.special) if not s]
        maps = drop_and_renormalise(maps, keep)
        labels, pieces = tuple(labels[u] for u in keep), tuple(pieces[u] for u in keep)
    if average_heads:
        maps = maps.mean(axis=1, keepdims=True)  # (L,1,N,N)
    return AttentionView(labels=labels, maps=maps.astype(np.float32, copy=False), hidden_special=hide_special,
                         merged_words=merge_words, pieces=tuple(tuple(group) for group in pieces))


def score_map(result: AttentionResult, b: int, layer: int, head: int, hide_special: bool) -> np.ndarray:
    """Text b's pre-softmax scores of one head over pieces, (T,T) or (K,K) without the specials."""
    n = result.lengths[b]
    z = result.scores_map(layer, head)[b, :n, :n].cpu().numpy()
    if not hide_special:
        return z
    keep = [i for i, w in enumerate(result.word_ids[b]) if w is not None]
    return z[np.ix_(keep, keep)]


def top_keys(view: AttentionView, query: int, k: int = 3) -> list[tuple[int, int, list[tuple[str, float]]]]:
    """For every (layer, head): the k keys the query unit attends to most, ties to the earliest."""
    rows = []
    n_layers, n_heads = view.maps.shape[:2]
    for layer in range(n_layers):
        for head in range(n_heads):
            weights = view.maps[layer, head, query]
            best = np.argsort(-weights, kind="stable")[:k]
            rows.append((layer, head, [(view.labels[j], float(weights[j])) for j in best]))
    return rows


OVERVIEW_MAX_BINS = 32  # overview tile side cap: 72 tiles of 32x32 keep the overview light in the browser


def pool_map(m: np.ndarray, bins: int) -> np.ndarray:
    """Shrink (..., N, N) maps to at most (..., bins, bins) contiguous blocks; unchanged when N <= bins.

    Like merging pieces into words: key blocks are summed and query blocks averaged, so every
    pooled row is still a distribution and the 0..1 colour scale keeps its meaning."""
    n = m.shape[-1]
    if n <= bins:
        return m
    edges = np.linspace(0, n, bins + 1).round().astype(int)
    return merge_pieces(m, [range(edges[i], edges[i + 1]) for i in range(bins)])
