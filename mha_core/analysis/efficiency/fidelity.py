"""What a sparse or linear pattern changes in a real model: the same text run dense and patterned through the one
layer loop (a masked pattern joins every chosen layer's bias, engine/allowed.py; a kernel replaces the chosen
layers' maps through hook_pattern, computed from the queries and keys the hooks read), then compared.

Shapes: L layers, H heads, T pieces, D d_model, V vocabulary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.efficiency.patterns import Pattern, allowed_keys, check_fits, kernel_map, parse_pattern
from mha_core.engine.allowed import AllowedKeys
from mha_core.engine.attention import repeat_kv
from mha_core.engine.forward import AUTO, EXPLICIT, run
from mha_core.engine.hooks import HookPoint, Reader, hooks_of
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError
from mha_core.i18n import N_


@dataclass(frozen=True)
class PatternedRun:
    """A text run dense and under a pattern. kept_mass (L,H): each head's share of its dense weight that the pattern
    keeps (a mask: the dense weights on the keys it allows, mean over queries; a kernel: Σ_j min(dense, kernel));
    layer_change (L,): ‖h_l − h_l^dense‖ / ‖h_l^dense‖ of each layer's output; last_hidden (T,D) the patterned
    run's final hidden states; next_kl and top1_agrees (a decoder with a language-model head, else None): KL(dense ‖
    patterned) of the next piece's distribution after the text, and whether their likeliest pieces agree."""

    model: str
    tokens: tuple[str, ...]
    pattern: Pattern
    layers: tuple[int, ...]
    allowed: np.ndarray | None  # (T,T) bool, the keys each query sees (None for a kernel)
    kept_mass: np.ndarray  # (L,H)
    layer_change: np.ndarray  # (L,)
    last_hidden: np.ndarray  # (T,D)
    dense: AttentionResult
    patterned: AttentionResult
    next_kl: float | None
    top1_agrees: bool | None

    @property
    def most_changed_head(self) -> tuple[int, int]:
        """(layer, head) whose dense weight the pattern keeps least of."""
        layer, head = np.unravel_index(self.kept_mass.argmin(), self.kept_mass.shape)
        return int(layer), int(head)

    def as_json(self) -> dict:
        return {"model": self.model, "tokens": list(self.tokens), "pattern": self.pattern.spec,
                "layers": list(self.layers), "kept_mass": self.kept_mass.round(6).tolist(),
                "layer_change": self.layer_change.round(6).tolist(), "last_hidden": self.last_hidden.tolist(),
                "next_token_kl": self.next_kl, "top1_agrees": self.top1_agrees}


def check_text_model(model: LoadedModel) -> None:
    if model.arch.image or model.arch.audio or model.encoder_decoder:
        raise InputError("pattern_needs_text_model", N_("Attention patterns apply here to a text encoder or decoder; "
                                                        "{model} reads {kind}, where they are not built."),
                         model=model.name, kind=N_("images") if model.arch.image else N_("audio and text"))


def chosen_layers(model: LoadedModel, layers: Sequence[int] | None) -> tuple[int, ...]:
    chosen = tuple(range(model.n_layers)) if not layers else tuple(sorted(set(layers)))
    wrong = [layer for layer in chosen if not 0 <= layer < model.n_layers]
    if wrong:
        raise InputError("pattern_layer_out_of_range", N_("Layer {layer} does not exist: {model} has layers 0–{last}."),
                         layer=wrong[0], model=model.name, last=model.n_layers - 1)
    return chosen


def kernel_hooks(model: LoadedModel, pattern: Pattern, layers: tuple[int, ...]) -> list:
    """Hooks that keep each chosen layer's queries and keys (after RoPE and QK-norm where the model has them) and
    replace its map by the kernel's."""
    seen: dict[tuple[int, str], Tensor] = {}

    def keep(tensor: Tensor, hook: HookPoint) -> None:
        seen[(hook.layer(), hook.name.rsplit("_", 1)[-1])] = tensor  # (B,T,H|G,Dh) as the hooks show them

    def replace(probs: Tensor, hook: HookPoint) -> Tensor:  # (B,H,T,S)
        q = seen[(hook.layer(), "q")].transpose(1, 2)  # (B,H,T,Dh)
        k = repeat_kv(seen[(hook.layer(), "k")].transpose(1, 2), q.shape[1])  # (B,H,S,Dh)
        own = model.layers[hook.layer()].attention.scale
        return kernel_map(pattern, q, k, own if own is not None else q.shape[-1] ** -0.5, model.arch.causal)

    rotated = model.arch.rotary or any(w.attention.q_norm is not None for w in model.layers)
    names = ("hook_rot_q", "hook_rot_k") if rotated else ("hook_q", "hook_k")
    hooks = []
    for layer in layers:
        hooks += [(f"blocks.{layer}.attn.{name}", Reader(keep)) for name in names]
        hooks.append((f"blocks.{layer}.attn.hook_pattern", replace))
    return hooks


