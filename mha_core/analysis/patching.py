"""Activation patching on a minimal pair (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda 2024): run the
corrupted text, put back one piece of the clean run (a head's output, or the residual stream at one layer and
position), and read how much of the clean behaviour returns.

Metric: logit(answer) - logit(wrong) at the last piece. Grids are computed in batched layer passes, like the
ablation grid: a variant that changes layer l joins the batch at layer l (the layers below are the corrupted
run's, computed once).

Shapes: L layers, H heads, T pieces, D d_model, Dh head dim, n variants in a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.predict import Stream, check_lm_head, residual_stream, token_id
from mha_core.engine.attention import ContextEdit
from mha_core.engine.batching import Progress
from mha_core.engine.budget import element_size, layer_work_bytes, planned_bytes
from mha_core.engine.forward import final_norm, prepare, variant_outputs
from mha_core.engine.model import LoadedModel
from mha_core.engine.tokens import InputError

HEADS, RESIDUAL = "heads", "residual"
WHAT = (HEADS, RESIDUAL)


@dataclass(frozen=True)
class PatchGrid:
    what: str  # heads: (L,H); residual: (L,T)
    answer: str
    wrong: str
    clean: float  # the metric on the clean text
    corrupted: float  # ... on the corrupted text
    effects: np.ndarray  # (L,H) or (L,T): the metric with that one piece of the clean run put back
    tokens: tuple[str, ...]  # T pieces of the corrupted text

    @property
    def recovered(self) -> np.ndarray:
        """(patched - corrupted) / (clean - corrupted): 1 = the clean behaviour fully back, 0 = no change."""
        gap = self.clean - self.corrupted
        return (self.effects - self.corrupted) / gap if abs(gap) > 1e-9 else np.zeros_like(self.effects)

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "metric": "logit_diff", "what": self.what, "answer": self.answer,
                "wrong": self.wrong, "clean": round(self.clean, 6), "corrupted": round(self.corrupted, 6),
                "effects": self.effects.round(6).tolist(), "tokens": list(self.tokens)}


def metric(model: LoadedModel, last_states: Tensor, direction: Tensor) -> Tensor:
    """(n,D) last layer outputs at the last piece -> (n,) logit differences."""
    return final_norm(model, last_states) @ direction


def pair_streams(model: LoadedModel, clean: str, corrupted: str) -> tuple[Stream, Stream]:
    first, second = residual_stream(model, clean), residual_stream(model, corrupted)
    n1, n2 = len(first.tokens), len(second.tokens)
    if n1 != n2:
        raise InputError(f"The clean text has {n1} pieces and the corrupted text {n2}: patching puts back pieces "
                         "position by position, so both need the same number.")
    return first, second


def chunk_rows(model: LoadedModel, tokens: int) -> int:
    """Variants run together within the memory budget (each holds its stream and one layer's work)."""
    per_row = layer_work_bytes(model, 1, tokens) + 2 * tokens * model.d_model * element_size(model)
    return max(1, planned_bytes() // max(per_row, 1))


def head_edit(clean: Stream, layer: int, n: int, rows: Tensor, heads: Tensor) -> ContextEdit:
    """Rows `rows` of a batch of n get head heads[i]'s clean output back at this layer."""

    def edit(context: Tensor) -> Tensor:  # (n,H,T,Dh)
        patched = context.clone()
        patched[rows, heads] = clean.contexts[layer][heads].to(context.dtype)
        return patched

    return edit


def residual_join(clean: Stream, corrupted: Stream, layer: int, positions: Tensor) -> Tensor:
    """(n,T,D) the corrupted input of `layer`, each row with the clean input at its own position."""
    x = corrupted.inputs[layer][None].expand(len(positions), -1, -1).clone()
    x[torch.arange(len(positions)), positions] = clean.inputs[layer][positions]
    return x


@torch.inference_mode()
def patch_grid(model: LoadedModel, clean: str, corrupted: str, answer: str, wrong: str, what: str = HEADS,
               progress: Progress | None = None) -> PatchGrid:
    """The metric with each head's output (what=heads) or each layer's input at each position (what=residual) of
    the corrupted run replaced by its clean value."""
    if what not in WHAT:
        raise InputError(f"Unknown patch {what!r}: choose {' or '.join(WHAT)}.")
    w_u = check_lm_head(model)
    answer_id, wrong_id = token_id(model, answer), token_id(model, wrong)
    direction = (w_u[answer_id] - w_u[wrong_id]).float()
    first, second = pair_streams(model, clean, corrupted)
    _, bias, rope = prepare(model, second.batch)
    units = model.n_heads if what == HEADS else len(second.tokens)
    variants = [(layer, unit) for layer in range(model.n_layers) for unit in range(units)]
    if what == HEADS:
        join = lambda layer, heads: second.inputs[layer][None].expand(len(heads), -1, -1)  # noqa: E731
        edit_of = lambda layer, n, rows, heads: head_edit(first, layer, n, rows, heads)  # noqa: E731
    else:
        join = lambda layer, positions: residual_join(first, second, layer, positions)  # noqa: E731
        edit_of = lambda *_: None  # noqa: E731
    rows, effects = chunk_rows(model, len(second.tokens)), []
    for start in range(0, len(variants), rows):
        x, _ = variant_outputs(model, variants[start:start + rows], bias, rope, join, edit_of)
        effects.append(metric(model, x[:, -1].float(), direction))
        if progress:
            progress(min(start + rows, len(variants)), len(variants))
    value = lambda stream: float(metric(model, stream.inputs[-1][-1:].float(), direction)[0])  # noqa: E731
    return PatchGrid(what, answer, wrong, value(first), value(second),
                     torch.cat(effects).reshape(model.n_layers, units).numpy(), second.tokens)
