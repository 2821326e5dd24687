"""The whole transformer recomputed from the model's weights, layer by layer, for every supported family.

Shapes: B batch, L layers, H query heads, T tokens, D d_model, Dh head dim.
One layer loop serves all families; what differs is read from `model.arch` (arch.py):
    post-norm (BERT, OPT-350m):  h = norm1(x + MHA(x));               out = norm2(h + MLP(h))
    pre-norm (GPT, Llama):       h = x + MHA(norm1(x));               out = h + MLP(norm2(h))
    sandwich (Gemma):            h = x + post1(MHA(norm1(x)));        out = h + post2(MLP(norm2(h)))
    parallel (GPT-NeoX):         out = x + MHA(norm1(x)) + MLP(norm2(x))
A layer's attention bias (padding, causal mask, its sliding window, ALiBi) and RoPE table may differ by layer
(Gemma's local and global layers): `PerLayer` holds one per kind of layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.engine import attention
from mha_core.engine.allowed import AllowedKeys, with_allowed
from mha_core.engine.arch import MAX_PIECES, Architecture
from mha_core.engine.attention import (
    AUTO,
    EXPLICIT,
    FUSED,
    PATHS,
    AttentionOutput,
    multi_head_attention,
)
from mha_core.engine.budget import check_budget, forward_bytes, release_freed_memory, reuse_freed_memory
from mha_core.engine.hooks import NO_HOOKS, HookPoint, Hooks, hooks_of, is_point
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.per_layer import PerLayer, at_layer, per_layer  # noqa: F401 -- PerLayer: re-exported
from mha_core.engine.result import AttentionResult
from mha_core.engine.seq2seq.cross import cross_of
from mha_core.engine.tokens import InputError, TextsLike, TokenBatch, tokenize
from mha_core.engine.weights import EmbeddingWeights, LayerWeights
from mha_core.messages import N_, Worded

# Below this many tokens the explicit path is as fast and gives the maps for free.
AUTO_FUSED_MIN_TOKENS = 256


def scores_bias(model: LoadedModel, mask: Tensor, dtype: torch.dtype, window: int | None) -> Tensor | None:
    """(B,1|H,T|1,T) what a layer of this model with `window` adds to its scores (padding, causal, window, ALiBi)."""
    arch = model.arch
    return attention.scores_bias(mask, dtype, arch.causal, window, arch.n_heads if arch.alibi else None)


def position_ids(mask: Tensor, arch: Architecture) -> Tensor:
    """(B,T): 0, 1, 2, ... per text; RoBERTa counts real tokens from padding_idx + 1 (padding keeps padding_idx)."""
    if arch.position_offset:
        return torch.cumsum(mask, dim=1) * mask + (arch.position_offset - 1)
    return torch.arange(mask.shape[1], device=mask.device).expand_as(mask)


def embed(w: EmbeddingWeights, input_ids: Tensor, positions: Tensor, token_types: Tensor | None = None) -> Tensor:
    """Word embeddings (times Gemma's √d_model), plus learned positions and token types (all 0 unless `token_types`,
    (B,T), says which text of a pair each piece is) where the model has them, then its embedding norm where it has
    one: (B,T) -> (B,T,D)."""
    return embed_words(w, word_embeddings(w, input_ids), positions, token_types)


def word_embeddings(w: EmbeddingWeights, input_ids: Tensor) -> Tensor:
    """(B,T) -> (B,T,D) the word embeddings as transformers' input embeddings module gives them (inputs_embeds;
    Gemma's times √d_model): what attribution methods attribute to."""
    x = F.embedding(input_ids, w.word)  # (B,T,D)
    return x * torch.tensor(w.scale, dtype=x.dtype) if w.scale != 1.0 else x


