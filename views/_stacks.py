"""An encoder–decoder on the pages that read one sentence (Heads, Roles, Walkthrough, Predictions): which of its three
kinds of attention the page reads, and the views of those the one-stack machinery does not draw. The sentence is the
source: a text model writes its own target; Whisper hears the sentence spoken (espeak-ng) and writes what it hears.
A text model's encoder self-attention is read by the page itself, as an encoder's (encoder_alone)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import LoadedModel, Seq2SeqResult
from mha_core.analysis.heads.roles import role_labels
from mha_core.analysis.seq2seq.decode import MAX_NEW
from mha_core.analysis.seq2seq.transcribe import Transcript
from mha_core.figures import charts, colours
from mha_core.figures import seq2seq as figures
from mha_core.figures.roles import role_grid_figure
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import seq2seq as computed
from mha_core.serving.computed.seq2seq import KIND_NAMES, KINDS
from mha_core.serving.export import json_text
from mha_core.serving.menu import default_kind
from views._inputs import sampling_settings
from views._long import show_row, show_summaries, show_zoom
from views._state import (
    STACK_KIND,
    answered,
    chart,
    chosen_whole_model,
    narrow_screen,
    plain_chart,
    server,
    waiting,
)
from views._text import literal
from views._visit import choose, head_taps, stop, widget

CAPTIONS = {
    "encoder": N_("The encoder's self-attention: every source piece over every other (S × S), no mask."),
    "decoder": N_("The decoder's self-attention: each target piece over itself and the pieces before it (T × T, "
                  "causal: it cannot see what it has not written)."),
    "cross": N_("Cross-attention: each target piece (Q from the decoder) over the source (K and V from the encoder's "
                "output), T × S. Row t reads piece t and writes piece t + 1."),
}
MAX_WRITTEN_DEFAULT = 20
OVERVIEW_MAX_POSITIONS = 600  # Whisper's encoder: every head's map at a glance only for a clip up to 12 s


def attention_kind() -> str | None:
    """None for a model with one stack; for an encoder–decoder, which attention the page reads (the sidebar's
    picker; menu.default_kind: a text model's encoder, Whisper's cross-attention). The page's model follows it:
    a text model's encoder is read alone (views._state.loaded_here)."""
    model = chosen_whole_model()
    if model is None or not model.encoder_decoder:
        return None
    with st.sidebar:
        return widget(st.radio, STACK_KIND, default_kind(model), tr("Which attention"),
                      context=(model.arch.audio,), options=list(KINDS), format_func=lambda k: tr(KIND_NAMES[k]),
                      help=tr("An encoder–decoder has three: the encoder reading the source, the decoder reading what "
                              "it has written, and cross-attention, where the decoder reads the encoder's output."))


def read(model: LoadedModel, text: str) -> tuple[Seq2SeqResult, Transcript | None]:
    """Every map of the model reading `text` (Whisper: hearing it spoken), and Whisper's transcript; the page stops
    with one sentence on bad input."""
    if model.arch.audio:
        with st.spinner(tr("Listening…")):
            heard = answered(computed.heard_of, model, text)
        if heard is None:
            stop()
        st.markdown(tr("**Heard** (the sentence spoken by espeak-ng, {seconds:.1f} s): {text}", seconds=heard.seconds,
                       text=literal(heard.text)))
        return heard.result, heard
    result = answered(computed.seq2seq_of, model, text, None)
    if result is None:
        stop()
    written = model.tokenizer.decode(result.target_ids(0), skip_special_tokens=True)
    st.markdown(tr("**Target** (the model's own output): {text}", text=literal(written)))
    return result, None


def kind_pickers(model: LoadedModel, kind: str, prefix: str = "k") -> tuple[int, int]:
    """A layer of the stack that holds `kind` (the last by default) and one of its heads."""
    stack = model if kind == "encoder" else model.decoder
    left, right = st.columns(2)
    layer = widget(left.selectbox, f"{prefix}_layer", stack.n_layers - 1, tr("Layer"), context=(kind,),
                   options=list(range(stack.n_layers)))
    head = widget(right.selectbox, f"{prefix}_head", 0, tr("Head"), context=(kind,),
                  options=list(range(stack.n_heads)), format_func=lambda h: tr("head {head}", head=h))
    return layer, head


