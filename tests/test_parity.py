"""Parity on the real bundled model: our recompute vs transformers' eager BERT."""

from __future__ import annotations

import pytest
import torch

from mha_core import run
from tests.conftest import ANIMAL_TIRED, long_text
from tests.tolerance import assert_close_to_scale

TEXTS = {
    "animal": ANIMAL_TIRED,
    "over_300_pieces": long_text(280),
    "over_512_pieces": long_text(600),
    "punctuation": "Wait... what?! (Really) -- yes; no: \"maybe\" [CLS] [SEP] #hash @at 3.14%, 1,000,000!",
    "accents": "Le café où Zoë a mangé une crème brûlée était très agréable, naïve façade.",
    "cjk_emoji": "東京は大きい都市です 🙂🚀 한국어 文本 and some English 👍🏽 too.",
}


def reference(model, result):
    with torch.inference_mode():
        return model.model(
            input_ids=result.batch.input_ids, attention_mask=result.batch.attention_mask, output_attentions=True
        )


@pytest.fixture(scope="module", params=list(TEXTS), ids=list(TEXTS))
def case(request, bundled):
    text = TEXTS[request.param]
    explicit = run(bundled, text, path="explicit")
    return request.param, explicit, reference(bundled, explicit), run(bundled, text, path="fused")


def test_explicit_maps_equal_eager_transformers(case):
    _, explicit, ref, _ = case
    assert len(ref.attentions) == explicit.n_layers == 6
    for layer in range(explicit.n_layers):
        ours = explicit.layer_maps(layer)
        assert_close_to_scale(ours, ref.attentions[layer], 1e-5, what=f"layer {layer}")


def test_explicit_hidden_state_equals_transformers(case):
    _, explicit, ref, _ = case
    assert_close_to_scale(explicit.last_hidden_state, ref.last_hidden_state, 1e-4)


def test_fused_maps_rebuilt_from_lse_equal_explicit(case):
    _, explicit, _, fused = case
    assert fused.path == "fused" and fused.backend == "flash (CPU)"
    assert fused.layer_probs is None  # nothing quadratic is kept on the fused path
    assert_close_to_scale(fused.attention(), explicit.attention(), 5e-5)
    for a, b in zip(fused.hidden_states, explicit.hidden_states, strict=True):
        assert_close_to_scale(a, b, 1e-4)


def test_pre_softmax_scores_give_the_maps(case):
    _, explicit, _, _ = case
    probs = torch.softmax(explicit.scores_map(3, 5), dim=-1)
    assert_close_to_scale(probs, explicit.head_map(3, 5), 1e-5)
    assert torch.equal(explicit.scores()[:, 3, 5], explicit.scores_map(3, 5))


def test_long_texts_are_cut_and_say_so(case):
    name, explicit, _, _ = case
    if name == "over_512_pieces":
        assert explicit.truncated == (True,)
        assert explicit.lengths == (512,) and explicit.n_tokens[0] > 512
    else:
        assert explicit.truncated == (False,)
        assert explicit.n_tokens[0] == explicit.lengths[0]


def test_batch_equals_texts_one_by_one(bundled):
    texts = [ANIMAL_TIRED, "Short one.", TEXTS["cjk_emoji"]]
    for path in ("explicit", "fused"):
        batch = run(bundled, texts, path=path)
        maps = batch.attention()  # (B,L,H,T,T)
        assert batch.lengths[1] < maps.shape[-1]  # the short text really is padded
        for b, text in enumerate(texts):
            alone = run(bundled, text, path=path)
            n = alone.lengths[0]
            assert batch.tokens[b] == alone.tokens[0]
            assert_close_to_scale(maps[b, :, :, :n, :n], alone.attention()[0], 2e-5)
            assert maps[b, :, :, :, n:].sum().item() == 0.0  # padded keys
            assert maps[b, :, :, n:, :].sum().item() == 0.0  # padded queries
            assert_close_to_scale(batch.last_hidden_state[b, :n], alone.last_hidden_state[0], 1e-5)
