"""What every page starts with: the language picker and the model card in the sidebar, and the sentence box with its
examples and its .txt upload (choices of the visit: views/_visit.py)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import streamlit as st

from mha_core import LoadedModel, ModelLoadError, i18n
from mha_core.analysis.corpus.readers import CorpusFormatError, decode_text
from mha_core.i18n import tr, worded
from mha_core.messages import N_
from mha_core.serving.menu import ModelChoice, model_notice, read_on_other_pages
from mha_core.serving.pages import page_at
from mha_core.teaching.examples import example_of, examples_for
from views._state import (
    DESCRIBE,
    MAX_INPUT_CHARS,
    PAGE,
    check_length,
    chosen_model_name,
    current_model,
    loaded_here,
    model_choices,
    narrow_screen,
)
from views._text import literal
from views._uploads import uploader_words
from views._visit import choose, visit, widget


def set_sentence(text: str) -> None:
    """Put `text` in the sentence box of every page, as if typed (a callback: runs before the box is drawn again)."""
    choose("text", text)


def _pick_example() -> None:
    """The picked example into the sentence box; the picker goes back to its placeholder, so that the same example can
    be picked again after the box was edited (a picker that still showed it would not fire)."""
    if st.session_state.get("example") is not None:
        set_sentence(st.session_state["example"])
    st.session_state["example"] = None


def _load_text_file() -> None:
    """The uploaded .txt file's text into the sentence box (a widget callback); a file that is not UTF-8 or is over
    the box's limit leaves the box as it was, with one sentence saying why."""
    upload, error = st.session_state.get("text_file"), ""
    if upload is not None:
        try:
            text = decode_text(upload.getvalue())
        except CorpusFormatError as err:
            error = tr("{name}: {err}.", name=upload.name, err=worded(err))
        else:
            if len(text) > MAX_INPUT_CHARS:
                error = tr("{name} has {n:,} characters; at most {max_input_chars:,} are read.", name=upload.name,
                           n=len(text), max_input_chars=MAX_INPUT_CHARS)
            else:
                set_sentence(text)
    st.session_state["_text_file_error"] = error


def language_picker() -> None:
    """The language choice, first in the sidebar; its label also says "Language" in English, so a visitor who reads
    no Chinese finds it."""
    language = i18n.current()
    label = tr("Language") if language == i18n.DEFAULT else f"{tr('Language')} · Language"
    widget(st.sidebar.selectbox, "lang", language, label, options=list(i18n.LANGUAGES), format_func=i18n.LANGUAGES.get)


def describe_toggle() -> None:
    """Each chart's sentence under it, on request (a screen reader reads it as the chart's name either way)."""
    widget(st.sidebar.toggle, DESCRIBE, False, tr("Describe each chart in words"),
           help=tr("A sentence under each chart says what it shows, from its numbers (a screen reader reads it as the "
                   "chart's name either way)."))


def model_card() -> None:
    """The language picker, the model list, and the chosen model's name and shape, in the sidebar of every page."""
    choices = model_choices()
    language_picker()
    describe_toggle()
    with st.sidebar:
        name = widget(st.selectbox, "model", chosen_model_name(), tr("Model"), options=list(choices),
                      format_func=lambda n: choices[n].label,
                      help=tr("The bundled models, the folders in the server's $MHA_MODELS_DIR and the models already "
                              "in its Hugging Face cache. Nothing is downloaded."))
        fallback = fallback_note(name, choices[name])
        if fallback:
            fallback()
        model = current_model()
        long_limit = model.arch.long_max_length
        if model.arch.image:
            st.caption(tr("{n_layers} layers × {n_heads} heads · d_model {d_model} · patches of {patch} px · trained "
                          "at {side} px", n_layers=model.n_layers, n_heads=model.n_heads, d_model=model.d_model,
                          patch=model.arch.patch_size, side=model.arch.image_size))
        elif model.encoder_decoder:
            st.caption(tr("encoder {n_layers} layers, decoder {n_decoder} layers × {n_heads} heads · d_model "
                          "{d_model} · source up to {max_length:,} {unit} · target up to {max_target} pieces",
                          n_layers=model.n_layers, n_decoder=model.decoder.n_layers, n_heads=model.n_heads,
                          d_model=model.d_model, max_length=model.max_length, max_target=model.decoder.max_length,
                          unit=tr("positions (20 ms each)") if model.arch.audio else tr("pieces")))
        else:
            st.caption(tr("{n_layers} layers × {n_heads} heads · d_model {d_model} · head dim {head_dim} · max "
                          "{max_length} word pieces", n_layers=model.n_layers, n_heads=model.n_heads,
                          d_model=model.d_model, head_dim=model.head_dim, max_length=model.max_length)
                       + (tr(" ({long_limit:,} on the Heads page)", long_limit=long_limit)
                          if long_limit > model.max_length else ""))
        notice = model_notice(model.model_dir)
        if notice:
            st.caption(literal(tr(notice)) + ".")
    if fallback and narrow_screen():  # a phone hides the sidebar: the page itself says which model it reads
        fallback()
    switch_note(model)


