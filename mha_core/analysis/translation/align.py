"""A decoder's alignment of a translation to its source, read from self-attention: in the prompt
"Chinese: {source}\nEnglish: {translation}", a translation word's rows look back at the source's pieces.

Word level (run.py; Clark et al.'s pooling by default): a target word's row is the mean of its rows, attention to a
source word the sum over its pieces (run.POOLINGS: the max or the first piece's are measured too). The rows are, by
default, those of the pieces *before* each target piece: the row that predicted the piece (ROWS: "previous"; "self",
the piece's own row, is measured too: bench_translate.py).
Links: each target word to its strongest source word (argmax) under the mean of the chosen heads' maps; LINK_RULES
lists the others measured, SCALINGS a column normalisation against attention sinks. Kinds (same_kind): a punctuation
mark links only to a punctuation mark and a word only to a word, unless the other sentence has none of its kind (a
translation's full stop after a source without one): then the heads' strongest link stands. On the hand alignments
a mark's sure links are marks (benchmarks/bench_translate.py measures the AER with and without the rule).

Shapes: L layers, H heads, P pieces of the prompt, S source words, T target words.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mha_core.analysis.translation import symmetric
from mha_core.analysis.translation.gold import Links
from mha_core.analysis.translation.prompt import Prompted, prompt_for
from mha_core.analysis.translation.words import BRACKETS, split_words
from mha_core.engine.drawable import Drawable
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch, tokenize
from mha_core.messages import N_

ROWS = ("previous", "self")
ROW_SHIFTS = (1, 0)  # each way's row of a target piece: the piece before it, or its own
LINK_RULES = ("argmax", "intersect", "grow")
SCALINGS = ("plain", "columns")  # columns: each source word's column divided by its mean over the translation's
#                                  words, so that a word every translation word attends to (a sink: the source's
#                                  last full stop) no longer wins every row


@dataclass(frozen=True)
class WordMaps(Drawable):
    """Every head's word-level attention from the translation's words to the source's."""

    source_words: tuple[str, ...]  # S
    target_words: tuple[str, ...]  # T
    maps: np.ndarray  # (L,H,T,S) float32: a target word's attention to each source word
    prompt: str  # what the model read (the translation appended)
    rows: str  # "previous" or "self"

    def combined(self, heads: Sequence[tuple[int, int]]) -> np.ndarray:
        """(T,S) the mean of the chosen heads' maps."""
        return np.mean([self.maps[layer, head] for layer, head in heads], axis=0)

    def scaled(self, scaling: str) -> WordMaps:
        """The maps as SCALINGS says: "columns" divides each (layer, head, source word) column by its mean."""
        if scaling == "plain":
            return self
        columns = self.maps / (self.maps.mean(axis=2, keepdims=True) + 1e-9)  # (L,H,T,S)
        return WordMaps(self.source_words, self.target_words, columns.astype(np.float32), self.prompt, self.rows)

    def allowed(self) -> np.ndarray:
        """(T,S) where a link may be: same_kind."""
        return same_kind(self.source_words, self.target_words)


def is_punctuation(word: str) -> bool:
    """A word made of punctuation marks only (，。. " ( and the treebank's -LRB-)."""
    return word in BRACKETS or all(unicodedata.category(char).startswith("P") for char in word)


def same_kind(source_words: Sequence[str], target_words: Sequence[str]) -> np.ndarray:
    """(T,S) bool: True where a target word may link to a source word: both punctuation or both words; a word whose
    kind the other sentence lacks may link anywhere (the heads say where)."""
    source = np.array([is_punctuation(w) for w in source_words])
    target = np.array([is_punctuation(w) for w in target_words])
    same = target[:, None] == source[None, :]
    return same | ~same.any(axis=1, keepdims=True) | ~same.any(axis=0, keepdims=True)