def kept_mass(dense: AttentionResult, patterned: AttentionResult, allowed: Tensor | None) -> np.ndarray:
    """(L,H): the dense weight inside the pattern (a mask), or the overlap Σ_j min(dense, kernel) (a kernel)."""
    maps = dense.text_maps(0)  # (L,H,T,T)
    if allowed is not None:
        return (maps * allowed).sum(-1).mean(-1).numpy()
    return torch.minimum(maps, patterned.text_maps(0)).sum(-1).mean(-1).numpy()


def next_piece(model: LoadedModel, dense: AttentionResult, patterned: AttentionResult) -> tuple[float | None,
                                                                                                  bool | None]:
    """A decoder's next piece after the text, dense against patterned: KL(dense ‖ patterned) and top-1 agreement."""
    from mha_core.analysis.lm.head import lm_logits, predicts_next

    if not predicts_next(model):
        return None, None
    dense_log, patterned_log = (torch.log_softmax(lm_logits(model, r.hidden_states[-1][0, -1]).double(), -1)
                                for r in (dense, patterned))  # (V,)
    kl = float((dense_log.exp() * (dense_log - patterned_log)).sum())
    return kl, bool(dense_log.argmax() == patterned_log.argmax())


@torch.inference_mode()
def with_pattern(model: LoadedModel, text: str, pattern: str | Pattern, layers: Sequence[int] | None = None,
                 path: str = AUTO) -> PatternedRun:
    """`text` run dense and under `pattern` (a spec, patterns.py) in `layers` (default: every layer); kernels run on
    the explicit path, masks on `path`."""
    check_text_model(model)
    pattern = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    chosen = chosen_layers(model, layers)
    dense = run(model, text, EXPLICIT)
    n = dense.batch.input_ids.shape[1]
    check_fits(pattern, n)
    if pattern.masked:
        allowed = allowed_keys(pattern, n, model.arch.causal)
        patterned = run(model, text, path, allowed=AllowedKeys(allowed.to(model.device), chosen))
    else:
        allowed = None
        patterned = run(model, text, EXPLICIT, hooks=hooks_of(kernel_hooks(model, pattern, chosen)))
    states = [(h[0].double(), d[0].double()) for h, d in zip(patterned.hidden_states[1:], dense.hidden_states[1:],
                                                              strict=True)]
    change = np.array([float((h - d).norm() / d.norm()) for h, d in states])
    kl, agrees = next_piece(model, dense, patterned) if model.arch.causal else (None, None)
    return PatternedRun(model.name, tuple(dense.labels[0]), pattern, chosen,
                        None if allowed is None else allowed.numpy(), kept_mass(dense, patterned, allowed), change,
                        patterned.hidden_states[-1][0].float().numpy(), dense, patterned, kl, agrees)


@dataclass(frozen=True)
class CorefAnswer:
    """An encoder's pronoun → antecedent under a pattern: in the head whose dense preference is clearest (layer,
    head), the candidate it prefers dense (`before`) and patterned (`after`); `kept` of `total` heads prefer the same
    candidate in both runs."""

    pronoun: str
    candidates: tuple[str, str]
    layer: int
    head: int
    before: str
    after: str
    kept: int
    total: int


def pronoun_and_candidates(text: str) -> tuple[list, int, list[int]] | None:
    """The text's words, its first pronoun and the two nouns before it (spaCy, as the Coreference page picks them);
    None when it has no pronoun with two nouns before it."""
    from mha_core.analysis.coref.sentence import candidates_before, default_pronoun, sentence_words

    words = sentence_words(text)
    pronoun = default_pronoun(words)
    candidates = candidates_before(words, pronoun)[:2] if pronoun is not None else []
    return (words, pronoun, candidates) if len(candidates) == 2 else None


def coref_answer(run: PatternedRun, text: str) -> CorefAnswer | None:
    """The text's first pronoun with two nouns before it (the seeds' it → animal), dense and patterned; None when the
    text has none (an InspectorError when a word lies beyond the model's cut)."""
    from mha_core.analysis.coref.sentence import antecedent_scores

    found = pronoun_and_candidates(text)
    if found is None:
        return None
    words, pronoun, candidates = found
    dense, patterned = (antecedent_scores(r, 0, words, pronoun, candidates).scores for r in (run.dense,
                                                                                            run.patterned))  # (2,L,H)
    margin = dense[0] - dense[1]  # (L,H)
    layer, head = np.unravel_index(np.abs(margin).argmax(), margin.shape)
    names = tuple(words[i].text for i in candidates)
    return CorefAnswer(words[pronoun].text, names, int(layer), int(head), names[int(dense[:, layer, head].argmax())],
                       names[int(patterned[:, layer, head].argmax())],
                       int(((patterned[0] > patterned[1]) == (dense[0] > dense[1])).sum()), int(margin.size))
