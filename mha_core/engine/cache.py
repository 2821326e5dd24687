"""The key/value cache of a decoder, for decoders and encoder–decoders alike: a prefill runs the prompt through every
layer and keeps each layer's keys (after RoPE) and values; each step then runs only the new piece, its
self-attention reading the earlier pieces from the cache (and an encoder–decoder's cross-attention its `memory`).

Shapes: L layers, G key/value heads, P pieces so far, D d_model, Dh head dim.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mha_core.engine.attention import EXPLICIT
from mha_core.engine.forward import (
    Memory,
    embed,
    layer_biases,
    layer_outputs,
    per_layer,
    position_ids,
    prepare,
    scores_bias,
)
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import TokenBatch

Cache = list[tuple[Tensor, Tensor]]  # L x (keys (1,G,P,Dh) after RoPE, values (1,G,P,Dh))


def prefill(model: LoadedModel, batch: TokenBatch, memory: Memory | None = None) -> tuple[Tensor, Cache]:
    """The prompt (one text) through every layer of `model` (a decoder, or an encoder–decoder's .decoder reading
    `memory`): the last piece's last-layer output (1,D), before the final norm, and each layer's keys and values."""
    x, bias, rope = prepare(model, batch)
    cache, out = [], x
    for out, attn in layer_outputs(model, x, bias, rope, EXPLICIT, memory=memory):  # noqa: B007 -- the last's
        cache.append((attn.k, attn.v))
    return out[:, -1], cache


def newest_row_bias(model: LoadedModel, mask: Tensor, dtype: torch.dtype) -> object:
    """What the newest piece's row adds to its scores, per layer: nothing where it sees every earlier piece, else
    its window's and ALiBi's row (1,1|H,1,P), or T5's relative-position row with the padding."""
    arch = model.arch
    if arch.relative_bias:
        return layer_biases(model, mask, dtype, past=mask.shape[1] - 1)

    def last_row(window: int | None) -> Tensor | None:
        if window is None and not arch.alibi:
            return None
        return scores_bias(model, mask, dtype, window)[:, :, -1:, :]  # (1,1|H,1,P)

    return per_layer(arch.windows, last_row)


def step(model: LoadedModel, token: int, length: int, cache: Cache, memory: Memory | None = None
         ) -> tuple[Tensor, Cache]:
    """One new piece at position `length - 1` (length: pieces so far, the new one included) through every layer,
    the earlier ones read from `cache`: its last-layer output (1,D) and the grown cache."""
    arch, mask = model.arch, torch.ones(1, length, dtype=torch.long, device=model.device)
    positions = position_ids(mask, arch)[:, -1:]  # (1,1)
    x = embed(model.embeddings, torch.tensor([[token]], device=model.device), positions)  # (1,1,D)
    bias = newest_row_bias(model, mask, x.dtype)
    rope = per_layer(arch.rope_kinds, lambda kind: model.rotary(x, positions, kind)) if arch.rotary else None
    new_cache, out = [], x
    for out, attn in layer_outputs(model, x, bias, rope, EXPLICIT, past=cache, memory=memory):  # noqa: B007
        new_cache.append((attn.k, attn.v))
    return out[:, -1], new_cache
