"""Which keys each query may see, beyond the model's own masks: a sparse pattern (a window, Longformer's or
BigBird's) joins a layer's attention bias as 0 / the dtype's minimum, so the one layer loop runs it on either path
(the explicit softmax and the fused kernel read the same bias). Shapes: T queries, S keys, B texts, H heads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from mha_core.engine.per_layer import PerLayer, at_layer, per_layer


@dataclass(frozen=True)
class AllowedKeys:
    """keys (T,S) bool: True where query i may see key j; `layers`: the layers it applies to (None: every one)."""

    keys: Tensor
    layers: tuple[int, ...] | None = None

    def applies(self, layer: int) -> bool:
        return self.layers is None or layer in self.layers


def allowed_bias(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """(T,S) bool -> (1,1,T,S) additive: 0 where allowed, the dtype's minimum elsewhere."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)[None, None]


def with_allowed(bias: object, allowed: AllowedKeys, dtype: torch.dtype, n_layers: int) -> object:
    """A layer's bias (a tensor (B|1,1|H,T|1,S), None, or a PerLayer) with the pattern added where it applies."""
    extra = allowed_bias(allowed.keys, dtype)  # (1,1,T,S)

    def added(layer: int) -> Tensor:
        own = at_layer(bias, layer)
        return extra if own is None else (own + extra).clamp_min(torch.finfo(dtype).min)

    own_kinds: Sequence = bias.kinds if isinstance(bias, PerLayer) else (0,) * n_layers
    kinds = [(own_kinds[layer], allowed.applies(layer)) for layer in range(n_layers)]
    first = {kind: kinds.index(kind) for kind in kinds}  # a layer of each kind stands for it
    return per_layer(kinds, lambda kind: added(first[kind]) if kind[1] else at_layer(bias, first[kind]))
