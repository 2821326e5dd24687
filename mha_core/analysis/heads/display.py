"""The attention a page shows: one text's maps after the display options (specials hidden, pieces merged into
words, heads averaged), ready for figures, lessons and export.

Shapes: L layers, H heads, T word pieces, N display units (pieces or words).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mha_core.analysis.heads.roles import top_indices
from mha_core.engine.pieces import is_wide
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import without_spaces
from mha_core.engine.words import drop_and_renormalise, merge_pieces, text_units
from mha_core.i18n import tr


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

    def strongest_head(self, query: int, key: int) -> tuple[int, int]:
        """(layer, head) whose `query` row gives `key` the most weight (the Heads page opens on it for a sentence's
        pronoun and the word it names, rather than on layer 0, head 0)."""
        weights = self.maps[:, :, query, key]  # (L,H)
        layer, head = np.unravel_index(int(np.argmax(weights)), weights.shape)
        return int(layer), int(head)


def segment_b_start(view: AttentionView, result: AttentionResult, b: int = 0) -> int | None:
    """The first shown unit of a sentence pair's second text (segment B); None for a single text."""
    segments = result.batch.segments[b] if result.batch.segments else ()
    if 1 not in segments:
        return None
    first = segments.index(1)
    groups = view.pieces or tuple((u,) for u in range(len(view.labels)))
    return next((unit for unit, pieces in enumerate(groups) if any(p >= first for p in pieces)), None)


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


def words_by_default(text: str) -> bool:
    """Whether `text` is shown as words rather than pieces unless the visitor says otherwise: text without spaces
    between its words (Chinese), whose pieces (动¹/₂) are not the words a reader asks about; spaced text shows the
    model's own pieces."""
    return without_spaces(text)


def unit_attention(view: AttentionView, result: AttentionResult, b: int, query: str, key: str) -> np.ndarray | None:
    """(L,H) the weight from the unit holding word `query` to the unit holding word `key` in `view` (the units the
    page shows: words where merged); None when the text has no such word."""
    query_pieces, key_pieces = result.word_pieces(b, query), result.word_pieces(b, key)
    if not query_pieces or not key_pieces:
        return None
    return view.maps[:, :, view.unit_of(query_pieces), view.unit_of(key_pieces)]


def uniform_weight(view: AttentionView, query: int, causal: bool, window: int | None = None) -> float:
    """The weight each key the query unit sees gets from a uniform head: 1 / every shown unit in an encoder; in a
    decoder, 1 / the units up to the query's last piece (i + 1 for piece i), within the layer's window where it has
    one (keys `window` pieces back or further are not seen). The baseline every page and lesson states."""
    if not causal:
        return 1 / len(view.labels)
    groups = view.pieces or tuple((u,) for u in range(len(view.labels)))
    last = max(groups[query])
    first = last - window + 1 if window else 0
    return 1 / max(1, sum(any(first <= p <= last for p in group) for group in groups))


def uniform_piece_weight(n: int, query: int, causal: bool, window: int | None = None) -> float:
    """uniform_weight over a text's n pieces, none merged or hidden (the long-text views): 1/n in an encoder; for
    query piece i of a decoder 1/(i + 1), or 1/window where the layer has a shorter window."""
    if not causal:
        return 1 / n
    return 1 / min(query + 1, window or query + 1)


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
            best = top_indices(weights, k)
            rows.append((layer, head, [(view.labels[j], float(weights[j])) for j in best]))
    return rows


SHOWN_UNKNOWN = 8  # unreadable parts named by unknown_note


def unknown_note(result: AttentionResult, b: int = 0) -> str | None:
    """One line naming what the model reads as unknown in text b (None when it reads everything)."""
    spans = result.unknown_spans(b)
    if not spans:
        return None
    text, unk = result.batch.texts[b], result.unknown_piece(b)
    shown = ", ".join(spans[:SHOWN_UNKNOWN]) + (", …" if len(spans) > SHOWN_UNKNOWN else "")
    return tr("The model cannot read {chars} of the text's {readable} characters ({shown}): it sees one {unk} piece "
              "in their place, whatever they say. The charts label those pieces {unk}.",
              chars=sum(len(span) for span in spans), readable=sum(1 for c in text if not c.isspace()), shown=shown,
              unk=unk)


def fragments_note(result: AttentionResult, b: int, suggested: str) -> str | None:
    """One line when the model reads text b's Chinese (or other wide) characters as byte fragments; `suggested`: a
    model that reads them whole. None when every wide character is whole."""
    cut = result.fragmented_chars(b)
    if not cut:
        return None
    text = result.batch.texts[b]
    return tr("The model reads {cut} of the text's {wide} different Chinese characters as byte fragments (动¹/₂ "
              "动²/₂), not as words: its attention to them is split over pieces of one character. For Chinese, "
              "choose a model that reads it, such as {suggested}.", cut=len(cut),
              wide=len({c for c in text if is_wide(c)}), suggested=suggested)
