"""Texts sharing one forward (mha_core.engine.each): each text's result is run() on that text alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model, run
from mha_core.engine import each
from mha_core.engine import forward as forward_module
from mha_core.engine.budget import forward_bytes
from mha_core.engine.tokens import InputError

TEXTS = ["The animal didn't cross the street because it was too tired.", "She sang.",
         "小明把书借给了小红，因为她明天要考试。", "Numbers 1, 22 and 333 stay as they are typed."]
BATCH_FIELDS = ("texts", "tokens", "labels", "word_ids", "offsets", "n_tokens", "unknown", "left_out", "segments")


def counted_forwards(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of texts of each forward run_each starts (shared or alone)."""
    seen: list[int] = []
    shared, alone = forward_module.forward, each.run

    def counting(model, batch, *args, **kwargs):
        seen.append(len(batch.texts))
        return shared(model, batch, *args, **kwargs)

    monkeypatch.setattr(each, "forward", counting)
    monkeypatch.setattr(each, "run", lambda model, texts, **kwargs: seen.append(len(texts)) or alone(model, texts,
                                                                                                       **kwargs))
    return seen


def assert_alone(result, model, text: str, path: str) -> None:
    """`result` is run(model, [text], path): every token field equal, every tensor within float rounding and of
    the text's own length and storage."""
    own = run(model, [text], path=path)
    for name in BATCH_FIELDS:
        assert getattr(result.batch, name) == getattr(own.batch, name), name
    assert torch.equal(result.batch.input_ids, own.batch.input_ids)
    assert torch.equal(result.batch.attention_mask, own.batch.attention_mask)
    assert (result.path, str(result.path_reason)) == (own.path, str(own.path_reason))
    for name in ("layer_q", "layer_k", "layer_context", "layer_probs", "layer_lse", "hidden_states"):
        mine, theirs = getattr(result, name), getattr(own, name)
        assert (mine is None) == (theirs is None), name
        for a, b in zip(mine or (), theirs or (), strict=True):
            assert a.shape == b.shape, name
            assert a.untyped_storage().nbytes() == a.numel() * a.element_size(), name  # no padded batch kept
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-5, rtol=1e-4, err_msg=name)


def test_texts_read_together_are_each_the_text_alone_on_the_bundled_encoder(bundled, monkeypatch):
    forwards = counted_forwards(monkeypatch)
    results = each.run_each(bundled, TEXTS, "auto")
    assert forwards == [len(TEXTS)]  # one forward for all four
    for result, text in zip(results, TEXTS, strict=True):
        assert_alone(result, bundled, text, "auto")
    assert f"explicit for {results[1].lengths[0]} tokens" in str(results[1].path_reason)  # its own count


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "gpt2", "bloom", "opt", "qwen2"])
def test_decoders_read_together_keep_their_positions_windows_and_biases(family, family_dirs, monkeypatch):
    """Right padding under causal masks, RoPE positions, sliding windows (Gemma 3), ALiBi (BLOOM), OPT's position
    offset, grouped-query attention: each text is still the text alone, on both paths."""
    model = load_model(family_dirs[family])
    forwards = counted_forwards(monkeypatch)
    for path in ("explicit", "fused"):
        for result, text in zip(each.run_each(model, TEXTS[:2] + TEXTS[3:], path), TEXTS[:2] + TEXTS[3:],
                                strict=True):
            assert_alone(result, model, text, path)
    assert forwards == [3, 3]


def test_a_refused_text_gets_its_own_message_and_the_others_their_results(bundled, monkeypatch):
    forwards = counted_forwards(monkeypatch)
    results = each.run_each(bundled, [TEXTS[0], "   ", TEXTS[1]], "auto")
    assert isinstance(results[1], InputError) and results[1].code == "text_empty"  # as alone, not "Text 2 is empty"
    assert forwards == [1, 1, 1]  # one by one
    assert_alone(results[0], bundled, TEXTS[0], "auto")
    assert_alone(results[2], bundled, TEXTS[1], "auto")


def test_texts_whose_paths_differ_alone_or_over_the_budget_together_are_read_one_by_one(bundled, monkeypatch):
    forwards = counted_forwards(monkeypatch)
    long = " ".join(["word"] * 300)  # auto: fused alone (over 256 pieces); the short text alone: explicit
    results = each.run_each(bundled, [long, TEXTS[1]], "auto")
    assert forwards == [1, 1] and [r.path for r in results] == ["fused", "explicit"]
    assert_alone(results[0], bundled, long, "auto")

    forwards.clear()
    batch_bytes = forward_bytes(bundled, 2, run(bundled, [TEXTS[0]]).lengths[0], keeps_maps=True)
    monkeypatch.setattr(each, "budget_bytes", lambda: 2 * batch_bytes - 1)  # the batch fits, not with its copies
    results = each.run_each(bundled, TEXTS[:2], "auto")
    assert forwards == [1, 1]  # each alone: the peak of cutting it would be over the budget
    assert_alone(results[0], bundled, TEXTS[0], "auto")
    forwards.clear()
    monkeypatch.setattr(each, "budget_bytes", lambda: 2 * batch_bytes)
    each.run_each(bundled, TEXTS[:2], "auto")
    assert forwards == [2]