def kind_maps(result: Seq2SeqResult, heard: Transcript | None, kind: str) -> np.ndarray:
    """(L,H,rows,columns) every head's map of one kind; over Whisper's frames, the speech's positions only."""
    maps = result.text_maps(kind).numpy()
    if heard is None:
        return maps
    n = heard.speech_positions
    return maps[..., :n, :n] if kind == "encoder" else maps[..., :n]


def show_kind_heads(model: LoadedModel, text: str, kind: str) -> None:
    """The Heads page for an encoder–decoder's decoder or cross-attention (or Whisper's encoder): every head at a
    glance, one head's map, and the maps as JSON."""
    result, heard = read(model, text)
    layer, head = kind_pickers(model, kind)
    key = ("kind", str(model.model_dir), text, kind)
    if heard is None or kind != "encoder" or heard.speech_positions <= OVERVIEW_MAX_POSITIONS:
        chart((*key, "overview", layer, head, narrow_screen()),
              lambda: figures.kind_overview_figure(kind_maps(result, heard, kind), kind, (layer, head),
                                                   narrow=narrow_screen()),
              key="kind_overview", on_select=lambda: pick_from_overview(kind), selection_mode="points")
        if narrow_screen():
            stack = model if kind == "encoder" else model.decoder
            head_taps(stack.n_heads, layer, head, "k_head", (kind,))
    if heard is not None and kind == "encoder":
        language = computed.spoken_language(text)
        show_frames(model, heard, answered(computed.spoken_of, text, language), language, layer, head)
    else:
        chart((*key, "head", layer, head), lambda: kind_head_figure(result, heard, kind, layer, head),
              width="stretch")
        st.caption(tr(CAPTIONS[kind]))
    st.download_button(tr("JSON: every head's map of this kind"), lambda: kind_json(model, result, heard, kind),
                       f"{kind}.json", "application/json", key="kind_json")


def pick_from_overview(kind: str) -> None:
    """A tile clicked: open that head in the pickers above."""
    points = st.session_state["kind_overview"].selection.points
    if points:
        layer, head = points[0]["customdata"]
        choose("k_layer", int(layer), (kind,))
        choose("k_head", int(head), (kind,))


def kind_head_figure(result: Seq2SeqResult, heard: Transcript | None, kind: str, layer: int, head: int) -> dict:
    if heard is not None and kind == "cross":
        return figures.spectrogram_cross_figure(heard, layer, head)
    return figures.seq2seq_figure(result, kind, layer, head)


def show_frames(model: LoadedModel, heard: Transcript, audio: bytes | None, language: str | None, layer: int,
                head: int) -> None:
    """Whisper's encoder over a clip's 1,500 positions, through the long-text machinery (views/_long.py): one head
    over the speech (pooled), the exact cells of a region, one position's row, and every head summarised (queued,
    with progress); every weight rebuilt from q, k and the log-sum-exp."""
    if audio is None:
        stop()
    encoder, n = heard.result.encoder, heard.speech_positions
    base = ("frames", str(model.model_dir), computed.digest(audio), language)
    chart((*base, "speech", layer, head), lambda: figures.encoder_frames_figure(
        heard, layer, head, 420 if narrow_screen() else 720), width="stretch")
    st.caption(tr("The encoder's self-attention over the clip's {n:,} positions (20 ms each; the silence that pads "
                  "Whisper's 30-second window is left out), each cell a block's largest weight.", n=n))
    show_zoom(encoder, layer, head, base, end=n)  # open on the speech, not the padding after it
    show_row(encoder, layer, head, base, end=n, unit=N_("time"))
    with waiting() as wait:
        summaries = computed.frame_summaries_of(server(), model, audio, language, wait)
    show_summaries(summaries, base)
    st.caption(tr("The region, the row and the summaries read the whole window of {n:,} positions, the padding "
                  "silence included, as the encoder does.", n=encoder.lengths[0]))


