"""The Walkthrough's tensors, step by step, against the model itself (issue 20, section 3): the output projection
as transformers computes it (a hook on the module), the rest as the recompute keeps it (parity-tested)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model, run
from mha_core.teaching.walkthrough import design_notes, softmax_at_scale, walkthrough
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
