"""The key/value cache of a decoder, for decoders and encoder–decoders alike: a prefill runs the prompt through every
layer and keeps each layer's keys (after RoPE) and values; each step then runs only the new piece, its
self-attention reading the earlier pieces from the cache (and an encoder–decoder's cross-attention its `memory`).
Each returns the final states (after the final norm), and `hooks` (hooks.py) run at every point of every layer on
the way, as in a whole forward: a generation can be read or steered (TransformerLens's generate with fwd_hooks;
with the cache, a step's points see its new pieces only, their maps over every piece so far).

Shapes: L layers, G key/value heads, P pieces so far, D d_model, Dh head dim.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator

import torch
from torch import Tensor

from mha_core.engine.attention import EXPLICIT, AttentionOutput
from mha_core.engine.forward import (
    Memory,
    check_forward_budget,
    embed,
    final_states,
    forward,
    layer_biases,
    layer_outputs,
    per_layer,
    position_ids,
    prepare,
    scores_bias,
)
from mha_core.engine.held import Held, register, tensor_bytes
from mha_core.engine.hooks import NO_HOOKS, Hooks
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import TokenBatch, tokenize

Cache = list[tuple[Tensor, Tensor]]  # L x (keys (1,G,P,Dh) after RoPE, values (1,G,P,Dh))


def prefill(model: LoadedModel, batch: TokenBatch, memory: Memory | None = None, hooks: Hooks = NO_HOOKS
            ) -> tuple[Tensor, Cache]:
    """The prompt (one text) through every layer of `model` (a decoder, or an encoder–decoder's .decoder reading
    `memory`): the last piece's final state (1,D), after the final norm, and each layer's keys and values."""
    x, bias, rope = prepare(model, batch)
    cache, out = [], x
    for out, attn in layer_outputs(model, x, bias, rope, EXPLICIT, hooks=hooks, memory=memory):  # noqa: B007
        cache.append((attn.k, attn.v))
    return final_states(model, out, hooks)[:, -1], cache


def newest_rows_bias(model: LoadedModel, mask: Tensor, dtype: torch.dtype, n: int = 1) -> object:
    """What the newest `n` pieces' rows add to their scores, per layer: nothing where one new piece sees every
    earlier piece, else the rows (1,1|H,n,P) of the causal mask, the window's and ALiBi's, or T5's relative-position
    rows with the padding."""
    arch = model.arch
    if arch.relative_bias:
        return layer_biases(model, mask, dtype, past=mask.shape[1] - n)

    def last_rows(window: int | None) -> Tensor | None:
        if n == 1 and window is None and not arch.alibi:
            return None
        return scores_bias(model, mask, dtype, window)[:, :, -n:, :]  # (1,1|H,n,P)

    return per_layer(arch.windows, last_rows)


def extend(model: LoadedModel, ids: Tensor, cache: Cache, memory: Memory | None = None, hooks: Hooks = NO_HOOKS
           ) -> tuple[Tensor, Cache, tuple[Tensor, ...]]:
    """`ids` (1,N): new pieces after the P in `cache`, through every layer, the earlier ones read from the cache:
    their final states (1,N,D), after the final norm, the grown cache, and each layer's maps of the new rows over
    every piece (1,H,N,P+N). The new pieces' keys depend on no later piece, so a prompt's start is computed once for
    every text that shares it."""
    x, layers = extension(model, ids, cache, memory, hooks)
    new_cache, maps, out = [], [], x
    for out, attn in layers:  # noqa: B007
        new_cache.append((attn.k, attn.v))
        maps.append(attn.probs)
    return final_states(model, out, hooks), new_cache, tuple(maps)


def extension(model: LoadedModel, ids: Tensor, cache: Cache, memory: Memory | None = None, hooks: Hooks = NO_HOOKS
              ) -> tuple[Tensor, Iterator[tuple[Tensor, AttentionOutput]]]:
    """The embeddings (1,N,D) of `ids` (1,N), new pieces after the P in `cache`, and the layer loop over them (each
    layer's output and attention, the earlier pieces read from the cache)."""
    arch, n = model.arch, ids.shape[1]
    mask = torch.ones(1, cache[0][0].shape[2] + n, dtype=torch.long, device=model.device)
    positions = position_ids(mask, arch)[:, -n:]  # (1,N)
    x = embed(model.embeddings, ids.to(model.device), positions)  # (1,N,D)
    bias = newest_rows_bias(model, mask, x.dtype, n)
    rope = per_layer(arch.rope_kinds, lambda kind: model.rotary(x, positions, kind)) if arch.rotary else None
    return x, layer_outputs(model, x, bias, rope, EXPLICIT, hooks=hooks, past=cache, memory=memory)


def step(model: LoadedModel, token: int, length: int, cache: Cache, memory: Memory | None = None,
         hooks: Hooks = NO_HOOKS) -> tuple[Tensor, Cache]:
    """One new piece at position `length - 1` (length: pieces so far, the new one included) through every layer,
    the earlier ones read from `cache`: its final state (1,D) and the grown cache."""
    if length != cache[0][0].shape[2] + 1:
        raise ValueError(f"step: {length} pieces with the new one, but the cache holds {cache[0][0].shape[2]}")
    out, new_cache, _ = extend(model, torch.tensor([[token]], device=model.device), cache, memory, hooks)
    return out[:, -1], new_cache


STARTS_KEPT = 8  # prompt starts kept per process (a translation direction's example pairs are one)
_starts: dict[tuple[int, str], tuple[weakref.ref, tuple[int, ...], Cache]] = {}
_starts_lock = threading.Lock()  # a server's visitors translate at once


def starts_held() -> Held:
    """The prompt starts kept now: their keys and values (measured)."""
    with _starts_lock:
        caches = [cache for _, _, cache in _starts.values()]
    return Held("prompt starts", len(caches), tensor_bytes(t for cache in caches for pair in cache for t in pair), True)


register("prompt starts", starts_held)


def start_of(model: LoadedModel, start: str) -> tuple[tuple[int, ...], Cache]:
    """A prompt's start (a text every prompt of a kind begins with): its pieces' ids, as `tokenize` reads the start
    alone, and every layer's keys and values; computed once per model and start (a model loaded again is another)."""
    key = (id(model), start)
    with _starts_lock:
        kept = _starts.get(key)
    if kept is not None and kept[0]() is model:
        return kept[1], kept[2]
    batch = tokenize(model.tokenizer, start, model.max_length, bos=model.bos_id)
    _, cache = prefill(model, batch)  # two visitors at once may both compute it: the same values
    ids = tuple(batch.input_ids[0].tolist())
    with _starts_lock:
        while len(_starts) >= STARTS_KEPT:
            _starts.pop(next(iter(_starts)))
        _starts[key] = (weakref.ref(model), ids, cache)
    return ids, cache


def shared_start(model: LoadedModel, ids: Tensor, start: str, most: int) -> tuple[int, Cache]:
    """How many of the first pieces of `ids` (1,P) are `start`'s (at most `most`), and their keys and values."""
    start_ids, cache = start_of(model, start)
    k = 0
    while k < min(len(start_ids), most, ids.shape[1]) and start_ids[k] == int(ids[0, k]):
        k += 1
    return k, [(keys[:, :, :k], values[:, :, :k]) for keys, values in cache]


def prefill_after_start(model: LoadedModel, batch: TokenBatch, start: str, hooks: Hooks = NO_HOOKS
                        ) -> tuple[Tensor, Cache]:
    """prefill, the pieces `batch`'s text shares with `start` read from start_of's keys and values (a few-shot
    prompt's examples run once): the same last output and cache, to float rounding. With `hooks` the whole prompt
    runs (the start's keys were made without them)."""
    ids = batch.input_ids[:, : len(batch.tokens[0])]  # (1,P)
    k, cache = shared_start(model, ids, start, ids.shape[1] - 1) if start and not hooks.fwd_hooks else (0, [])
    if k == 0:
        return prefill(model, batch, hooks=hooks)
    out, cache, _ = extend(model, ids[:, k:], cache)
    return out[:, -1], cache


@torch.inference_mode()
def maps_after_start(model: LoadedModel, batch: TokenBatch, start: str, before: int) -> tuple[int, Tensor]:
    """(k, maps): a decoder's maps (L,H,P-k,P) float32 of one text's rows k.. over all its pieces, where its first k
    pieces (k <= `before`) are those of `start` (start_of: computed once), so only the rest is run. The rows are
    those a full forward gives (a piece's keys depend on no later piece), to float rounding; k = 0 where the text
    does not begin with the start's pieces."""
    ids = batch.input_ids[:, : len(batch.tokens[0])]  # (1,P)
    check_forward_budget(model, 1, ids.shape[1], EXPLICIT, keep_hidden=False, kernel_causal=False)
    k, cache = shared_start(model, ids, start, before)
    if k == 0:
        return 0, forward(model, batch, EXPLICIT, keep_hidden=False).text_maps(0)
    _, _, maps = extend(model, ids[:, k:], cache)
    return k, torch.stack([m[0].float() for m in maps])  # (L,H,P-k,P)


@torch.inference_mode()
def layers_after_start(model: LoadedModel, batch: TokenBatch, start: str, before: int) -> tuple[int, Tensor, Tensor]:
    """(k, maps, hidden): maps_after_start's rows (L,H,P-k,P) float32, and the same rows' hidden states (L+1,P-k,D)
    float32: the embeddings, then each layer's output (before the final norm), as a whole-text run gives them."""
    ids = batch.input_ids[:, : len(batch.tokens[0])]  # (1,P)
    check_forward_budget(model, 1, ids.shape[1], EXPLICIT, keep_hidden=True, kernel_causal=False)
    k, cache = shared_start(model, ids, start, before)
    if k == 0:
        x, bias, rope = prepare(model, batch)
        layers = layer_outputs(model, x, bias, rope, EXPLICIT)
    else:
        x, layers = extension(model, ids[:, k:], cache)
    hidden, maps = [x[0].float()], []
    for out, attn in layers:
        hidden.append(out[0].float())
        maps.append(attn.probs[0].float())
    return k, torch.stack(maps), torch.stack(hidden)
