"""Is an explanation faithful? The model run again on copies of the text with words removed (exact, no gradient).

- occlusion: each word removed alone; its score is score(text) - score(the pieces without that word's);
- comprehensiveness at k (ERASER, DeYoung et al. 2020): score(text) - score(text without the method's top k words);
  sufficiency at k: score(text) - score(only the top k words); AOPC: their mean over k = 1, 2, 3, 5;
- deletion and insertion curves: the score as the top words are removed one by one, or added one by one to the
  text's special pieces and the target's own (which are never removed): at every k (FULL), or at k = 0, the k of
  comprehensiveness and sufficiency, and all the words (SHORT: the same measures, far fewer runs);
- rank correlation: Spearman's ρ between two methods' word scores.
A faithful method has high comprehensiveness and low sufficiency.

Every method's copies are run together (`measured`): a copy two methods ask for (the same words removed), or that
occlusion already ran (one word removed: every method's first deletion), runs once; the text itself is never rerun.

Shapes: T pieces, W words (units: a word's pieces, or a special piece alone), n copies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.analysis.explain.choices import CURVES, FULL, SHORT  # noqa: F401 -- CURVES: re-exported
from mha_core.analysis.explain.targets import Target
from mha_core.engine.batching import Progress  # (copies run, copies to run)
from mha_core.engine.budget import forward_bytes, rows_within
from mha_core.engine.gradients import embeddings_scores, input_embeddings
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import TokenBatch, ids_batch
from mha_core.engine.words import Units

KS = (1, 2, 3, 5)
Kept = tuple[int, ...]  # the pieces a copy keeps, in order
Known = dict[Kept, float]  # the target on copies already run


@dataclass(frozen=True)
class Faithfulness:
    """One method's faithfulness on one text and target."""

    ks: tuple[int, ...]  # the k of comprehensiveness and sufficiency (those <= the removable words)
    comprehensiveness: tuple[float, ...]  # per k
    sufficiency: tuple[float, ...]  # per k
    curve_ks: tuple[int, ...]  # the k of the curves, from 0 to the removable words
    deletion: tuple[float, ...]  # per curve k: the score with the top k words removed
    insertion: tuple[float, ...]  # per curve k: the score with only the top k words

    @property
    def aopc_comprehensiveness(self) -> float:
        return float(np.mean(self.comprehensiveness)) if self.ks else 0.0

    @property
    def aopc_sufficiency(self) -> float:
        return float(np.mean(self.sufficiency)) if self.ks else 0.0

    def as_json(self) -> dict:
        return {"ks": list(self.ks), "comprehensiveness": list(self.comprehensiveness),
                "sufficiency": list(self.sufficiency), "aopc_comprehensiveness": self.aopc_comprehensiveness,
                "aopc_sufficiency": self.aopc_sufficiency, "curve_ks": list(self.curve_ks),
                "deletion": list(self.deletion), "insertion": list(self.insertion)}


def removable_words(units: Units, target: Target) -> tuple[int, ...]:
    """The units a method's ranking may remove: not special, holding none of the target's pieces."""
    fixed = set(target.fixed)
    return tuple(u for u, (group, special) in enumerate(zip(units.groups, units.special, strict=True))
                 if not special and not fixed & set(group))


def kept_pieces(units: Units, removed: Sequence[int]) -> Kept:
    """The text's pieces, in order, without those of the units `removed`."""
    gone = {p for u in removed for p in units.groups[u]}
    return tuple(p for group in units.groups for p in group if p not in gone)


def rows_per_pass(model: LoadedModel, tokens: int, rows: int) -> int:
    """Copies per pass: as many as the budget holds, the passes even (fewer, larger passes: integrated.step_chunk)."""
    passes = math.ceil(rows / max(1, rows_within(forward_bytes(model, 1, tokens, keeps_maps=True))))
    return max(1, math.ceil(rows / max(1, passes)))


@torch.inference_mode()
def edited_scores(model: LoadedModel, batch: TokenBatch, target: Target, kept: Sequence[Sequence[int]],
                  progress: Progress | None = None) -> np.ndarray:
    """(n,) the target on copies of text 0 keeping the pieces kept[i], as many copies per pass as the budget holds
    (the layer loop's pass without gradients that keeps only the last layer's maps)."""
    ids = batch.input_ids[0].tolist()
    special = [w is None for w in batch.word_ids[0]]
    chunk = rows_per_pass(model, len(ids), len(kept))
    out: list[np.ndarray] = []
    for start in range(0, len(kept), chunk):
        if progress is not None:
            progress(start, len(kept))
        rows = kept[start:start + chunk]
        copies = ids_batch(model.tokenizer, [[ids[p] for p in row] for row in rows],
                           [[special[p] for p in row] for row in rows])
        scores = embeddings_scores(model, copies, lambda final, maps, rows=rows: target.score(final, maps, rows),
                                   input_embeddings(model, copies))
        out.append(scores.float().numpy())
    if progress is not None:
        progress(len(kept), len(kept))
    return np.concatenate(out) if out else np.zeros(0)


