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

from mha_core.analysis.efficiency.patterns import Pattern, allowed_keys, check_fits, checked_pattern, kernel_map
from mha_core.engine.allowed import AllowedKeys
from mha_core.engine.attention import repeat_kv
from mha_core.engine.budget import budget_bytes, check_budget, forward_bytes
from mha_core.engine.forward import AUTO, EXPLICIT, FUSED, forward, model_path
from mha_core.engine.hooks import HookPoint, Reader, hooks_of
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError, tokenize
from mha_core.i18n import Worded
from mha_core.messages import N_

FLOAT, DOUBLE = 4, 8  # bytes


@dataclass(frozen=True)
class PatternedRun:
    """A text run dense and under a pattern. kept_mass (L,H): each head's share of its dense weight that the pattern
    keeps (a mask: the dense weights on the keys it allows, mean over queries; a kernel: Σ_j min(dense, kernel));
    layer_change (L,): ‖h_l − h_l^dense‖ / ‖h_l^dense‖ of each layer's output; last_hidden (T,D) the patterned
    run's final hidden states; next_kl and top1_agrees (a decoder with a language-model head, else None): KL(dense ‖
    patterned) of the next piece's distribution after the text, and whether their likeliest pieces agree;
    next_pieces: those two pieces."""

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
    next_pieces: tuple[str, str] | None = None  # the likeliest next piece, dense and patterned (a decoder's)

    @property
    def most_changed_head(self) -> tuple[int, int]:
        """(layer, head) whose dense weight the pattern keeps least of."""
        layer, head = np.unravel_index(self.kept_mass.argmin(), self.kept_mass.shape)
        return int(layer), int(head)

    def as_json(self) -> dict:
        return {"model": self.model, "tokens": list(self.tokens), "pattern": self.pattern.spec,
                "layers": list(self.layers), "kept_mass": self.kept_mass.round(6).tolist(),
                "layer_change": self.layer_change.round(6).tolist(), "last_hidden": self.last_hidden.tolist(),
                "next_token_kl": self.next_kl, "top1_agrees": self.top1_agrees,
                "next_pieces": None if self.next_pieces is None else list(self.next_pieces)}


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
    """(L,H): the dense weight inside the pattern (a mask), or the overlap Σ_j min(dense, kernel) (a kernel); one
    layer's maps at a time (never the (L,H,T,T) stacks)."""
    kept = []
    for layer in range(dense.n_layers):
        maps = dense.text_layer_maps(0, layer)  # (H,T,T)
        if allowed is not None:
            kept.append((maps * allowed).sum(-1).mean(-1))
        else:
            kept.append(torch.minimum(maps, patterned.text_layer_maps(0, layer)).sum(-1).mean(-1))
    return torch.stack(kept).numpy()


def next_piece(model: LoadedModel, dense: AttentionResult, patterned: AttentionResult
               ) -> tuple[float | None, bool | None, tuple[str, str] | None]:
    """A decoder's next piece after the text, dense against patterned: KL(dense ‖ patterned), top-1 agreement and
    the two likeliest pieces."""
    from mha_core.analysis.lm.head import lm_logits, predicts_next

    if not model.arch.causal or not predicts_next(model):
        return None, None, None
    dense_log, patterned_log = (torch.log_softmax(lm_logits(model, r.hidden_states[-1][0, -1]).double(), -1)
                                for r in (dense, patterned))  # (V,)
    kl = float((dense_log.exp() * (dense_log - patterned_log)).sum())
    pieces = tuple(model.tokenizer.decode([int(log.argmax())]) for log in (dense_log, patterned_log))
    return kl, bool(dense_log.argmax() == patterned_log.argmax()), pieces


def paths_of(model: LoadedModel, pattern: Pattern, n: int, path: str) -> tuple[str, str]:
    """(dense run's path, patterned run's): `path` resolved for n pieces (AUTO: fused past a few hundred pieces,
    keeping q, k and the log-sum-exp instead of every map), a kernel's run explicit (it replaces the maps)."""
    chosen = model_path(model, path, n)[0]
    return chosen, chosen if pattern.masked else EXPLICIT


