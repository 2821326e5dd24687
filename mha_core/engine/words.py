"""Word pieces <-> words: display units, and pooling piece maps into unit maps.

Shapes: L layers, H heads, T word pieces, N display units (pieces or words), W words.
Merging pieces into words follows Clark et al. (2019): attention *to* a word is the sum over its
pieces (keeps each row a distribution), attention *from* a word is the mean over its pieces.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from mha_core.engine.held import Held, estimate, kept, register
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import is_wide

ArrayLike = TypeVar("ArrayLike")  # a numpy array or a torch tensor


@dataclass(frozen=True)
class Units:
    """How display units are made of pieces: unit u covers pieces groups[u]."""

    labels: tuple[str, ...]  # N display labels
    groups: tuple[tuple[int, ...], ...]  # N piece index groups (into the text's T pieces)
    special: tuple[bool, ...]  # N True for [CLS]/[SEP]-like units (word id None)


def piece_units(tokens: Sequence[str], word_ids: Sequence[int | None]) -> Units:
    return Units(
        labels=tuple(tokens), groups=tuple((i,) for i in range(len(tokens))),
        special=tuple(w is None for w in word_ids),
    )


SIMPLIFIED_PRONOUNS = str.maketrans({"牠": "它"})  # OpenCC's t2s keeps 牠; Simplified Chinese writes 它 for an animal


OPENCC_BYTES = 3 * 2**20  # OpenCC's t2s converter, loaded (its RSS growth: 2.5 MB)
JIEBA_BYTES = 64 * 2**20  # jieba's dictionary, loaded at its first cut (its RSS growth: 63 MB)


@kept("OpenCC converter", 1, weigh=estimate(OPENCC_BYTES), measured=False)
def simplifier() -> object:
    """OpenCC's Traditional → Simplified converter (its t2s dictionaries, phrases before characters)."""
    import opencc

    return opencc.OpenCC("t2s")


def simplified(text: str) -> str:
    """Chinese text in Simplified characters (OpenCC's t2s, and 牠 → 它, which t2s keeps)."""
    return simplifier().convert(text).translate(SIMPLIFIED_PRONOUNS)


def jieba_held() -> Held:
    """jieba's dictionary, which jieba keeps in its module once loaded (a stated estimate)."""
    jieba = sys.modules.get("jieba")
    loaded = jieba is not None and bool(getattr(getattr(jieba, "dt", None), "initialized", False))
    return Held("jieba dictionary", int(loaded), JIEBA_BYTES * loaded, False)


register("jieba dictionary", jieba_held)


@kept("jieba segmentations", 256)
def segmented_words(text: str) -> tuple[int, ...]:
    """The word of each character of `text` (an index), as jieba's Chinese segmenter splits it: text without spaces
    between words has no other word boundaries. Traditional characters are segmented as their Simplified ones
    (jieba's dictionary is Simplified: 因為 is one word as 因为 is), the characters themselves kept. Loaded only for
    such text (jieba's dictionary takes a second)."""
    import jieba

    jieba.setLogLevel(60)  # no "Building prefix dict" lines on stderr
    converted = simplified(text)
    read = converted if len(converted) == len(text) else text  # character for character, or as written
    word_of = []
    for w, word in enumerate(jieba.cut(read, HMM=False)):
        word_of.extend([w] * len(word))
    return tuple(word_of)


def continues(text: str, offsets: Sequence[tuple[int, int]], last: int, piece: int) -> bool:
    """Piece `piece` of the same word continues the unit that ends with piece `last`: always in spaced scripts; among
    wide characters while the two pieces share a character (its bytes split over pieces) or one word of the
    segmenter's (动物 from 动 and 物), so text without spaces merges into words, never into whole clauses."""
    (start, end), (next_start, next_end) = offsets[last], offsets[piece]
    if not any(is_wide(c) for c in text[min(start, next_start):max(end, next_end)]):
        return True
    if next_start < end:
        return True
    word_of = segmented_words(text)
    return end - 1 < len(word_of) and next_start < len(word_of) and word_of[end - 1] == word_of[next_start]


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


def merge_pieces(maps: ArrayLike, groups: Sequence[Sequence[int]]) -> ArrayLike:
    """(..., T, T) -> (..., N, N), numpy or torch alike: columns summed within a group, rows averaged within a
    group (pieces in no group are dropped as keys)."""
    member = membership(groups, maps.shape[-1])  # (T,N)
    if isinstance(maps, torch.Tensor):
        return pool_pieces(maps, torch.from_numpy(member).to(maps.dtype))
    return pool_pieces(maps, member.astype(maps.dtype))


def word_groups(word_ids: Sequence[int | None], n_words: int) -> list[list[int]]:
    """The pieces of each of n_words words (word id None: a special token, in no word)."""
    return [[p for p, w in enumerate(word_ids) if w == word] for word in range(n_words)]


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
