"""Parameter accounting, always counted from real modules (`numel()`), never from a formula alone."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_core.model import LoadedModel


@dataclass(frozen=True)
class ParamRow:
    name: str  # dotted parameter name, e.g. "encoder.layer.0.attention.self.query.weight"
    shape: tuple[int, ...]
    count: int


@dataclass(frozen=True)
class ParameterCount:
    rows: tuple[ParamRow, ...]  # one per named parameter, in module order
    total: int

    def by_prefix(self, prefix: str) -> int:
        return sum(r.count for r in self.rows if r.name.startswith(prefix))


def count_parameters(module: torch.nn.Module) -> ParameterCount:
    """Every named matrix and bias of `module` with its count; shared parameters counted once."""
    rows = tuple(ParamRow(n, tuple(p.shape), p.numel()) for n, p in module.named_parameters())
    return ParameterCount(rows=rows, total=sum(r.count for r in rows))


@dataclass(frozen=True)
class LayerCount:
    layer: int
    attention: int  # W_Q, W_K, W_V, W_O and their biases
    attention_norm: int
    feed_forward: int
    output_norm: int

    @property
    def total(self) -> int:
        return self.attention + self.attention_norm + self.feed_forward + self.output_norm


@dataclass(frozen=True)
class HeadCount:
    """One head's slice of the projections: rows of W_Q/W_K/W_V (+ bias), columns of W_O."""

    q: int
    k: int
    v: int
    o: int  # W_O's bias is shared by all heads and not part of any head

    @property
    def total(self) -> int:
        return self.q + self.k + self.v + self.o


def module_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def layer_counts(loaded: LoadedModel) -> tuple[LayerCount, ...]:
    rows = []
    for i, layer in enumerate(loaded.model.encoder.layer):
        attn = layer.attention
        rows.append(LayerCount(
            layer=i,
            attention=module_count(attn.self) + module_count(attn.output.dense),
            attention_norm=module_count(attn.output.LayerNorm),
            feed_forward=module_count(layer.intermediate) + module_count(layer.output.dense),
            output_norm=module_count(layer.output.LayerNorm),
        ))
    return tuple(rows)


def head_count(loaded: LoadedModel, layer: int = 0) -> HeadCount:
    """Counted from the per-head slices of the real weights."""
    hw = loaded.head_weights(layer)
    return HeadCount(
        q=hw.w_q[0].numel() + hw.b_q[0].numel(),
        k=hw.w_k[0].numel() + hw.b_k[0].numel(),
        v=hw.w_v[0].numel() + hw.b_v[0].numel(),
        o=hw.w_o[0].numel(),
    )