def embed_words(w: EmbeddingWeights, x: Tensor, positions: Tensor, token_types: Tensor | None = None) -> Tensor:
    """Word embeddings x (B,T,D) plus learned positions and token types, then the embedding norm (embed's rest)."""
    if w.token_type is not None:
        x = x + (w.token_type[0] if token_types is None else F.embedding(token_types, w.token_type))
    if w.position is not None:
        x = x + F.embedding(positions, w.position)  # (B,T,D)
    return w.norm(x) if w.norm is not None else x


@dataclass(frozen=True)
class Memory:
    """What a decoder layer's cross-attention reads: the encoder's output and the source's padding."""

    states: Tensor | None  # (B,S,D) the encoder's output after its final norm (None when `kv` holds all it gives)
    bias: Tensor | None  # (B,1,1,S) the source's padding bias, or None
    kv: Sequence[tuple[Tensor, Tensor]] | None = None  # per layer, cross-attention's keys and values (B,H,S,Dh),
    #                                                    computed once from `states` (a generation's steps reuse them)


def cross_attend(h: Tensor, w: LayerWeights, memory: Memory, layer: int, path: str, hooks: Hooks) -> AttentionOutput:
    """A decoder layer's cross-attention on its (normed) states h (B,T,D): Q from h, K and V from the encoder."""
    given = None if memory.kv is None else memory.kv[layer]
    return multi_head_attention(h, w.cross_attention, memory.bias, path, kv=memory.states, given_kv=given,
                                hooks=hooks.at("cross_attn"))


def layer_forward(x: Tensor, w: LayerWeights, arch: Architecture, bias: Tensor | None, path: str,
                  rope: tuple[Tensor, Tensor] | None, kernel_causal: bool = False, hooks: Hooks = NO_HOOKS,
                  past: tuple[Tensor, Tensor] | None = None, memory: Memory | None = None,
                  layer: int = 0) -> tuple[Tensor, AttentionOutput]:
    """One layer, (B,T,D) -> (B,T,D), plus the attention internals; norm placement from the architecture.
    `hooks`: the block's hook points (hooks.py: "blocks.{layer}."); `past` is the layer's key/value cache;
    `memory`: an encoder–decoder's decoder layer cross-attends to it after its self-attention (attn.cross)."""
    options = {"rope": rope, "kernel_causal": kernel_causal, "hooks": hooks.at("attn"), "past": past}
    cross = None
    if arch.pre_norm:
        attn = multi_head_attention(w.attn_norm(x), w.attention, bias, path, **options)
        a = attn.output if w.post_attn_norm is None else w.post_attn_norm(attn.output)  # (B,T,D)
        h = hooks("hook_resid_mid", x + hooks("hook_attn_out", a if w.attn_scale is None else a * w.attn_scale))
        if memory is not None:
            cross = cross_attend(w.cross_norm(h), w, memory, layer, path, hooks)
            h = h + hooks("hook_cross_attn_out", cross.output)  # (B,T,D)
        m = w.mlp(w.mlp_norm(x if arch.parallel else h))  # (B,T,D)
        m = m if w.mlp_scale is None else m * w.mlp_scale
        out = h + hooks("hook_mlp_out", m if w.post_mlp_norm is None else w.post_mlp_norm(m))
    else:
        attn = multi_head_attention(x, w.attention, bias, path, **options)
        h = hooks("hook_resid_mid", w.attn_norm(hooks("hook_attn_out", attn.output) + x))  # (B,T,D)
        if memory is not None:
            cross = cross_attend(h, w, memory, layer, path, hooks)
            h = w.cross_norm(hooks("hook_cross_attn_out", cross.output) + h)  # (B,T,D)
        out = w.mlp_norm(hooks("hook_mlp_out", w.mlp(h)) + h)
    return hooks("hook_resid_post", out), attn if cross is None else replace(attn, cross=cross)


