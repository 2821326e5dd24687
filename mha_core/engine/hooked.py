"""TransformerLens's notebook verbs on any model of the list: `run_with_hooks` and `run_with_cache`.

    result = run_with_hooks(model, "The animal ...", fwd_hooks=[("blocks.3.attn.hook_z", zero_head_5)])
    result, cache = run_with_cache(model, "The animal ...")
    cache["blocks.3.attn.hook_pattern"]   # (B,H,T,T), or cache["pattern", 3]

The names and shapes are hooks.py's. A text model reads texts; an image model pictures (Pillow images, files or
bytes) or prepared pixels (B,C,H,W), its points under "vision."; an encoder–decoder a source (texts, or a Whisper
clip) and a `target` its decoder reads, its points under "encoder." and "decoder."; a text or image model (or one
stack of an encoder–decoder) also a TokenBatch, such as a result's (`result.batch.one(b)`: text b again). The result
is the recompute's (AttentionResult, or Seq2SeqResult for an encoder–decoder), on the path asked for.

Refused before any work, each in one sentence (InputError): inputs the model does not read, a `target` for a model
without a decoder, and a hook name (or run_with_cache's names) the model has no point of (hook_names lists them
all; the error names the nearest). A hook's return is checked at its point (hooks.Checked).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from pathlib import Path

from PIL import Image
from torch import Tensor

from mha_core.engine.arguments import refuse_type
from mha_core.engine.attention import AUTO
from mha_core.engine.forward import forward, run
from mha_core.engine.hooks import NO_HOOKS, Checked, HookFn, HookPoint, Hooks, NameFilter, Reader, hooks_of
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.seq2seq.audio import Clip, model_log_mel
from mha_core.engine.seq2seq.forward import check_encoder_decoder, forward_seq2seq, source_targets
from mha_core.engine.seq2seq.frames import frames_batch
from mha_core.engine.tokens import InputError, TextsLike, TokenBatch, tokenize
from mha_core.engine.vision.images import prepare_images, read_image, run_images
from mha_core.messages import N_

ATTENTION_POINTS = ("q", "k", "v", "rot_q", "rot_k", "pattern", "z")  # short names under attn.
Picture = str | bytes | Path | Image.Image
INPUTS = {"text": TextsLike | TokenBatch, "image": Tensor | Picture | Sequence[Picture] | TokenBatch,  # each kind's
          "encoder_decoder": Clip | TokenBatch | TextsLike}  # inputs (a TokenBatch: one a result was computed from)


def act_name(name: str, layer: int, stack: str = "") -> str:
    """TransformerLens's get_act_name: ("pattern", 3) -> "blocks.3.attn.hook_pattern", ("resid_pre", 0) ->
    "blocks.0.hook_resid_pre"; `stack` ("encoder", "decoder", "vision") puts it under that stack."""
    inner = f"attn.hook_{name}" if name in ATTENTION_POINTS else f"hook_{name}"
    return f"{stack + '.' if stack else ''}blocks.{layer}.{inner}"


class ActivationCache(dict):
    """Every hook point's tensor of one run by its name; `cache[name, layer]` (or `[name, layer, stack]`) is
    act_name's shorthand, as in TransformerLens."""

    def __getitem__(self, key: str | tuple) -> Tensor:
        return super().__getitem__(act_name(*key) if isinstance(key, tuple) else key)


def attention_points(prefix: str, rotated: bool) -> list[str]:
    return [f"{prefix}hook_{point}" for point in ATTENTION_POINTS if rotated or not point.startswith("rot_")]


def stack_names(stack: LoadedModel, prefix: str) -> list[str]:
    """Every hook point of one stack, in the order a run passes them (prefix "", "encoder.", "decoder.", "vision.")."""
    names = []
    for layer, weights in enumerate(stack.layers):
        block = f"{prefix}blocks.{layer}."
        names += [f"{block}hook_resid_pre",
                  *attention_points(f"{block}attn.", stack.arch.rotary or weights.attention.q_norm is not None),
                  f"{block}hook_attn_out", f"{block}hook_resid_mid"]
        if weights.cross_attention is not None:
            names += [*attention_points(f"{block}cross_attn.", weights.cross_attention.q_norm is not None),
                      f"{block}hook_cross_attn_out"]
        names += [f"{block}hook_mlp_out", f"{block}hook_resid_post"]
    return [*names, f"{prefix}ln_final.hook_normalized"]


def stacks_of(model: LoadedModel) -> list[tuple[LoadedModel, str]]:
    """Each stack of `model` and the prefix of its points' names."""
    if model.encoder_decoder:
        return [(model, "encoder."), (model.decoder, "decoder.")]
    return [(model, "vision." if model.arch.image else "")]


def hook_names(model: LoadedModel) -> tuple[str, ...]:
    """Every hook point's name of `model` (TransformerLens's `model.hook_dict`), in the order a run passes them."""
    return tuple(name for stack, prefix in stacks_of(model) for name in stack_names(stack, prefix))


def points_pattern(stack: LoadedModel, prefix: str) -> str:
    """A stack's points in a line: "blocks.<0 to 2>.<hook_resid_pre, attn.hook_q, …>, ln_final.hook_normalized"."""
    first = f"{prefix}blocks.0."
    points = [name.removeprefix(first) for name in stack_names(stack, prefix) if name.startswith(first)]
    return (f"{prefix}blocks.<0 to {stack.n_layers - 1}>.<{', '.join(points)}>, "
            f"{prefix}ln_final.hook_normalized")


