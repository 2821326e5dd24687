"""Integrated Gradients (Sundararajan et al. 2017) on the input embeddings, batched: the path from a baseline to the
text's embeddings in `steps` points of Gauss–Legendre quadrature (Captum's default method, so Captum's
IntegratedGradients with the same baseline and steps gives the same attributions), as many points per gradient pass
as the memory budget holds.

Baselines: "zero" (every piece's embedding zero) or "pad" (every piece the padding piece's embedding); the text's
special pieces ([CLS], [SEP], a decoder's first piece) keep their own embeddings in either.
Convergence delta: Σ attributions - (score(text) - score(baseline)), zero for an exact integral.

Shapes: T pieces, D d_model, S steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.explain.choices import BASELINES, DEFAULT_STEPS, MAX_STEPS, PAD, ZERO  # noqa: F401
from mha_core.analysis.explain.targets import Target
from mha_core.engine.batching import Progress
from mha_core.engine.budget import forward_bytes, rows_within
from mha_core.engine.gradients import (
    GRADIENT_COST,
    check_gradient_budget,
    embeddings_scores,
    gradients,
    input_embeddings,
)
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch
from mha_core.messages import N_


@dataclass(frozen=True)
class Integrated:
    attributions: Tensor  # (T,D) per piece and feature, float64
    scores: np.ndarray  # (T,) summed over features
    steps: int
    baseline: str
    score: float  # the target on the text
    baseline_score: float  # ... on the baseline
    delta: float  # convergence delta

    def as_json(self) -> dict:
        return {"steps": self.steps, "baseline": self.baseline, "baseline_score": self.baseline_score,
                "delta": self.delta}


def check_steps(steps: int) -> None:
    if not 0 < steps <= MAX_STEPS:
        raise InputError("ig_steps_out_of_range", N_("Integrated Gradients takes 1 to {cap} steps, not {steps}."),
                         cap=MAX_STEPS, steps=steps)


def baseline_embeddings(model: LoadedModel, batch: TokenBatch, kind: str = ZERO) -> Tensor:
    """(1,T,D) the baseline of text 0: zero or the padding piece's embedding, the special pieces their own."""
    if kind not in BASELINES:
        raise InputError("unknown_baseline", N_("Unknown baseline {baseline!r}: choose one of {baselines}."),
                         baseline=kind, baselines=", ".join(BASELINES))
    words = input_embeddings(model, batch)[:1]  # (1,T,D)
    if kind == ZERO:
        base = torch.zeros_like(words)
    else:
        pad = torch.full_like(batch.input_ids[:1], model.tokenizer.pad_token_id or 0)
        base = input_embeddings(model, replace(batch, input_ids=pad))
    special = torch.tensor([w is None for w in batch.word_ids[0]], device=words.device)[None, :, None]
    return torch.where(special, words, base)


def quadrature(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(S,) points in [0, 1] and their weights (Gauss–Legendre, as Captum's gausslegendre)."""
    x, w = np.polynomial.legendre.leggauss(steps)
    return 0.5 * (1 + x), 0.5 * w


def rows_of(batch: TokenBatch, n: int) -> TokenBatch:
    """Text 0 of `batch` repeated n times."""
    def repeat(t: Tensor | None) -> Tensor | None:
        return None if t is None else t[:1].expand(n, -1)

    return replace(batch, input_ids=repeat(batch.input_ids), attention_mask=repeat(batch.attention_mask),
                   token_type_ids=repeat(batch.token_type_ids))


def step_chunk(steps: int, fitting: int) -> int:
    """Points per gradient pass: as many as the budget holds (`fitting` rows), the passes even. Fewer, larger passes:
    on a busy machine each of a pass's operations waits for its slowest thread (SmolLM2's 50 steps, 2 threads, load
    11: two passes of 25 took 53 s, one of 50 41 s)."""
    passes = math.ceil(steps / max(1, fitting))
    return math.ceil(steps / passes)


def integrated_gradients(model: LoadedModel, batch: TokenBatch, target: Target, steps: int = DEFAULT_STEPS,
                         baseline: str = ZERO, score: float | None = None, progress: Progress | None = None
                         ) -> Integrated:
    """Integrated Gradients of `target` for text 0 of `batch` (module docstring). `score`: the target on the text
    where the caller has it (only the baseline's is then run); `progress(steps done, steps)` after each pass."""
    check_steps(steps)
    tokens = batch.input_ids.shape[1]
    check_gradient_budget(model, 1, tokens)
    words = input_embeddings(model, batch)[:1]
    base = baseline_embeddings(model, batch, baseline)
    alphas, weights = quadrature(steps)
    chunk = step_chunk(steps, rows_within(GRADIENT_COST * forward_bytes(model, 1, tokens, keeps_maps=True)))
    total = torch.zeros(words.shape[1:], dtype=torch.float64)
    for start in range(0, steps, chunk):
        a = torch.tensor(alphas[start:start + chunk], dtype=words.dtype)[:, None, None]  # (n,1,1)
        points = base + a * (words - base)  # (n,T,D)
        found = gradients(model, rows_of(batch, len(a)), target.score, words=points, heads=False)
        w = torch.tensor(weights[start:start + chunk], dtype=torch.float64)[:, None, None]
        total += (found.words_grad.double() * w).sum(0)
        if progress is not None:
            progress(start + len(a), steps)
    attributions = (words[0] - base[0]).double() * total  # (T,D)
    ends = torch.cat([base] if score is not None else [words, base])
    scores = embeddings_scores(model, rows_of(batch, len(ends)), target.score, ends).tolist()
    score, base_score = (score, scores[0]) if score is not None else scores
    delta = float(attributions.sum()) - (score - base_score)
    return Integrated(attributions, attributions.sum(-1).numpy(), steps, baseline, score, base_score, delta)