def layer_outputs(model: LoadedModel, x: Tensor, bias: Tensor | None, rope: tuple[Tensor, Tensor] | None,
                  path: str = EXPLICIT, kernel_causal: bool = False, hooks: Hooks = NO_HOOKS,
                  first: int = 0, past: Sequence[tuple[Tensor, Tensor]] | None = None,
                  memory: Memory | None = None) -> Iterator[tuple[Tensor, AttentionOutput]]:
    """The one layer loop of every family: layers `first`.. from x (B,T,D), yielding each layer's output (B,T,D)
    and its attention internals. `hooks` read or change what passes the layers' hook points (hooks.py; a hook on
    blocks.{l}.hook_resid_pre may even add rows: ablated variants joining a batch); `past` holds each layer's
    key/value cache; `memory`: the encoder's output, which an encoder–decoder's decoder layers cross-attend to."""
    for layer in range(first, model.n_layers):
        block = hooks.block(layer)
        x, attn = layer_forward(block("hook_resid_pre", x), model.layers[layer], model.arch, at_layer(bias, layer),
                                path, at_layer(rope, layer), kernel_causal, block,
                                None if past is None else past[layer], memory, layer)
        yield x, attn


def last_output(outputs: Iterator[tuple[Tensor, AttentionOutput]]) -> tuple[Tensor, AttentionOutput]:
    """The last of layer_outputs' layers, each earlier layer's output dropped as the next is made (unpacking with
    `*_, last` would keep them all: a chunk's peak L times one layer's work)."""
    last = None
    for last in outputs:  # noqa: B007 -- only the last is wanted
        pass
    return last


Join = Callable[[int, Tensor], Tensor]  # (layer, units of the variants joining there (n,)) -> their inputs (n,T,D)
HeadsEdit = Callable[[Tensor], Tensor]  # (n,T,H,Dh) a layer's heads' outputs (hook_z) -> the same, changed
EditOf = Callable[[int, int, Tensor, Tensor], HeadsEdit | None]  # (layer, rows in the batch, rows joining, units)


def variant_outputs(model: LoadedModel, chunk: Sequence[tuple[int, int]], bias: Tensor | None,
                    rope: tuple[Tensor, Tensor] | None, join: Join, edit_of: EditOf,
                    check: Callable[[], None] | None = None) -> tuple[Tensor, AttentionOutput]:
    """Variants of one text that each change one (layer, unit) (a head, a position), in layer-major order: a variant
    joins the batch at its layer with the input `join` gives it (blocks.{l}.hook_resid_pre: the layers below are
    those of the unchanged run, computed once), and `edit_of` may edit the heads' outputs of the rows joining there
    (blocks.{l}.attn.hook_z). Row i is chunk[i]. Returns the last layer's output (n,T,D), before the final norm,
    and its attention. `check()` runs before each layer (it may raise to cancel: a chunk stops within a layer's
    time, not a whole chunk's)."""
    layer_of = torch.tensor([layer for layer, _ in chunk])  # (n,)
    unit_of = torch.tensor([unit for _, unit in chunk])
    edits: dict[int, HeadsEdit | None] = {}

    def enter(x: Tensor, hook: HookPoint) -> Tensor:  # (rows so far,T,D) -> with the rows joining at this layer
        layer = hook.layer()
        if check is not None:
            check()
        joining = (layer_of == layer).nonzero()[:, 0]
        if len(joining):
            x = torch.cat([x, join(layer, unit_of[joining])])
        rows = (layer_of[:x.shape[0]] == layer).nonzero()[:, 0]
        edits[layer] = edit_of(layer, x.shape[0], rows, unit_of[rows])
        return x

    def edit(z: Tensor, hook: HookPoint) -> Tensor:  # (n,T,H,Dh)
        change = edits.get(hook.layer())
        return z if change is None else change(z)

    hooks = hooks_of([(is_point("hook_resid_pre"), enter), (is_point("attn.hook_z"), edit)])
    first = chunk[0][0]
    return last_output(layer_outputs(model, join(first, unit_of[:0]), bias, rope, hooks=hooks, first=first))


