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
