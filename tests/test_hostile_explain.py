"""Hostile input to `explain` (issue 81): what a careless command line must be told in one line before any work."""

from __future__ import annotations

import pytest

from tests.conftest import cli


@pytest.mark.parametrize("bad", [["--methods", "bogus"], ["--steps", "0"]])
def test_a_dataset_run_refuses_bad_methods_or_steps_before_any_text(lm_dirs, monkeypatch, bad):
    import mha_core.analysis.explain.dataset as dataset

    monkeypatch.setattr(dataset, "explain", lambda *a, **k: pytest.fail("a text was explained"))
    run = cli("explain", "--dataset", "corpus", *bad, "--model-dir", str(lm_dirs["llama-tied"]), "--json", "-")
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()[-1:]) == 1 and "skipped" not in run.stderr
    assert ("Unknown method 'bogus'" if "bogus" in bad else "1 to 300 steps, not 0") in run.stderr


def test_an_answer_that_is_its_own_wrong_word_is_refused(lm_dirs):
    run = cli("explain", "the cat sat", "--answer", "cat", "--wrong", " cat ", "--model-dir",
              str(lm_dirs["llama-tied"]), "--json", "-")
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr
    assert "same piece 'cat'" in run.stderr
