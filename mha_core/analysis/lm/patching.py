"""Activation patching on a minimal pair (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda 2024): run the
corrupted text, put back one piece of the clean run (a head's output, or the residual stream at one layer and
position), and read how much of the clean behaviour returns.

Metric: logit(answer) - logit(wrong) at the last piece for a model with a language-model head; otherwise the
coreference margin of the pronoun (as the ablation's "coref" measure: in the clean run's last-layer head where
that margin is largest, attention from the pronoun to the first candidate minus the second). Grids:
- heads: one head's output (its context vector before W_O, every position) put back: (L,H);
- residual: the input of layer l at position t put back: (L,T);
- head: one chosen head's output at one position put back: (T,).
Grids are computed in batched layer passes, like the ablation grid: a variant that changes layer l joins the batch
at layer l (the layers below are the corrupted run's, computed once).

Shapes: L layers, H heads, T pieces, D d_model, Dh head dim, n variants in a chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from mha_core.analysis.coref.sentence import Word
from mha_core.analysis.heads.roles import head_label
from mha_core.analysis.lm.choices import HEAD, HEADS, RESIDUAL, WHAT  # noqa: F401 -- named without torch
from mha_core.analysis.lm.head import check_lm_head, chosen_position, has_lm_head, token_id
from mha_core.analysis.lm.measures import CorefProbe, coref_margins, coref_probe
from mha_core.analysis.lm.predict import Stream, residual_stream
from mha_core.engine.batching import Progress
from mha_core.engine.budget import check_budget, element_size, layer_work_bytes, release_freed_memory, rows_within
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import EditOf, HeadsEdit, Join, final_norm, prepare, variant_outputs
from mha_core.engine.heads import model_head
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import json_floats
from mha_core.engine.tokens import InputError
from mha_core.i18n import Worded, tr
from mha_core.messages import N_

LOGIT_DIFF, COREF_MARGIN = "logit_diff", "coref_margin"
MIN_GAP = {LOGIT_DIFF: 0.5, COREF_MARGIN: 0.05}  # clean - corrupted below this: shares of the gap are noise


@dataclass(frozen=True)
class Metric:
    """What a patched run is scored by: `read` maps the last layer's outputs (n,T,D) and maps (n,H,T,T) to (n,)."""

    name: str  # LOGIT_DIFF or COREF_MARGIN
    read: Callable[[Tensor, Tensor], Tensor]
    words: tuple[str, str]  # answer and wrong piece, or the two candidate words
    probe: CorefProbe | None = None
    position: int | None = None  # logit_diff: the piece whose prediction is read

    def of(self, stream: Stream) -> float:
        return float(self.read(stream.inputs[-1][None].float(), stream.last_maps[None])[0])


@dataclass(frozen=True)
class PatchGrid(Drawable):
    what: str  # heads: (L,H); residual: (L,T); head: (T,)
    metric: str  # LOGIT_DIFF or COREF_MARGIN
    answer: str  # the answer piece, or the candidate the pronoun should mean in the clean text
    wrong: str
    clean: float  # the metric on the clean text
    corrupted: float  # ... on the corrupted text
    effects: np.ndarray  # (L,H), (L,T) or (T,): the metric with that one piece of the clean run put back
    tokens: tuple[str, ...]  # T pieces of the corrupted text
    head: tuple[int, int] | None = None  # (layer, head) of what=head
    probe_head: int | None = None  # coref_margin: the last-layer head whose margin is read
    pronoun: str | None = None  # coref_margin: the word whose attention is read
    position: int | None = None  # logit_diff: the piece whose prediction is read
    left_out: int = 0  # pieces of texts over the model's limit left out before the ones read (predict.Stream)

    @property
    def decisive(self) -> bool:
        """Whether the two texts differ enough in the metric for shares of the gap to mean something."""
        return abs(self.clean - self.corrupted) >= MIN_GAP[self.metric]

    @property
    def shown(self) -> np.ndarray:
        """What a page draws and ranks heads by: the share put back where the gap is decisive, else the change from
        the corrupted value (a share of a tiny gap is noise)."""
        return self.recovered if self.decisive else self.effects - self.corrupted

    @property
    def shown_label(self) -> str:
        return N_("share put back") if self.decisive else N_("change from the corrupted text")

    def described(self, n_layers: int) -> str:
        """One sentence on what the numbers are, with the clean and corrupted values."""
        if self.metric == LOGIT_DIFF:
            measure = tr("logit('{answer}') − logit('{wrong}') at piece {position} ('{piece}')", answer=self.answer,
                         wrong=self.wrong, position=self.position, piece=self.tokens[self.position])
        else:
            measure = tr("the coreference margin: attention from '{pronoun}' to '{answer}' minus to '{wrong}' in "
                         "{head}, the last layer's head where it is largest", pronoun=self.pronoun,
                         answer=self.answer, wrong=self.wrong, head=head_label(n_layers - 1, self.probe_head))
        note = "" if self.decisive else tr(" The gap is under {gap}: the model barely tells the texts apart, so shares "
                                           "of it would be noise; the grid shows the change from the corrupted value.",
                                           gap=MIN_GAP[self.metric])
        if self.metric == COREF_MARGIN and self.what != RESIDUAL:
            note += tr(" The last layer's heads cannot move the margin: it is read from that layer's own attention, "
                       "which comes before their outputs.")
        return tr("Clean text: {clean:.3f}; corrupted text: {corrupted:.3f} ({measure}).", clean=self.clean,
                  corrupted=self.corrupted, measure=measure) + note

    @property
    def recovered(self) -> np.ndarray:
        """(patched - corrupted) / (clean - corrupted): 1 = the clean behaviour fully back, 0 = no change."""
        gap = self.clean - self.corrupted
        return (self.effects - self.corrupted) / gap if abs(gap) > 1e-9 else np.zeros_like(self.effects)

    def as_json(self, model_name: str) -> dict:
        extra = {"head": list(self.head)} if self.head is not None else {}
        if self.probe_head is not None:
            extra["probe_head"] = [-1, self.probe_head]  # in the last layer
        if self.position is not None:
            extra["position"] = self.position
        extra["left_out"] = self.left_out
        return {"model": model_name, "metric": self.metric, "what": self.what, "answer": self.answer,
                "wrong": self.wrong, "clean": round(self.clean, 6), "corrupted": round(self.corrupted, 6),
                "effects": json_floats(self.effects), "tokens": list(self.tokens), **extra}


