"""Issue 78 (items 1, 7, 8 and the cost API of 9): the efficiency lab under hostile input and long texts. Every
pattern, every argument of the cost lab and every text is checked (and its memory estimated) before any work, each
refusal one sentence; what the cost lab says fits is what it runs."""

from __future__ import annotations

import pytest

from mha_core import InputError, load_model, parse_pattern, with_pattern
from mha_core.analysis.efficiency import cost, fidelity
from mha_core.analysis.efficiency.cost import KERNELS, MAX_LENGTH, attention_cost, check_cost_inputs, longest_fitting
from mha_core.analysis.efficiency.fidelity import longest_fitting as longest_text
from mha_core.analysis.efficiency.fidelity import pattern_bytes
from mha_core.analysis.efficiency.patterns import Pattern
from mha_core.engine.budget import BUDGET_ENV, BudgetError, budget_bytes
from tests.tiny_models import make_tiny

TEXT = "The animal didn't cross the street because it was too tired."


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny decoder that reads up to 4,096 pieces."""
    return load_model(make_tiny("llama", tmp_path_factory.mktemp("llama"), max_position_embeddings=4096))


@pytest.mark.parametrize("spec", ["performer:4:²", "bigbird:4:1:2:²", "window:４", "dilated:2:99999999999999999999",
                                  f"performer:4:{10**23}", f"bigbird:1:1:1:{10**23}", "window:-3", "window:1e3",
                                  "longformer:2:" + "9" * 5000, "window:" + "1" * 300])
def test_a_pattern_s_numbers_are_read_strictly_and_bounded(spec):
    with pytest.raises(InputError) as err:
        parse_pattern(spec)
    assert err.value.code == "pattern_unreadable" and "\n" not in str(err.value)


@pytest.mark.parametrize("pattern", [Pattern("window:-3", "window", window=-3), Pattern("bogus", "bogus"),
                                     Pattern("performer", "performer", features=10**6, seed=1),
                                     Pattern("bigbird", "bigbird", window=1, globals_=1, random=1, seed=10**23),
                                     "window:²", 7, None])
def test_with_pattern_refuses_a_bad_pattern_before_any_work(llama, monkeypatch, pattern):
    monkeypatch.setattr(fidelity, "forward", lambda *a, **k: pytest.fail("the forward ran"))
    with pytest.raises(InputError) as err:
        with_pattern(llama, TEXT, pattern)
    assert err.value.code in ("pattern_unreadable", "api_argument_type")  # the API's own type check: 7, None


@pytest.mark.parametrize("arguments", [
    {"heads": 0}, {"head_dim": 0}, {"window": 0}, {"window": -5}, {"window": 10**9}, {"heads": 10**9},
    {"head_dim": True}, {"lengths": []}, {"lengths": [0]}, {"lengths": [2**40]}, {"lengths": "512"},
    {"kernels": ["bogus"]}, {"kernels": []}, {"device": "cuda:7"}, {"device": "tpu"}, {"repeats": 0},
])
def test_the_cost_api_refuses_hostile_arguments_in_one_sentence_before_any_work(monkeypatch, arguments):
    monkeypatch.setattr(cost, "best_seconds", lambda *a, **k: pytest.fail("a kernel ran"))
    asked = {"lengths": [64, 128], "heads": 2, "head_dim": 8, "kernels": ("fused",), "window": 8, "memory": False,
             **arguments}
    with pytest.raises(InputError) as err:
        attention_cost(**asked)
    assert "\n" not in str(err.value) and "Traceback" not in str(err.value)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("budget_mb", ["64", "1536"])
def test_the_longest_length_said_is_the_longest_the_lab_runs(monkeypatch, kernel, budget_mb):
    """One rule: the refusal names the length `fits` stops at; that length passes, one piece more is refused (the
    refusal used to say 8,192, a power of two, while 13,800 ran)."""
    monkeypatch.setenv(BUDGET_ENV, budget_mb)
    longest = longest_fitting(kernel, 12, 64, 128)
    assert longest >= 2
    check_cost_inputs([longest], [kernel], 12, 64, 128)
    said = f"the longest that fits is {longest:,} pieces" if longest < MAX_LENGTH else f"from 2 to {MAX_LENGTH:,}"
    with pytest.raises(InputError, match=said):
        check_cost_inputs([512, longest + 1], [kernel], 12, 64, 128)


def test_a_length_that_would_run_for_minutes_is_refused():
    with pytest.raises(InputError) as err:
        check_cost_inputs([65536], ["fused"], 9, 64, 128)
    assert err.value.code == "cost_too_much_work" and "the longest that fits is" in str(err.value)


def test_a_text_over_the_budget_is_refused_before_any_work_naming_the_longest_that_fits(llama, monkeypatch):
    """The estimate covers both runs and what compares them; the longest it names fits, one piece more does not."""
    monkeypatch.setenv(BUDGET_ENV, "64")
    long_text = "The animal crossed the street. " * 400
    pattern = parse_pattern("performer:4096:1")
    longest = longest_text(llama, pattern, "auto")
    assert 0 < longest < llama.max_length
    assert pattern_bytes(llama, pattern, longest, "auto") <= budget_bytes() < pattern_bytes(llama, pattern,
                                                                                            longest + 1, "auto")
    monkeypatch.setattr(fidelity, "forward", lambda *a, **k: pytest.fail("the forward ran"))
    with pytest.raises(BudgetError, match=f"the longest text that fits is {longest:,} pieces"):
        with_pattern(llama, long_text, pattern)


def street(times: int) -> str:
    return "The animal crossed the street. " * times


@pytest.mark.slow
def test_the_efficiency_run_stays_within_its_budget_at_two_and_four_times_its_size(llama, tmp_path):
    """The tiny decoder under window:4 at 241 pieces, 482 and 962 (the issue's SmolLM2 text had 962: 4.94 GB on a
    1,536 MB budget), and under linear:elu (every map kept) at 241 and 482, with a budget of 96 MB: each forked run's
    peak over a one-sentence run's is within the budget (the two runs with every map, and kept_mass's (L,H,T,T)
    stacks, grew by about 150 MB at 962 pieces). Each run a fork of one process that imported the libraries."""
    from tests.cli_forks import peak_rss_mb_each

    budget = 96
    cases = [("window:1", 1), ("window:4", 40), ("window:4", 80), ("window:4", 160), ("linear:elu", 40),
             ("linear:elu", 80)]
    runs = [(["efficiency", street(times), "--pattern", spec, "--model-dir", str(llama.model_dir), "--json",
              str(tmp_path / f"{i}.json")], {BUDGET_ENV: str(budget)}) for i, (spec, times) in enumerate(cases)]
    base, *peaks = peak_rss_mb_each(runs)
    grown = {case: round(peak - base) for case, peak in zip(cases[1:], peaks, strict=True)}
    assert all(growth <= budget for growth in grown.values()), grown


@pytest.mark.slow
def test_the_issue_s_kernel_run_is_refused_at_once_naming_the_longest_text_that_fits(decoder, monkeypatch):
    from tests.conftest import cli

    monkeypatch.setattr(fidelity, "forward", lambda *a, **k: pytest.fail("the forward ran"))
    refused = cli("efficiency", street(160), "--pattern", "performer:4096:1", "--model", decoder.name)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    longest = longest_text(decoder, parse_pattern("performer:4096:1"), "auto")
    assert f"the longest text that fits is {longest:,} pieces" in refused.stderr


def test_the_memory_phase_counts_on_the_progress_bar():
    """Issue 77.10: the page sat at 20/20 for 26 s while each kernel's peak memory was measured; a step per kernel
    now follows the timed lengths."""
    seen: list[tuple[int, int]] = []
    attention_cost([64, 128], heads=2, head_dim=8, kernels=("fused", "linear"), window=8, repeats=1,
                   progress=lambda done, total: seen.append((done, total)))
    assert [done for done, _ in seen] == list(range(1, 7)) and {total for _, total in seen} == {6}


def test_the_slope_note_explains_explicit_s_slope_above_two_by_its_weights_bytes():
    from mha_core.analysis.efficiency.cost import AttentionCost, analytic
    from mha_core.teaching.efficiency import slope_note

    lengths = (512, 1024, 2048, 4096, 8192)

    def measured(explicit_slope):
        seconds = {"explicit": [1e-3 * (n / 512) ** explicit_slope for n in lengths],
                   "fused": [1e-3 * (n / 512) ** 2 for n in lengths]}
        figures = {k: [analytic(k, n, 9, 64, 128) for n in lengths] for k in seconds}
        return AttentionCost(lengths, 9, 64, 128, "cpu", seconds, {}, {k: [f for f, _ in v] for k, v in
                             figures.items()}, {k: [b for _, b in v] for k, v in figures.items()})

    above = slope_note(measured(2.48))
    assert "2.48" in above and "memory traffic" in above and f"{2 * 8192 * 8192 * 4 / 2**20:,.0f} MB" in above
    assert "memory traffic" not in slope_note(measured(2.0)) and "nˢ" in slope_note(measured(2.0))


def test_a_decoder_s_small_answers_keep_their_size():
    """Gemma, Chinese: "玛丽 0%, 书 0%: it now prefers 书 over 玛丽" (two answers under 1 % both shown as 0 %)."""
    from mha_core.teaching.efficiency import share

    assert [share(p) for p in (0.62, 0.0031, 0.00023, 0.00004, 5e-9, 0.0)] == ["62%", "0.3%", "0.02%", "<0.01%",
                                                                                 "<0.01%", "0%"]
    assert share(0.0031) != share(0.0012)  # the verdict's two numbers differ where the model's do


def test_a_patterned_answer_that_is_neither_noun_is_not_called_a_preference():
    """SmolLM2 under window:4 answered ' world' (animal 0%, street 0%) and the page said "it now prefers street over
    animal"; Gemma's '玛' is 玛丽's first piece and still names it."""
    from mha_core.analysis.efficiency.answers import ProbeAnswer

    def asked(patterned: str) -> ProbeAnswer:
        return ProbeAnswer("…", "it", ("animal", "street"), " animal", patterned, (0.42, 0.001), (0.0001, 0.0003))

    assert not asked(" world").patterned_names_one and not asked(" ").patterned_names_one
    assert asked(" street").patterned_names_one and asked(" anim").patterned_names_one
    assert ProbeAnswer("…", "她", ("玛丽", "书"), "玛", "玛", (0.62, 0.0), (0.5, 0.0)).patterned_names_one
