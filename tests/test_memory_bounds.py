"""Issue 33, part 2: the memory budget bounds the process. A computation a visitor or the CLI can start runs in a child
process of its own at the size the other tests use and at four times that size, under a small budget
($MHA_COMPUTE_MB) that makes every case run in many chunks; the bigger run's peak resident memory (the kernel's count
for that child alone) may exceed the smallest run's by at most the budget. The smallest run carries the same
libraries and model, so what grows is the computation itself. benchmarks/bench_memory.py measures the issue's own
sizes (1,024 pieces, 8,192 pieces) against the default budget."""

from __future__ import annotations

import pytest

from benchmarks.bench_memory import pair_of, words
from mha_core.engine.budget import BUDGET_ENV
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME
from tests.cli_forks import peak_rss_mb_each

CASES = {  # name: (model, budget in MB, the command at 1x and 4x its tests' size)
    "ablation": (ENCODER_NAME, 256, lambda k: ["ablate", words(15 * k)]),
    "patching": (ENCODER_NAME, 256, lambda k: ["patch", *pair_of(25 * k)]),
    "lens": (DECODER_NAME, 256, lambda k: ["lens", words(30 * k)]),
    "long output": (DECODER_NAME, 512, lambda k: ["attention", "--text-file", "LONG", "--heads", "0:0"]),
}


@pytest.mark.slow
@pytest.mark.long
def test_a_computation_grows_by_at_most_its_budget(tmp_path):
    """Every case at 1x and 4x, each run a fork of one process that has imported the libraries and loaded the two
    models (tests/cli_forks.py: eight fresh CLI processes spent about 40 s importing; eight forks that each loaded
    their model, 4 s loading)."""
    runs = []
    for case, (model, budget, command) in CASES.items():
        for k in (1, 4):
            args = command(k)
            if "LONG" in args:  # one head's whole map over a long text, written as it is made
                long_text = tmp_path / f"long{k}.txt"
                long_text.write_text(words(300 * k), encoding="utf-8")
                args = [str(long_text) if a == "LONG" else a for a in args]
            out = str(tmp_path / f"{case.replace(' ', '_')}{k}.json")
            runs.append(([*args, "--model", model, "--json", out], {BUDGET_ENV: str(budget)}))
    peaks = peak_rss_mb_each(runs)
    grown = {case: (peaks[2 * i], peaks[2 * i + 1]) for i, case in enumerate(CASES)}
    over = {case: (small, big) for case, (small, big) in grown.items() if big - small > CASES[case][1]}
    assert not over, (over, grown)


def test_a_chunk_keeps_only_its_current_layer():
    """`*_, last = layers` keeps every layer's output until the end (a chunk's peak L times one layer's work):
    last_output lets each layer go as the next is made."""
    import gc
    import weakref

    from mha_core.engine.forward import last_output

    class Output:
        """Stands for one layer's (x, attention) pair."""

    made: list[weakref.ref] = []

    def layers():
        for _ in range(4):
            gc.collect()
            assert all(ref() is None for ref in made[:-1]), "an earlier layer is still held"
            output = Output()
            made.append(weakref.ref(output))
            yield output

    assert isinstance(last_output(layers()), Output) and len(made) == 4


def test_patching_plans_its_chunks_after_the_two_streams(monkeypatch, tiny):
    """The clean and corrupted streams are held through the whole grid: chunks share what is left of the budget,
    and a budget the streams already fill is refused before any variant runs."""
    from mha_core.analysis.lm.patching import chunk_rows
    from mha_core.engine.budget import BUDGET_ENV, BudgetError, budget_bytes, planned_bytes

    monkeypatch.setenv(BUDGET_ENV, "64")
    free = chunk_rows(tiny, 40)
    assert 1 < chunk_rows(tiny, 40, reserved=planned_bytes() // 2) <= free // 2 + 1
    with pytest.raises(BudgetError, match="Patching 40 pieces"):
        chunk_rows(tiny, 40, reserved=budget_bytes())
