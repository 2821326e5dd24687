"""Value-weighted (norm-based) attention and attention rollout: invariants on tiny models of several families."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mha_core import load_model, run
from mha_core.contrib import rollout, summed_contributions, value_weighted

TEXT = "The animal didn't cross the street because it was too tired."


def attention_block_output(model, result, layer: int) -> torch.Tensor:
    """The block's output before W_O's bias, from the recompute: concat(context) @ W_O^T."""
    context = result.layer_context[layer][0]  # (H,T,Dh)
    w_o = model.layers[layer].attention.w_o
    return F.linear(context.transpose(0, 1).reshape(context.shape[1], -1), w_o)  # (T,D)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_contributions_sum_to_the_attention_output(family_dirs, family):
    model = load_model(family_dirs[family])
    result = run(model, TEXT, path="explicit")
    for layer in range(model.n_layers):
        summed = summed_contributions(model, result, layer)
        expected = attention_block_output(model, result, layer)
        assert (summed - expected).abs().max().item() <= 1e-5, (family, layer)


def test_weighted_maps_scale_attention_by_value_norms(tiny):
    result = run(tiny, TEXT, path="explicit")
    vw = value_weighted(tiny, result, layer=1)
    alpha = result.text_maps(0)[1].numpy()  # (H,T,T)
    assert np.allclose(vw.weighted, alpha * vw.value_norms[:, None, :], atol=1e-6)
    assert vw.weighted.shape == alpha.shape and vw.raw_special_share.shape == (tiny.n_heads,)
    assert np.all((vw.weighted_special_share >= 0) & (vw.weighted_special_share <= 1))


def test_rollout_rows_sum_to_one_and_one_layer_is_its_own_rollout(tiny):
    maps = run(tiny, TEXT).text_attention(0)  # (L,H,T,T)
    rolled = rollout(maps)
    assert np.allclose(rolled.sum(-1), 1.0, atol=1e-6)
    t = maps.shape[-1]
    first = 0.5 * maps[0].mean(0) + 0.5 * np.eye(t)
    assert np.allclose(rolled[0], first / first.sum(-1, keepdims=True))
    assert np.allclose(rollout(maps[:1])[0], rolled[0])


def test_causal_models_roll_out_lower_triangular(family_dirs):
    model = load_model(family_dirs["gpt2"])
    rolled = rollout(run(model, TEXT).text_attention(0))
    assert np.abs(np.triu(rolled[-1], k=1)).max() == 0.0