def final_norm(model: LoadedModel, x: Tensor) -> Tensor:
    """The last layer's output through the model's final norm where it has one (transformers'
    last_hidden_state)."""
    norm = model.embeddings.final_norm
    return norm(x) if norm is not None else x


def final_states(model: LoadedModel, x: Tensor, hooks: Hooks = NO_HOOKS) -> Tensor:
    """The last layer's output x (B,T,D) through the final norm and its hook point (ln_final.hook_normalized)."""
    return hooks("ln_final.hook_normalized", final_norm(model, x))


def model_path(model: LoadedModel, path: str, n_tokens: int) -> tuple[str, str]:
    """choose_path for `model`: explicit where no fused kernel computes what it does."""
    chosen, reason = choose_path(path, n_tokens, model.device)
    if chosen == FUSED and not model.arch.fused_exact:
        return EXPLICIT, Worded(N_("explicit: {name} caps its attention scores (tanh(s/c)·c), which no fused kernel "
                                   "does"), name=model.name)
    return chosen, reason


def choose_path(path: str, n_tokens: int, device: torch.device) -> tuple[str, str]:
    """Resolve `auto`; returns (path, reason)."""
    if path not in PATHS:
        raise InputError("unknown_path", N_("Unknown path {path!r}: choose one of {paths}."), path=path,
                         paths=", ".join(PATHS))
    if path != AUTO:
        return path, Worded(N_("as asked"))
    if device.type == "cuda":
        return FUSED, Worded(N_("auto: fused on the GPU"))
    if n_tokens > AUTO_FUSED_MIN_TOKENS:
        return FUSED, Worded(N_("auto: fused for {n} tokens > {limit}"), n=n_tokens, limit=AUTO_FUSED_MIN_TOKENS)
    return EXPLICIT, Worded(N_("auto: explicit for {n} tokens <= {limit}"), n=n_tokens,
                             limit=AUTO_FUSED_MIN_TOKENS)


@torch.inference_mode()
def run(model: LoadedModel, texts: TextsLike, path: str = AUTO, pairs: Sequence[str] | None = None,
        hooks: Hooks = NO_HOOKS, allowed: AllowedKeys | None = None) -> AttentionResult:
    """Recompute every layer and head for `texts` (a str, a list of str, or pre-split word lists).

    Several texts are padded into one batch; padded keys get weight 0, so each text's maps and
    hidden states equal those of the text alone. Texts over the model's maximum are cut.
    Runs in the precision the model was loaded in (`load_model(dtype=...)`).
    `pairs`: a second text for each text, read as BERT reads a sentence pair (segments A and B; an encoder with
    token types: result.batch.token_type_ids and .segments say which piece is whose). `hooks`: hooks.py.
    `allowed`: a sparse pattern of the keys each query may see (allowed.py).
    """
    if pairs is not None and model.arch.causal:
        raise InputError("pairs_need_an_encoder", N_("Sentence pairs are read by encoders; {model} is a decoder: join "
                                                     "the two texts instead."), model=model.name)
    return forward(model, tokenize(model.tokenizer, texts, model.max_length, bos=model.bos_id, pairs=pairs), path,
                   hooks=hooks, allowed=allowed)


def prepare(model: LoadedModel, batch: TokenBatch, with_bias: bool = True, allowed: AllowedKeys | None = None
            ) -> tuple[Tensor, object, object]:
    """What every layer needs: the embeddings (B,T,D), the attention bias (padding, causal, window, ALiBi, T5's
    relative positions, and `allowed`'s sparse pattern; None without `with_bias`: the kernel's own causal mode) and
    RoPE's (cos, sin), each (B,T,R); either may be a PerLayer where layers differ."""
    arch = model.arch
    mask = batch.attention_mask.to(model.device)
    positions = position_ids(mask, arch)  # (B,T)
    if arch.audio:
        x = embed_frames(model.embeddings, batch.features.to(model.device, model.embeddings.word.dtype))
    elif arch.image:
        x = embed_patches(model.embeddings, batch.features.to(model.device, model.embeddings.word.dtype))
    else:
        types = None if batch.token_type_ids is None else batch.token_type_ids.to(model.device)
        x = embed(model.embeddings, batch.input_ids.to(model.device), positions, types)  # (B,T,D)
    bias = layer_biases(model, mask, x.dtype) if with_bias else None
    if allowed is not None:
        bias = with_allowed(bias, allowed, x.dtype, model.n_layers)
    rope = per_layer(arch.rope_kinds, lambda kind: model.rotary(x, positions, kind)) if arch.rotary else None
    return x, bias, rope


