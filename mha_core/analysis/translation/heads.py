"""Which heads align: every head's AER on the development half of the hand alignments (gold.py), and the heads the
app combines, chosen there without looking at the held-back half.

The choice: for each pooling of a word's pieces (run.POOLINGS), way of reading a word's rows (align.ROWS) and of
scaling the maps (align.SCALINGS), heads ranked by their own AER (argmax links), then the k best (k from 1 to
MAX_COMBINED) and the link rule (align.LINK_RULES: argmax, intersection or grow-diag of both directions' argmax) whose
mean map gives the lowest AER on the development half; the best of those. A bundled model's choice is shipped
(assets/alignment/heads.json, written by benchmarks/bench_align.py --write with the development counts it follows
from: evidence.py); another
model's is computed on first use. Both directions at once, the representations and weighted heads: methods.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha_core.analysis.translation.align import LINK_RULES, ROWS, SCALINGS, WordMaps, links_of
from mha_core.analysis.translation.gold import ALIGNMENT_DIR, AlignedPair, aer, diagonal, halves, newswire_pairs
from mha_core.analysis.translation.run import POOLINGS, direction_run
from mha_core.engine.drawable import Drawable
from mha_core.engine.held import Held, register, value_bytes
from mha_core.engine.loading.model import LoadedModel, bundled_dirs

MAX_COMBINED = 8
HEADS_FILE = ALIGNMENT_DIR / "heads.json"
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class HeadChoice(Drawable):
    """Every head's AER on the development half, and the heads combined."""

    direction: str  # "zh-en" or "en-zh"
    aers: np.ndarray  # (L,H) each head's AER, argmax links
    heads: tuple[tuple[int, int], ...]  # the chosen, best first
    combined_aer: float  # their mean map's AER on the development half, links by `rule`
    diagonal_aer: float  # the baseline's on the same pairs
    rows: str = "previous"
    rule: str = "argmax"  # how links are read from the mean map (align.links_of)
    scaling: str = "plain"  # align.SCALINGS: the maps as read, or each source column divided by its mean
    pooling: str = "sum"  # run.POOLINGS: how a word's pieces are pooled

    def as_json(self) -> dict:
        return {"direction": self.direction, "rows": self.rows, "heads": [list(h) for h in self.heads],
                "rule": self.rule, "scaling": self.scaling, "pooling": self.pooling,
                "combined_aer": round(self.combined_aer, 4), "diagonal_aer": round(self.diagonal_aer, 4),
                "aers": self.aers.round(4).tolist()}

    @classmethod
    def from_json(cls, data: dict) -> HeadChoice:
        return cls(data["direction"], np.array(data["aers"], dtype=np.float64),
                   tuple((int(layer), int(head)) for layer, head in data["heads"]), float(data["combined_aer"]),
                   float(data["diagonal_aer"]), data.get("rows", "previous"), data.get("rule", "argmax"),
                   data.get("scaling", "plain"), data.get("pooling", "sum"))


def pair_maps(model: LoadedModel, pairs: Sequence[AlignedPair], source_language: str, target_language: str,
              progress: Progress | None = None) -> dict[tuple[str, str], list[WordMaps]]:
    """Every pair's word maps, for each pooling and way of reading the rows: (pooling, rows) -> one per pair."""
    maps: dict[tuple[str, str], list[WordMaps]] = {(pooling, rows): [] for pooling in POOLINGS for rows in ROWS}
    for i, pair in enumerate(pairs):
        run = direction_run(model, pair.source, pair.target, source_language, target_language)
        for pooling, rows in maps:
            maps[pooling, rows].append(run.word_maps(rows, pooling))
        if progress is not None:
            progress(i + 1, len(pairs))
    return maps


def head_aers(maps: Sequence[WordMaps], pairs: Sequence[AlignedPair], rule: str = "argmax") -> np.ndarray:
    """(L,H) each head's AER over the pairs."""
    n_layers, n_heads = maps[0].maps.shape[:2]
    allowed = [m.allowed() for m in maps]
    links = lambda layer, head: [links_of(m.maps[layer, head], rule, a)  # noqa: E731
                                 for m, a in zip(maps, allowed, strict=True)]
    return np.array([[aer(links(layer, head), pairs) for head in range(n_heads)] for layer in range(n_layers)])


