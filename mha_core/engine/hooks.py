"""Hook points with TransformerLens's names and shapes, so that a probe never widens the layer loop's signature.

Every layer of every family passes its activations through named points; a hook `fn(tensor, hook)` sees one in
TransformerLens's layout and may return a replacement (or change it in place and return None). Names, for a model
of one stack (text models; an image model's stack is `vision.`, an encoder–decoder's `encoder.` and `decoder.`):

    blocks.{l}.hook_resid_pre            (B,T,D)        the layer's input (it may change the batch: variants join)
    blocks.{l}.attn.hook_q               (B,T,H,Dh)     after W_Q, before QK-norm and RoPE
    blocks.{l}.attn.hook_k / hook_v      (B,S,G,Dh)     after W_K / W_V (G key/value heads)
    blocks.{l}.attn.hook_rot_q / rot_k   (B,T,H,Dh)     after QK-norm and RoPE, where the model has them
    blocks.{l}.attn.hook_pattern         (B,H,T,S)      softmax of the scores (fused path: rebuilt from the LSE)
    blocks.{l}.attn.hook_z               (B,T,H,Dh)     each head's output, before W_O
    blocks.{l}.hook_attn_out             (B,T,D)        what attention adds to the stream (after W_O; Gemma: its
                                                        post-norm; post-norm models: before the residual's norm)
    blocks.{l}.hook_resid_mid            (B,T,D)        the stream between attention and the MLP (post-norm: normed)
    blocks.{l}.cross_attn.hook_*         an encoder–decoder's decoder layer: its cross-attention, as attn's
    blocks.{l}.hook_cross_attn_out       (B,T,D)        what cross-attention adds
    blocks.{l}.hook_mlp_out              (B,T,D)        what the MLP adds
    blocks.{l}.hook_resid_post           (B,T,D)        the layer's output
    ln_final.hook_normalized             (B,T,D)        the last layer's output through the final norm

Shapes: B batch, T query positions, S key positions, H query heads, G key/value heads, Dh head dim, D d_model.
Internally heads come before positions (B,H,T,Dh); a point transposes to TransformerLens's (B,T,H,Dh) and back.

A user's hook (run_with_hooks, run_with_cache's fwd_hooks) is Checked: it returns None or a tensor of the shape,
dtype and device it was given, and puts no NaN or infinity into a tensor that had none (InputError naming the
point); an exception of its own passes through unchanged, as in TransformerLens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from mha_core.messages import N_, InputError, Worded

NameFilter = str | Callable[[str], bool]


@dataclass(frozen=True)
class HookPoint:
    """What a hook function is told about where it runs (TransformerLens's HookPoint: `.name`, `.layer()`)."""

    name: str

    def layer(self) -> int:
        """The block's number in the name ("decoder.blocks.3.attn.hook_z" -> 3)."""
        parts = self.name.split(".")
        if "blocks" not in parts:
            raise ValueError(f"{self.name} is not inside a block")
        return int(parts[parts.index("blocks") + 1])


HookFn = Callable[[Tensor, HookPoint], Tensor | None]


class Reader:
    """A hook that only reads (run_with_cache's): a point it reads need not be recomputed from what it returns."""

    def __init__(self, fn: Callable[[Tensor, HookPoint], None]) -> None:
        self.fn = fn

    def __call__(self, tensor: Tensor, hook: HookPoint) -> None:
        self.fn(tensor, hook)


def described_tensor(value: object) -> Worded:
    """What a hook returned, as an error names it: "a tensor of shape (1, 5, 4, 8), torch.float32 on cpu", "a value
    of type str"."""
    if isinstance(value, Tensor):
        layout = "" if value.layout == torch.strided else f" {str(value.layout).removeprefix('torch.')}"
        return Worded(N_("a tensor of shape {shape}, {dtype} on {device}"), shape=tuple(value.shape),
                      dtype=f"{value.dtype}{layout}", device=str(value.device))
    return Worded(N_("a value of type {kind}"), kind=type(value).__name__)


class Checked:
    """A user's hook: what it returns is checked at its point (module docstring); what it raises passes through."""

    def __init__(self, fn: HookFn) -> None:
        self.fn = fn

    def __call__(self, tensor: Tensor, hook: HookPoint) -> Tensor | None:
        was_finite = bool(torch.isfinite(tensor).all())
        replaced = self.fn(tensor, hook)
        if replaced is not None and not (isinstance(replaced, Tensor) and replaced.shape == tensor.shape
                                         and replaced.dtype == tensor.dtype and replaced.device == tensor.device
                                         and replaced.layout == tensor.layout):
            raise InputError("hook_returned_unlike", N_("The hook at {point} returned {returned}; a hook returns None "
                                                        "or {expected}, like the tensor it is given."),
                             point=hook.name, returned=described_tensor(replaced), expected=described_tensor(tensor))
        out = tensor if replaced is None else replaced
        if was_finite and not bool(torch.isfinite(out).all()):
            raise InputError("hook_returned_not_finite", N_("The hook at {point} put {count:,} NaN or infinite values "
                                                            "into a tensor that had none: nothing computed from them "
                                                            "would mean anything."),
                             point=hook.name, count=int((~torch.isfinite(out)).sum()))
        return replaced


def matches(name_filter: NameFilter, name: str) -> bool:
    return name_filter(name) if callable(name_filter) else name_filter == name


@dataclass(frozen=True)
class Hooks:
    """The hooks of one run, and where in the model the layer loop now is (`prefix`: "blocks.3.attn.")."""

    fwd_hooks: tuple[tuple[NameFilter, HookFn], ...] = ()
    prefix: str = ""
    _memo: dict = field(default_factory=dict, compare=False, repr=False)  # name -> its hooks, found once

    def at(self, part: str | int) -> Hooks:
        """The points below `part` ("encoder", "blocks", 3, "attn"): the same hooks, a longer prefix."""
        if not self.fwd_hooks:
            return self
        return Hooks(self.fwd_hooks, f"{self.prefix}{part}.", self._memo)

    def block(self, layer: int) -> Hooks:
        return self.at(f"blocks.{layer}")

    def hooks_of(self, name: str) -> tuple[HookFn, ...]:
        full = self.prefix + name
        if full not in self._memo:
            self._memo[full] = tuple(fn for name_filter, fn in self.fwd_hooks if matches(name_filter, full))
        return self._memo[full]

    def wants(self, name: str) -> bool:
        """Whether any hook runs at `name` (a point that costs work to make is made only then)."""
        return bool(self.fwd_hooks) and bool(self.hooks_of(name))

    def edits(self, name: str) -> bool:
        """Whether a hook at `name` may change it (not only a Reader)."""
        return self.wants(name) and any(not isinstance(fn, Reader) for fn in self.hooks_of(name))

    def __call__(self, name: str, tensor: Tensor, heads_first: bool = False) -> Tensor:
        """`tensor` through the hooks at `name`, each given the one before's result. `heads_first`: the tensor is
        (B,H,T,Dh) here and (B,T,H,Dh) to the hooks."""
        if not self.fwd_hooks or not self.hooks_of(name):
            return tensor
        seen = tensor.transpose(1, 2) if heads_first else tensor
        point = HookPoint(self.prefix + name)
        for fn in self.hooks_of(name):
            replaced = fn(seen, point)
            seen = seen if replaced is None else replaced
        return seen.transpose(1, 2) if heads_first else seen


NO_HOOKS = Hooks()


def hooks_of(fwd_hooks: Sequence[tuple[NameFilter, HookFn]]) -> Hooks:
    return Hooks(tuple((name_filter, fn) for name_filter, fn in fwd_hooks)) if fwd_hooks else NO_HOOKS


def is_point(point: str) -> Callable[[str], bool]:
    """A name filter for `point` ("attn.hook_z", "hook_resid_pre") in every block of a stack (not cross_attn's)."""
    pattern = re.compile(rf"(?:\w+\.)?blocks\.\d+\.{re.escape(point)}")
    return lambda name: pattern.fullmatch(name) is not None