def kind_json(model: LoadedModel, result: Seq2SeqResult, heard: Transcript | None, kind: str) -> str:
    """{"model", "kind", "rows", "columns", "maps": [L][H][rows][columns]} (Whisper's columns: 20 ms positions)."""
    maps = kind_maps(result, heard, kind)
    source = list(result.source_tokens[0]) if heard is None else [f"{i * 0.02:.2f}" for i in range(maps.shape[-1])]
    target = list(result.target_tokens[0])
    rows, columns = (source, source) if kind == "encoder" else (target, target) if kind == "decoder" else (
        target, source)
    return json_text({"model": model.name, "kind": kind, "rows": rows[: maps.shape[-2]],
                      "columns": columns[: maps.shape[-1]], "maps": maps})


def show_kind_roles(model: LoadedModel, text: str, kind: str) -> None:
    """The Roles page for an encoder–decoder: the decoder's heads by the patterns of their maps (previous piece,
    start piece), Whisper's encoder heads summarised over the frames (local, positional heads), each
    cross-attention head scored as an alignment head."""
    read(model, text)
    if kind == "decoder":
        show_decoder_roles(model, text)
        return
    if kind == "encoder":  # Whisper's: over 20 ms frames (a text model's encoder is read as a one-stack model)
        with waiting() as wait:
            summaries = computed.spoken_frame_summaries_of(server(), model, text, wait)
        st.caption(tr("The encoder reads 20 ms frames of sound, not pieces: its heads are told apart by where their "
                      "weight goes over time. A local (positional) head keeps it within a few frames of the query, "
                      "as a text's previous-word heads do; a sink parks it on the first frames."))
        show_summaries(summaries, ("kind roles", str(model.model_dir), text, "encoder"))
        return
    scores = answered(computed.cross_scores_of, model, text)
    if scores is None:
        return
    chart(("kind roles", str(model.model_dir), text), lambda: figures.head_scores_figure(scores), width="stretch")
    st.markdown(tr("**Alignment heads found** (✓): {found}. **Published with the model** (●): {published}.",
                   found=", ".join(f"L{lay}H{h}" for lay, h in scores.found) or tr("none"),
                   published=", ".join(f"L{lay}H{h}" for lay, h in scores.published) or tr("none")))
    st.caption(tr("An alignment head's most-attended source position moves forward as the decoder writes (at least "
                  "85% of steps), sharply (that position's weight at least 0.12 on average) and across at least 40% "
                  "of the source: the head that lines the output up with the input."))


def show_decoder_roles(model: LoadedModel, text: str) -> None:
    """The decoder's self-attention heads named by the pattern rules of the Roles page (over what it writes)."""
    roles = answered(computed.decoder_roles_of, model, text)
    if roles is None:
        return
    labels = role_labels(roles, True)
    plain_chart(role_grid_figure(labels, roles, True), key="role_grid")
    st.caption(tr("The decoder's self-attention over the pieces it writes, each head named by the rules of the Roles "
                  "page: a previous-piece head reads the piece just written, a first-piece head rests on the start "
                  "of the output (the decoder's sink), over {rows:,} query rows.", rows=roles.rows))


def show_kind_walkthrough(model: LoadedModel, text: str, kind: str) -> None:
    """The Walkthrough for cross-attention: one head step by step (Q from the decoder, K and V from the encoder)."""
    result, heard = read(model, text)
    if kind != "cross":
        st.info(tr("The Walkthrough steps through one stack's attention over the sentence's pieces: choose encoder "
                   "self-attention (a text model) or cross-attention."))
        return
    layer, head = kind_pickers(model, kind)
    steps = show_steps(computed.read_steps_of, model, text, layer, head)
    if steps is not None:
        show_step_maps(steps, result, heard, (str(model.model_dir), text, layer, head))


