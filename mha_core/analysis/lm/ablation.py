"""Head ablation and its measured effect on the model's output.

A head is removed by changing its output before W_O: set to zero ("zero"), or replaced by its mean over the
text's positions ("mean"). The effect is measured downstream:
- "embedding" (encoders such as all-MiniLM-L6-v2, a sentence-embedding model): the cosine distance
  1 - cos between the ablated and the original sentence embedding (mean over tokens, L2-normalised);
- "loss" (decoders with a language-model head, tied or separate): the change in mean next-token loss;
- "target": the change in log-probability of `target` as the continuation after `position`: a target of
  several pieces is scored whole, the sum of its pieces' log-probabilities, each after the ones before it;
- "coref" (any model): the change of the coreference margin in the last layer's best head: attention from the
  pronoun to the first candidate noun before it minus attention to the second (as on the Coreference page),
  in the last-layer head where that margin is largest in the unablated model.

All single-head ablations at once: ablating a head of layer l leaves the layers below l unchanged, so a variant
starts at layer l from the original's input there (one pass of the original keeps every layer's input). The
variants run in layer-major chunks as large as the memory budget allows (budget.py), a chunk's batch growing by
the variants of each layer it reaches; logits are made only where the measure reads them, in position blocks.

Shapes: L layers, H heads, T tokens, D d_model, V vocabulary, N variants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.heads.roles import ranked_heads
from mha_core.analysis.lm.choices import MEAN, MODES, ZERO  # noqa: F401 -- named without torch (the cli's arguments)
from mha_core.analysis.lm.head import check_next_piece_head
from mha_core.analysis.lm.measures import (
    MEASURES,
    Scorer,
    coref_probe,
    default_measure,
)
from mha_core.engine.batching import Progress
from mha_core.engine.budget import (
    check_budget,
    element_size,
    layer_work_bytes,
    planned_bytes,
    release_freed_memory,
    rows_within,
)
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import HeadsEdit, final_norm, last_output, layer_outputs, prepare, variant_outputs
from mha_core.engine.hooks import HookPoint, hooks_of, is_point
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch, ids_batch, readable_pieces, tokenize
from mha_core.i18n import Worded
from mha_core.messages import N_

STRONGEST_SHOWN = 8  # heads listed under the grid


@dataclass(frozen=True)
class AblationGrid(Drawable):
    measure: str
    mode: str
    effects: np.ndarray  # (L,H) the measure's change when that head alone is ablated
    original: float  # the unablated model's value (0 for the embedding distance)
    target_pieces: tuple[str, ...] = ()  # target measure: the pieces whose log-probabilities are summed

    def strongest(self, k: int = STRONGEST_SHOWN) -> list[tuple[int, int]]:
        """The k heads whose ablation changes the measure most, either way."""
        return ranked_heads(np.abs(self.effects), k)

    def as_json(self, model_name: str) -> dict:
        """The grid as the CLI's `ablate --json` and the page's download both write it."""
        return {"measure": self.measure, "mode": self.mode, "original": self.original, "model": model_name,
                "target_pieces": list(self.target_pieces), "effects": self.effects.astype("float64").round(8).tolist()}


@dataclass(frozen=True)
class OriginalPass:
    """The unablated text, layer by layer: what every variant starts from."""

    inputs: tuple[Tensor, ...]  # L+1 x (1,T,D): layer l's input (the last: the last layer's output, before the
    #                             final norm)
    means: tuple[Tensor, ...]  # L x (1,1,H,Dh): each head's output averaged over the positions (mean-ablation)
    last_maps: Tensor  # (1,H,T,T) the last layer's attention
    bias: Tensor | None  # (1,1,T,T) or None
    rope: tuple[Tensor, Tensor] | None


@torch.inference_mode()
def original_pass(model: LoadedModel, batch: TokenBatch) -> OriginalPass:
    """One explicit pass that keeps each layer's input and head means (read at blocks.{l}.attn.hook_z), never all
    the maps."""
    x, bias, rope = prepare(model, batch)  # (1,T,D)
    inputs, means = [x], []

    def record(z: Tensor, hook: HookPoint) -> None:  # (1,T,H,Dh)
        means.append(z.mean(dim=1, keepdim=True))

    last = None  # only the last layer's maps are kept
    for output, attn in layer_outputs(model, x, bias, rope, hooks=hooks_of([(is_point("attn.hook_z"), record)])):
        inputs.append(output)
        last = attn
    if last is None:
        raise InputError('ablation_no_layers', N_('{name} has no layers to ablate.'), name=model.name)
    return OriginalPass(tuple(inputs), tuple(means), last.probs, bias, rope)


def head_means(model: LoadedModel, batch: TokenBatch) -> tuple[Tensor, ...]:
    """Each layer's heads' outputs averaged over the text's positions: L x (1,1,H,Dh) (for mean-ablation)."""
    return original_pass(model, batch).means