def layer_biases(model: LoadedModel, mask: Tensor, dtype: torch.dtype, past: int = 0) -> object:
    """Per layer, what it adds to its scores (scores_bias), plus T5's relative-position bias (B|1,H,T,S) where the
    model has one: a layer without its own table uses the first layer's, as transformers passes it on. `past`:
    earlier positions already in the cache (the queries are the last mask.shape[1] - past)."""
    arch = model.arch
    if not arch.relative_bias:
        return per_layer(arch.windows, lambda window: scores_bias(model, mask, dtype, window))
    padding = attention.scores_bias(mask, dtype, arch.causal)  # (B,1,T|1,S) or None
    padding = padding if padding is None or not past else padding[:, :, past:]
    n_queries, n_keys = mask.shape[1] - past, mask.shape[1]
    owners = [layer if w.position_bias is not None else 0 for layer, w in enumerate(model.layers)]

    def biased(owner: int) -> Tensor:
        table = model.layers[owner].position_bias(n_queries, n_keys, mask.device, past).to(dtype)  # (1,H,T,S)
        return table if padding is None else (table + padding).clamp_min(torch.finfo(dtype).min)

    return per_layer(owners, biased)


def embed_patches(w: EmbeddingWeights, pixels: Tensor) -> Tensor:
    """A Vision Transformer's input: pixels (B,C,Hpx,Wpx) -> (B,N,D) by transformers' embedding module (patches,
    [CLS] and any other prefix, positions), then the norm after it where the model has one (CLIP)."""
    x = w.patches(pixels)  # (B,N,D)
    return w.norm(x) if w.norm is not None else x


def embed_frames(w: EmbeddingWeights, features: Tensor) -> Tensor:
    """Whisper's encoder input: (B,C,F) log-mel frames -> two convolutions with GELU (the second halves the frames)
    -> (B,F/2,D), plus the sinusoidal positions."""
    (w1, b1), (w2, b2) = w.convs
    x = torch.nn.functional.gelu(torch.nn.functional.conv1d(features, w1, b1, padding=1))  # (B,D,F)
    x = torch.nn.functional.gelu(torch.nn.functional.conv1d(x, w2, b2, stride=2, padding=1))  # (B,D,F/2)
    x = x.transpose(1, 2)  # (B,F/2,D)
    return x + w.position[: x.shape[1]]


Progress = Callable[[int, int], None]  # (layers done, layers)


def fused_kernel_causal(model: LoadedModel, padded: bool, path: str) -> bool:
    """A decoder's unpadded batch on the fused path, no window, ALiBi nor relative bias: the kernel's own causal
    mode skips the masked half, and no (T,T) bias is built."""
    arch = model.arch
    plain = arch.sliding_window is None and not arch.alibi and not arch.relative_bias
    return path == FUSED and arch.causal and plain and not padded


