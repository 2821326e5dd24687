"""Issue 33, part 2: the memory budget bounds the process. Each computation a visitor or the CLI can start runs in a
child process of its own; its peak resident memory (the kernel's count for that child alone) minus the same model's
smallest run must stay within $MHA_COMPUTE_MB, at twice and four times the sizes the other tests use."""

from __future__ import annotations

import pytest

from benchmarks.bench_memory import pair_of, words
from mha_core.engine.bundled import DECODER_NAME, GEMMA_NAME
from tests.test_budget import peak_rss_mb

BUDGET_MB = 768  # small enough that every case below needs several chunks


def growth_mb(model: str, args: list[str], tmp_path) -> float:
    out = ["--model", model, "--json", str(tmp_path / "out.json")]
    loaded = peak_rss_mb(["attention", "hi", *out])  # the model in memory, every weight touched
    return peak_rss_mb([*args, *out], budget_mb=BUDGET_MB) - loaded


@pytest.mark.slow
@pytest.mark.parametrize("pieces", [50, 100])  # the default pair has about 25
def test_a_patching_grid_stays_within_the_budget(decoder, tmp_path, pieces):
    """Before: patch on 256 pieces passed 5 GB (every layer's work of a chunk kept until its end)."""
    clean, corrupted = pair_of(pieces)
    assert growth_mb(DECODER_NAME, ["patch", clean, corrupted, "--answer", " animal", "--wrong", " street"],
                     tmp_path) <= BUDGET_MB


@pytest.mark.slow
@pytest.mark.parametrize("n_words", [30, 60])  # the ablation test's sentence has 12 words
def test_an_ablation_grid_stays_within_the_budget(decoder, tmp_path, n_words):
    assert growth_mb(DECODER_NAME, ["ablate", words(n_words)], tmp_path) <= BUDGET_MB


@pytest.mark.slow
@pytest.mark.parametrize("n_words", [60, 120])
def test_the_logit_lens_stays_within_the_budget_on_a_large_vocabulary(gemma, tmp_path, n_words):
    """Gemma's 262,144 pieces: before, one layer's logits at a time (a GB at 1,024 positions)."""
    assert growth_mb(GEMMA_NAME, ["lens", words(n_words)], tmp_path) <= BUDGET_MB


@pytest.mark.slow
@pytest.mark.parametrize("n_words", [1500, 3000])
def test_one_heads_whole_long_map_is_written_as_it_is_made(decoder, tmp_path, n_words):
    """Before: the JSON of one head's 8,192 × 8,192 map took 5.6 GB in one string."""
    text = tmp_path / "long.txt"
    text.write_text(words(n_words), encoding="utf-8")
    assert growth_mb(DECODER_NAME, ["attention", "--text-file", str(text), "--heads", "0:0"], tmp_path) <= BUDGET_MB
