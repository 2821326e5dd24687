"""Coreference heads on a GAP corpus (the Roles page; sentence.py reads one sentence): does a head's attention from
the pronoun prefer the right name?

Shapes: L layers, H heads, T word pieces. A span's pieces are the tokens whose character offsets
overlap it; score(C) = mean over the pronoun's pieces p of the sum over C's pieces q of A[p, q].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from torch import Tensor

from mha_core.analysis.corpus.readers import GapExample, GapRows
from mha_core.analysis.heads.roles import ranked_heads
from mha_core.engine.batching import Progress, map_batches, piece_lengths
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import run
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import json_floats
from mha_core.engine.tokens import InputError
from mha_core.messages import N_

COREF_TOP = 5  # heads shown and considered for the "coreference" label
COREF_GAIN = 0.10  # … which must beat the nearest-candidate baseline by 10 points
CLARK_COREF = (65.0, 27.0)  # Clark et al. 2019, BERT-base on CoNLL-2012: best head % vs the nearest mention %


@dataclass(frozen=True)
class CorefResult(Drawable):
    examples: int  # scored
    skipped: int  # a span fell outside the model's maximum length (or had no pieces)
    correct: np.ndarray  # (L,H) int
    always_a: float
    always_b: float
    nearest: float  # the candidate whose start is closest to the pronoun's

    @property
    def accuracy(self) -> np.ndarray:
        return self.correct / max(self.examples, 1)  # (L,H)

    def ranking(self) -> list[tuple[int, int, float]]:
        """(layer, head, accuracy), best first; ties to the lowest layer, then head."""
        acc = self.accuracy
        return [(layer, head, float(acc[layer, head])) for layer, head in ranked_heads(acc)]

    def best(self) -> tuple[int, int, float]:
        return self.ranking()[0]

    def counting(self, rows: GapRows) -> CorefResult:
        """This result with the rows the file's reader left out counted among the skipped (the one count the CLI
        writes and the pages show)."""
        return replace(self, skipped=self.skipped + rows.skipped)

    def as_json(self) -> dict:
        layer, head, accuracy = self.best()
        return {"examples": self.examples, "skipped": self.skipped, "best_layer": layer, "best_head": head,
                "best_accuracy": accuracy, "baseline_always_a": self.always_a, "baseline_always_b": self.always_b,
                "baseline_nearest": self.nearest, "accuracy": json_floats(self.accuracy),
                "clark_bert_base": {"best_accuracy": CLARK_COREF[0], "baseline_nearest": CLARK_COREF[1]}}

    def head_labels(self) -> dict[tuple[int, int], str]:
        """(layer, head) -> "coreference" for the top COREF_TOP heads that beat the nearest-candidate baseline by
        at least COREF_GAIN."""
        return {(layer, head): "coreference" for layer, head, acc in self.ranking()[:COREF_TOP]
                if acc >= self.nearest + COREF_GAIN}


def span_pieces(offsets: Sequence[tuple[int, int]], start: int, length: int) -> list[int]:
    """Pieces whose [start, end) character span overlaps [start, start + length); specials excluded."""
    end = start + length
    return [i for i, (s, e) in enumerate(offsets) if e > s and s < end and e > start]


def candidate_scores(maps: Tensor, pronoun: Sequence[int], candidate: Sequence[int]) -> Tensor:
    """(L,H,T,T) -> (L,H): mean over pronoun pieces of summed attention to the candidate's pieces."""
    rows = maps[:, :, list(pronoun)]  # (L,H,P,T)
    return rows[..., list(candidate)].sum(dim=-1).mean(dim=-1)


def nearest_is_a(ex: GapExample) -> bool:
    return abs(ex.a_offset - ex.pronoun_offset) <= abs(ex.b_offset - ex.pronoun_offset)


def analyse_coref(model: LoadedModel, examples: Sequence[GapExample], progress: Progress | None = None
                  ) -> CorefResult:
    """Clark et al.'s coreference heads on GAP examples: for each head, how often the pronoun's attention goes more to
    its true antecedent than to the other candidate, with the always-A, always-B and nearest-candidate baselines."""
    correct = np.zeros((model.n_layers, model.n_heads), dtype=np.int64)
    scored = a_right = near_right = 0
    lengths = piece_lengths(model, [ex.text for ex in examples])
    readable = [i for i, n in enumerate(lengths) if n <= model.max_length]  # the rest is not even tokenized
    done = len(examples) - len(readable)
    # maps of one batch: at most MAPS_MB, and its forward within the memory budget
    for batch in map_batches([lengths[i] for i in readable], model.n_layers * model.n_heads, model=model):
        chosen = [examples[readable[i]] for i in batch]
        result = run(model, [ex.text for ex in chosen], path="explicit")
        for b, ex in enumerate(chosen):
            offsets = result.batch.offsets[b]
            spans = [span_pieces(offsets, o, len(s)) for o, s in
                     ((ex.pronoun_offset, ex.pronoun), (ex.a_offset, ex.a), (ex.b_offset, ex.b))]
            if not all(spans):
                continue
            maps = result.text_maps(b)  # (L,H,T_b,T_b)
            picks_a = candidate_scores(maps, spans[0], spans[1]) > candidate_scores(maps, spans[0], spans[2])
            correct += (picks_a == ex.a_coref).numpy()
            scored += 1
            a_right += ex.a_coref
            near_right += nearest_is_a(ex) == ex.a_coref
        done += len(batch)
        if progress:
            progress(done, len(examples))
    if not scored:
        raise InputError(
            "gap_nothing_scored",
            N_(
                "None of the {examples:,} GAP examples could be scored: a mention lies beyond the model's {max_length} "
                "word pieces or has none."
            ),
            examples=len(examples),
            max_length=model.max_length,
        )
    total = scored
    return CorefResult(
        scored, len(examples) - scored, correct, a_right / total, (scored - a_right) / total, near_right / total
    )
