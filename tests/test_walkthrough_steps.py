"""The Walkthrough's tensors, step by step, against the model itself (issue 20, section 3): the output projection
as transformers computes it (a hook on the module), the rest as the recompute keeps it (parity-tested)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model, run
from mha_core.teaching.walkthrough import Parity, design_notes, softmax_at_scale, walkthrough
from tests.tiny_models import CONFIGS

TEXT = "The animal didn't cross the street because it was too tired."
W_O_MODULES = ("attention.output.dense", "attn.c_proj", "self_attn.o_proj", "attention.out_lin", "attention.dense",
               "self_attention.dense", "self_attn.out_proj")


def model_output_projection(model, result, layer: int) -> np.ndarray:
    """What the transformers module holding W_O returns for text 0 at `layer` (T,D)."""
    suffixes = tuple(f".{layer}.{name}" for name in W_O_MODULES)
    module = next(m for name, m in model.model.named_modules() if name.endswith(suffixes))
    captured = []
    handle = module.register_forward_hook(lambda _m, _i, out: captured.append(out))
    try:
        with torch.no_grad():
            model.model(input_ids=result.batch.input_ids, attention_mask=result.batch.attention_mask)
    finally:
        handle.remove()
    return captured[0][0, : result.lengths[0]].float().numpy()


def check_steps(model, layer: int, head: int) -> None:
    result = run(model, TEXT, path="explicit")
    n, group = result.lengths[0], model.n_heads // model.n_kv_heads
    w = walkthrough(model, result, layer, head)
    assert np.allclose(w.q, result.layer_q[layer][0, :, :n].numpy(), atol=1e-5)  # Q (after RoPE)
    assert np.allclose(w.k, result.layer_k[layer][0, :, :n].numpy(), atol=1e-5)  # K
    assert np.allclose(w.probs, result.text_layer_maps(0, layer)[head].numpy(), atol=1e-5)  # the weights
    assert np.allclose(w.context, result.layer_context[layer][0, :, :n].numpy(), atol=1e-5)  # head outputs
    assert np.allclose(w.context[head], w.probs @ w.v[head // group], atol=1e-5)  # probs @ V
    assert np.allclose(w.concat.reshape(n, model.n_heads, -1).transpose(1, 0, 2), w.context)  # concatenation
    assert np.allclose(w.output, model_output_projection(model, result, layer), atol=1e-4)  # W_O, by transformers
    for query in range(n):  # the page's softmax at the model's scale is the model's row (soft-cap, ALiBi, T5's bias)
        bias = None if w.position_bias is None else w.position_bias[query]
        row = softmax_at_scale(w.raw_scores[query], w.scale, w.visible[query], bias, w.softcap)
        assert np.allclose(row, w.probs[query], atol=1e-5), query


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_walkthrough_steps_equal_the_model_for_every_family(family_dirs, family):
    check_steps(load_model(family_dirs[family]), layer=1, head=1)


def test_walkthrough_steps_equal_the_bundled_encoder(bundled):
    check_steps(bundled, layer=3, head=1)


@pytest.mark.slow
def test_walkthrough_steps_equal_the_bundled_decoder(decoder):
    check_steps(decoder, layer=15, head=4)


def test_the_walkthrough_names_what_each_design_adds(family_dirs):
    notes = {family: " ".join(design_notes(load_model(family_dirs[family]), 0)) for family in
             ("bert", "gemma3_text", "gemma2", "bloom", "gpt_neox", "mistral")}
    assert notes["bert"] == ""
    assert "QK-norm" in notes["gemma3_text"] and "local layer" in notes["gemma3_text"] and "global layers (1)" in notes[
        "gemma3_text"] and "different RoPE bases" in notes["gemma3_text"]
    assert "Soft-capping: the scaled scores pass through 2·tanh(s / 2)" in notes["gemma2"]
    assert "ALiBi" in notes["bloom"] and "Parallel block" in notes["gpt_neox"]
    assert "sliding window of 6" in notes["mistral"] and "global" not in notes["mistral"]
    assert "Layer 1 is a global layer" in " ".join(design_notes(load_model(family_dirs["gemma3_text"]), 1))


def transformers_shapes(model, layer: int) -> tuple[int, int, float | None]:
    """(D, H·d_k, scale) as transformers' own modules hold them: the W_O module's weight (nn.Linear stores (out, in),
    GPT-2's Conv1D (in, out)) and the attention module's `scaling`, where it has one."""
    suffixes = tuple(f".{layer}.{name}" for name in W_O_MODULES)
    name, out = next((n, m) for n, m in model.model.named_modules() if n.endswith(suffixes))
    rows, cols = out.weight.shape
    d, width = (cols, rows) if hasattr(out, "nf") else (rows, cols)
    owner = model.model.get_submodule(name.rsplit(".", 2)[0] if name.count(".") > 2 else name.rsplit(".", 1)[0])
    scaling = next((m.scaling for m in (owner, *owner.children()) if hasattr(m, "scaling")), None)
    return d, width, scaling


def check_step_numbers(model, layer: int) -> None:
    """Every shape and constant the Walkthrough writes at `layer` equals the model's modules, in both languages."""
    from mha_core import i18n
    from mha_core.teaching import step_shapes as words

    t = run(model, TEXT, path="explicit").lengths[0]
    s = words.step_shapes(model, layer, t)
    d, width, scaling = transformers_shapes(model, layer)
    config = model.config.get_text_config()
    heads = config.num_attention_heads if hasattr(config, "num_attention_heads") else config.n_head
    assert (s.d_model, s.heads_width, s.heads, s.d_k) == (d, width, heads, width // heads)
    if scaling is not None:
        assert s.scale == pytest.approx(scaling, rel=1e-6)
    for language in ("en", "zh"):
        i18n.use(language)
        try:
            assert f"(1, {t}, {d})" in words.projection_sentence(s, True) and f"{d} × {width}" in \
                words.projection_sentence(s, True)
            assert f"(1, {t}, {width})" in words.concat_sentence(s)
            out = words.output_sentence(s)
            assert f"(1, {t}, {width})" in out and f"({width} × {d})" in out and out.endswith(("heads.", "bias).",
                                                                                              "。", "）。"))
            assert f"{s.scale:.4f}" in words.scale_sentence(s) or s.scale_rule == words.UNSCALED
            notes = " ".join(design_notes(model, layer))
            assert (str(width) in notes) == (width != d)  # the width note, only where the heads are not d_model wide
        finally:
            i18n.use("en")


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_the_walkthrough_writes_each_family_s_own_shapes_and_scale(family_dirs, family):
    check_step_numbers(load_model(family_dirs[family]), layer=1)


@pytest.mark.parametrize(("family", "overrides"), [("gemma3_text", dict(head_dim=16, query_pre_attn_scalar=16)),
                                                   ("qwen3", dict(head_dim=16)), ("llama", dict(head_dim=4))])
def test_heads_wider_or_narrower_than_the_stream_are_written_as_they_are(tmp_path, family, overrides):
    from tests.tiny_models import make_tiny

    model = load_model(make_tiny(family, tmp_path / family, **overrides))
    assert model.n_heads * model.head_dim != model.d_model
    check_step_numbers(model, layer=1)


def test_gemma_s_scale_is_named_by_its_own_rule(family_dirs, tmp_path):
    from mha_core.teaching import step_shapes as words
    from tests.tiny_models import make_tiny

    s = words.step_shapes(load_model(family_dirs["gemma2"]), 0, 5)  # query_pre_attn_scalar 16, d_k 8
    assert s.scale_rule == words.PRE_ATTN_SCALAR and s.scale == pytest.approx(0.25)
    assert "1/√query_pre_attn_scalar = 1/√16 = 0.2500 (not 1/√d_k = 1/√8 = 0.3536)" in words.scale_sentence(s)
    same = words.step_shapes(load_model(make_tiny("gemma3_text", tmp_path / "g", head_dim=16)), 0, 5)
    assert "here equal to 1/√d_k = 1/√16" in words.scale_sentence(same)
    assert "not 1/√d_k" not in " ".join(design_notes(load_model(tmp_path / "g"), 0))


def test_t5_s_encoder_is_written_unscaled(tmp_path):
    from mha_core.teaching import step_shapes as words
    from tests.tiny_models import make_tiny_seq2seq

    model = load_model(make_tiny_seq2seq("t5", tmp_path / "t5"))
    s = words.step_shapes(model, 0, 5)  # an encoder–decoder's LoadedModel is its encoder stack
    assert s.scale == 1.0 and s.scale_rule == words.UNSCALED and "not scaled" in words.scale_sentence(s)


def test_the_bundled_models_walkthrough_numbers(bundled):
    check_step_numbers(bundled, layer=3)


@pytest.mark.slow
def test_gemma_s_walkthrough_numbers(gemma):
    from mha_core.teaching import step_shapes as words

    check_step_numbers(gemma, layer=5)
    s = words.step_shapes(gemma, 5, 14)
    assert (s.d_model, s.heads, s.d_k, s.heads_width, s.kv_width) == (640, 4, 256, 1024, 256)
    assert "(1, 14, 1024) × W_Oᵀ (1024 × 640)" in words.output_sentence(s)


@pytest.mark.slow
def test_the_bundled_decoder_s_walkthrough_numbers(decoder):
    check_step_numbers(decoder, layer=15)


@pytest.mark.slow
@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_page_writes_gemma_s_widths_in_both_languages(gemma, language):
    """The Chinese default (Gemma 3 270M): every step's text names the widths transformers' modules hold."""
    from tests.conftest import open_app

    at = open_app("views/walkthrough.py", lang=language, model=gemma.name)
    assert not at.exception
    d, width, scaling = transformers_shapes(gemma, gemma.n_layers // 2)
    t = len(at.selectbox(key="wt_query").options)
    text = " ".join(m.value for m in at.markdown)
    assert f"(1, {t}, {width}) × W_Oᵀ ({width} × {d})" in text and f"→ (1, {t}, {width})" in text
    assert "W_Q" in text and f"{d} × {width}" in text and f"{scaling:.4f}" in text
    assert "not 1/√d_k" not in text and "不是 1/√d_k" not in text


def test_parity_allows_float_rounding_in_proportion_to_the_hidden_state():
    """Maps to 1e-5 (weights lie in [0, 1]); the last hidden state to 1e-4, or 2e-6 of its largest value where that
    is larger (Gemma 3's reaches ~180 on a Chinese sentence)."""
    def found(maps: float, hidden: float, scale: float) -> Parity:
        return Parity(maps, hidden, maps, "math", hidden_scale=scale)

    assert found(1e-6, 1.4e-4, 180.0).ok and found(1e-6, 9e-5, 1.0).ok
    assert not found(1e-6, 1.4e-4, 5.0).ok  # a small state: 1e-4 holds
    assert not found(1e-6, 4e-4, 180.0).ok  # beyond 2e-6 of 180
    assert not found(2e-5, 1e-6, 1.0).ok  # a map off by more than float precision
