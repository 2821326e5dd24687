"""A pair read both ways: the translation as the continuation of the source (zh → en) and the source as the
continuation of the translation (en → zh), two forwards of the same model. The methods that read both directions
(methods.py) work in the hand alignments' order, Chinese words as the source (CANONICAL): a pair asked the other way
round has its links turned after, so that it aligns the same whichever language is typed first.

Shapes: L layers, H heads, S source words, T target words (in CANONICAL order: S Chinese, T English).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mha_core.analysis.translation.align import same_kind
from mha_core.analysis.translation.gold import Links
from mha_core.analysis.translation.run import POOLINGS, DirectionRun, direction_run
from mha_core.engine.loading.model import LoadedModel

CANONICAL = ("zh", "en")  # the hand alignments' order (gold.newswire_pairs("zh"))
DIRECTIONS = ("zh-en", "en-zh")  # the run that reads English as the continuation, and the other


def scaled_columns(maps: np.ndarray) -> np.ndarray:
    """(…,T,S) each source word's column divided by its mean over the run's target words (align.SCALINGS'
    "columns": a sink every word attends to no longer wins every row)."""
    return maps / (maps.mean(axis=-2, keepdims=True) + 1e-9)


@dataclass(frozen=True)
class BothWays:
    """Both directions' runs of one pair, every matrix in CANONICAL order (T,S)."""

    source_words: tuple[str, ...]  # S (Chinese)
    target_words: tuple[str, ...]  # T (English)
    runs: dict[str, DirectionRun]  # DIRECTIONS -> its run, in its own order

    def maps(self, direction: str, rows: str, pooling: str, columns: bool = True) -> np.ndarray:
        """(L,H,T,S) every head's word map of one run, its columns scaled in the run's own order (a run's columns are
        its source words), then turned to CANONICAL order."""
        maps = self.runs[direction].maps[pooling, rows]
        maps = scaled_columns(maps) if columns else maps
        return maps if direction == DIRECTIONS[0] else np.swapaxes(maps, 2, 3)

    def similarities(self, pooling: str) -> list[np.ndarray]:
        """Each run's (L+1,T,S) word similarity by layer, in CANONICAL order."""
        return [run.similarity[pooling] if direction == DIRECTIONS[0] else np.swapaxes(run.similarity[pooling], 1, 2)
                for direction, run in self.runs.items()]

    def allowed(self) -> np.ndarray:
        """(T,S) same_kind: a punctuation mark links only to a mark, unless the other sentence has none."""
        return same_kind(self.source_words, self.target_words)


def both_ways(model: LoadedModel, source: str | Sequence[str], target: str | Sequence[str], source_language: str,
              target_language: str, poolings: Sequence[str] = POOLINGS) -> BothWays:
    """Both runs of the pair (texts or their words): the direction asked first, reading the words as the heads
    method reads them, then the other way round with those words; every matrix in CANONICAL order."""
    asked = direction_run(model, source, target, source_language, target_language, poolings)
    other = direction_run(model, asked.target_words, asked.source_words, target_language, source_language, poolings)
    runs = {f"{source_language}-{target_language}": asked, f"{target_language}-{source_language}": other}
    canonical = runs[DIRECTIONS[0]]
    return BothWays(canonical.source_words, canonical.target_words, {d: runs[d] for d in DIRECTIONS})


def turned(links: Links) -> Links:
    """(s, t) -> (t, s): links in CANONICAL order for a pair asked the other way round, or back."""
    return frozenset((t, s) for s, t in links)
