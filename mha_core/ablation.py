"""Head ablation and its measured effect on the model's output.

A head is removed by changing its output before W_O: set to zero ("zero"), or replaced by its mean over the
text's positions ("mean"). The effect is measured downstream:
- "embedding" (encoders such as all-MiniLM-L6-v2, a sentence-embedding model): the cosine distance
  1 - cos between the ablated and the original sentence embedding (mean over tokens, L2-normalised);
- "loss" (decoders with a language-model head tied to the embeddings): the change in mean next-token loss;
- "target": the change in log-probability of `target` as the next token after `position`.

All single-head ablations at once: ablating a head of layer l leaves the layers below l unchanged, so their
outputs are reused; the variants are batched, and the batch grows by H rows at each layer (L layer passes in
all, instead of L x H full forwards).

Shapes: L layers, H heads, T tokens, D d_model, V vocabulary, N variants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.attention import EXPLICIT
from mha_core.encoder import forward, layer_forward, prepare
from mha_core.model import LoadedModel
from mha_core.tokens import InputError, TokenBatch, tokenize

ZERO, MEAN = "zero", "mean"
MODES = (ZERO, MEAN)
MEASURES = ("embedding", "loss", "target")


@dataclass(frozen=True)
class AblationGrid:
    measure: str
    mode: str
    effects: np.ndarray  # (L,H) the measure's change when that head alone is ablated
    original: float  # the unablated model's value (0 for the embedding distance)


def default_measure(model: LoadedModel) -> str:
    return "loss" if model.causal else "embedding"


def head_means(model: LoadedModel, batch: TokenBatch) -> tuple[Tensor, ...]:
    """Each layer's heads' outputs averaged over the text's positions: L x (1,H,1,Dh) (for mean-ablation)."""
    result = forward(model, batch, path=EXPLICIT)
    return tuple(ctx.mean(dim=2, keepdim=True) for ctx in result.layer_context)


def make_edit(removed: Tensor, replacement: Tensor | None) -> object:
    """removed (N,H) bool: which heads each variant loses; replacement (1,H,1,Dh) or None (zero)."""
    keep = (~removed).to(torch.float32)[:, :, None, None]  # (N,H,1,1)

    def edit(context: Tensor) -> Tensor:  # (N,H,T,Dh)
        ablated = context * keep
        return ablated if replacement is None else ablated + (1 - keep) * replacement

    return edit


@torch.inference_mode()
def final_states(model: LoadedModel, batch: TokenBatch, removed: Sequence[Tensor], mode: str) -> Tensor:
    """Last hidden states (N,T,D) of N variants of one text; removed[l] (N,H) bool marks the heads each variant
    loses at layer l (the recompute's layer loop, batched over the variants)."""
    x, bias, rope = prepare(model, batch)  # (1,T,D)
    means = head_means(model, batch) if mode == MEAN else [None] * model.n_layers
    x = x.expand(removed[0].shape[0], -1, -1)
    for layer, w in enumerate(model.layers):
        x, _ = layer_forward(x, w, model.arch, bias, EXPLICIT, rope, edit=make_edit(removed[layer], means[layer]))
    final_norm = model.embeddings.final_norm
    return final_norm(x) if final_norm is not None else x


@torch.inference_mode()
def single_head_states(model: LoadedModel, batch: TokenBatch, mode: str) -> tuple[Tensor, Tensor]:
    """(original (1,T,D), every single-head ablation (L*H,T,D) in layer-major order), reusing lower layers."""
    x, bias, rope = prepare(model, batch)
    means = head_means(model, batch) if mode == MEAN else [None] * model.n_layers
    n_heads, variants = model.n_heads, x[:0]  # (0,T,D)
    original = x
    for layer, w in enumerate(model.layers):
        variants = torch.cat([variants, original.expand(n_heads, -1, -1)])  # H new rows lose a head of this layer
        removed = torch.zeros(variants.shape[0], n_heads, dtype=torch.bool)
        removed[-n_heads:] = torch.eye(n_heads, dtype=torch.bool)
        both = torch.cat([original, variants])  # row 0: the unablated text
        both, _ = layer_forward(both, w, model.arch, bias, EXPLICIT, rope,
                                edit=make_edit(torch.cat([torch.zeros(1, n_heads, dtype=torch.bool), removed]),
                                               means[layer]))
        original, variants = both[:1], both[1:]
    final_norm = model.embeddings.final_norm
    if final_norm is not None:
        original, variants = final_norm(original), final_norm(variants)
    return original, variants


