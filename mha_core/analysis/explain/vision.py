"""Explanations for a Vision Transformer (issue 81): which patches its [CLS] output rests on, by attention and by its
alternatives, on the same patch grid the Images page draws.

The target: the cosine of the final [CLS] (after the final norm: transformers' last_hidden_state[:, 0]) to a
reference [CLS]. By default the image's own, so the score is 1 on the image and falls as the patches it rests on are
edited (DINOv2 has no classifier: the cosine to its own [CLS] is its own measure of "the same picture"); or another
image's (`reference`: what makes this image look like that one).

Methods, each one score per patch (R,C):
- attention: the last layer's [CLS] row over the patches, mean of heads; rollout (Abnar & Zuidema 2020), its [CLS]
  row after the last layer (analysis/heads/contrib.py's, as the Images page draws it);
- inputxgrad: the pixels times the target's gradient, summed over each patch's pixels and channels;
- gradxattn: Chefer et al.'s relevance (methods.py), [CLS]'s row over the patches;
- ig: Integrated Gradients on the pixels from the all-zero input (after normalisation: the mean colour the model was
  normalised with), Gauss–Legendre as Captum's, and its convergence delta;
- occlusion: each block of b × b patches set to that mean colour; score(image) − score(edited), given to every patch
  of the block (b the smallest that runs at most MAX_COPIES copies, unless given).
At the image the cosine to its own [CLS] is at its largest, 1, so its gradient there is zero: input × gradient and
gradient × attention are then ~0 (Integrated Gradients walks from the mean colour, where it is not); they explain a
cosine to another image's [CLS].

Shapes: C channels, Hpx × Wpx pixels, P patch pixels, R × Q patches, N tokens, D d_model, n copies or path points.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.explain.choices import DEFAULT_STEPS, ZERO
from mha_core.analysis.explain.faithfulness import rank_correlation
from mha_core.analysis.explain.integrated import check_steps, quadrature
from mha_core.analysis.explain.methods import grad_attention_relevance
from mha_core.analysis.heads.contrib import rollout_of
from mha_core.analysis.vision.heads import patch_rows
from mha_core.engine.arch import prefix_names, vision_config
from mha_core.engine.batching import Progress
from mha_core.engine.budget import forward_bytes, rows_within
from mha_core.engine.gradients import GRADIENT_COST
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import json_floats
from mha_core.engine.tokens import InputError, TokenBatch
from mha_core.engine.vision.gradients import check_image_gradient_budget, image_gradients, pixels_scores
from mha_core.engine.vision.images import image_batch, prepare_images, read_image, run_images
from mha_core.messages import N_

IMAGE_METHODS = ("attention", "rollout", "inputxgrad", "gradxattn", "ig", "occlusion")
DEFAULT_IMAGE_METHODS = ("attention", "rollout", "ig", "occlusion")
MAX_COPIES = 64  # occlusion's blocks are sized so that at most this many edited copies run
TOP_SHARE = 0.1  # the patches compared between two methods: each one's top tenth
DELTA_SHARE = 0.1  # Integrated Gradients has converged when its scores add up to the change within this share of it
CLS_COSINE = "cls_cosine"


@dataclass(frozen=True)
class CosineTarget:
    """cos(final [CLS], reference), one per row, in float64 (1 − cos of two close vectors is small: float32 would
    round it to its last digits)."""

    reference: Tensor  # (D,)

    def score(self, final: Tensor, maps: Tensor) -> Tensor:
        return torch.nn.functional.cosine_similarity(final[:, 0].double(), self.reference[None].double(), dim=-1)


@dataclass(frozen=True)
class PatchScores:
    name: str
    scores: np.ndarray  # (R,Q) float64
    seconds: float


@dataclass(frozen=True)
class ImageIntegrated:
    steps: int
    baseline: str
    baseline_score: float
    delta: float  # Σ attributions − (score − baseline_score)
    change: float  # score − baseline_score: what the attributions should add up to

    @property
    def converged(self) -> bool:
        """Whether the scores add up to the change within DELTA_SHARE of it (else: too few steps for this image)."""
        return abs(self.delta) <= DELTA_SHARE * abs(self.change)

    def as_json(self) -> dict:
        return {"steps": self.steps, "baseline": self.baseline, "baseline_score": self.baseline_score,
                "delta": self.delta, "converged": self.converged}


@dataclass(frozen=True)
class ImageExplanation:
    model: str
    grid: tuple[int, int]  # (R, Q)
    patch_px: int
    prefix: tuple[str, ...]  # the tokens before the patches
    own_reference: bool  # the cosine is to the image's own [CLS]
    score: float  # the target on the image (1 for its own [CLS])
    methods: dict[str, PatchScores]
    ig: ImageIntegrated | None
    block: int | None  # occlusion's block, patches a side

    @property
    def top_count(self) -> int:
        """How many patches `overlap` compares: the top tenth, at least one."""
        return max(1, math.ceil(TOP_SHARE * self.grid[0] * self.grid[1]))

    def ranked(self, method: str) -> list[tuple[int, int]]:
        """Every patch (row, column), the method's highest score first (ties: the earlier patch first)."""
        flat = self.methods[method].scores.ravel()
        return [divmod(int(i), self.grid[1]) for i in sorted(range(flat.size), key=lambda i: (-flat[i], i))]

    def overlap(self, first: str, second: str) -> int:
        """How many of `first`'s top_count patches are among `second`'s."""
        k = self.top_count
        return len(set(self.ranked(first)[:k]) & set(self.ranked(second)[:k]))

    def correlation(self, first: str, second: str) -> float:
        """Spearman's ρ between two methods' scores over every patch (nan where either is constant)."""
        return rank_correlation(self.methods[first].scores.ravel(), self.methods[second].scores.ravel())

    def as_json(self) -> dict:
        names = list(self.methods)
        return {"model": self.model, "grid": list(self.grid), "patch_px": self.patch_px, "prefix": list(self.prefix),
                "target": {"kind": CLS_COSINE, "own_reference": self.own_reference, "score": self.score},
                "methods": {name: {"scores": [json_floats(row) for row in m.scores], "seconds": round(m.seconds, 4)}
                            for name, m in self.methods.items()},
                "ig": None if self.ig is None else self.ig.as_json(), "occlusion_block": self.block,
                "top_count": self.top_count,
                "agreement": {a: {b: {"overlap": self.overlap(a, b), "correlation": none_if_nan(
                    self.correlation(a, b))} for b in names if b != a} for a in names}}


