"""A model's both-ways methods (methods.py) as chosen on the development half: shipped for the bundled model
(assets/alignment/methods.json, with the measured table and the held-back links it follows from: evidence.py;
written by benchmarks/bench_align.py --write, --check recomputes it), else chosen on first use (both directions'
runs of the 75 development pairs, then fit.choose_all) and kept for the process."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mha_core.analysis.translation.both_ways import CANONICAL, BothWays, both_ways
from mha_core.analysis.translation.fit import choose_all
from mha_core.analysis.translation.gold import ALIGNMENT_DIR, AlignedPair, halves, newswire_pairs
from mha_core.analysis.translation.heads import Progress
from mha_core.analysis.translation.methods import MethodChoices
from mha_core.analysis.translation.run import POOLINGS
from mha_core.engine.held import Held, kept, register, value_bytes
from mha_core.engine.loading.model import LoadedModel, bundled_dirs

METHODS_FILE = ALIGNMENT_DIR / "methods.json"
CHOSEN: dict[str, MethodChoices] = {}  # model folder -> its choices, made or read once a process
register("translation methods", lambda: Held("translation methods", len(CHOSEN), value_bytes(dict(CHOSEN)), True))
_lock = threading.Lock()


def pairs_both_ways(model: LoadedModel, pairs: Sequence[AlignedPair], progress: Progress | None = None,
                    poolings: Sequence[str] = POOLINGS) -> list[BothWays]:
    """Both directions' runs of each hand-aligned pair (CANONICAL order)."""
    runs = []
    for i, pair in enumerate(pairs):
        runs.append(both_ways(model, pair.source, pair.target, *CANONICAL, poolings))
        if progress is not None:
            progress(i + 1, len(pairs))
    return runs


def development_choices(model: LoadedModel, progress: Progress | None = None) -> MethodChoices:
    """Every both-ways method chosen on the development half (the held-back half unread)."""
    development, _ = halves(newswire_pairs(CANONICAL[0]))
    return choose_all(pairs_both_ways(model, development, progress), development)


@kept("shipped methods", 1)
def shipped_file() -> dict:
    """methods.json as read once a process ({} where there is none)."""
    return json.loads(METHODS_FILE.read_text(encoding="utf-8")) if METHODS_FILE.is_file() else {}


def shipped(model: LoadedModel) -> dict | None:
    """The bundled model's entry of methods.json ({"choices", "table"}), or None: another model, or a folder that
    only shares a bundled model's name."""
    if Path(model.model_dir) not in set(bundled_dirs().values()):
        return None
    return shipped_file().get(model.name)


def known_choices(model: LoadedModel) -> MethodChoices | None:
    """The choices this process has for the model, or the shipped ones; None: they must be made."""
    key = str(model.model_dir)
    with _lock:
        if key not in CHOSEN:
            entry = shipped(model)
            if entry is None:
                return None
            CHOSEN[key] = MethodChoices.from_json(entry["choices"])
        return CHOSEN[key]


def method_choices(model: LoadedModel, progress: Progress | None = None) -> MethodChoices:
    """The model's both-ways choices: shipped, else made on the development half (once a process)."""
    known = known_choices(model)
    if known is None:
        known = development_choices(model, progress)
        with _lock:
            CHOSEN[str(model.model_dir)] = known
    return known


@dataclass(frozen=True)
class MeasuredTable:
    """The methods measured on the hand alignments (bench_align.py): one row per method and setting."""

    rows: tuple[dict, ...]  # method, setting, development, held_back, cross_validated, precision, recall, seconds,
    #                         chosen (bench_align.Row)
    folds: int  # the cross-validation's
    development: int  # pairs in each half
    held_back: int

    def row(self, method: str, setting: str | None = None) -> dict | None:
        """The chosen row of a method (or its row for `setting`)."""
        return next((r for r in self.rows if r["method"] == method and (
            r["setting"] == setting if setting is not None else r["chosen"])), None)


def measured_table(model: LoadedModel) -> MeasuredTable | None:
    """The methods' measured table shipped for the bundled model (bench_align.py), else None."""
    entry = shipped(model)
    if not entry or "table" not in entry:
        return None
    return MeasuredTable(tuple(entry["table"]), int(entry["folds"]), int(entry["development"]),
                         int(entry["held_back"]))
