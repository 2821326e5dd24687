"""Gradients through the one layer loop for a Vision Transformer: a target's gradient with respect to the image's
pixels (prepared, normalised: what transformers' models read as pixel_values), every head's attention weights and
every head's output (engine/gradients.py's pass, the embedding module of transformers called on pixels that keep
their gradient).

Shapes: B images, C channels, Hpx × Wpx pixels, N tokens (prefix, then the patches row by row), D d_model.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from mha_core.engine.budget import check_budget, forward_bytes
from mha_core.engine.forward import prepare
from mha_core.engine.gradients import GRADIENT_COST, Gradients, Score, gradient_pass, scored_from
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import TokenBatch
from mha_core.engine.vision.images import check_vision_model
from mha_core.messages import N_, Worded


def check_image_gradient_budget(model: LoadedModel, rows: int, tokens: int) -> None:
    """Refuse, before any work, a gradient pass of `rows` images of `tokens` tokens over the memory budget."""
    needed = GRADIENT_COST * forward_bytes(model, rows, tokens, keeps_maps=True)
    check_budget(needed, Worded(N_("Gradients through {rows:,} image(s) of {tokens:,} tokens"), rows=rows,
                                tokens=tokens), Worded(N_("read the image at fewer pixels a side")))


def pixels_scored(model: LoadedModel, batch: TokenBatch, score: Score, pixels: Tensor, readers: list) -> Tensor:
    """(B,) `score` of the pass over `pixels` (B,C,Hpx,Wpx) instead of the batch's own."""
    x, bias, rope = prepare(model, replace(batch, features=pixels))
    return scored_from(model, x, bias, rope, score, readers)


def image_gradients(model: LoadedModel, batch: TokenBatch, score: Score, pixels: Tensor | None = None,
                    heads: bool = True) -> Gradients:
    """The target `score` of every image of `batch` (engine/vision/images.image_batch) and its gradients: `words` and
    `words_grad` are the pixels (B,C,Hpx,Wpx) and d score / d pixels; `pixels`: others to read instead (Integrated
    Gradients' path); `heads=False`: the pixels' gradient only."""
    check_vision_model(model)
    check_image_gradient_budget(model, *batch.input_ids.shape)
    start = (batch.features if pixels is None else pixels).to(model.device, model.embeddings.word.dtype)
    return gradient_pass(model, start, heads, lambda leaf, readers: pixels_scored(model, batch, score, leaf,
                                                                                   readers))


@torch.inference_mode()
def pixels_scores(model: LoadedModel, batch: TokenBatch, score: Score, pixels: Tensor) -> Tensor:
    """(B,) `score` of the pass over `pixels`, without gradients (occlusion's copies, the ends of a path)."""
    check_vision_model(model)
    return pixels_scored(model, batch, score, pixels.to(model.device, model.embeddings.word.dtype), [])