def none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else round(value, 6)


def image_pixels(model: LoadedModel, image: object, side: int | None = None) -> Tensor:
    """(1,C,Hpx,Wpx) prepared pixels from a file's path or bytes, a Pillow picture, or pixels already prepared."""
    if isinstance(image, Tensor):
        return (image if image.ndim == 4 else image[None]).float()
    if isinstance(image, str | Path | bytes):
        image = read_image(Path(image) if isinstance(image, str) else image)
    return prepare_images(model, [image], side)


def check_image_methods(methods: Sequence[str] | None) -> tuple[str, ...]:
    methods = DEFAULT_IMAGE_METHODS if methods is None else tuple(dict.fromkeys(methods))
    unknown = [name for name in methods if name not in IMAGE_METHODS]
    if unknown or not methods:
        raise InputError("unknown_method", N_("Unknown method {method!r}: choose from {methods}."),
                         method=unknown[0] if unknown else "", methods=", ".join(IMAGE_METHODS))
    return methods


def batch_of(model: LoadedModel, pixels: Tensor) -> TokenBatch:
    return image_batch(pixels, model.arch, prefix_names(vision_config(model.config)))


def per_patch(values: Tensor, grid: tuple[int, int], patch: int) -> np.ndarray:
    """(C,Hpx,Wpx) a value per pixel -> (R,Q) summed over each patch's pixels and channels (pixels past the last
    whole patch are read by no patch)."""
    rows, columns = grid
    cut = values[:, :rows * patch, :columns * patch].double()
    return cut.reshape(cut.shape[0], rows, patch, columns, patch).sum((0, 2, 4)).numpy()