def make_edit(removed: Tensor, replacement: Tensor | None) -> HeadsEdit:
    """An edit of blocks.{l}.attn.hook_z: removed (N,H) bool: which heads each variant loses; replacement
    (1,1,H,Dh) or None (zero)."""
    keep = (~removed).to(torch.float32)[:, None, :, None]  # (N,1,H,1)

    def edit(z: Tensor) -> Tensor:  # (N,T,H,Dh)
        ablated = z * keep
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
    edits = [make_edit(removed[layer], means[layer]) for layer in range(model.n_layers)]
    hooks = hooks_of([(is_point("attn.hook_z"), lambda z, hook: edits[hook.layer()](z))])
    x, attn = last_output(layer_outputs(model, x, bias, rope, hooks=hooks))
    return final_norm(model, x), attn.probs


def final_states(model: LoadedModel, batch: TokenBatch, removed: Sequence[Tensor], mode: str) -> Tensor:
    """The last hidden states (N,T,D) of N variants (see run_variants)."""
    return run_variants(model, batch, removed, mode)[0]


@dataclass(frozen=True)
class GridPlan:
    rows: int  # variants run together
    free_bytes: int  # what is left of the budget for the measure's logits


def grid_plan(model: LoadedModel, tokens: int) -> GridPlan:
    """Chunk size from the budget: the original pass (every layer's input, one layer's work, the last maps) is
    reserved; each variant row holds its states and one layer's work. Refuses a text that fits no row."""
    e = element_size(model)
    reserved = ((model.n_layers + 1) * tokens * model.d_model + 2 * model.n_heads * tokens * tokens) * e
    reserved += layer_work_bytes(model, 1, tokens)
    per_row = layer_work_bytes(model, 1, tokens) + 2 * tokens * model.d_model * e
    rows = rows_within(per_row, reserved)
    if rows == 0:
        check_budget(reserved + per_row, Worded(N_("Ablating the heads of a text of {tokens:,} pieces"), tokens=tokens),
                     Worded(N_("use a shorter text")))
    rows = min(rows, model.n_layers * model.n_heads)
    return GridPlan(rows, planned_bytes() - reserved - rows * tokens * model.d_model * e)


def check_choice(mode: str, measure: str, target: str | None, position: int | None) -> None:
    if mode not in MODES:
        raise InputError("unknown_ablation_mode", N_("Unknown mode {mode!r}: choose zero or mean."), mode=mode)
    if measure not in MEASURES:
        raise InputError(
            "unknown_measure",
            N_("Unknown measure {measure!r}: choose {measures}."),
            measure=measure,
            measures=", ".join(MEASURES),
        )
    if measure == "target" and target is None:
        raise InputError(
            "target_missing", N_("The target measure needs a target token (and optionally a position).")
        )
    if measure != "target" and (target is not None or position is not None):
        raise InputError(
            "target_with_other_measure",
            N_("A target and a position apply only to the target measure, not to {measure!r}."),
            measure=measure,
        )


def prepared(
    model: LoadedModel, text: str, mode: str, measure: str | None, target: str | None, position: int | None
) -> tuple[str, TokenBatch, tuple[tuple[int, int], ...]]:
    """(measure, the batch to run, the (position, token) pairs a target measure scores). A target of several
    pieces is scored as a continuation: the text up to `position` followed by the target's pieces but the last."""
    measure = measure or default_measure(model)
    check_choice(mode, measure, target, position)
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    if measure != "target":
        return measure, batch, ()
    return measure, *continuation(model, batch, target, position)


def continuation(
    model: LoadedModel, batch: TokenBatch, target: str, position: int | None
) -> tuple[TokenBatch, tuple[tuple[int, int], ...]]:
    check_next_piece_head(model)
    pieces = model.tokenizer(target, add_special_tokens=False)["input_ids"]
    if not pieces:
        raise InputError("target_empty", N_("The target token is empty."))
    n = batch.input_ids.shape[1]
    position = n - 1 if position is None else position
    if not 0 <= position < n:
        raise InputError(
            "position_out_of_range", N_("The position must be from 0 to {n} (the text has {n2} tokens)."), n=n - 1, n2=n
        )
    if position + len(pieces) > model.max_length:
        raise InputError(
            "target_past_limit",
            N_("The target's {pieces} pieces after position {position} go past the model's {max_length} pieces."),
            pieces=len(pieces),
            position=position,
            max_length=model.max_length,
        )
    # A decoder's prediction at `position` reads nothing after it: the text is cut there, the target follows.
    ids = batch.input_ids[0, : position + 1].tolist() + pieces[:-1]
    special = [w is None for w in batch.word_ids[0][: position + 1]] + [False] * (len(pieces) - 1)
    scored = tuple((position + i, token) for i, token in enumerate(pieces))
    return ids_batch(model.tokenizer, [ids], [special]), scored