def logit_diff_metric(model: LoadedModel, clean: Stream, answer: str | None, wrong: str | None) -> Metric:
    """logit(answer) - logit(wrong) where the model predicts: the last piece, or a masked-LM head's mask."""
    head = check_lm_head(model)
    if answer is None or wrong is None:
        raise InputError(
            "patching_needs_answer_and_wrong",
            N_("Patching a model with a language-model head reads logit(answer) - logit(wrong): name both pieces."),
        )
    ids = torch.tensor([token_id(model, answer), token_id(model, wrong)])
    p = chosen_position(model, clean.batch, None)

    def read(states: Tensor, _: Tensor) -> Tensor:  # (n,T,D) -> (n,)
        logits = head(final_norm(model, states[:, p]), ids)  # (n,2)
        return logits[:, 0] - logits[:, 1]

    return Metric(LOGIT_DIFF, read, (answer, wrong), position=p)


def coref_metric(
    model: LoadedModel, clean: Stream, answer: str | None, wrong: str | None, chosen: Sequence[Word] | None = None
) -> Metric:
    """The coreference margin, read where the clean run puts it: its pronoun and two candidates (`chosen`, else the
    first pronoun with two nouns before it) and its best last-layer head."""
    if answer is not None or wrong is not None:
        raise InputError(
            "patching_needs_coref_words",
            N_(
                "{name} has no language-model head: patching reads the pronoun's coreference margin instead of logits, "
                "so it takes no answer or wrong piece."
            ),
            name=model.name,
        )
    probe = coref_probe(clean.batch, clean.last_maps[None], chosen)
    return Metric(COREF_MARGIN, lambda _, maps: coref_margins(maps.float(), probe), probe.words[1:], probe)


def metric_for(
    model: LoadedModel, clean: Stream, answer: str | None, wrong: str | None, coref: Sequence[Word] | None
) -> Metric:
    return (
        logit_diff_metric(model, clean, answer, wrong)
        if has_lm_head(model)
        else coref_metric(model, clean, answer, wrong, coref)
    )


def pair_streams(model: LoadedModel, clean: str, corrupted: str) -> tuple[Stream, Stream]:
    first, second = residual_stream(model, clean), residual_stream(model, corrupted)
    n1, n2 = len(first.tokens), len(second.tokens)
    if n1 != n2:
        raise InputError(
            "patching_lengths_differ",
            N_(
                "The clean text has {n1} pieces and the corrupted text {n2}: patching puts back pieces position by "
                "position, so both need the same number."
            ),
            n1=n1,
            n2=n2,
        )
    return first, second


def chunk_rows(model: LoadedModel, tokens: int, reserved: int = 0) -> int:
    """Variants run together within the memory budget (each holds its stream and one layer's work), after
    `reserved` bytes (the two texts' streams); a budget too small for one row is refused before any work."""
    per_row = layer_work_bytes(model, 1, tokens) + 2 * tokens * model.d_model * element_size(model)
    rows = rows_within(per_row, reserved)
    if rows < 1:
        check_budget(reserved + per_row, Worded(N_("Patching {tokens:,} pieces"), tokens=tokens),
                     Worded(N_("use shorter texts")))
    return max(1, rows)


def stream_bytes(stream: Stream) -> int:
    """What one text's residual stream keeps (every layer's input, heads' outputs, attention output, last maps)."""
    tensors = [*stream.inputs, *stream.contexts, *stream.attn_out, stream.last_maps]
    return sum(t.numel() * t.element_size() for t in tensors)