def occlusion_block(grid: tuple[int, int], block: int | None, most: int = MAX_COPIES) -> int:
    """The block's side in patches: `block` (1 to the grid's larger side), else the smallest running at most `most`
    copies."""
    if block is not None:
        if not 1 <= block <= max(grid):
            raise InputError("occlusion_block_out_of_range", N_("An occlusion block is 1 to {most} patches a side, "
                                                                "not {block}."), most=max(grid), block=block)
        return block
    return next(b for b in range(1, max(grid) + 1) if copies_of(grid, b) <= most)


def copies_of(grid: tuple[int, int], block: int) -> int:
    """How many edited copies occlusion runs with blocks of `block` patches a side."""
    return math.ceil(grid[0] / block) * math.ceil(grid[1] / block)


def block_choices(grid: tuple[int, int]) -> list[int]:
    """The blocks a page offers: those running at most 4 × MAX_COPIES, MAX_COPIES and MAX_COPIES / 4 copies."""
    return sorted({occlusion_block(grid, None, most) for most in (4 * MAX_COPIES, MAX_COPIES, MAX_COPIES // 4)})


def blocks_of(grid: tuple[int, int], block: int) -> list[tuple[slice, slice]]:
    """Each block's rows and columns of patches, row by row."""
    return [(slice(r, min(r + block, grid[0])), slice(c, min(c + block, grid[1])))
            for r in range(0, grid[0], block) for c in range(0, grid[1], block)]


def occlusion(model: LoadedModel, pixels: Tensor, target: CosineTarget, score: float, grid: tuple[int, int],
              block: int, progress: Progress | None = None) -> np.ndarray:
    """(R,Q) score(image) − score(the image with the patch's block set to zero), every patch its block's."""
    patch = model.arch.patch_size
    blocks = blocks_of(grid, block)
    chunk = max(1, rows_within(forward_bytes(model, 1, len(batch_of(model, pixels).labels[0]), keeps_maps=True)))
    edited = []
    for start in range(0, len(blocks), chunk):
        copies = pixels.expand(len(blocks[start:start + chunk]), -1, -1, -1).clone()
        for copy, (rows, columns) in zip(copies, blocks[start:start + chunk], strict=True):
            copy[:, rows.start * patch:rows.stop * patch, columns.start * patch:columns.stop * patch] = 0
        edited.append(pixels_scores(model, batch_of(model, copies), target.score, copies).double().numpy())
        if progress is not None:
            progress(min(start + chunk, len(blocks)), len(blocks))
    scores = np.zeros(grid)
    for (rows, columns), value in zip(blocks, np.concatenate(edited), strict=True):
        scores[rows, columns] = score - value
    return scores


def integrated_pixels(model: LoadedModel, pixels: Tensor, target: CosineTarget, score: float, steps: int,
                      progress: Progress | None = None) -> tuple[np.ndarray, ImageIntegrated]:
    """(R,Q) Integrated Gradients from the all-zero pixels, summed per patch, batched along the path."""
    check_steps(steps)
    batch = batch_of(model, pixels)
    grid, tokens = batch.grid, len(batch.labels[0])
    check_image_gradient_budget(model, 1, tokens)
    alphas, weights = quadrature(steps)
    chunk = max(1, rows_within(GRADIENT_COST * forward_bytes(model, 1, tokens, keeps_maps=True)))
    total = torch.zeros(pixels.shape[1:], dtype=torch.float64)
    for start in range(0, steps, chunk):
        points = torch.tensor(alphas[start:start + chunk], dtype=pixels.dtype)[:, None, None, None] * pixels
        found = image_gradients(model, batch_of(model, points), target.score, heads=False)
        w = torch.tensor(weights[start:start + chunk], dtype=torch.float64)[:, None, None, None]
        total += (found.words_grad.double() * w).sum(0)
        if progress is not None:
            progress(min(start + chunk, steps), steps)
    attributions = pixels[0].double() * total  # (C,Hpx,Wpx): the baseline is zero
    base = float(pixels_scores(model, batch_of(model, torch.zeros_like(pixels)), target.score,
                               torch.zeros_like(pixels))[0])
    delta = float(attributions.sum()) - (score - base)
    return per_patch(attributions, grid, model.arch.patch_size), ImageIntegrated(steps, ZERO, base, delta,
                                                                                  score - base)


def gradient_scores(model: LoadedModel, pixels: Tensor, target: CosineTarget, methods: Sequence[str]
                    ) -> dict[str, np.ndarray]:
    """Input × gradient and gradient × attention at the image, per patch."""
    batch = batch_of(model, pixels)
    grads = image_gradients(model, batch, target.score)
    prefix = len(batch.labels[0]) - batch.grid[0] * batch.grid[1]
    found = {}
    if "inputxgrad" in methods:
        found["inputxgrad"] = per_patch((grads.words[0] * grads.words_grad[0]).double(), batch.grid,
                                        model.arch.patch_size)
    if "gradxattn" in methods:
        found["gradxattn"] = patch_rows(grad_attention_relevance(grads.probs, grads.probs_grad)[0].numpy(), prefix,
                                        batch.grid)
    return found


def attention_scores(model: LoadedModel, pixels: Tensor) -> tuple[Tensor, dict[str, np.ndarray]]:
    """The image's final [CLS] (D,), and attention and rollout per patch from one run."""
    result = run_images(model, pixels, "explicit")
    grid = result.batch.grid
    prefix = len(result.tokens[0]) - grid[0] * grid[1]
    last = result.text_layer_maps(0, model.n_layers - 1).double().mean(0)[0].numpy()  # (N,)
    flow = rollout_of(model, result)[-1][0].astype(np.float64)
    return result.hidden_states[-1][0, 0], {"attention": patch_rows(last, prefix, grid),
                                            "rollout": patch_rows(flow, prefix, grid)}


def explain_image(model: LoadedModel, image: object, methods: Sequence[str] | None = None, steps: int = DEFAULT_STEPS,
                  block: int | None = None, reference: object | None = None, side: int | None = None,
                  progress: Progress | None = None) -> ImageExplanation:
    """Every method of `methods` (default DEFAULT_IMAGE_METHODS) on `image` (a path, bytes, a Pillow picture or
    prepared pixels (1,C,Hpx,Wpx)) for the cosine of its final [CLS] to its own, or to `reference`'s (module
    docstring); `side`: the picture squared to side × side pixels instead of the model's own preparation;
    `progress(done, total)` hears of occlusion's copies and Integrated Gradients' steps as they are done."""
    methods = check_image_methods(methods)
    check_steps(steps)
    pixels = image_pixels(model, image, side).to(model.device)
    batch = batch_of(model, pixels)
    grid, size = batch.grid, occlusion_block(batch.grid, block)
    started = time.perf_counter()
    own, maps = attention_scores(model, pixels)
    seen = time.perf_counter() - started
    other = None if reference is None else image_pixels(model, reference, side).to(model.device)
    target = CosineTarget(own if other is None else attention_scores(model, other)[0])
    score = float(pixels_scores(model, batch, target.score, pixels)[0])
    found, integrated = {}, None
    for name in methods:
        started = time.perf_counter()
        if name in maps:
            scores = maps[name]
        elif name == "occlusion":
            scores = occlusion(model, pixels, target, score, grid, size, progress)
        elif name == "ig":
            scores, integrated = integrated_pixels(model, pixels, target, score, steps, progress)
        else:
            scores = gradient_scores(model, pixels, target, [name])[name]
        found[name] = PatchScores(name, np.asarray(scores, dtype=np.float64),
                                  time.perf_counter() - started + (seen if name in maps else 0.0))
    prefix = batch.labels[0][:len(batch.labels[0]) - grid[0] * grid[1]]
    return ImageExplanation(model.name, grid, model.arch.patch_size, tuple(prefix), other is None, score, found,
                            integrated, size if "occlusion" in methods else None)
