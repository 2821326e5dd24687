"""A prompt's start computed once (engine/cache.py): the pieces a text shares with a start (a few-shot prompt's
examples) are read from the start's keys and values, and only the rest is run. On tiny random decoders of each
kind (RoPE, learned positions, sliding windows with soft-capped scores), the rows, the prefill and a greedy
generation equal those of the whole text run at once; the start is computed once per model; a text that does not
begin with the start is run whole."""

from __future__ import annotations

import pytest

import mha_core.engine.cache as cache
from mha_core import load_model, run
from mha_core.analysis.lm.generate import generate
from mha_core.engine.tokens import tokenize
from tests.lm_models import LMS

START = "the animal did not cross the street because"
TEXT = START + " it was too tired . it refers to the animal"


def batch_of(model, text: str):
    return tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)


@pytest.mark.parametrize("name", sorted(LMS))
def test_rows_after_the_start_equal_the_whole_text_s(lm_dirs, name):
    model = load_model(lm_dirs[name])
    batch = batch_of(model, TEXT)
    whole = run(model, TEXT, path="explicit").text_maps(0)  # (L,H,P,P)
    k, rows = cache.maps_after_start(model, batch, START, before=whole.shape[-1] - 3)
    assert 5 < k <= whole.shape[-1] - 3  # the start's pieces (its own [SEP], if any, is not the text's)
    assert rows.shape == (model.n_layers, model.n_heads, whole.shape[-1] - k, whole.shape[-1])
    assert (rows - whole[:, :, k:]).abs().max().item() <= 1e-6
    k_capped, _ = cache.maps_after_start(model, batch, START, before=3)
    assert k_capped == 3  # never past the first row the caller reads


@pytest.mark.parametrize("name", ["llama-tied", "gemma2", "gpt2"])
def test_the_prefill_and_a_greedy_generation_after_the_start_equal_the_whole_prompt_s(lm_dirs, name):
    model = load_model(lm_dirs[name])
    batch = batch_of(model, TEXT)
    last, kept = cache.prefill(model, batch)
    last_after, kept_after = cache.prefill_after_start(model, batch, START)
    assert (last - last_after).abs().max().item() <= 1e-5
    for (keys, values), (keys_after, values_after) in zip(kept, kept_after, strict=True):
        assert keys.shape == keys_after.shape and (keys - keys_after).abs().max().item() <= 1e-5
        assert (values - values_after).abs().max().item() <= 1e-5
    plain, shared = generate(model, TEXT, new=8), generate(model, TEXT, new=8, start=START)
    assert [s.id for s in plain.steps] == [s.id for s in shared.steps]


def test_the_start_is_computed_once_per_model_and_a_text_without_it_runs_whole(lm_dirs, monkeypatch):
    real, prefills = cache.prefill, []
    monkeypatch.setattr(cache, "prefill", lambda *args: prefills.append(args) or real(*args))
    first, second = load_model(lm_dirs["llama-tied"]), load_model(lm_dirs["llama-tied"])
    for model in (first, first, second):
        cache.maps_after_start(model, batch_of(model, TEXT), START, before=10)
    assert len(prefills) == 2  # once for each loaded model
    other = "a river ran under the bridge"
    k, rows = cache.maps_after_start(first, batch_of(first, other), START, before=10)
    assert k <= 1  # at most the first special piece, which every text has
    assert (rows - run(first, other, path="explicit").text_maps(0)[:, :, k:]).abs().max().item() <= 1e-6