def run_missing(model: LoadedModel, batch: TokenBatch, target: Target, wanted: Sequence[Kept], known: Known,
                progress: Progress | None = None) -> Known:
    """`known` with the target on every copy of `wanted` it lacks, each run once."""
    missing = [kept for kept in dict.fromkeys(wanted) if kept not in known]
    return {**known, **dict(zip(missing, edited_scores(model, batch, target, missing, progress).tolist(),
                                strict=True))}


def text_known(units: Units, score: float) -> Known:
    """The text itself, whose score the explanation has: never rerun."""
    return {kept_pieces(units, ()): score}


def occlusion(model: LoadedModel, batch: TokenBatch, units: Units, target: Target, known: Known,
              progress: Progress | None = None) -> tuple[np.ndarray, Known]:
    """(W,) score(text) - score(text without the word), 0 for a unit that is never removed; and `known` (the text's
    score, text_known, and any copy already run) grown by the copies run."""
    removable = removable_words(units, target)
    rows = [kept_pieces(units, [u]) for u in removable]
    known = run_missing(model, batch, target, rows, known, progress)
    score = known[kept_pieces(units, ())]
    scores = np.zeros(len(units.groups))
    scores[list(removable)] = [score - known[row] for row in rows]
    return scores, known


def ranked(word_scores: np.ndarray, removable: Sequence[int]) -> list[int]:
    """The removable units from the highest score down (ties: the earlier first)."""
    return sorted(removable, key=lambda u: (-word_scores[u], u))


def curve_ks(n: int, curves: str) -> tuple[int, ...]:
    """The k of the curves over n removable words (module docstring)."""
    return tuple(range(n + 1)) if curves == FULL else tuple(sorted({0, *(k for k in KS if k <= n), n}))


def curve_rows(units: Units, target: Target, word_scores: np.ndarray, ks: Sequence[int]
               ) -> tuple[list[Kept], list[Kept]]:
    """The copies of the deletion curve (the top k words removed) and of the insertion curve (only they kept)."""
    removable = removable_words(units, target)
    order = ranked(word_scores, removable)
    deletion = [kept_pieces(units, order[:k]) for k in ks]
    insertion = [kept_pieces(units, [u for u in removable if u not in order[:k]]) for k in ks]
    return deletion, insertion


def measured(model: LoadedModel, batch: TokenBatch, units: Units, target: Target, word_scores: Mapping[str, np.ndarray],
             known: Known, curves: str = SHORT, progress: Progress | None = None) -> dict[str, Faithfulness]:
    """Each method's faithfulness from its word scores, every method's copies run together (module docstring);
    `known` holds the text's score and any copy already run (occlusion's)."""
    ks = curve_ks(len(removable_words(units, target)), curves)
    planned = {name: curve_rows(units, target, scores, ks) for name, scores in word_scores.items()}
    known = run_missing(model, batch, target, [row for rows in planned.values() for part in rows for row in part],
                        known, progress)
    return {name: curve_faithfulness(ks, [known[row] for row in deletion], [known[row] for row in insertion])
            for name, (deletion, insertion) in planned.items()}


def curve_faithfulness(curve: tuple[int, ...], deletion: Sequence[float], insertion: Sequence[float]
                       ) -> Faithfulness:
    """The measures from the curves at the k of `curve` (deletion[0]: the text's score)."""
    score, at = deletion[0], {k: i for i, k in enumerate(curve)}
    ks = tuple(k for k in KS if k in at)
    return Faithfulness(ks, tuple(score - deletion[at[k]] for k in ks), tuple(score - insertion[at[k]] for k in ks),
                        curve, tuple(float(v) for v in deletion), tuple(float(v) for v in insertion))


def rank_correlation(first: np.ndarray, second: np.ndarray) -> float:
    """Spearman's ρ of two methods' scores over the same words (nan where either is constant)."""
    from scipy.stats import spearmanr

    if len(first) < 2 or np.ptp(first) == 0 or np.ptp(second) == 0:
        return float("nan")
    return float(spearmanr(first, second).statistic)
