"""Heads page in a real browser vs a plain 20x20 plotly heatmap page, side by side in one run.

Times from submitting text (Ctrl+Enter in the sentence box) to the new figures drawn, for
(a) a 20-word sentence and (b) a 400-word-piece text on the heads page, and for the baseline page
(benchmarks/baseline_app.py: one 20x20 go.Heatmap redrawn on submit). Prints median ratios;
targets (issue 3): (a) / baseline <= 1.5, (b) / baseline <= 3.
Run: .venv/bin/python benchmarks/bench_page.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import text_of_pieces  # noqa: E402
from mha_core import load_model  # noqa: E402
from tests.browser import chromium_pages, streamlit_server  # noqa: E402

SENTENCE_20 = ("The old teacher explained to her curious students why the river near the village "
               "floods every spring")  # 18 words + "run N" = 20


FINGERPRINT_JS = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    if (!gd || !gd.calcdata || !gd.calcdata[0]) return '';
    const z = gd.calcdata[0][0].z;
    return z.length + ':' + z[0].length + ':' + z[1][2] + ':' + z[z.length - 1][1];
}"""


def submit_and_wait(page, text: str) -> float:
    """Seconds from Ctrl+Enter until the page's first plotly figure holds new data and the run ended."""
    before = page.evaluate(FINGERPRINT_JS)
    box = page.get_by_label("Sentence", exact=True)
    box.fill(text)
    start = time.perf_counter()
    box.press("Control+Enter")
    page.wait_for_function(
        f"""(before) => ({FINGERPRINT_JS})() !== before
                        && !document.querySelector('[data-testid="stStatusWidget"]')""",
        arg=before, timeout=120_000, polling="raf",
    )
    return time.perf_counter() - start


def measure(repeats: int) -> dict[str, list[float]]:
    long_text = text_of_pieces(load_model().tokenizer, 397)  # + 3 marker pieces = 400
    times: dict[str, list[float]] = {"baseline": [], "sentence": [], "long": []}
    with streamlit_server() as app_url, streamlit_server("benchmarks/baseline_app.py") as base_url, \
            chromium_pages(2) as (app, base):
        app.goto(app_url)
        base.goto(base_url)
        app.get_by_label("Sentence", exact=True).wait_for(timeout=120_000)
        base.get_by_label("Sentence", exact=True).wait_for(timeout=120_000)
        for i in range(repeats + 1):  # round 0 warms caches and the browser, not counted
            marker = f"run {i}"  # a new text each round, so nothing is served from a cache
            runs = {
                "baseline": lambda m=marker: submit_and_wait(base, f"baseline {m}"),
                "sentence": lambda m=marker: submit_and_wait(app, f"{SENTENCE_20} {m}"),
                "long": lambda m=marker: submit_and_wait(app, f"{m} {long_text}"),
            }
            for name, fn in runs.items():
                seconds = fn()
                if i:
                    times[name].append(seconds)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    times = measure(parser.parse_args().repeats)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"baseline 20x20 heatmap page: {med['baseline'] * 1e3:.0f} ms")
    print(f"(a) 20-word sentence: {med['sentence'] * 1e3:.0f} ms, ratio {med['sentence'] / med['baseline']:.2f} "
          "(target <= 1.5)")
    print(f"(b) 400-piece text:   {med['long'] * 1e3:.0f} ms, ratio {med['long'] / med['baseline']:.2f} "
          "(target <= 3)")


if __name__ == "__main__":
    main()