@torch.inference_mode()
def ablation_grid(
    model: LoadedModel,
    text: str,
    mode: str = ZERO,
    measure: str | None = None,
    target: str | None = None,
    position: int | None = None,
    progress: Progress | None = None,
) -> AblationGrid:
    """The effect of ablating each head alone, every (layer, head), in chunks that fit the memory budget.
    `progress(done, total)` is called after each chunk (it may raise to cancel)."""
    measure, batch, scored = prepared(model, text, mode, measure, target, position)
    plan = grid_plan(model, batch.input_ids.shape[1])
    original = original_pass(model, batch)
    probe = coref_probe(batch, original.last_maps) if measure == "coref" else None
    scorer = Scorer(model, measure, batch.input_ids[0], scored, probe, plan.free_bytes)
    base = scorer.values(final_norm(model, original.inputs[-1]), original.last_maps, None)
    release_freed_memory()
    variants = [(layer, head) for layer in range(model.n_layers) for head in range(model.n_heads)]
    effects = []
    for start in range(0, len(variants), plan.rows):
        check = (lambda done=start: progress(done, len(variants))) if progress else None  # cancel within a layer
        states, last_maps = run_chunk(model, original, variants[start : start + plan.rows], mode, check)
        effects.append(scorer.values(states, last_maps, base) - (0.0 if measure == "embedding" else base))
        del states, last_maps
        release_freed_memory()
        if progress:
            progress(min(start + plan.rows, len(variants)), len(variants))
    original_value = 0.0 if measure == "embedding" else float(base[0])
    return AblationGrid(
        measure,
        mode,
        torch.cat(effects).reshape(model.n_layers, model.n_heads).numpy(),
        original_value,
        scored_pieces(model, scored),
    )


def scored_pieces(model: LoadedModel, scored: Sequence[tuple[int, int]]) -> tuple[str, ...]:
    ids = [token for _, token in scored]
    return readable_pieces(model.tokenizer, ids, model.tokenizer.convert_ids_to_tokens(ids)) if ids else ()


def run_chunk(
    model: LoadedModel, original: OriginalPass, chunk: Sequence[tuple[int, int]], mode: str,
    check: Callable[[], None] | None = None,
) -> tuple[Tensor, Tensor]:
    """Variants that each lose one head, layer-major; a variant joins the batch at its head's layer with the
    original's input there (the layers below are the original's). Returns final states (n,T,D) and the last
    layer's maps (n,H,T,T)."""

    def edit_of(layer: int, n: int, rows: Tensor, heads: Tensor) -> HeadsEdit:
        removed = torch.zeros(n, model.n_heads, dtype=torch.bool)  # (rows so far, H)
        removed[rows, heads] = True
        return make_edit(removed, original.means[layer] if mode == MEAN else None)

    x, attn = variant_outputs(
        model,
        chunk,
        original.bias,
        original.rope,
        lambda layer, heads: original.inputs[layer].expand(len(heads), -1, -1),
        edit_of,
        check,
    )
    states, last_maps = final_norm(model, x), attn.probs
    del x, attn
    release_freed_memory()
    return states, last_maps


@torch.inference_mode()
def ablate_heads(
    model: LoadedModel,
    text: str,
    heads: Sequence[tuple[int, int]],
    mode: str = ZERO,
    measure: str | None = None,
    target: str | None = None,
    position: int | None = None,
) -> float:
    """The joint effect of ablating `heads` together (one run beside the unablated text)."""
    measure, batch, scored = prepared(model, text, mode, measure, target, position)
    plan = grid_plan(model, batch.input_ids.shape[1])
    removed = [torch.zeros(2, model.n_heads, dtype=torch.bool) for _ in model.layers]  # row 0: nothing removed
    for layer, head in heads:
        removed[layer][1, head] = True
    states, last_maps = run_variants(model, batch, removed, mode)
    probe = coref_probe(batch, last_maps[:1]) if measure == "coref" else None
    scorer = Scorer(model, measure, batch.input_ids[0], scored, probe, plan.free_bytes)
    base = scorer.values(states[:1], last_maps[:1], None)
    value = scorer.values(states[1:], last_maps[1:], base)
    return float(value[0] if measure == "embedding" else value[0] - base[0])