def head_edit(clean: Stream, layer: int, rows: Tensor, heads: Tensor) -> HeadsEdit:
    """At blocks.{layer}.attn.hook_z, rows `rows` of the batch get head heads[i]'s clean output back, at every
    position."""

    def edit(z: Tensor) -> Tensor:  # (n,T,H,Dh)
        patched = z.clone()
        patched[rows, :, heads] = clean.contexts[layer][heads].to(z.dtype)
        return patched

    return edit


def position_edit(clean: Stream, layer: int, head: int, rows: Tensor, positions: Tensor) -> HeadsEdit:
    """At blocks.{layer}.attn.hook_z, rows `rows` of the batch get `head`'s clean output back at their own position
    only."""

    def edit(z: Tensor) -> Tensor:  # (n,T,H,Dh)
        patched = z.clone()
        patched[rows, positions, head] = clean.contexts[layer][head, positions].to(z.dtype)
        return patched

    return edit


def residual_join(clean: Stream, corrupted: Stream, layer: int, positions: Tensor) -> Tensor:
    """(n,T,D) the corrupted input of `layer`, each row with the clean input at its own position."""
    x = corrupted.inputs[layer][None].expand(len(positions), -1, -1).clone()
    x[torch.arange(len(positions)), positions] = clean.inputs[layer][positions]
    return x


def check_head(model: LoadedModel, head: tuple[int, int] | None) -> tuple[int, int]:
    if head is None:
        raise InputError(
            "patching_head_missing",
            N_("Patching one head position by position needs the head: its layer and head."),
        )
    return model_head(model, *head)


def planned_variants(
    model: LoadedModel, first: Stream, second: Stream, what: str, head: tuple[int, int] | None
) -> tuple[list[tuple[int, int]], Join, EditOf]:
    """The variants (layer, unit) of a grid, how each enters its layer and how it edits the heads' outputs there."""
    corrupted_input = lambda layer, units: second.inputs[layer][None].expand(len(units), -1, -1)  # noqa: E731
    n = len(second.tokens)
    if what == HEADS:
        return (
            [(layer, h) for layer in range(model.n_layers) for h in range(model.n_heads)],
            corrupted_input,
            lambda layer, _, rows, heads: head_edit(first, layer, rows, heads),
        )
    if what == RESIDUAL:
        return (
            [(layer, t) for layer in range(model.n_layers) for t in range(n)],
            lambda layer, positions: residual_join(first, second, layer, positions),
            lambda *_: None,
        )
    layer, h = check_head(model, head)
    return (
        [(layer, t) for t in range(n)],
        corrupted_input,
        lambda layer, _, rows, positions: position_edit(first, layer, h, rows, positions),
    )


@torch.inference_mode()
def patch_grid(
    model: LoadedModel,
    clean: str,
    corrupted: str,
    answer: str | None = None,
    wrong: str | None = None,
    what: str = HEADS,
    head: tuple[int, int] | None = None,
    coref: Sequence[Word] | None = None,
    progress: Progress | None = None,
) -> PatchGrid:
    """The metric with each head's output (what=heads), each layer's input at each position (what=residual) or one
    head's output at each position (what=head) of the corrupted run replaced by its clean value. `coref`: the
    pronoun and two candidates of the clean text whose margin a model without a language-model head is read by."""
    if what not in WHAT:
        raise InputError(
            "unknown_patch", N_("Unknown patch {what!r}: choose {what2}."), what=what, what2=", ".join(WHAT)
        )
    if what == HEAD:
        check_head(model, head)
    first, second = pair_streams(model, clean, corrupted)
    metric = metric_for(model, first, answer, wrong, coref)
    _, bias, rope = prepare(model, second.batch)
    variants, join, edit_of = planned_variants(model, first, second, what, head)
    rows, effects = chunk_rows(model, len(second.tokens), stream_bytes(first) + stream_bytes(second)), []
    for start in range(0, len(variants), rows):
        check = (lambda done=start: progress(done, len(variants))) if progress else None  # cancel within a layer
        x, attn = variant_outputs(model, variants[start : start + rows], bias, rope, join, edit_of, check)
        effects.append(metric.read(x.float(), attn.probs))
        del x, attn
        release_freed_memory()  # glibc keeps a freed chunk's blocks otherwise: the next chunk would add to them
        if progress:
            progress(min(start + rows, len(variants)), len(variants))
    shape = (len(second.tokens),) if what == HEAD else (model.n_layers, len(variants) // model.n_layers)
    return PatchGrid(
        what,
        metric.name,
        *metric.words,
        metric.of(first),
        metric.of(second),
        torch.cat(effects).reshape(shape).numpy(),
        second.tokens,
        head if what == HEAD else None,
        *((metric.probe.head, metric.probe.words[0]) if metric.probe is not None else (None, None)),
        metric.position,
        second.left_out,
    )
