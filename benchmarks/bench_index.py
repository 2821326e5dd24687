"""The corpus index (issue 37), side by side in one run on this machine (all-MiniLM-L6-v2):

  (a) build throughput, pieces per second of the model pass, on the same 200,000-piece corpus: Ray Data on 2 workers
      / one process (the same command without --ray), the one process at one torch thread (as each Ray replica and
      each app process runs) and at torch's default threads (every core): target >= 1.6. Each rate is given for the
      whole pass (a local Ray started for the build: its start and the replicas' model loading counted) and after the
      first shard (the rate a longer build approaches)
  (b) a 1,000,000-piece index built with --ray: build time and size; a query's latency (the index's part: the
      nearest pieces, rescored, with their metadata), p50 and p95 over 200 queries: target p95 <= 50 ms; recall@10
      of the compressed index against exact search over the same vectors: target >= 0.9
  (c) the bundled corpus's index built for each bundled text model: target < 60 s each

The corpus: sentences of ../shared/data (UD English EWT dev, GAP development and validation), two at random a line
(seed 0), written to a work folder (default /tmp/mha-bench-index; never into the repository). Queries: 200 pieces of
50 new pairs of the same sentences.

Run: .venv/bin/python benchmarks/bench_index.py [--pieces 1000000] [--layers 3] [--work DIR] [--skip-build]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mha_core import load_model  # noqa: E402
from mha_core.analysis.corpus.readers import read_conllu, read_gap  # noqa: E402
from mha_core.analysis.index.build import build_index, bundled_sentences  # noqa: E402
from mha_core.analysis.index.search import nearest, query_vector, search  # noqa: E402
from mha_core.analysis.index.store import OpenIndex  # noqa: E402
from mha_core.engine.forward import run  # noqa: E402
from mha_core.serving.computed.index import spread_layers  # noqa: E402
from mha_core.serving.menu import available_models  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
MODEL = "all-MiniLM-L6-v2"
BUNDLED_TEXT_MODELS = ("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "gemma-3-270m")


def sentence_pool() -> list[str]:
    ewt = [s.text for s in read_conllu(DATA / "ud-ewt" / "en_ewt-ud-dev.conllu")]
    gap = [ex.text for name in ("gap-development.tsv", "gap-validation.tsv")
           for ex in read_gap(DATA / "gap" / name).examples]
    split = [part.strip() for text in gap for part in re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", text)]
    return [s for s in ewt + split if 3 <= len(s.split()) <= 60]


def write_corpus(path: Path, pool: list[str], pieces: int, tokenizer: object) -> int:
    """Lines of two pool sentences at random until about `pieces` pieces (specials not counted); returns the lines."""
    rng = np.random.default_rng(0)
    counts = [len(ids) - 2 for ids in tokenizer(pool)["input_ids"]]
    lines, total = [], 0
    while total < pieces:
        a, b = rng.integers(len(pool), size=2)
        lines.append(f"{pool[a]} {pool[b]}")
        total += counts[a] + counts[b]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def cli_build(corpus: Path, out: Path, limit: int, layers: str, ray: bool, threads: int | None) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    command = [sys.executable, "-m", "mha_core", "index", "--text-file", str(corpus), "--model", MODEL, "--layers",
               layers, "--out", str(out), "--json", "-", "--limit", str(limit), *(["--ray", "--workers", "2"] * ray)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def throughput(corpus: Path, work: Path, limit: int, rounds: int) -> None:
    runs = {"one process, 1 thread": (False, 1), "one process, torch's threads": (False, None),
            "Ray, 2 workers": (True, None)}
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    pieces = 0
    for _ in range(rounds):
        for name, (ray, threads) in runs.items():
            built = cli_build(corpus, work / "throughput", limit, "3", ray, threads)
            pieces = built["pieces"]
            rates[name].append((built["built"]["pieces_per_second"], built["built"]["steady_pieces_per_second"]))
    medians = {name: tuple(statistics.median(v[i] for v in values) for i in (0, 1)) for name, values in rates.items()}
    print(f"(a) model pass over {pieces:,} pieces, median of {rounds} build(s) each, pieces/s (whole pass; after the "
          "first shard, i.e. without starting Ray and its replicas):")
    for name, (whole, steady) in medians.items():
        print(f"    {name:32s} {whole:9,.0f}   {steady:9,.0f}")
    ray = medians["Ray, 2 workers"]
    for name in ("one process, 1 thread", "one process, torch's threads"):
        one = medians[name]
        print(f"    Ray / {name:30s} {ray[0] / one[0]:.2f}   {ray[1] / one[1]:.2f}  (target >= 1.6)")


def queries(model: object, pool: list[str], n_sentences: int = 50, per_sentence: int = 4) -> list[tuple]:
    rng = np.random.default_rng(1)
    found = []
    for _ in range(n_sentences):
        a, b = rng.integers(len(pool), size=2)
        result = run(model, f"{pool[a]} {pool[b]}", path="explicit")
        for position in rng.choice(np.arange(1, result.lengths[0] - 1), size=per_sentence, replace=False):
            found.append((result, int(position)))
    return found


def latency_and_recall(model: object, index: OpenIndex, asked: list[tuple], layer: int) -> None:
    heads = (0, 5, 9)
    for label, chosen in (("hidden state", ()), (f"heads {heads}", heads)):
        times = []
        for result, position in asked:
            start = time.perf_counter()
            search(index, model, result, position, layer, chosen, top=50)
            times.append(time.perf_counter() - start)
        p50, p95 = np.percentile(times, [50, 95]) * 1000
        print(f"    query by {label:16s} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  (target p95 <= 50 ms)")
    kind = "hidden"
    if index.manifest.exact:
        print("    (an exact index: recall 1 by construction)")
        return
    rows = index.rows(layer, kind)
    vectors = [query_vector(result, position, layer, ()) for result, position in asked]
    exact = np.zeros((len(vectors), rows.shape[0]), dtype=np.float32)
    for start in range(0, rows.shape[0], 200_000):
        exact[:, start:start + 200_000] = np.stack(vectors) @ rows[start:start + 200_000].astype(np.float32).T
    truth = np.argsort(-exact, axis=1)[:, :10]
    recall = [len(set(nearest(index, layer, kind, v, 10)[1]) & set(t)) / 10 for v, t in zip(vectors, truth,
                                                                                           strict=True)]
    print(f"    recall@10 against exact search: {np.mean(recall):.3f}  (target >= 0.9)")


def big_index(corpus: Path, work: Path, lines: int, layers: str, skip_build: bool) -> OpenIndex:
    out = work / "big"
    if not (skip_build and (out / "index.json").is_file()):
        start = time.perf_counter()
        built = cli_build(corpus, out, lines, layers, ray=True, threads=None)
        took = time.perf_counter() - start
        run = built["built"]
        print(f"(b) {built['pieces']:,} pieces indexed with --ray (2 workers) in {took:,.0f} s: the model pass "
              f"{run['pass_seconds']:,.0f} s ({run['pieces_per_second']:,.0f} pieces/s; "
              f"{run['steady_pieces_per_second']:,.0f} after the first shard, at {run['first_shard_seconds']:.0f} s), "
              f"then the vector indexes")
    index = OpenIndex(out)
    data = index.manifest.data
    print(f"    {data['search']} search; {data['bytes'] / 2**30:.2f} GiB on disk, {data['bytes_per_piece']:,.0f} "
          f"bytes a piece; layers {data['layers']}")
    return index


def bundled_builds(work: Path) -> None:
    choices = {choice.name: choice for choice in available_models()}
    print("(c) the bundled corpus's index:")
    corpus = bundled_sentences()
    for name in BUNDLED_TEXT_MODELS:
        model = load_model(choices[name].path)
        out = work / f"bundled-{name}"
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        built = build_index(model, corpus, spread_layers(model.n_layers), out)
        print(f"    {name:24s} {time.perf_counter() - start:5.1f} s  ({built['pieces']:,} pieces, layers "
              f"{built['layers']}, {built['bytes'] / 2**20:,.0f} MB)  (target < 60 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, default=1_000_000)
    parser.add_argument("--throughput-pieces", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=1, help="builds of each kind in (a), round-robin")
    parser.add_argument("--layers", default="3")
    parser.add_argument("--work", default="/tmp/mha-bench-index")
    parser.add_argument("--skip-build", action="store_true", help="reuse the big index if it is there")
    parser.add_argument("--only", choices=("a", "b", "c"), default=None)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model = load_model({c.name: c for c in available_models()}[MODEL].path)
    pool = sentence_pool()
    corpus = work / "corpus.txt"
    lines = write_corpus(corpus, pool, args.pieces, model.tokenizer)
    if args.only in (None, "a"):
        share = max(1, round(lines * args.throughput_pieces / args.pieces))
        throughput(corpus, work, share, args.rounds)
    if args.only in (None, "b"):
        index = big_index(corpus, work, lines, args.layers, args.skip_build)
        latency_and_recall(model, index, queries(model, pool), int(args.layers.split(",")[-1]))
    if args.only in (None, "c"):
        bundled_builds(work)


if __name__ == "__main__":
    main()