def check_forward_budget(model: LoadedModel, rows: int, tokens: int, path: str, keep_hidden: bool,
                         kernel_causal: bool) -> None:
    """Refuse, before any work, a recompute of `rows` texts of `tokens` pieces over the memory budget."""
    if path == FUSED:
        what = Worded(N_("Recomputing {rows:,} text(s) of {tokens:,} pieces"), rows=rows, tokens=tokens)
        advice = Worded(N_("use a shorter text"))
    else:
        what = Worded(N_("Recomputing {rows:,} text(s) of {tokens:,} pieces on the {path} path (it keeps every map)"),
                      rows=rows, tokens=tokens, path=path)
        advice = Worded(N_("use a shorter text or the fused path"))
    needed = forward_bytes(model, rows, tokens, keeps_maps=path != FUSED, keep_hidden=keep_hidden,
                           bias=not kernel_causal)
    check_budget(needed, what, advice)


def kept_parts(attn: AttentionOutput, path: str) -> tuple:
    """What a result keeps of a layer's attention: q, k, and the log-sum-exp (fused) or the probabilities and the
    heads' outputs (explicit); nothing else."""
    return attn.q, attn.k, attn.lse if path == FUSED else (attn.probs, attn.context)


@torch.inference_mode()
def forward(model: LoadedModel, batch: TokenBatch, path: str = AUTO, keep_hidden: bool = True,
            progress: Progress | None = None, memory: Memory | None = None,
            source_mask: Tensor | None = None, hooks: Hooks = NO_HOOKS, allowed: AllowedKeys | None = None
            ) -> AttentionResult:
    """The recompute on an already tokenized batch (texts, or token ids made by `ids_batch`). `keep_hidden=False`
    (a long text's result): keep each layer's q, k and log-sum-exp, and of the hidden states only the last.
    `memory` (an encoder–decoder's decoder): the encoder's output, cross-attended in every layer; the result's
    `cross` then holds those maps over the source (`source_mask` (B,S) its padding). `hooks`: what reads or changes
    the layers' activations on the way (hooks.py; run_with_hooks). `allowed`: a sparse pattern of the keys each
    query may see (allowed.py), added to the layers' bias on either path."""
    reuse_freed_memory()  # once per process: the results a forward frees are reused, not faulted in again
    arch = model.arch
    tokens = batch.input_ids.shape[1]
    chosen, reason = model_path(model, path, tokens)
    kernel_causal = fused_kernel_causal(model, not bool(batch.attention_mask.all()), chosen) and allowed is None
    check_forward_budget(model, *batch.input_ids.shape, chosen, keep_hidden, kernel_causal)
    x, bias, rope = prepare(model, batch, with_bias=not kernel_causal, allowed=allowed)
    hidden, kept, crossed, backend = [x] if keep_hidden else [], [], [], ""
    for layer, (output, attn) in enumerate(layer_outputs(model, x, bias, rope, chosen, kernel_causal, hooks,
                                                         memory=memory)):
        hidden = [*hidden, output] if keep_hidden else [output]  # a long text's: the last layer's output only
        kept.append(kept_parts(attn, chosen))
        if attn.cross is not None:
            crossed.append(attn.cross)
        backend = attn.backend
        del attn, output
        if tokens > MAX_PIECES:
            release_freed_memory()  # the layer's work back to the system, not kept by the allocator
        if progress is not None:
            progress(layer + 1, model.n_layers)
    cross = None if not crossed else cross_of(crossed, source_mask, batch.attention_mask, chosen, arch.scale)
    return AttentionResult(
        batch=batch,
        layer_q=tuple(q for q, _, _ in kept),
        layer_k=tuple(k for _, k, _ in kept),
        layer_context=None if chosen == FUSED else tuple(c for _, _, (_, c) in kept),
        layer_probs=None if chosen == FUSED else tuple(p for _, _, (p, _) in kept),
        layer_lse=tuple(lse for _, _, lse in kept) if chosen == FUSED else None,
        hidden_states=(*hidden[:-1], final_states(model, hidden[-1], hooks)),
        path=chosen,
        backend=backend,
        path_reason=reason,
        max_length=arch.max_length,
        causal=arch.causal,
        windows=arch.windows,
        score_scale=arch.scale,
        alibi=arch.alibi,
        layer_bias=bias if arch.relative_bias else None,
        cross=cross,
    )
