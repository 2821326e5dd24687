"""Gradients through the one layer loop (explicit path): a target's gradient with respect to the input embeddings,
every head's attention weights and every head's output, in the same pass as the recompute (no second model).

The recompute itself runs under torch.inference_mode; this pass runs the same functions (prepare, layer_outputs,
final_norm) with autograd on, and reads the heads' maps and outputs through Reader hooks on
blocks.{l}.attn.hook_pattern and blocks.{l}.attn.hook_z, so the layer loop gains no parameter.
The input embeddings are what transformers' input embeddings module gives (inputs_embeds: the word rows, Gemma's
times √d_model); positions, token types and the embedding norm come after them, as in transformers.

Shapes: B rows, T pieces, D d_model, L layers, H query heads, Dh head dim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from mha_core.engine.attention import EXPLICIT
from mha_core.engine.budget import check_budget, forward_bytes
from mha_core.engine.forward import (
    embed_words,
    final_norm,
    last_output,
    layer_outputs,
    position_ids,
    prepare,
    word_embeddings,
)
from mha_core.engine.hooks import HookPoint, Reader, hooks_of, is_point
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch
from mha_core.messages import N_, Worded

GRADIENT_COST = 3  # a forward with its graph kept and the backward pass: about three forwards' memory

Score = Callable[[Tensor, Tensor], Tensor]  # (final states (B,T,D), last layer's maps (B,H,T,T)) -> (B,) scores


@dataclass(frozen=True)
class Gradients:
    """One pass forward and back: the score of each row and its gradients (all detached, float as computed)."""

    score: Tensor  # (B,)
    words: Tensor  # (B,T,D) the input embeddings the pass read (an image's: its pixels (B,C,Hpx,Wpx))
    words_grad: Tensor  # d score / d words, the same shape
    probs: tuple[Tensor, ...]  # L x (B,H,T,T) every head's attention weights
    probs_grad: tuple[Tensor, ...]  # L x (B,H,T,T)
    z: tuple[Tensor, ...]  # L x (B,H,T,Dh) every head's output before W_O (hook_z)
    z_grad: tuple[Tensor, ...]  # L x (B,H,T,Dh)


def check_text_model(model: LoadedModel) -> None:
    if model.arch.audio or model.arch.image or model.encoder_decoder:
        raise InputError("gradients_need_text_model", N_("Gradients are computed for a text model's encoder or "
                                                         "decoder; {model} reads another input."), model=model.name)


def largest_fitting(model: LoadedModel, rows: int) -> int:
    """The most pieces a gradient pass of `rows` rows fits within the budget (0 when none)."""
    from mha_core.engine.budget import budget_bytes

    low, high = 0, model.max_length
    while low < high:
        mid = (low + high + 1) // 2
        fits = GRADIENT_COST * forward_bytes(model, rows, mid, keeps_maps=True) <= budget_bytes()
        low, high = (mid, high) if fits else (low, mid - 1)
    return low


def check_gradient_budget(model: LoadedModel, rows: int, tokens: int) -> None:
    """Refuse, before any work, a gradient pass of `rows` rows of `tokens` pieces over the memory budget, naming the
    longest text that fits."""
    needed = GRADIENT_COST * forward_bytes(model, rows, tokens, keeps_maps=True)
    check_budget(needed, Worded(N_("Gradients through {rows:,} text(s) of {tokens:,} pieces"), rows=rows,
                                tokens=tokens),
                 Worded(N_("use a text of at most {largest:,} pieces"), largest=largest_fitting(model, rows)))


def input_embeddings(model: LoadedModel, batch: TokenBatch) -> Tensor:
    """(B,T,D) the batch's input embeddings (transformers' inputs_embeds)."""
    return word_embeddings(model.embeddings, batch.input_ids.to(model.device)).detach()


def scored(model: LoadedModel, batch: TokenBatch, score: Score, words: Tensor, readers: list) -> Tensor:
    """(B,) `score` of the layer loop's pass over the input embeddings `words` (B,T,D); `readers` (name filter,
    Reader) pairs read the layers' hook points on the way."""
    _, bias, rope = prepare(model, batch)
    types = None if batch.token_type_ids is None else batch.token_type_ids.to(model.device)
    x = embed_words(model.embeddings, words, position_ids(batch.attention_mask.to(model.device), model.arch), types)
    return scored_from(model, x, bias, rope, score, readers)


def scored_from(model: LoadedModel, x: Tensor, bias: object, rope: object, score: Score, readers: list) -> Tensor:
    """(B,) `score` of the layers' pass from their input x (B,T,D), the last layer's maps kept for it."""
    maps = []
    last = model.n_layers - 1

    def keep_last(probs: Tensor, hook: HookPoint) -> None:
        if hook.layer() == last:
            maps.append(probs)

    hooks = hooks_of([*readers, (is_point("attn.hook_pattern"), Reader(keep_last))])
    final, _ = last_output(layer_outputs(model, x, bias, rope, EXPLICIT, hooks=hooks))
    return score(final_norm(model, final), maps[-1])


@torch.inference_mode()
def embeddings_scores(model: LoadedModel, batch: TokenBatch, score: Score, words: Tensor) -> Tensor:
    """(B,) `score` of the pass over the input embeddings `words` (B,T,D), without gradients."""
    check_text_model(model)
    return scored(model, batch, score, words, [])


def gradients(model: LoadedModel, batch: TokenBatch, score: Score, words: Tensor | None = None,
              heads: bool = True) -> Gradients:
    """The target `score` of every row of `batch` and its gradients. `words` (B,T,D): input embeddings to read
    instead of the batch's pieces' (Integrated Gradients' interpolations); `heads=False`: the embeddings' gradient
    only (the maps and heads' outputs are then left empty)."""
    check_text_model(model)
    check_gradient_budget(model, *batch.input_ids.shape)
    start = input_embeddings(model, batch) if words is None else words
    return gradient_pass(model, start, heads, lambda leaf, readers: scored(model, batch, score, leaf, readers))


Pass = Callable[[Tensor, list], Tensor]  # (the input to differentiate by, readers) -> (B,) scores


def gradient_pass(model: LoadedModel, start: Tensor, heads: bool, run: Pass) -> Gradients:
    """The scores `run` computes from a copy of `start` (the input embeddings, or an image's pixels) and their
    gradients with respect to it and, with `heads`, to every head's attention weights and output."""
    maps: list[Tensor] = []
    outputs: list[Tensor] = []

    def keep_map(probs: Tensor, hook: HookPoint) -> None:
        maps.append(probs)

    def keep_output(z: Tensor, hook: HookPoint) -> None:  # (B,T,H,Dh): the view the layer goes on with
        outputs.append(z)

    readers = [(is_point("attn.hook_pattern"), Reader(keep_map)), (is_point("attn.hook_z"), Reader(keep_output))]
    with torch.inference_mode(False), torch.enable_grad():
        leaf = start.detach().clone().requires_grad_()
        scores = run(leaf, readers if heads else [])  # (B,)
        wanted = [leaf, *maps, *outputs] if heads else [leaf]
        found = torch.autograd.grad(scores.sum(), wanted, allow_unused=True)
    found = [torch.zeros_like(t) if g is None else g for t, g in zip(wanted, found, strict=True)]
    n = model.n_layers if heads else 0
    return Gradients(scores.detach(), leaf.detach(), found[0],
                     tuple(m.detach() for m in maps[:n]), tuple(found[1:1 + n]),
                     tuple(z.detach().transpose(1, 2) for z in outputs), tuple(g.transpose(1, 2) for g in
                                                                                 found[1 + n:]))