def piece_groups(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Each word's pieces: those whose characters overlap the word's."""
    return [[p for p, (a, b) in enumerate(offsets) if b > a and a < end and b > start] for start, end in spans]


def check_read(groups: Sequence[Sequence[int]], words: Sequence[str]) -> None:
    missing = [word for word, group in zip(words, groups, strict=True) if not group]
    if missing:
        raise InputError("word_not_read", N_("The model reads no piece of {word!r}: its tokenizer drops it."),
                         word=missing[0])


@dataclass(frozen=True)
class ReadPair:
    """A pair as the model reads it in the prompt: its words, the prompt's pieces and each word's pieces."""

    source_words: tuple[str, ...]  # S
    target_words: tuple[str, ...]  # T
    prompted: Prompted
    batch: TokenBatch
    source_groups: list[list[int]]  # S piece groups
    target_groups: list[list[int]]  # T piece groups


def read_pair(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str,
              target_language: str) -> ReadPair:
    """The pair in the prompt, tokenized, refused (before any forward) where the prompt is too long for the model or
    a word has no piece. A sentence given as text has its neighbouring words that share a piece made one word
    (shared_pieces: Gemma reads 因为它 as one piece, so no head can tell 因为 from 它); given words stay as given."""
    source_words = tuple(source) if not isinstance(source, str) else split_words(source, source_language)
    target_words = tuple(target) if not isinstance(target, str) else split_words(target, target_language)
    prompted = prompt_for(source_words, source_language, target_language, target_words)
    batch = tokenize(model.tokenizer, prompted.text, model.max_length, bos=model.bos_id)
    if batch.n_tokens[0] > len(batch.tokens[0]):
        raise InputError("translation_too_long", N_("The prompt with this pair has {n:,} pieces; {model} reads at "
                                                    "most {max_length:,}."), n=batch.n_tokens[0], model=model.name,
                         max_length=model.max_length)
    source_groups, target_groups = (piece_groups(batch.offsets[0], spans)
                                    for spans in (prompted.source_spans, prompted.target_spans))
    check_read(source_groups, source_words)
    check_read(target_groups, target_words)
    merged_source = shared_pieces(prompted.text, prompted.source_spans, source_groups)
    merged_target = shared_pieces(prompted.text, prompted.target_spans, target_groups)
    if (isinstance(source, str) and len(merged_source) < len(source_words)) or (
            isinstance(target, str) and len(merged_target) < len(target_words)):
        return read_pair(model, merged_source if isinstance(source, str) else source_words,
                         merged_target if isinstance(target, str) else target_words, source_language, target_language)
    return ReadPair(source_words, target_words, prompted, batch, source_groups, target_groups)


def shared_pieces(text: str, spans: Sequence[tuple[int, int]], groups: Sequence[Sequence[int]]) -> tuple[str, ...]:
    """The words at `spans` of `text`, neighbours that share a piece made one (the text between them kept)."""
    merged: list[tuple[int, int, set[int]]] = []
    for (start, end), group in zip(spans, groups, strict=True):
        if merged and merged[-1][2] & set(group):
            merged[-1] = (merged[-1][0], end, merged[-1][2] | set(group))
        else:
            merged.append((start, end, set(group)))
    return tuple(text[start:end] for start, end, _ in merged)


def argmax_links(matrix: np.ndarray) -> Links:
    """Each target word to its strongest source word: (T,S) -> {(s, t)}."""
    return frozenset((int(s), t) for t, s in enumerate(matrix.argmax(axis=1)))


def column_links(matrix: np.ndarray) -> Links:
    """Each source word to the target word that attends to it most."""
    return frozenset((s, int(t)) for s, t in enumerate(matrix.argmax(axis=0)))


def grown(matrix: np.ndarray) -> Links:
    """grow-diag (Koehn et al. 2003; symmetric.py) from both directions' argmax of one map: their intersection,
    then neighbouring links of the union that align a word not yet aligned."""
    return symmetric.grown(argmax_links(matrix), column_links(matrix))


def links_of(matrix: np.ndarray, rule: str = "argmax", allowed: np.ndarray | None = None) -> Links:
    """The links `rule` reads from a (T,S) map, only where `allowed` (same_kind) is True when it is given."""
    if allowed is not None:
        matrix = np.where(allowed, matrix, -np.inf)
    if rule == "intersect":
        return argmax_links(matrix) & column_links(matrix)
    if rule == "grow":
        return grown(matrix)
    return argmax_links(matrix)