def fallback_note(name: str, choice: ModelChoice) -> Callable[[], object] | None:
    """Saying (st.info or st.error), when the chosen model is not the one this page reads, which it shows instead: a
    model that other pages read (Whisper, DINOv2 on a text page) is a notice; one that cannot be used at all is an
    error."""
    loaded = choice.refused or loaded_here(str(choice.path))
    if isinstance(loaded, ModelLoadError):
        said = st.info if read_on_other_pages(loaded) else st.error  # a page's own limit is no failure
        return partial(said, literal(tr("{name} cannot be used: {reason} Showing {shown}.", name=name,
                                        reason=worded(loaded), shown=current_model().name)))
    if choice.refused:
        return partial(st.error, literal(tr("{refused}. Showing {name}.", refused=worded(choice.refused),
                                            name=current_model().name)))
    return None


LAST_MODEL = "_last_model"  # the model the page before read


def switch_note(model: LoadedModel) -> None:
    """A page that reads another model than the page before, without the visitor choosing it (a page's own
    default: the Encoder–decoder page opens on Whisper, Images on DINOv2), says so, with a way back where this page
    can read the other model."""
    previous, st.session_state[LAST_MODEL] = st.session_state.get(LAST_MODEL), model.name
    if previous in (None, model.name) or visit().chosen.get("model") is not None:
        return
    st.info(literal(tr("This page reads {current}; the page before read {previous}. The Model list in the sidebar "
                       "chooses one for every page.", current=model.name, previous=previous)))
    page = page_at(st.session_state.get(PAGE))
    if previous in model_choices() and (page is None or page.opens_on is None):  # not Whisper's, DINOv2's pages
        st.button(tr("Read {previous} here", previous=previous), on_click=choose, args=("model", previous),
                  key="read_previous_model")


def sampling_settings(max_new: int) -> tuple[int, float, int | None, int]:
    """How a model writes (the Predictions page's Continue, an encoder–decoder's output): new pieces, temperature,
    top-k (None: all) and seed, one widget each in a row."""
    c1, c2, c3, c4 = st.columns(4)
    new = widget(c1.slider, "g_new", 20, tr("New pieces"), 1, max_new, fits=lambda n: 1 <= n <= max_new)
    temperature = widget(c2.slider, "g_temperature", 0.0, tr("Temperature"), 0.0, 2.0, step=0.1,
                         fits=lambda t: 0.0 <= t <= 2.0)
    top_k = widget(c3.number_input, "g_top_k", None, tr("Top-k (empty: all)"), min_value=1, value=None, like=0,
                   step=1, disabled=temperature == 0, fits=lambda k: k >= 1)
    seed = widget(c4.number_input, "g_seed", 0, tr("Seed"), min_value=0, step=1, disabled=temperature == 0,
                  fits=lambda v: v >= 0)
    return new, temperature, top_k, int(seed)


def sentence_box() -> str:
    """The shared sentence box, at the top of the page (the model card stays in the sidebar); its value survives page
    switches and lives in the URL. Its examples are those offered in the page's language on this model
    (mha_core.teaching.examples); an untouched default follows a change of language or model."""
    model_card()
    model = current_model()
    offered = examples_for(i18n.current(), model.name)
    box, examples = st.columns([3, 1])  # on the page itself: a phone hides the sidebar
    examples.selectbox(tr("Examples"), [e.text for e in offered], index=None, key="example",
                       on_change=_pick_example, placeholder=tr("Pick an example sentence"))
    text = widget(box.text_area, "text", offered[0].text, tr("Sentence"), height=90)
    with examples:
        uploader_words("text_file", ["txt"])
    examples.file_uploader(tr("Or a .txt file"), type=["txt"], key="text_file", on_change=_load_text_file,
                           help=tr("UTF-8 text, at most {max_input_chars:,} characters; long texts are read up to "
                                   "the model's own limit on the Heads page.", max_input_chars=MAX_INPUT_CHARS))
    if st.session_state.get("_text_file_error"):
        st.error(literal(st.session_state["_text_file_error"]))
    example = example_of(text)
    if example is not None and model.name in example.shows:
        st.caption(literal(example.shows[model.name]))
    return text


def pair_box(model: LoadedModel) -> str | None:
    """On an encoder: an optional second sentence, read with the first as a pair (segment B); None when empty."""
    if model.causal:
        return None
    pair = widget(st.text_input, "segment_b", "", tr("Second sentence (segment B, optional)"),
                  help=tr("An encoder reads two sentences as one pair, as BERT was trained to: [CLS] A [SEP] B [SEP], "
                          "the second sentence's pieces with token type 1. Leave it empty for one sentence."))
    if pair.strip():
        check_length(pair, N_("The second sentence"))
    return pair.strip() or None


def open_bundled(name: str) -> None:
    """A button that opens the bundled model `name` (as the sidebar lists it), where the server lists it."""
    if name in model_choices():
        st.button(tr("Open {name}", name=name), on_click=choose, args=("model", name))
