"""Step 7's ranking sentence: a rank correlation that rounds to zero reads 0.00, not -0.00 (Gemma 3 said -0.00)."""

from __future__ import annotations

import numpy as np

from mha_core.teaching.explain_step import LESSON_METHODS, Asked, AttentionBeside, ranking_claims


class NearZero(AttentionBeside):
    def correlation(self, method: str) -> float:
        return -0.001


def test_a_correlation_that_rounds_to_zero_has_no_minus_sign():
    scores = {method: np.array([0.1, 0.5, 0.2]) for method in LESSON_METHODS}
    found = NearZero("m", Asked("a b c", "a", "b"), "next", "a", "b", "", None, 1.0, (0, 0), ("a", "b", "c"), scores)
    sentence = next(c for c in ranking_claims(found) if "{attention:.2f}" in c.template)
    values = sentence.kwargs()
    assert f"{values['attention']:.2f}" == "0.00" and f"{values['gradient']:.2f}" == "0.00"
