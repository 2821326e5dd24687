"""Attention and its alternatives as scores per piece for one target (targets.py), each read at the target's
position (the piece whose output the target reads):

- attention: the last layer's mean over heads; attention_layer: a chosen layer's mean; attention_head: one head;
- rollout (Abnar & Zuidema 2020): Â_l = 0.5·mean_h(A_l) + 0.5·I, rows renormalised, multiplied up the layers
  (analysis/heads/contrib.py's step);
- value_weighted (Kobayashi et al. 2020): the last layer's α_ij^h ‖f^h(x_j)‖, mean over heads (contrib.py);
- gradxattn (Chefer et al. 2021): Ā_l = mean_h (∇A_l ⊙ A_l)⁺, R ← R + Ā_l · R from R = I, layer by layer;
- inputxgrad: the input embeddings times the target's gradient, summed over features;
- per head: the target's gradient times the head's output, summed over positions and features (which heads
  matter: the first-order change if the head's output were removed).

Shapes: L layers, H heads, T pieces, D d_model, Dh head dim.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.heads.contrib import rollout_step, value_weighted
from mha_core.engine.gradients import Gradients
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult


def head_importance(grads: Gradients) -> np.ndarray:
    """(L,H) Σ over positions and features of ∇z ⊙ z for row 0: each head's output times the target's gradient."""
    return torch.stack([(g[0] * z[0]).sum((-2, -1)) for z, g in zip(grads.z, grads.z_grad, strict=True)]
                       ).double().numpy()


def chosen_head(grads: Gradients) -> tuple[int, int]:
    """The head whose output matters most to the target (largest |∇z ⊙ z|)."""
    importance = np.abs(head_importance(grads))
    layer, head = np.unravel_index(int(importance.argmax()), importance.shape)
    return int(layer), int(head)


def attention_row(grads: Gradients, position: int, layer: int, head: int | None = None) -> np.ndarray:
    """(T,) attention from `position` in one head, or the layer's mean over heads (head None)."""
    maps = grads.probs[layer][0].double()  # (H,T,T)
    return (maps.mean(0) if head is None else maps[head])[position].numpy()


def rollout_row(grads: Gradients, position: int) -> np.ndarray:
    """(T,) the rollout through every layer, read at `position`."""
    t = grads.probs[0].shape[-1]
    current = np.eye(t)
    for probs in grads.probs:
        current = rollout_step(probs[0].double().mean(0).numpy(), current)
    return current[position]


def value_weighted_row(model: LoadedModel, result: AttentionResult, position: int) -> np.ndarray:
    """(T,) the last layer's value-weighted attention from `position`, mean over heads."""
    return value_weighted(model, result, model.n_layers - 1).weighted.mean(0)[position].astype(np.float64)


def grad_attention_relevance(probs: tuple[Tensor, ...], probs_grad: tuple[Tensor, ...]) -> Tensor:
    """(T,T) Chefer et al.'s relevance of row 0's maps: R = I, then R ← R + mean_h((∇A ⊙ A)⁺) · R per layer."""
    t = probs[0].shape[-1]
    relevance = torch.eye(t, dtype=torch.float64)
    for a, g in zip(probs, probs_grad, strict=True):
        cam = (g[0].double() * a[0].double()).clamp(min=0).mean(0)  # (T,T)
        relevance = relevance + cam @ relevance
    return relevance


def grad_attention_row(grads: Gradients, position: int) -> np.ndarray:
    return grad_attention_relevance(grads.probs, grads.probs_grad)[position].numpy()


def input_x_gradient(grads: Gradients) -> np.ndarray:
    """(T,) Σ_d e_td ∂score/∂e_td for row 0."""
    return (grads.words[0].double() * grads.words_grad[0].double()).sum(-1).numpy()
