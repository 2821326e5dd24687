"""TransformerLens's notebook verbs on any model of the list: `run_with_hooks` and `run_with_cache`.

    result = run_with_hooks(model, "The animal ...", fwd_hooks=[("blocks.3.attn.hook_z", zero_head_5)])
    result, cache = run_with_cache(model, "The animal ...")
    cache["blocks.3.attn.hook_pattern"]   # (B,H,T,T), or cache["pattern", 3]

The names and shapes are hooks.py's. A text model reads texts; an image model pictures (Pillow images, files or
bytes) or prepared pixels (B,C,H,W), its points under "vision."; an encoder–decoder a source (texts, or a Whisper
clip) and a `target` its decoder reads, its points under "encoder." and "decoder.". The result is the recompute's
(AttentionResult, or Seq2SeqResult for an encoder–decoder), on the path asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from torch import Tensor

from mha_core.engine.attention import AUTO
from mha_core.engine.forward import run
from mha_core.engine.hooks import HookFn, HookPoint, Hooks, NameFilter, Reader, hooks_of
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.seq2seq.audio import Clip, model_log_mel
from mha_core.engine.seq2seq.forward import forward_seq2seq, source_targets
from mha_core.engine.seq2seq.frames import frames_batch
from mha_core.engine.tokens import InputError, TokenBatch, tokenize
from mha_core.engine.vision.images import prepare_images, read_image, run_images
from mha_core.messages import N_

ATTENTION_POINTS = ("q", "k", "v", "rot_q", "rot_k", "pattern", "z")  # short names under attn.


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


def pictures(images: object) -> list:
    """Pictures as a list of Pillow images: a file, bytes or an image, or a list of them."""
    items = images if isinstance(images, list | tuple) else [images]
    return [read_image(item) if isinstance(item, bytes | Path | str) else item for item in items]


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
    if model.arch.image:
        pixels = inputs if isinstance(inputs, Tensor) else prepare_images(model, pictures(inputs))
        return run_images(model, pixels, path, hooks=hooks.at("vision"))
    return run(model, inputs, path, hooks=hooks)


def run_with_hooks(model: LoadedModel, inputs: object, fwd_hooks: Sequence[tuple[NameFilter, HookFn]] = (),
                   target: str | Sequence[str] | None = None, path: str = AUTO) -> object:
    """The recompute with `fwd_hooks`: (name or name filter, fn(tensor, hook)) pairs; a fn may return a replacement
    for the tensor it is given (or change it in place). Head ablation: zero blocks.{l}.attn.hook_z[:, :, h]."""
    return hooked_run(model, inputs, hooks_of(fwd_hooks), target, path)


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
    cache = ActivationCache()
    keep = names_filter_of(names_filter)

    def store(tensor: Tensor, hook: HookPoint) -> None:
        dict.__setitem__(cache, hook.name, tensor.detach())

    result = hooked_run(model, inputs, hooks_of([*fwd_hooks, (keep, Reader(store))]), target, path)
    return result, cache
