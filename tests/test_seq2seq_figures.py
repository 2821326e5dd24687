"""Issue 42, item 9: the alignment-head marks (✓ found, ● published) are legible on every colour of the grid."""

from __future__ import annotations

import numpy as np

from mha_core.analysis.seq2seq.alignment import HeadScores
from mha_core.figures.seq2seq import head_scores_figure


def luminance(rgb: tuple[float, float, float]) -> float:
    """WCAG's relative luminance of an sRGB colour (0..255 each)."""
    def linear(c: float) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def parse(colour: str) -> tuple[tuple[float, float, float], float]:
    if colour.startswith("#"):
        return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5)), 1.0
    parts = [float(p) for p in colour[colour.index("(") + 1:-1].split(",")]
    return tuple(parts[:3]), parts[3] if len(parts) > 3 else 1.0


def contrast(a: tuple, b: tuple) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_the_marks_stand_out_on_the_darkest_and_the_palest_cell():
    rng = np.random.default_rng(0)
    scores = HeadScores(rng.random((4, 6)), rng.random((4, 6)), rng.random((4, 6)), ((3, 1), (2, 5)), ((3, 1), (0, 0)))
    notes = head_scores_figure(scores)["layout"]["annotations"]
    assert {n["text"] for n in notes} == {"✓●", "✓", "●"}
    for note in notes:
        ink, _ = parse(note["font"]["color"])
        badge, alpha = parse(note["bgcolor"])
        assert note["font"]["size"] >= 14
        for cell in ((0, 0, 0), (255, 255, 255), (8, 48, 107)):  # black, white, the Blues scale's darkest
            under = tuple(alpha * b + (1 - alpha) * c for b, c in zip(badge, cell, strict=True))
            assert contrast(ink, under) >= 7.0, (note, cell)  # WCAG AAA for text
