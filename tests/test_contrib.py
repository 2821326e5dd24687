"""Value-weighted (norm-based) attention and attention rollout: invariants on tiny models of several families."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mha_core import load_model, run
from mha_core.analysis.heads.contrib import (
    rollout,
    rollout_of,
    summed_contributions,
    value_weighted,
    value_weighted_summary,
)
from mha_core.engine.budget import BudgetError

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
    uniform = np.full((1, 2, 4, 4), 0.25)  # every head looks everywhere alike
    assert np.allclose(rollout(uniform)[0], 0.5 * np.eye(4) + 0.125)  # half stays (the residual), half spreads
    identity = np.broadcast_to(np.eye(4), (3, 2, 4, 4))  # every token attends to itself only
    assert np.allclose(rollout(identity), np.eye(4))  # nothing ever moves
    assert np.allclose(rollout(maps[:1])[0], rolled[0])


def test_causal_models_roll_out_lower_triangular(family_dirs):
    model = load_model(family_dirs["gpt2"])
    rolled = rollout(run(model, TEXT).text_attention(0))
    assert np.abs(np.triu(rolled[-1], k=1)).max() == 0.0


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_layer_by_layer_summary_and_rollout_equal_the_full_stacks(family_dirs, family):
    """The page's views, built one layer at a time from the fused path's log-sum-exp, equal what the full
    (L,H,T,T) stack of the explicit path gives."""
    model = load_model(family_dirs[family])
    fused, explicit = run(model, TEXT, path="fused"), run(model, TEXT, path="explicit")
    stages = []
    summary = value_weighted_summary(model, fused, progress=lambda done, total: stages.append((done, total)))
    full = [value_weighted(model, explicit, layer) for layer in range(model.n_layers)]
    assert np.allclose(summary.raw_special_share, np.stack([v.raw_special_share for v in full]), atol=1e-5)
    assert np.allclose(summary.weighted_special_share, np.stack([v.weighted_special_share for v in full]), atol=1e-5)
    rows = np.stack([v.weighted / v.weighted.sum(-1, keepdims=True) for v in full])  # (L,H,T,T)
    assert np.allclose(summary.overview, rows, atol=1e-5)  # T <= OVERVIEW_MAX_BINS: nothing pooled
    assert stages[-1] == (model.n_layers, model.n_layers)
    assert np.allclose(rollout_of(model, fused), rollout(explicit.text_attention(0)), atol=1e-5)


def test_value_weighted_views_over_the_budget_are_refused(tiny, monkeypatch):
    result = run(tiny, TEXT)
    monkeypatch.setattr("mha_core.engine.budget.budget_bytes", lambda: 1024)
    with pytest.raises(BudgetError, match="value-weighted maps of this text would need"):
        value_weighted_summary(tiny, result)
    with pytest.raises(BudgetError, match="rollout of this text would need"):
        rollout_of(tiny, result)
