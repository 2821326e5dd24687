"""2-D projections of points (PCA, UMAP, t-SNE). This module imports only numpy, so it also runs as a child
process that a server can kill when no visitor waits for the result any more:

    python mha_core/analysis/heads/projection.py POINTS.npy OUT.npy METHOD SEED
    python mha_core/analysis/heads/projection.py --serve       (requests as JSON lines on stdin: see heavy.ChildPool)

Shapes: P points, Dh dimensions.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

PCA, UMAP, TSNE = "PCA", "UMAP", "t-SNE"
PROJECTIONS = (PCA, UMAP, TSNE)
SEED = 0
UMAP_EPOCHS = 200  # umap-learn's own choice above 10,000 points (500 below): 21 s -> 10 s for 8,000 points
# Seconds per point on one core of the 2-core development machine (8,152 points: t-SNE 44 s, UMAP 10 s), and the
# minute UMAP's numba code takes to compile the first time on a machine (kept on disk afterwards: keep_compiled).
SECONDS_PER_POINT = {TSNE: 0.0055, UMAP: 0.0013}
UMAP_COMPILE_S = 55
COMPILED_BY = ("umap", "pynndescent")  # the packages whose numba functions UMAP runs


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
    numba_keeps_to_its_own_threads()
    import umap

    keep_compiled()
    neighbours = max(2, min(15, len(points) - 1))
    return umap.UMAP(n_components=2, n_neighbors=neighbours, random_state=seed, n_jobs=1,
                     n_epochs=UMAP_EPOCHS).fit_transform(points)


def numba_keeps_to_its_own_threads() -> None:
    """UMAP's parallel numba functions start numba's threading layer; its OpenMP layer set the process's OpenMP
    threads to every core, and torch (the same OpenMP) then ran every later forward of the process on them, for no
    gain: on 2 cores, one thread's forward took the same time for twice the CPU (5.9 -> 11.7 s; in the test suite a
    worker that had run a UMAP spent 43 s of CPU more on its next tests). numba's own pool (workqueue) leaves OpenMP
    alone. A NUMBA_THREADING_LAYER set in the environment is kept; a layer already started is not changed."""
    import numba

    if "NUMBA_THREADING_LAYER" not in os.environ:
        numba.config.THREADING_LAYER = "workqueue"


def keep_compiled() -> None:
    """Numba's on-disk cache turned on for every compiled function of umap-learn and pynndescent (most do not ask
    for it), so UMAP compiles once per machine, not once per process: a new child process's first UMAP of 300
    points took 12.9 s, and 0.4 s from the cache (umap-learn's 2.5 s import aside; bench_global.py (c)). Numba
    keeps the cache beside each package's files, or in the user's cache folder where those are read-only, and keys
    it on the source file and the CPU. A numba without the method, or a function with no folder to keep it in,
    compiles in the process as before."""
    from numba.core.dispatcher import Dispatcher

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in COMPILED_BY or module is None:
            continue
        for function in list(vars(module).values()):
            if isinstance(function, Dispatcher) and not getattr(function, "_kept_on_disk", False):
                try:
                    function.enable_caching()
                except (AttributeError, RuntimeError):  # no such method, or no folder to keep it in: compiled here
                    continue
                function._kept_on_disk = True


def expected_seconds(method: str, n_points: int, compiled: bool = True) -> float:
    """A rough duration on one free core (see SECONDS_PER_POINT); UMAP's first run on a machine compiles first."""
    if method == PCA:
        return 0.0
    return SECONDS_PER_POINT[method] * n_points + (0 if compiled or method != UMAP else UMAP_COMPILE_S)


def serve() -> None:
    """One request per line on stdin, a JSON list [POINTS.npy, OUT.npy, METHOD, SEED]; one answer line each."""
    for line in sys.stdin:
        source, target, chosen, chosen_seed = json.loads(line)
        try:
            np.save(target, nonlinear(np.load(source), chosen, int(chosen_seed)))
            print("ok", flush=True)
        except Exception as err:  # noqa: BLE001 - the parent names it
            print("error: " + " ".join(str(err).split()), flush=True)


def duration_note(method: str, n_points: int) -> str:
    """What a visitor should expect before choosing `method` for `n_points` points (one line, no full stop), in the
    page's language (imported here: as a child process this module imports only numpy)."""
    from mha_core.i18n import tr

    if method == PCA:
        return tr("instant")
    note = tr("about {seconds:.0f} s on one free core", seconds=expected_seconds(method, n_points))
    if method == UMAP:
        note += tr(", plus about {seconds} s the first time on this server (umap-learn compiles its code once and "
                   "keeps it)", seconds=UMAP_COMPILE_S)
    return note


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        source, target, chosen, chosen_seed = sys.argv[1:5]
        np.save(target, nonlinear(np.load(source), chosen, int(chosen_seed)))
