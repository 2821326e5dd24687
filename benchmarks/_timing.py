"""Side-by-side timing helpers: candidates run interleaved in one process, medians compared."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved_medians(candidates: dict[str, Callable[[], object]], repeats: int, warmup: int = 2,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Run each candidate `repeats` times, round-robin (so machine noise hits all alike); median seconds of `clock`
    (wall time; time.process_time: this process's CPU)."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def text_of_pieces(tokenizer: object, n_pieces: int) -> str:
    """An English text that tokenizes to exactly n_pieces word pieces including [CLS] and [SEP]."""
    words = "the cat sat on the mat and looked at the dog while it was raining in the old town".split()
    text_words: list[str] = []
    while len(tokenizer(" ".join(text_words))["input_ids"]) < n_pieces:
        text_words.append(words[len(text_words) % len(words)])
    return " ".join(text_words)