def sentence_embedding(states: Tensor) -> Tensor:
    """(N,T,D) -> (N,D): mean over tokens, L2-normalised (as sentence-transformers pools all-MiniLM-L6-v2)."""
    return F.normalize(states.mean(dim=1), dim=-1)


def lm_logits(model: LoadedModel, states: Tensor) -> Tensor:
    """(N,T,D) -> (N,T,V) through the language-model head tied to the input embeddings."""
    if not (model.causal and getattr(model.config, "tie_word_embeddings", False)):
        raise InputError(f"{model.name} has no language-model head tied to its embeddings: measure 'embedding'.")
    return states @ model.embeddings.word.T


def measure_values(model: LoadedModel, batch: TokenBatch, states: Tensor, measure: str,
                   target: tuple[int, int] | None) -> Tensor:
    """(N,) the measure of each variant: embedding (N,D) rows, mean next-token loss, or a target log-prob."""
    if measure == "embedding":
        return sentence_embedding(states)
    logits = lm_logits(model, states).float()  # (N,T,V)
    if measure == "loss":
        ids = batch.input_ids[0, 1:].expand(logits.shape[0], -1)  # (N,T-1) the next tokens
        return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids, reduction="none").mean(-1)
    position, token = target
    return torch.log_softmax(logits[:, position], dim=-1)[:, token]


def effect(model: LoadedModel, batch: TokenBatch, original: Tensor, variants: Tensor, measure: str,
           target: tuple[int, int] | None) -> tuple[Tensor, float]:
    """(effects (N,), the original's value): cosine distance for embeddings, else ablated minus original."""
    base = measure_values(model, batch, original, measure, target)
    values = measure_values(model, batch, variants, measure, target)
    if measure == "embedding":
        return 1 - values @ base[0], 0.0
    return values - base[0], float(base[0])


def resolve_target(model: LoadedModel, batch: TokenBatch, target: str | None, position: int | None
                   ) -> tuple[int, int] | None:
    """(position whose next token is scored, token id); the position defaults to the text's last token."""
    if target is None:
        return None
    ids = model.tokenizer(target, add_special_tokens=False)["input_ids"]
    if not ids:
        raise InputError("The target token is empty.")
    n = batch.input_ids.shape[1]
    position = n - 1 if position is None else position
    if not 0 <= position < n:
        raise InputError(f"The position must be from 0 to {n - 1} (the text has {n} tokens).")
    return position, ids[0]


def check_choice(model: LoadedModel, mode: str, measure: str, target: str | None) -> None:
    if mode not in MODES:
        raise InputError(f"Unknown mode {mode!r}: choose zero or mean.")
    if measure not in MEASURES:
        raise InputError(f"Unknown measure {measure!r}: choose {', '.join(MEASURES)}.")
    if measure == "target" and target is None:
        raise InputError("The target measure needs a target token (and optionally a position).")


def ablation_grid(model: LoadedModel, text: str, mode: str = ZERO, measure: str | None = None,
                  target: str | None = None, position: int | None = None) -> AblationGrid:
    """The effect of ablating each head alone, every (layer, head) at once."""
    measure = measure or default_measure(model)
    check_choice(model, mode, measure, target)
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    chosen_target = resolve_target(model, batch, target, position) if measure == "target" else None
    original, variants = single_head_states(model, batch, mode)
    effects, base = effect(model, batch, original, variants, measure, chosen_target)
    return AblationGrid(measure, mode, effects.reshape(model.n_layers, model.n_heads).numpy(), base)


def ablate_heads(model: LoadedModel, text: str, heads: Sequence[tuple[int, int]], mode: str = ZERO,
                 measure: str | None = None, target: str | None = None, position: int | None = None) -> float:
    """The joint effect of ablating `heads` together (one run)."""
    measure = measure or default_measure(model)
    check_choice(model, mode, measure, target)
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    removed = [torch.zeros(2, model.n_heads, dtype=torch.bool) for _ in model.layers]  # row 0: nothing removed
    for layer, head in heads:
        removed[layer][1, head] = True
    states = final_states(model, batch, removed, mode)
    chosen_target = resolve_target(model, batch, target, position) if measure == "target" else None
    effects, _ = effect(model, batch, states[:1], states[1:], measure, chosen_target)
    return float(effects[0])
