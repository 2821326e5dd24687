"""How a Vision Transformer reads an image, step by step for one token and one head (the seeds' "an image is worth
16×16 words"): the image cut into patches, each patch's pixels projected to a token, [CLS] put first and positions
added, then the four steps of one head, recomputed here (teaching.walkthrough) and checked against the run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.messages import N_
from mha_core.teaching.walkthrough import softmax_at_scale, walkthrough


@dataclass(frozen=True)
class ImageSteps:
    layer: int
    head: int
    query: int  # the token whose row is followed
    steps: tuple[tuple[str, str, str], ...]  # (what, formula, shape); what is marked for the catalogue
    row: np.ndarray  # (N,) the recomputed weights of the query's row
    kept_difference: float  # the largest difference from the map the run kept

    def rows(self) -> tuple[tuple[str, str, str], ...]:
        return self.steps


def image_steps(model: LoadedModel, result: AttentionResult, layer: int, head: int, query: int) -> ImageSteps:
    """The steps for `query`'s row in (layer, head) of image 0, recomputed from the model's weights."""
    w = walkthrough(model, result, layer, head)
    n, d, dh, p = len(w.tokens), model.d_model, model.head_dim, model.arch.patch_size
    rows, columns = result.batch.grid
    side = p * columns
    row = softmax_at_scale(w.raw_scores[query], w.scale, w.visible[query])  # (N,)
    kept = result.text_layer_maps(0, layer)[head, query].numpy()
    steps = (
        (N_("the image, cut into patches"), f"3 × {side} × {side} → {rows} × {columns} × (3 × {p} × {p})",
         f"{rows * columns} × {3 * p * p}"),
        (N_("each patch's pixels projected (a convolution of stride P)"), "x_p · W_E + b", f"{rows * columns} × {d}"),
        (N_("tokens before the patches, then positions added"), "x₀ ⊕ x_p W_E + E", f"{n} × {d}"),
        (N_("this layer's input, normed"), "LN(x)", f"{n} × {d}"),
        (N_("the query of the chosen token"), "q = LN(x)ᵢ W_Q^h + b", f"1 × {dh}"),
        (N_("keys and values of every token"), "K = LN(x) W_K^h, V = LN(x) W_V^h", f"{n} × {dh}"),
        (N_("scores"), f"q Kᵀ × {w.scale:.4f}", f"1 × {n}"),
        (N_("weights (the row sums to 1)"), "softmax(…)", f"1 × {n}"),
        (N_("the head's output for this token"), "A · V", f"1 × {dh}"),
    )
    return ImageSteps(layer, head, query, steps, row, float(np.abs(row - kept).max()))
