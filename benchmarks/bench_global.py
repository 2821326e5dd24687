"""Heads across a corpus, side by side in one run on the CPU (issue 13), for both bundled models:

  (a) the head-distance matrix over the bundled corpus (forward + pairwise JS of every head's rows) / one
      batched forward pass over the same corpus (the same batches, explicit path): target <= 2 for the encoder;
      reported for the decoder (270 heads, 36,315 pairs). The page's whole pass (with role metrics and the
      kept query/key vectors) is reported beside it.
  (b) the joint query-key view of one head from the cached pass, PCA: target < 10% of that forward's time;
      the figure (one Scattergl trace per colour group) is timed beside it. With --ud, the same on the first
      UD English EWT dev sentences that make >= 5,000 tokens (../shared/data), and --slow-projections times
      UMAP and t-SNE once.
  (c) with --new-process-umap: a new process's first UMAP (a server's projection child, a restarted server), with
      umap-learn's compiled code kept on disk (projection.keep_compiled) / compiled in that process, alternating.
Run: .venv/bin/python benchmarks/bench_global.py [--repeats N] [--ud] [--slow-projections] [--new-process-umap]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians  # noqa: E402
from mha_core import load_model, run  # noqa: E402
from mha_core.analysis.corpus.passes import corpus_pass  # noqa: E402
from mha_core.analysis.corpus.readers import bundled_corpus, read_conllu  # noqa: E402
from mha_core.analysis.heads.qk_view import PROJECTIONS, qk_view  # noqa: E402
from mha_core.engine.batching import map_batches, piece_lengths  # noqa: E402
from mha_core.engine.loading import bundled  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs  # noqa: E402
from mha_core.figures.corpus import qk_figure, qk_hover  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EWT = ROOT.parent / "shared" / "data" / "ud-ewt" / "en_ewt-ud-dev.conllu"


def ud_corpus(model, tokens: int = 5_000) -> list[str]:
    texts, total = [], 0
    for sentence in read_conllu(EWT, limit=2_001):
        texts.append(sentence.text)
        total += piece_lengths(model, [sentence.text])[0]
        if total >= tokens:
            return texts
    return texts


def batched_forward(model, texts: list[str]) -> None:
    lengths = piece_lengths(model, texts)
    for batch in map_batches(lengths, model.n_layers * model.n_heads, model=model):  # the pass's batches
        run(model, [texts[i] for i in batch], path="explicit")


def bench_distances(model, texts: list[str], repeats: int) -> float:
    med = interleaved_medians({
        "forward": lambda: batched_forward(model, texts),
        "distances": lambda: corpus_pass(model, texts, keep_vectors=False, with_roles=False),
        "page pass": lambda: corpus_pass(model, texts),
    }, repeats=repeats, warmup=1)
    heads = model.n_layers * model.n_heads
    print(f"  (a) {len(texts)} sentences, {heads} heads ({heads * (heads - 1) // 2:,} pairs): distance matrix "
          f"{med['distances']:.2f} s / batched forward {med['forward']:.2f} s = {med['distances'] / med['forward']:.2f}"
          f" (target <= 2 for the encoder); the page's whole pass {med['page pass']:.2f} s = "
          f"{med['page pass'] / med['forward']:.2f}")
    return med["forward"]


def bench_view(model, texts: list[str], forward: float, repeats: int, label: str) -> None:
    corpus = corpus_pass(model, texts)
    layer, head = model.n_layers // 2, model.n_heads // 2
    hover = qk_hover(corpus)
    med = interleaved_medians({
        "view": lambda: qk_view(corpus, layer, head),
        "view + figure": lambda: qk_figure(qk_view(corpus, layer, head), corpus, "query / key", hover),
    }, repeats=repeats, warmup=1)
    print(f"  (b) {label}: {len(corpus.labels):,} tokens ({2 * len(corpus.labels):,} points), L{layer} H{head}, PCA "
          f"{med['view'] * 1e3:.0f} ms = {100 * med['view'] / forward:.1f}% of the forward (target < 10%); with the "
          f"figure {med['view + figure'] * 1e3:.0f} ms = {100 * med['view + figure'] / forward:.1f}%")


def time_slow_projections(model, texts: list[str]) -> None:
    corpus = corpus_pass(model, texts)
    for method in PROJECTIONS[1:]:
        start = time.perf_counter()
        qk_view(corpus, 0, 0, method)
        print(f"      {method}: {time.perf_counter() - start:.1f} s for {2 * len(corpus.labels):,} points "
              "(UMAP's first call includes numba's compilation)")


NEW_PROCESS_UMAP = """
import sys, time
import numpy as np
from mha_core.analysis.heads import projection
if sys.argv[1] == "compiled here":
    projection.keep_compiled = lambda: None
points = np.random.default_rng(0).normal(size=(int(sys.argv[2]), 64)).astype(np.float32)
start = time.perf_counter()
projection.nonlinear(points, projection.UMAP)
print(time.perf_counter() - start)
"""


def time_new_process_umap(n_points: int, rounds: int) -> None:
    """(c) one new process per UMAP, the two ways alternating (the first "kept" run may fill the cache: dropped)."""
    import statistics
    import subprocess

    def child(mode: str) -> float:
        done = subprocess.run([sys.executable, "-c", NEW_PROCESS_UMAP, mode, str(n_points)], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).resolve().parents[1])
        return float(done.stdout.split()[-1])

    child("kept")
    times: dict[str, list[float]] = {"kept": [], "compiled here": []}
    for _ in range(rounds):
        for mode in times:
            times[mode].append(child(mode))
    med = {mode: statistics.median(ts) for mode, ts in times.items()}
    print(f"(c) a new process's first UMAP of {n_points:,} points (umap-learn imported inside): compiled code kept "
          f"{med['kept']:.1f} s, compiled in the process {med['compiled here']:.1f} s, ratio "
          f"{med['kept'] / med['compiled here']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ud", action="store_true", help="also time the view on >= 5,000 UD tokens")
    parser.add_argument("--slow-projections", action="store_true", help="time UMAP and t-SNE once")
    parser.add_argument("--new-process-umap", type=int, metavar="POINTS", help="(c) only, on this many points")
    args = parser.parse_args()
    if args.new_process_umap:
        time_new_process_umap(args.new_process_umap, args.repeats)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    texts = bundled_corpus()
    for name in (bundled.ENCODER_NAME, bundled.DECODER_NAME):
        model = load_model(bundled_dirs()[name])
        print(f"{name}: {model.n_layers} layers x {model.n_heads} heads, bundled corpus")
        forward = bench_distances(model, texts, args.repeats)
        bench_view(model, texts, forward, args.repeats, "bundled corpus")
        if args.ud and EWT.exists():
            ud = ud_corpus(model)
            start = time.perf_counter()
            batched_forward(model, ud)
            bench_view(model, ud, time.perf_counter() - start, args.repeats, f"{len(ud)} UD EWT sentences")
        if args.slow_projections:
            time_slow_projections(model, texts)


if __name__ == "__main__":
    main()
