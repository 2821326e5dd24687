"""A value that differs by layer (a windowed layer's mask, a local layer's RoPE table, a T5 layer's own
relative-position bias), kept once per kind of layer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PerLayer:
    """A value that differs by layer: values[kinds[layer]] (a windowed layer's mask, a local layer's RoPE table)."""

    values: dict
    kinds: tuple

    def at(self, layer: int) -> object:
        return self.values[self.kinds[layer]]


def at_layer(value: object, layer: int) -> object:
    """`value` itself, or its entry for `layer` when it differs by layer."""
    return value.at(layer) if isinstance(value, PerLayer) else value


def per_layer(kinds: Sequence, make: Callable[[object], object]) -> object:
    """make(kind) for every distinct kind: the one value when all layers share it, else a PerLayer."""
    values = {kind: make(kind) for kind in dict.fromkeys(kinds)}
    return next(iter(values.values())) if len(values) == 1 else PerLayer(values, tuple(kinds))


class LayerQueries:
    """For results that keep each layer's queries (`layer_q`: L x (B,H,T,Dh)) and their scores' factor
    (`score_scale`, None: 1/√Dh): how many layers and query heads, and the factor itself."""

    layer_q: tuple
    score_scale: float | None

    @property
    def n_layers(self) -> int:
        return len(self.layer_q)

    @property
    def n_heads(self) -> int:
        return self.layer_q[0].shape[1]

    @property
    def scale(self) -> float:
        return self.score_scale if self.score_scale is not None else self.layer_q[0].shape[-1] ** -0.5