def show_step_maps(steps: object, result: Seq2SeqResult, heard: Transcript | None, base: tuple) -> None:
    """The four steps of one cross-attention head drawn: Q from the decoder and K from the encoder, the scores, the
    weights, the context (Whisper's source cut to the speech's positions)."""
    s = heard.speech_positions if heard is not None else steps.k.shape[0]
    targets, sources = list(result.target_tokens[0][: steps.q.shape[0]]), list(result.source_tokens[0][:s])
    panels = ((N_("1. Q (from the decoder's states), {t} × {dk}"), steps.q, targets, None),
              (N_("1. K (from the encoder's output), {s} × {dk}"), steps.k[:s], sources, None),
              (N_("2. Scores Q·Kᵀ × scale, {t} × {s}"), steps.scores[:, :s], targets, sources),
              (N_("3. Weights: softmax of each row, {t} × {s}"), steps.probs[:, :s], targets, sources),
              (N_("4. Context: weights · V, {t} × {dk}"), steps.context, targets, None))
    sizes = dict(t=len(targets), s=s, dk=steps.q.shape[1])
    if s < steps.k.shape[0]:
        st.caption(tr("The source is cut to the {s} positions that hold the speech; the rest of each row's weight, "
                      "{share:.0%} on average, goes to the silence that pads Whisper's 30-second window.", s=s,
                      share=steps.outside_share(s)))
    for number, (title, matrix, rows, cols) in enumerate(panels):
        scale = {"colorscale": colours.WEIGHTS, "zmid": None} if number == 3 else {}
        chart((*base, "cross step", number), lambda matrix=matrix, rows=rows, cols=cols, title=title, scale=scale:
              charts.matrix_spec(matrix, rows, tr(title, **sizes), cols=cols, **scale), width="stretch")


def show_steps(steps_of: object, *args: object) -> object | None:
    """One cross-attention head, step by step: each step's formula and shape, and the check against the run (the
    steps, or None where they could not be computed)."""
    steps = answered(steps_of, *args)
    if steps is None:
        return None
    st.subheader(tr("Step by step: layer {layer}, head {head}", layer=steps.layer, head=steps.head))
    st.dataframe(pd.DataFrame([{tr("step"): tr(step), tr("formula"): formula, tr("shape"): shape}
                               for step, formula, shape in steps.rows()]), hide_index=True)
    st.caption(tr("Q comes from the decoder's states (what has been written); K and V are projected from the "
                  "encoder's output, once per source. Recomputed here, the weights differ from the map the run kept "
                  "by at most {difference:.1e}.", difference=steps.kept_difference))
    return steps


def show_written(model: LoadedModel, text: str) -> None:
    """The Predictions page for an encoder–decoder: what its decoder writes for the sentence, piece by piece, with
    each step's probability and the alternatives it weighed (greedy, or sampled; Whisper: what it hears)."""
    st.caption(tr("The encoder reads the sentence once; the decoder writes one piece at a time, each step reading its "
                  "own earlier pieces from a cache and the encoder's output through cross-attention (its keys and "
                  "values projected once)."))
    settings = (MAX_WRITTEN_DEFAULT, 0.0, None, 0)
    if model.arch.audio:
        read(model, text)
    else:
        settings = sampling_settings(MAX_NEW)
    decoded = answered(computed.decoded_of, model, text, *settings)
    if decoded is None:
        stop()
    st.markdown(tr("**Written:** {text}", text=literal(decoded.text)))
    st.caption(tr("Stopped: {stopped}.", stopped=tr(decoded.stopped)))
    st.dataframe(pd.DataFrame([{tr("piece"): s.piece, tr("probability"): round(s.prob, 4),
                                tr("alternatives"): ", ".join(f"{p} {q:.2f}" for p, q in s.alternatives)}
                               for s in decoded.steps]), hide_index=True, key="g_steps")
    st.download_button(tr("JSON: what it wrote"), json_text(decoded.as_json(model.name)),
                       "written.json", "application/json", key="g_json")
