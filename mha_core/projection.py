"""2-D projections of points (PCA, UMAP, t-SNE). This module imports only numpy, so it also runs as a child
process that a server can kill when no visitor waits for the result any more:

    python mha_core/projection.py POINTS.npy OUT.npy METHOD SEED

Shapes: P points, Dh dimensions.
"""

from __future__ import annotations

import sys

import numpy as np

PCA, UMAP, TSNE = "PCA", "UMAP", "t-SNE"
PROJECTIONS = (PCA, UMAP, TSNE)
SEED = 0


def pca(points: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    """(P,Dh) -> (P,2) on the two main axes (a fixed sign each), and the share of the variance each keeps."""
    centred = points - points.mean(0)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2] * np.sign(vt[:2, [0]] + (vt[:2, [0]] == 0))
    variance = sing**2 / max(float((sing**2).sum()), 1e-300)
    return centred @ axes.T, (float(variance[0]), float(variance[1] if len(variance) > 1 else 0.0))


def nonlinear(points: np.ndarray, method: str, seed: int = SEED) -> np.ndarray:
    """(P,Dh) -> (P,2) with t-SNE (scikit-learn) or UMAP (umap-learn; numba compiles on first use)."""
    if method == TSNE:
        from sklearn.manifold import TSNE as SkTSNE

        tsne = SkTSNE(2, init="pca", random_state=seed, perplexity=min(30.0, (len(points) - 1) / 3))
        return tsne.fit_transform(points)
    import umap

    neighbours = max(2, min(15, len(points) - 1))
    return umap.UMAP(n_components=2, n_neighbors=neighbours, random_state=seed, n_jobs=1).fit_transform(points)


if __name__ == "__main__":
    source, target, chosen, chosen_seed = sys.argv[1:5]
    np.save(target, nonlinear(np.load(source), chosen, int(chosen_seed)))
