"""What heads contribute, not only where they look: norm-based (value-weighted) attention and attention rollout.

- Value-weighted attention (Kobayashi et al., 2020, "Attention is Not Only a Weight"): head h moves
  α_ij^h · f^h(x_j) from token j to token i, with f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h (the head's slice of
  W_O; with grouped-query attention, the key/value head serving h). ‖α_ij^h f^h(x_j)‖ = α_ij^h ‖f^h(x_j)‖.
  Summed over j and h the contributions give the attention block's output before W_O's bias, exactly.
- Attention rollout (Abnar & Zuidema, 2020): Â_l = 0.5·mean_h(A_l) + 0.5·I with rows renormalised;
  the rollout to layer l is Â_l ··· Â_0.

Shapes: L layers, H query heads, G key/value heads, T tokens, D d_model, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.engine.attention import repeat_kv
from mha_core.engine.batching import Progress
from mha_core.engine.budget import check_budget
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.words import OVERVIEW_MAX_BINS, pool_map
from mha_core.i18n import Worded
from mha_core.messages import N_


@dataclass(frozen=True)
class ValueWeighted:
    """One layer of one text."""

    layer: int
    value_norms: np.ndarray  # (H,T) ‖f^h(x_j)‖: how much head h can move from token j at full attention
    weighted: np.ndarray  # (H,T,T) α_ij^h ‖f^h(x_j)‖
    raw_special_share: np.ndarray  # (H,) of raw attention, the share that goes to special tokens (mean over rows)
    weighted_special_share: np.ndarray  # (H,) the same share of the norm-weighted attention


@torch.inference_mode()
def head_value_vectors(model: LoadedModel, result: AttentionResult, b: int, layer: int) -> Tensor:
    """f^h(x_j) for every head and token of text b: (H,T,D), float32."""
    lw = model.layers[layer]
    n = result.lengths[b]
    x = result.hidden_states[layer][b, :n].float()  # (T,D) the layer's input
    x = lw.attn_norm(x) if model.arch.pre_norm else x  # what attention reads
    hw = lw.head_weights()
    v = torch.einsum("td,gdk->gtk", x, hw.w_v.float()) + hw.b_v.float()[:, None, :]  # (G,T,Dh)
    v = repeat_kv(v[None], model.n_heads)[0]  # (H,T,Dh)
    return torch.einsum("htk,hkd->htd", v, hw.w_o.float())  # (H,T,D)


def special_share(maps: np.ndarray, special: np.ndarray) -> np.ndarray:
    """(H,T,T) non-negative maps -> (H,) mean over query rows of the row's share that goes to special keys."""
    totals = maps.sum(-1)  # (H,T)
    share = np.divide(maps[..., special].sum(-1), totals, out=np.zeros_like(totals), where=totals > 0)
    return share.mean(-1)


@torch.inference_mode()
def value_weighted(model: LoadedModel, result: AttentionResult, layer: int, b: int = 0) -> ValueWeighted:
    """Norm-based attention of every head of `layer` for text b."""
    f = head_value_vectors(model, result, b, layer)  # (H,T,D)
    norms = f.norm(dim=-1)  # (H,T)
    alpha = result.text_layer_maps(b, layer)  # (H,T,T)
    weighted = (alpha * norms[:, None, :]).numpy()  # (H,T,T)
    special = np.array([w is None for w in result.word_ids[b]])
    if model.causal:
        special[0] = True  # a decoder's first token: its sink
    return ValueWeighted(layer, norms.numpy(), weighted, special_share(alpha.numpy(), special),
                         special_share(weighted, special))


@torch.inference_mode()
def summed_contributions(model: LoadedModel, result: AttentionResult, layer: int, b: int = 0) -> Tensor:
    """Σ_h Σ_j α_ij^h f^h(x_j): (T,D). Equals the attention block's output minus W_O's bias."""
    f = head_value_vectors(model, result, b, layer)  # (H,T,D)
    alpha = result.text_layer_maps(b, layer)  # (H,T,T)
    return torch.einsum("hij,hjd->id", alpha, f)


@dataclass(frozen=True)
class ValueWeightedSummary:
    """Every layer of one text at a glance, built one layer at a time (no (L,H,T,T) stack is ever held)."""

    raw_special_share: np.ndarray  # (L,H) see ValueWeighted
    weighted_special_share: np.ndarray  # (L,H)
    overview: np.ndarray  # (L,H,n,n) each head's ‖α f(x)‖, rows summing to 1, pooled to n <= OVERVIEW_MAX_BINS


def layer_map_bytes(model: LoadedModel, result: AttentionResult, b: int = 0) -> int:
    """Peak of one layer's maps of text b: α, ‖α f(x)‖ and a rebuilt or copied map (H,T,T) each, f(x) (H,T,D)."""
    n = result.lengths[b]
    return 4 * model.n_heads * (3 * n * n + n * model.d_model)


def check_layer_budget(model: LoadedModel, result: AttentionResult, what: Worded, kept_per_layer: int = 0) -> None:
    n_bytes = layer_map_bytes(model, result) + model.n_layers * kept_per_layer
    check_budget(n_bytes, what, Worded(N_("use a shorter text")))


def value_weighted_summary(model: LoadedModel, result: AttentionResult, b: int = 0,
                           progress: Progress | None = None) -> ValueWeightedSummary:
    """The special-token shares and the pooled overview of every layer; progress(layer + 1, L) after each."""
    check_layer_budget(model, result, Worded(N_("The value-weighted maps of this text")))
    raw, weighted, overview = [], [], []
    for layer in range(model.n_layers):
        vw = value_weighted(model, result, layer, b)
        raw.append(vw.raw_special_share)
        weighted.append(vw.weighted_special_share)
        rows = vw.weighted / np.maximum(vw.weighted.sum(-1, keepdims=True), 1e-12)  # (H,T,T)
        overview.append(pool_map(rows, OVERVIEW_MAX_BINS).astype(np.float32))
        if progress is not None:
            progress(layer + 1, model.n_layers)
    return ValueWeightedSummary(np.stack(raw), np.stack(weighted), np.stack(overview))


def rollout_of(model: LoadedModel, result: AttentionResult, b: int = 0, progress: Progress | None = None
               ) -> np.ndarray:
    """rollout() of text b, one layer's maps at a time: (L,T,T) float32."""
    n = result.lengths[b]
    check_layer_budget(model, result, Worded(N_("The attention rollout of this text")), kept_per_layer=4 * n * n)
    out = np.empty((model.n_layers, n, n), dtype=np.float32)
    current = np.eye(n)
    for layer in range(model.n_layers):
        current = rollout_step(result.text_layer_maps(b, layer).mean(0).double().numpy(), current)
        out[layer] = current
        if progress is not None:
            progress(layer + 1, model.n_layers)
    return out


def rollout_step(head_mean: np.ndarray, current: np.ndarray) -> np.ndarray:
    """(T,T) mean over heads of one layer, (T,T) rollout so far -> the rollout including this layer."""
    t = head_mean.shape[-1]
    a = 0.5 * head_mean + 0.5 * np.eye(t)
    return (a / a.sum(-1, keepdims=True)) @ current


def rollout(maps: np.ndarray) -> np.ndarray:
    """(L,H,T,T) attention -> (L,T,T): entry l is the rollout up to and including layer l."""
    n_layers, t = maps.shape[0], maps.shape[-1]
    out = np.empty((n_layers, t, t), dtype=np.float64)
    current = np.eye(t)
    for layer in range(n_layers):
        current = rollout_step(maps[layer].mean(0), current)
        out[layer] = current
    return out
