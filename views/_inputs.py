"""What every page starts with: the model card and language picker in the sidebar, and the sentence box with its
examples and its .txt upload (values kept across pages and in the URL)."""

from __future__ import annotations

import streamlit as st

from mha_core import ModelLoadError, i18n
from mha_core.analysis.corpora import CorpusFormatError, decode_text
from mha_core.i18n import tr, worded
from mha_core.serving.menu import model_notice
from mha_core.teaching.examples import example_of, examples_for
from views._state import (
    MAX_INPUT_CHARS,
    chosen_model_name,
    current_model,
    language_picker,
    literal,
    load_listed_model,
    model_choices,
)


def set_sentence(text: str) -> None:
    """Put `text` in the sentence box of every page (a widget callback: runs before the box is drawn again)."""
    st.session_state["text"] = st.session_state["_text"] = text


def _pick_example() -> None:
    set_sentence(st.session_state["example"])


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


def _remember_text() -> None:
    st.session_state["_text"] = st.session_state["text"]


def model_card() -> None:
    """The model list, and the chosen model's name and shape, in the sidebar of every page."""
    choices = model_choices()
    language_picker()
    with st.sidebar:
        name = st.selectbox(tr("Model"), list(choices), index=list(choices).index(chosen_model_name()), key="model",
                            bind="query-params", format_func=lambda n: choices[n].label,
                            help=tr("The bundled models, the folders in the server's $MHA_MODELS_DIR and the models "
                                    "already in its Hugging Face cache. Nothing is downloaded."))
        st.session_state["_model"] = name  # survives a page switch
        refused = choices[name].refused
        loaded = refused or load_listed_model(str(choices[name].path))
        if isinstance(loaded, ModelLoadError):
            st.error(literal(tr("{name} cannot be used: {reason} Showing {shown}.", name=name, reason=worded(loaded),
                                shown=current_model().name)))
        elif refused:
            st.error(literal(tr("{refused}. Showing {name}.", refused=refused, name=current_model().name)))
        model = current_model()
        long_limit = model.arch.long_max_length
        st.caption(tr("{n_layers} layers × {n_heads} heads · d_model {d_model} · head dim {head_dim} · max "
                      "{max_length} word pieces", n_layers=model.n_layers, n_heads=model.n_heads,
                      d_model=model.d_model, head_dim=model.head_dim, max_length=model.max_length)
                   + (tr(" ({long_limit:,} on the Heads page)", long_limit=long_limit)
                      if long_limit > model.max_length else ""))
        notice = model_notice(model.model_dir)
        if notice:
            st.caption(literal(tr(notice)) + ".")


def sentence_box() -> str:
    """The shared sentence box, at the top of the page (the model card stays in the sidebar); its value survives page
    switches and lives in the URL. Its examples are those offered in the page's language on this model
    (mha_core.teaching.examples); an untouched default follows a change of language or model."""
    model_card()
    model = current_model()
    offered = examples_for(i18n.current(), model.name)
    default = offered[0].text
    if "text" not in st.session_state and "_text" in st.session_state:
        st.session_state["text"] = st.session_state["_text"]  # restore after a page switch
    if st.session_state.get("text") == st.session_state.get("_default") != default:
        st.session_state["text"] = default  # the old default, never edited: the new language's or model's
    st.session_state["_default"] = default
    box, examples = st.columns([3, 1])  # on the page itself: a phone hides the sidebar
    examples.selectbox(tr("Examples"), [e.text for e in offered], index=None, key="example",
                       on_change=_pick_example, placeholder=tr("Pick an example sentence"))
    text = box.text_area(tr("Sentence"), default, key="text", bind="query-params", height=90,
                         on_change=_remember_text)
    examples.file_uploader(tr("Or a .txt file"), type=["txt"], key="text_file", on_change=_load_text_file,
                           help=tr("UTF-8 text, at most {max_input_chars:,} characters; long texts are read up to "
                                   "the model's own limit on the Heads page.", max_input_chars=MAX_INPUT_CHARS))
    if st.session_state.get("_text_file_error"):
        st.error(literal(st.session_state["_text_file_error"]))
    st.session_state["_text"] = text
    example = example_of(text)
    if example is not None and model.name in example.shows:
        st.caption(literal(example.shows[model.name]))
    return text