def combined_aer(maps: Sequence[WordMaps], pairs: Sequence[AlignedPair], heads: Sequence[tuple[int, int]],
                 rule: str = "argmax") -> float:
    return aer([links_of(m.combined(heads), rule, m.allowed()) for m in maps], pairs)


def diagonal_aer(pairs: Sequence[AlignedPair]) -> float:
    return aer([diagonal(len(p.source), len(p.target)) for p in pairs], pairs)


def ranked_heads(aers: np.ndarray) -> list[tuple[int, int]]:
    """Every (layer, head), least AER first (argsort's order among equals)."""
    return [tuple(int(i) for i in np.unravel_index(flat, aers.shape)) for flat in np.argsort(aers, axis=None)]


def choose(maps: Sequence[WordMaps], pairs: Sequence[AlignedPair], direction: str, scaling: str = "plain",
           pooling: str = "sum") -> HeadChoice:
    """The heads to combine, from these (development) pairs only (their maps scaled as `scaling` says)."""
    maps = [m.scaled(scaling) for m in maps]
    aers = head_aers(maps, pairs)
    ranked = ranked_heads(aers)
    scores = {(rule, k): combined_aer(maps, pairs, ranked[:k], rule) for rule in LINK_RULES
              for k in range(1, MAX_COMBINED + 1)}
    rule, k = min(scores, key=scores.get)
    return HeadChoice(direction, aers, tuple(ranked[:k]), scores[rule, k], diagonal_aer(pairs), maps[0].rows, rule,
                      scaling, pooling)


def development_choice(model: LoadedModel, source_language: str, target_language: str,
                       progress: Progress | None = None) -> HeadChoice:
    """The choice made on the development half of the bundled set in this direction (the held-back half unread)."""
    development, _ = halves(newswire_pairs(source_language))
    maps = pair_maps(model, development, source_language, target_language, progress)
    choices = [choose(maps[pooling, rows], development, f"{source_language}-{target_language}", scaling, pooling)
               for pooling, rows in maps for scaling in SCALINGS]
    return min(choices, key=lambda choice: choice.combined_aer)  # the pooling, rows and scaling that align better


def shipped_choice(model: LoadedModel, direction: str) -> HeadChoice | None:
    """A bundled model's choice as heads.json keeps it (every head's AER too), or None: another model, or a folder
    that only shares a bundled model's name."""
    if not HEADS_FILE.is_file() or Path(model.model_dir) not in set(bundled_dirs().values()):
        return None
    entry = json.loads(HEADS_FILE.read_text(encoding="utf-8")).get(model.name, {}).get(direction)
    return HeadChoice.from_json(entry) if entry else None


CHOSEN: dict[tuple[str, str], HeadChoice] = {}  # (model folder, direction) -> its choice: computed once a process
register("translation heads", lambda: Held("translation heads", len(CHOSEN), value_bytes(dict(CHOSEN)), True))


def known_choice(model: LoadedModel, direction: str) -> HeadChoice | None:
    """This model's choice if this process has it, or the shipped one (kept from then on: heads.json is read once a
    process, not at every page run); None: it must be made on the development half."""
    key = (str(model.model_dir), direction)
    if key not in CHOSEN:
        shipped = shipped_choice(model, direction)
        if shipped is None:
            return None
        CHOSEN[key] = shipped
    return CHOSEN[key]


def head_choice(model: LoadedModel, source_language: str, target_language: str,
                progress: Progress | None = None) -> HeadChoice:
    """This model's choice in this direction: shipped, else made on the development half (once a process)."""
    direction = f"{source_language}-{target_language}"
    known = known_choice(model, direction)
    if known is None:
        known = CHOSEN[(str(model.model_dir), direction)] = development_choice(model, source_language,
                                                                               target_language, progress)
    return known
