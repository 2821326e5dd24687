"""Head ablation and its measured effect on the model's output.

A head is removed by changing its output before W_O: set to zero ("zero"), or replaced by its mean over the
text's positions ("mean"). The effect is measured downstream:
- "embedding" (encoders such as all-MiniLM-L6-v2, a sentence-embedding model): the cosine distance
  1 - cos between the ablated and the original sentence embedding (mean over tokens, L2-normalised);
- "loss" (decoders with a language-model head tied to the embeddings): the change in mean next-token loss;
- "target": the change in log-probability of `target` as the next token after `position`;
- "coref" (any model): the change of the coreference margin in the last layer's best head: attention from the
  pronoun to the first candidate noun before it minus attention to the second (as on the Coreference page),
  in the last-layer head where that margin is largest in the unablated model.

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
MEASURES = ("embedding", "loss", "target", "coref")


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
def run_variants(model: LoadedModel, batch: TokenBatch, removed: Sequence[Tensor], mode: str
                 ) -> tuple[Tensor, Tensor]:
    """N variants of one text; removed[l] (N,H) bool marks the heads each variant loses at layer l. Returns the
    last hidden states (N,T,D) and the last layer's attention (N,H,T,T) (the layer loop, batched)."""
    x, bias, rope = prepare(model, batch)  # (1,T,D)
    means = head_means(model, batch) if mode == MEAN else [None] * model.n_layers
    x = x.expand(removed[0].shape[0], -1, -1)
    for layer, w in enumerate(model.layers):
        x, attn = layer_forward(x, w, model.arch, bias, EXPLICIT, rope, edit=make_edit(removed[layer], means[layer]))
    final_norm = model.embeddings.final_norm
    return (final_norm(x) if final_norm is not None else x), attn.probs


def final_states(model: LoadedModel, batch: TokenBatch, removed: Sequence[Tensor], mode: str) -> Tensor:
    """The last hidden states (N,T,D) of N variants (see run_variants)."""
    return run_variants(model, batch, removed, mode)[0]


@dataclass(frozen=True)
class Variants:
    """The unablated text and every single-head ablation (N = L*H, layer-major)."""

    original: Tensor  # (1,T,D) last hidden state
    ablated: Tensor  # (N,T,D)
    original_last_maps: Tensor  # (1,H,T,T) the last layer's attention
    ablated_last_maps: Tensor  # (N,H,T,T)


@torch.inference_mode()
def single_head_states(model: LoadedModel, batch: TokenBatch, mode: str) -> Variants:
    """Every single-head ablation of one text, reusing the layers below each ablated head."""
    x, bias, rope = prepare(model, batch)
    means = head_means(model, batch) if mode == MEAN else [None] * model.n_layers
    n_heads, variants = model.n_heads, x[:0]  # (0,T,D)
    original = x
    for layer, w in enumerate(model.layers):
        variants = torch.cat([variants, original.expand(n_heads, -1, -1)])  # H new rows lose a head of this layer
        removed = torch.zeros(variants.shape[0], n_heads, dtype=torch.bool)
        removed[-n_heads:] = torch.eye(n_heads, dtype=torch.bool)
        both = torch.cat([original, variants])  # row 0: the unablated text
        both, attn = layer_forward(both, w, model.arch, bias, EXPLICIT, rope,
                                   edit=make_edit(torch.cat([torch.zeros(1, n_heads, dtype=torch.bool), removed]),
                                                  means[layer]))
        original, variants = both[:1], both[1:]
    final_norm = model.embeddings.final_norm
    if final_norm is not None:
        original, variants = final_norm(original), final_norm(variants)
    return Variants(original, variants, attn.probs[:1], attn.probs[1:])


def sentence_embedding(states: Tensor) -> Tensor:
    """(N,T,D) -> (N,D): mean over tokens, L2-normalised (as sentence-transformers pools all-MiniLM-L6-v2)."""
    return F.normalize(states.mean(dim=1), dim=-1)


def lm_logits(model: LoadedModel, states: Tensor) -> Tensor:
    """(N,T,D) -> (N,T,V) through the language-model head tied to the input embeddings."""
    if not (model.causal and getattr(model.config, "tie_word_embeddings", False)):
        raise InputError(f"{model.name} has no language-model head tied to its embeddings: measure 'embedding'.")
    return states @ model.embeddings.word.T


@dataclass(frozen=True)
class CorefProbe:
    """Where the coreference margin is read: the pronoun's and two candidates' pieces, the best last-layer head."""

    pronoun: list[int]
    a: list[int]
    b: list[int]
    head: int
    words: tuple[str, str, str]  # pronoun, candidate a, candidate b


def coref_probe(batch: TokenBatch, last_maps: Tensor) -> CorefProbe:
    """The first pronoun with two nouns before it (spaCy), as the Coreference page picks them."""
    from mha_core.coref import candidate_scores, span_pieces
    from mha_core.inspector import candidates_before, default_pronoun, sentence_words

    words = sentence_words(batch.texts[0])
    pronoun = default_pronoun(words)
    candidates = candidates_before(words, pronoun) if pronoun is not None else []
    if len(candidates) < 2:
        raise InputError("The coreference measure needs a pronoun with two nouns before it in the text.")
    offsets = batch.offsets[0]
    spans = [span_pieces(offsets, words[i].start, len(words[i].text)) for i in (pronoun, *candidates[:2])]
    if not all(spans):
        raise InputError("The pronoun or a candidate lies beyond the model's maximum length.")
    margin = candidate_scores(last_maps[None, 0], spans[0], spans[1]) - candidate_scores(
        last_maps[None, 0], spans[0], spans[2])  # (1,H)
    head = int(margin[0].abs().argmax())
    return CorefProbe(*spans, head, tuple(words[i].text for i in (pronoun, *candidates[:2])))


def coref_margins(maps: Tensor, probe: CorefProbe) -> Tensor:
    """(N,H,T,T) last-layer maps -> (N,) margin a - b of the probe's head."""
    rows = maps[:, probe.head][:, probe.pronoun]  # (N,P,T)
    return rows[..., probe.a].sum(-1).mean(-1) - rows[..., probe.b].sum(-1).mean(-1)


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
    v = single_head_states(model, batch, mode)
    if measure == "coref":
        probe = coref_probe(batch, v.original_last_maps)
        base = coref_margins(v.original_last_maps, probe)
        effects, original = coref_margins(v.ablated_last_maps, probe) - base, float(base[0])
    else:
        effects, original = effect(model, batch, v.original, v.ablated, measure, chosen_target)
    return AblationGrid(measure, mode, effects.reshape(model.n_layers, model.n_heads).numpy(), original)


def ablate_heads(model: LoadedModel, text: str, heads: Sequence[tuple[int, int]], mode: str = ZERO,
                 measure: str | None = None, target: str | None = None, position: int | None = None) -> float:
    """The joint effect of ablating `heads` together (one run)."""
    measure = measure or default_measure(model)
    check_choice(model, mode, measure, target)
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    removed = [torch.zeros(2, model.n_heads, dtype=torch.bool) for _ in model.layers]  # row 0: nothing removed
    for layer, head in heads:
        removed[layer][1, head] = True
    states, last_maps = run_variants(model, batch, removed, mode)
    if measure == "coref":
        margins = coref_margins(last_maps, coref_probe(batch, last_maps))
        return float(margins[1] - margins[0])
    chosen_target = resolve_target(model, batch, target, position) if measure == "target" else None
    effects, _ = effect(model, batch, states[:1], states[1:], measure, chosen_target)
    return float(effects[0])