def check_names(model: LoadedModel, names: Sequence[str]) -> None:
    """Refuse a name `model` has no hook point of, with the nearest names and the pattern of its points."""
    known = hook_names(model)
    points = set(known)
    unknown = [name for name in names if name not in points]
    if unknown:
        raise InputError("hook_point_unknown", N_("{model} has no hook point {name!r} (nearest: {nearest}); its "
                                                  "points are {points}."),
                         model=model.name, name=unknown[0],
                         nearest=", ".join(difflib.get_close_matches(unknown[0], known, n=3, cutoff=0)),
                         points="; ".join(points_pattern(stack, prefix) for stack, prefix in stacks_of(model)))


def pictures(images: object) -> list:
    """Pictures as a list of Pillow images: a file, bytes or an image, or a list of them."""
    items = images if isinstance(images, list | tuple) else [images]
    return [read_image(item) if isinstance(item, bytes | Path | str) else item for item in items]


def check_call(function: str, model: LoadedModel, inputs: object, target: object,
               names: Sequence[NameFilter]) -> None:
    """What is refused before any work (module docstring)."""
    kind = "encoder_decoder" if model.encoder_decoder else "image" if model.arch.image else "text"
    refuse_type(function, "inputs", INPUTS[kind], inputs)
    if target is not None:
        check_encoder_decoder(model)
    check_names(model, [name for name in names if isinstance(name, str)])


def user_hooks(fwd_hooks: Sequence[tuple[NameFilter, HookFn]]) -> list[tuple[NameFilter, HookFn]]:
    return [(name_filter, Checked(fn)) for name_filter, fn in fwd_hooks]


def checked_hooks(model: LoadedModel, fwd_hooks: Sequence[tuple[NameFilter, HookFn]]) -> Hooks:
    """A user's `fwd_hooks` as the Hooks of a run of `model` (generate's and decode's too): a name it has no point of
    refused before any work, each fn's return checked at its point."""
    if not fwd_hooks:
        return NO_HOOKS
    check_names(model, [name for name, _ in fwd_hooks if isinstance(name, str)])
    return hooks_of(user_hooks(fwd_hooks))


def hooked_run(model: LoadedModel, inputs: object, hooks: Hooks, target: str | Sequence[str] | None = None,
               path: str = AUTO) -> object:
    """The recompute of `inputs` (module docstring) with `hooks` on its points."""
    if model.encoder_decoder:
        if target is None:
            raise InputError("target_needed_for_hooks", N_("{model} is an encoder–decoder: give the target its "
                                                           "decoder reads (target=...)."), model=model.name)
        targets = [target] if isinstance(target, str) else list(target)
        if isinstance(inputs, Clip):
            source = frames_batch(model_log_mel(model, inputs))
        else:
            source = inputs if isinstance(inputs, TokenBatch) else tokenize(model.tokenizer, inputs, model.max_length)
        return forward_seq2seq(model, source, source_targets(model, source, targets), path, hooks=hooks)
    stack_hooks = hooks.at("vision") if model.arch.image else hooks
    if isinstance(inputs, TokenBatch):
        return forward(model, inputs, path, hooks=stack_hooks)
    if model.arch.image:
        pixels = inputs if isinstance(inputs, Tensor) else prepare_images(model, pictures(inputs))
        return run_images(model, pixels, path, hooks=stack_hooks)
    return run(model, inputs, path, hooks=hooks)


def run_with_hooks(model: LoadedModel, inputs: object, fwd_hooks: Sequence[tuple[NameFilter, HookFn]] = (),
                   target: str | Sequence[str] | None = None, path: str = AUTO) -> object:
    """The recompute with `fwd_hooks`: (name or name filter, fn(tensor, hook)) pairs; a fn may return a replacement
    for the tensor it is given (or change it in place). Head ablation: zero blocks.{l}.attn.hook_z[:, :, h]."""
    check_call("run_with_hooks", model, inputs, target, [name for name, _ in fwd_hooks])
    return hooked_run(model, inputs, hooks_of(user_hooks(fwd_hooks)), target, path)


def names_filter_of(names_filter: NameFilter | Sequence[str] | None) -> Callable[[str], bool]:
    if names_filter is None:
        return lambda _: True
    if isinstance(names_filter, str):
        return lambda name: name == names_filter
    if callable(names_filter):
        return names_filter
    wanted = set(names_filter)
    return lambda name: name in wanted


def run_with_cache(model: LoadedModel, inputs: object, names_filter: NameFilter | Sequence[str] | None = None,
                   target: str | Sequence[str] | None = None, path: str = AUTO,
                   fwd_hooks: Sequence[tuple[NameFilter, HookFn]] = ()) -> tuple[object, ActivationCache]:
    """The recompute and every hook point's tensor (those `names_filter` keeps: a name, names or a function of the
    name), after any `fwd_hooks` ran there. On the fused path the patterns are rebuilt from the log-sum-exp."""
    kept_names = [names_filter] if isinstance(names_filter, str) else [] if names_filter is None or callable(
        names_filter) else list(names_filter)
    check_call("run_with_cache", model, inputs, target, [*(name for name, _ in fwd_hooks), *kept_names])
    cache = ActivationCache()
    keep = names_filter_of(names_filter)

    def store(tensor: Tensor, hook: HookPoint) -> None:
        dict.__setitem__(cache, hook.name, tensor.detach())

    result = hooked_run(model, inputs, hooks_of([*user_hooks(fwd_hooks), (keep, Reader(store))]), target, path)
    return result, cache
