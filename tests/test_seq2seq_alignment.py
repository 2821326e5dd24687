"""Issue 49: analysis/seq2seq/alignment.py against references that share none of its code: dynamic time warping
against every monotonic path of small cost matrices, the alignment heads' scores recomputed head by head and step by
step on synthetic maps (a head that follows the audio, heads that do not), and the alignment matrix normalised and
median-filtered by plain loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mha_core.analysis.seq2seq.alignment import (
    BACK,
    MEDIAN_WIDTH,
    MONOTONIC,
    SHARP,
    SPAN,
    alignment_matrix,
    dtw,
    score_heads,
)


def monotonic_paths(n: int, m: int):
    """Every path from (0, 0) to (n-1, m-1) by steps (1, 1), (1, 0), (0, 1)."""
    def walk(i, j, path):
        if (i, j) == (n - 1, m - 1):
            yield path
            return
        for di, dj in ((1, 1), (1, 0), (0, 1)):
            if i + di < n and j + dj < m:
                yield from walk(i + di, j + dj, [*path, (i + di, j + dj)])

    yield from walk(0, 0, [(0, 0)])


@pytest.mark.parametrize("n,m,seed", [(1, 4, 0), (3, 3, 1), (3, 5, 2), (4, 4, 3), (5, 3, 4), (4, 6, 5)])
def test_dtw_finds_the_cheapest_monotonic_path(n, m, seed):
    cost = np.random.default_rng(seed).random((n, m))
    rows, cols = dtw(cost)
    path = list(zip(rows.tolist(), cols.tolist(), strict=True))
    assert path[0] == (0, 0) and path[-1] == (n - 1, m - 1)
    assert all((b[0] - a[0], b[1] - a[1]) in {(1, 1), (1, 0), (0, 1)} for a, b in itertools.pairwise(path))
    cheapest = min(sum(cost[i, j] for i, j in p) for p in monotonic_paths(n, m))
    assert cost[rows, cols].sum() == pytest.approx(cheapest, abs=1e-12)


def synthetic_rows(t: int = 12, s: int = 40) -> np.ndarray:
    """(L=2,H=3,T,S): L0H1 follows the audio sharply; L1H2 follows it but spreads its weight; the rest look at random
    frames; L0H0 sits on one frame."""
    rng = np.random.default_rng(7)
    rows = rng.random((2, 3, t, s)) * 0.05
    for k in range(t):
        frame = round(k * (s - 1) / (t - 1))
        rows[0, 1, k, frame] = 1.0  # sharp and forward
        rows[1, 2, k, frame] = 0.06  # forward, not sharp
        rows[0, 0, k, 5] = 1.0  # sharp, never moves
        rows[1, 0, k, rng.integers(s)] = 1.0  # sharp, anywhere
    return rows / rows.sum(-1, keepdims=True)


def test_the_heads_scores_equal_their_definitions_step_by_step():
    rows = synthetic_rows()
    scores = score_heads(rows)
    n_layers, n_heads, t, s = rows.shape
    for layer, head in itertools.product(range(n_layers), range(n_heads)):
        peaks = [max(range(s), key=lambda f, k=k: rows[layer, head, k, f]) for k in range(t)]
        forward = sum(peaks[k + 1] - peaks[k] >= -BACK for k in range(t - 1)) / (t - 1)
        sharp = sum(rows[layer, head, k, peaks[k]] for k in range(t)) / t
        span = (max(peaks) - min(peaks)) / (s - 1)
        assert scores.monotonic[layer, head] == pytest.approx(forward)
        assert scores.sharp[layer, head] == pytest.approx(sharp)
        assert scores.span[layer, head] == pytest.approx(span)
        passes = forward >= MONOTONIC and sharp >= SHARP and span >= SPAN
        assert ((layer, head) in scores.found) == passes, (layer, head)
    assert scores.found == ((0, 1),)  # the one head that follows the audio sharply, across it


def naive_median_filter(row: np.ndarray, width: int) -> np.ndarray:
    """Median over `width` neighbours, the ends mirrored without repeating the edge (d c b | a b c d | c b a)."""
    half, n = width // 2, len(row)

    def at(i):
        while i < 0 or i >= n:
            i = -i if i < 0 else 2 * (n - 1) - i
        return row[i]

    return np.array([np.median([at(i + d) for d in range(-half, half + 1)]) for i in range(n)])


def test_the_alignment_matrix_is_each_head_normalised_per_frame_filtered_and_averaged():
    rows = synthetic_rows(t=6, s=15)
    heads = ((0, 1), (1, 2))
    expected = []
    for layer, head in heads:
        w = rows[layer, head]  # (T,S)
        normalised = np.array([[(w[k, f] - w[:, f].mean()) / max(w[:, f].std(), 1e-10) for f in range(w.shape[1])]
                               for k in range(w.shape[0])])
        expected.append(np.array([naive_median_filter(r, MEDIAN_WIDTH) for r in normalised]))
    assert np.allclose(alignment_matrix(rows, heads), np.mean(expected, axis=0), atol=1e-12)
