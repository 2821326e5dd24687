"""Is an explanation faithful? The model run again on copies of the text with words removed (exact, no gradient).

- occlusion: each word removed alone; its score is score(text) - score(the pieces without that word's);
- comprehensiveness at k (ERASER, DeYoung et al. 2020): score(text) - score(text without the method's top k words);
  sufficiency at k: score(text) - score(only the top k words); AOPC: their mean over k = 1, 2, 3, 5;
- deletion and insertion curves: the score as the top words are removed one by one, or added one by one to the
  text's special pieces and the target's own (which are never removed);
- rank correlation: Spearman's ρ between two methods' word scores.
A faithful method has high comprehensiveness and low sufficiency.

Shapes: T pieces, W words (units: a word's pieces, or a special piece alone), n copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mha_core.analysis.explain.targets import Target
from mha_core.engine.attention import EXPLICIT
from mha_core.engine.budget import forward_bytes, rows_within
from mha_core.engine.forward import forward
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import TokenBatch, ids_batch
from mha_core.engine.words import Units

KS = (1, 2, 3, 5)


@dataclass(frozen=True)
class Faithfulness:
    """One method's faithfulness on one text and target."""

    ks: tuple[int, ...]  # the k of comprehensiveness and sufficiency (those <= the removable words)
    comprehensiveness: tuple[float, ...]  # per k
    sufficiency: tuple[float, ...]  # per k
    deletion: tuple[float, ...]  # the score with the top 0, 1, ... W' words removed
    insertion: tuple[float, ...]  # the score with only the top 0, 1, ... W' words

    @property
    def aopc_comprehensiveness(self) -> float:
        return float(np.mean(self.comprehensiveness)) if self.ks else 0.0

    @property
    def aopc_sufficiency(self) -> float:
        return float(np.mean(self.sufficiency)) if self.ks else 0.0

    def as_json(self) -> dict:
        return {"ks": list(self.ks), "comprehensiveness": list(self.comprehensiveness),
                "sufficiency": list(self.sufficiency), "aopc_comprehensiveness": self.aopc_comprehensiveness,
                "aopc_sufficiency": self.aopc_sufficiency, "deletion": list(self.deletion),
                "insertion": list(self.insertion)}


def removable_words(units: Units, target: Target) -> tuple[int, ...]:
    """The units a method's ranking may remove: not special, holding none of the target's pieces."""
    fixed = set(target.fixed)
    return tuple(u for u, (group, special) in enumerate(zip(units.groups, units.special, strict=True))
                 if not special and not fixed & set(group))


def kept_pieces(units: Units, removed: Sequence[int]) -> list[int]:
    """The text's pieces, in order, without those of the units `removed`."""
    gone = {p for u in removed for p in units.groups[u]}
    return [p for group in units.groups for p in group if p not in gone]


@torch.inference_mode()
def edited_scores(model: LoadedModel, batch: TokenBatch, target: Target, kept: Sequence[Sequence[int]]
                  ) -> np.ndarray:
    """(n,) the target on copies of text 0 keeping the pieces kept[i], as many copies per pass as the budget holds."""
    ids = batch.input_ids[0].tolist()
    special = [w is None for w in batch.word_ids[0]]
    chunk = max(1, rows_within(forward_bytes(model, 1, len(ids), keeps_maps=True)))
    out = []
    for start in range(0, len(kept), chunk):
        rows = kept[start:start + chunk]
        copies = ids_batch(model.tokenizer, [[ids[p] for p in row] for row in rows],
                           [[special[p] for p in row] for row in rows])
        result = forward(model, copies, EXPLICIT)
        out.append(target.score(result.hidden_states[-1], result.layer_probs[-1], rows).float().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def occlusion(model: LoadedModel, batch: TokenBatch, units: Units, target: Target, score: float) -> np.ndarray:
    """(W,) score(text) - score(text without the word), 0 for a unit that is never removed."""
    removable = removable_words(units, target)
    scores = np.zeros(len(units.groups))
    if removable:
        scores[list(removable)] = score - edited_scores(model, batch, target,
                                                        [kept_pieces(units, [u]) for u in removable])
    return scores


def ranked(word_scores: np.ndarray, removable: Sequence[int]) -> list[int]:
    """The removable units from the highest score down (ties: the earlier first)."""
    return sorted(removable, key=lambda u: (-word_scores[u], u))


def faithfulness_of(model: LoadedModel, batch: TokenBatch, units: Units, target: Target, score: float,
                 word_scores: np.ndarray) -> Faithfulness:
    """Comprehensiveness, sufficiency and the curves of one method's word scores (module docstring)."""
    removable = removable_words(units, target)
    order = ranked(word_scores, removable)
    n = len(order)
    kept = [kept_pieces(units, order[:k]) for k in range(1, n + 1)]  # deletion
    kept += [kept_pieces(units, [u for u in removable if u not in order[:k]]) for k in range(n + 1)]  # insertion
    values = edited_scores(model, batch, target, kept)
    deletion = (score, *(float(v) for v in values[:n]))
    insertion = tuple(float(v) for v in values[n:])
    ks = tuple(k for k in KS if k <= n)
    return Faithfulness(ks, tuple(score - deletion[k] for k in ks), tuple(score - insertion[k] for k in ks),
                        deletion, insertion)


def rank_correlation(first: np.ndarray, second: np.ndarray) -> float:
    """Spearman's ρ of two methods' scores over the same words (nan where either is constant)."""
    from scipy.stats import spearmanr

    if len(first) < 2 or np.ptp(first) == 0 or np.ptp(second) == 0:
        return float("nan")
    return float(spearmanr(first, second).statistic)
