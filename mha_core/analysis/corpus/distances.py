"""How alike heads are across a corpus (Clark et al. 2019, Figure 6), from the maps of a corpus pass
(passes.py).

- distance(a, b) is the mean, over every query token of every sentence (each token counts once), of the
  Jensen-Shannon divergence (nats) between head a's and head b's attention rows; word pieces, special tokens
  included.
- A 2-D embedding of the heads by metric MDS on those distances (scikit-learn, fixed seed).

Shapes: N = L*H heads in layer-major order (head h of layer l is l*H + h), T pieces (padded), R query rows,
S keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

JS_BLOCK_ELEMENTS = 2**22  # elements of one (a, b, R, S) block of the pairwise sums (16 MB in float32)
MDS_SEED = 0
NEAREST = 3  # nearest heads named in the map's hover


def js_sums(rows: Tensor) -> Tensor:
    """Pairwise Jensen-Shannon divergences (nats) summed over rows: rows (N,R,S), each row a distribution over
    S keys (zeros allowed, e.g. padding) -> (N,N) float64, symmetric; exactly 0 for heads with identical rows.

    Per row, with m = (p + q) / 2 and sum(p) = sum(q) = 1:
        JS(p, q) = (sum p log p + sum q log q) / 2 - sum m log m
                 = (sum p log p + sum q log q - sum (p+q) log (p+q)) / 2 + log 2
    so each pair costs one add, one x log x and one sum per element. Only pairs a <= b are computed, in
    blocks of at most JS_BLOCK_ELEMENTS elements, then mirrored."""
    n, r, s = rows.shape
    rows = rows.float()
    plogp = xlogx(rows).sum((1, 2)).double()  # (N,) summed over rows and keys
    mass = rows.sum((1, 2)).double()  # (N,) = R for real rows
    summed = torch.zeros(n, n, dtype=torch.float64)  # sum over rows of sum (p+q) log (p+q)
    row_step = max(1, JS_BLOCK_ELEMENTS // max(n * s, 1))
    for r0 in range(0, r, row_step):
        p = rows[:, r0:r0 + row_step]  # (N,r,S)
        head_step = max(1, JS_BLOCK_ELEMENTS // max(n * p.shape[1] * s, 1))
        for a0 in range(0, n, head_step):
            a = slice(a0, min(a0 + head_step, n))
            both = p[a, None] + p[None, a0:]  # (a,b,r,S), b >= a0
            summed[a, a0:] += xlogx(both).sum((-2, -1)).double()
    upper = summed.triu()
    summed = upper + upper.triu(1).T
    js = (plogp[:, None] + plogp[None, :] - summed) * 0.5 + np.log(2) * (mass[:, None] + mass[None, :]) * 0.5
    js = js.clamp_min(0.0)
    js[identical_heads(rows, js)] = 0.0  # float rounding leaves ~1e-8 per row where the rows are the same
    return js


def xlogx(x: Tensor) -> Tensor:
    """x log x elementwise, 0 where x = 0 (2x faster than torch.special.xlogy: log and multiply in place)."""
    return x.clamp_min(torch.finfo(x.dtype).tiny).log_().mul_(x)


def identical_heads(rows: Tensor, js: Tensor, per_row: float = 1e-5) -> Tensor:
    """(N,N) bool: pairs whose rows are exactly equal (checked only where the summed JS is near zero)."""
    same = torch.eye(len(js), dtype=torch.bool)
    for a, b in (js <= per_row * max(rows.shape[1], 1)).nonzero().tolist():
        same[a, b] = a == b or torch.equal(rows[a], rows[b])
    return same


def real_rows(maps: Tensor, mask: Tensor) -> Tensor:
    """A batch's maps (B,N,T,T) -> every real query row of every sentence, per head: (N,R,T)."""
    return maps.transpose(0, 1)[:, mask.bool()]  # (N,R,T)


@dataclass(frozen=True)
class HeadMap:
    """All heads embedded in 2-D by MDS on their distances."""

    xy: np.ndarray  # (N,2)
    heads: tuple[tuple[int, int], ...]  # N (layer, head), layer-major
    nearest: np.ndarray  # (N,NEAREST) indices of each head's nearest other heads, nearest first
    stress: float  # MDS's normalised stress (Kruskal's stress-1): 0 is a perfect fit


def embed_heads(distance: np.ndarray, heads: tuple[tuple[int, int], ...], seed: int = MDS_SEED) -> HeadMap:
    """Metric MDS of precomputed distances (scikit-learn, classical-MDS start, fixed seed)."""
    from sklearn.manifold import MDS

    mds = MDS(n_components=2, metric="precomputed", init="classical_mds", random_state=seed, normalized_stress=True)
    xy = mds.fit_transform(distance)  # (N,2)
    others = distance + np.diag(np.full(len(distance), np.inf))  # a head is not its own neighbour
    nearest = np.argsort(others, axis=1, kind="stable")[:, :min(NEAREST, len(distance) - 1)]
    return HeadMap(xy, heads, nearest, float(mds.stress_))


def closest_pairs(distance: np.ndarray, heads: Sequence[tuple[int, int]], n: int = 10
                  ) -> list[tuple[float, tuple[int, int], tuple[int, int]]]:
    """The n most alike pairs of heads in different layers: (distance, head a, head b), closest first."""
    i, j = np.triu_indices(len(heads), k=1)
    layers = np.array([layer for layer, _ in heads])
    i, j = i[layers[i] != layers[j]], j[layers[i] != layers[j]]
    order = np.argsort(distance[i, j], kind="stable")[:n]
    return [(float(distance[i[k], j[k]]), heads[i[k]], heads[j[k]]) for k in order]
