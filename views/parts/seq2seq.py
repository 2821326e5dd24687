"""The Encoder–decoder page's cross-attention tab, which the lesson's cross-attention step draws too."""

from __future__ import annotations

import contextlib

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.seq2seq.transcribe import Transcript
from mha_core.figures import seq2seq as figures
from mha_core.i18n import tr
from mha_core.serving.computed import seq2seq as computed
from views._stacks import show_steps
from views._state import chart, narrow_screen
from views._visit import widget

ALL_HEADS = -1


def head_pickers(model: LoadedModel, context: tuple, averaged: bool = True) -> tuple[int, int | None]:
    """A decoder layer (the last by default) and one of its heads, or all averaged."""
    left, right = st.columns(2)
    decoder = model.decoder
    layer = widget(left.selectbox, "x_layer", decoder.n_layers - 1, tr("Decoder layer"), context=context,
                   options=list(range(decoder.n_layers)))
    heads = ([ALL_HEADS] if averaged else []) + list(range(decoder.n_heads))
    head = widget(right.selectbox, "x_head", heads[0], tr("Head"), context=context, options=heads,
                  format_func=lambda h: tr("all heads averaged") if h == ALL_HEADS else tr("head {head}", head=h))
    return layer, None if head == ALL_HEADS else head


def cross_tab(model: LoadedModel, heard: Transcript, audio: bytes, key: tuple, pickers_below: bool = False,
              pickers_in: object | None = None) -> None:
    """The spectrogram over one decoder head's cross-attention, its layer and head picked above it (`pickers_below`:
    under it, so that a phone's first screen shows the chart; `pickers_in`: in that container, the lesson's folded
    panel on a projector)."""
    figure, pickers = (st.container(), st.container()) if pickers_below else (None, pickers_in)
    with pickers or contextlib.nullcontext():
        layer, head = head_pickers(model, key[:1])
    with figure or contextlib.nullcontext():
        chart(("x_spectrogram", *key, layer, head), lambda: figures.spectrogram_cross_figure(
            heard, layer, head, narrow_screen()), width="stretch")
    if head is not None:
        show_steps(computed.heard_steps_of, model, audio, heard.language, layer, head, heard.task)
    st.caption(cross_note())


def cross_note() -> str:
    """What the caption under the spectrogram and its cross-attention says."""
    return tr("Top: the clip's log-mel spectrogram (time across, pitch up), each word's span outlined. Bottom: each "
              "row is the decoder reading one piece and writing the next; its colour shows where in the audio its "
              "cross-attention listens (Q from the decoder, K and V from the encoder's frames).")