def pattern_bytes(model: LoadedModel, pattern: Pattern, n: int, path: str) -> int:
    """with_pattern's peak at n pieces, estimated before any work: the two results (each forward's own estimate,
    its layer's work included), one layer's dense and patterned maps and their product as kept_mass compares them,
    the pattern's (T,T) mask and bias, a kernel's float64 features (up to six (H,T,M) at once) and weights in the
    layer it replaces with the softmax's map it replaces and its float32 copy (SmolLM2 under performer:4096 at 602
    pieces grew 1,564 MB, 2 % over the budget, with four), and on an encoder the (L,H,T,T) maps the pronoun's answer
    reads."""
    dense_path, patterned_path = paths_of(model, pattern, n, path)
    h, square = model.n_heads, n * n
    total = sum(forward_bytes(model, 1, n, keeps_maps=chosen != FUSED) for chosen in (dense_path, patterned_path))
    total += 3 * h * square * FLOAT + (1 + 2 * FLOAT) * square
    if not pattern.masked:
        width = pattern.features or model.head_dim
        total += DOUBLE * h * (3 * square + 6 * n * width + 2 * n * model.head_dim) + 2 * FLOAT * h * square
    if not model.arch.causal:
        total += model.n_layers * h * square * FLOAT
    return total


def longest_fitting(model: LoadedModel, pattern: Pattern, path: str) -> int:
    """The most pieces pattern_bytes lets under the budget (0: none)."""
    low, high = 0, model.max_length + 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if pattern_bytes(model, pattern, middle, path) <= budget_bytes() else (low, middle)
    return low


def check_pattern_budget(model: LoadedModel, pattern: Pattern, n: int, path: str) -> None:
    """Refuse, before any work, a text whose two runs under `pattern` would not fit the memory budget."""
    needed = pattern_bytes(model, pattern, n, path)
    if needed > budget_bytes():
        check_budget(needed, Worded(N_("Running {n:,} pieces dense and under {spec}"), n=n, spec=pattern.spec),
                     Worded(N_("the longest text that fits is {longest:,} pieces"),
                            longest=longest_fitting(model, pattern, path)))


@torch.inference_mode()
def with_pattern(model: LoadedModel, text: str, pattern: str | Pattern, layers: Sequence[int] | None = None,
                 path: str = AUTO) -> PatternedRun:
    """`text` run dense and under `pattern` (a spec, patterns.py) in `layers` (default: every layer): masks on `path`
    (both runs), kernels on the explicit path. Everything is checked, and the memory estimated, before any work."""
    check_text_model(model)
    pattern = checked_pattern(pattern)
    chosen = chosen_layers(model, layers)
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    n = batch.input_ids.shape[1]
    check_fits(pattern, n)
    check_pattern_budget(model, pattern, n, path)
    dense_path, patterned_path = paths_of(model, pattern, n, path)
    dense = forward(model, batch, dense_path)
    if pattern.masked:
        allowed = allowed_keys(pattern, n, model.arch.causal)
        patterned = forward(model, batch, patterned_path, allowed=AllowedKeys(allowed.to(model.device), chosen))
    else:
        allowed = None
        patterned = forward(model, batch, EXPLICIT, hooks=hooks_of(kernel_hooks(model, pattern, chosen)))
    change = np.array([float((h[0].double() - d[0].double()).norm() / d[0].double().norm())
                       for h, d in zip(patterned.hidden_states[1:], dense.hidden_states[1:], strict=True)])
    return PatternedRun(model.name, tuple(dense.labels[0]), pattern, chosen,
                        None if allowed is None else allowed.numpy(), kept_mass(dense, patterned, allowed), change,
                        patterned.hidden_states[-1][0].float().numpy(), dense, patterned,
                        *next_piece(model, dense, patterned))
