"""How many pieces a corpus's forwards take at once (engine.batching.TOKEN_BUDGET), side by side in one run on one
thread: the Across-a-corpus pass over the bundled corpus and Clark's syntactic heads over the bundled Chinese treebank,
for each bundled text model, in batches of today's budget against 6,144 pieces (the budget before issue 44). Prints
the CPU seconds of each, their ratio (target < 1: the smaller batches cost less) and how far the results differ
(the pass's head distances, max |difference| in nats; the syntax's correct counts, equal or not).
Run: .venv/bin/python benchmarks/bench_batches.py [--repeats N] [--sentences N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians  # noqa: E402
from mha_core import load_model  # noqa: E402
from mha_core.analysis.corpus.passes import corpus_pass  # noqa: E402
from mha_core.analysis.corpus.readers import bundled_corpus, chinese_treebank  # noqa: E402
from mha_core.analysis.corpus.syntax import analyse_syntax  # noqa: E402
from mha_core.engine import batching  # noqa: E402
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME, GEMMA_NAME  # noqa: E402

BEFORE = 6144  # pieces per batch before issue 44


def at_budget(budget: int, work: Callable[[], object]) -> object:
    """work() with corpus batches of `budget` pieces."""
    today, batching.TOKEN_BUDGET = batching.TOKEN_BUDGET, budget
    try:
        return work()
    finally:
        batching.TOKEN_BUDGET = today


def compare(name: str, work: Callable[[], object], differ: Callable[[object, object], str], repeats: int) -> None:
    today, results = batching.TOKEN_BUDGET, {}

    def kept(budget: int) -> None:
        results[budget] = at_budget(budget, work)

    # CPU seconds; each budget once first: the model's weights read in, the kernels warmed
    medians = interleaved_medians({budget: partial(kept, budget) for budget in (BEFORE, today)}, repeats, warmup=1,
                                  clock=time.process_time)
    before, now = medians[BEFORE], medians[today]
    print(f"{name:<44} {BEFORE} pieces {before:6.2f} s   {today} pieces {now:6.2f} s   ratio {now / before:.2f}   "
          f"{differ(results[BEFORE], results[today])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=100, help="treebank sentences for the syntax")
    args = parser.parse_args()
    torch.set_num_threads(1)
    texts, trees = bundled_corpus(), chinese_treebank()[:args.sentences]
    for model_name in (ENCODER_NAME, DECODER_NAME, GEMMA_NAME):
        model = load_model(model_name)
        compare(f"{model_name}: pass over {len(texts)} lines", lambda m=model: corpus_pass(m, texts),
                lambda a, b: f"max |distance difference| {np.abs(a.distance - b.distance).max():.1e} nats",
                args.repeats)
        compare(f"{model_name}: syntax of {len(trees)} sentences", lambda m=model: analyse_syntax(m, trees),
                lambda a, b: "same counts" if all(np.array_equal(a.relations[r].correct, b.relations[r].correct)
                                                  for r in a.relations) else "counts differ", args.repeats)


if __name__ == "__main__":
    main()
