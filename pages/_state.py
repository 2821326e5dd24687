"""The one place with Streamlit caches and the shared sentence box; pages call mha_core through here."""

from __future__ import annotations

import streamlit as st

import mha_core
from mha_core import AttentionResult, LoadedModel
from mha_core.model import resolve_model_dir

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."


@st.cache_resource(show_spinner="Loading the model…")
def get_model(model_dir: str) -> LoadedModel:
    return mha_core.load_model(model_dir)


def current_model() -> LoadedModel:
    return get_model(str(resolve_model_dir(None)))


@st.cache_data(max_entries=32, show_spinner="Computing attention…")
def run_texts(model_dir: str, texts: tuple[str, ...], path: str) -> AttentionResult:
    return mha_core.run(get_model(model_dir), list(texts), path=path)


def run_one(text: str, path: str = "auto") -> AttentionResult:
    return run_texts(str(current_model().model_dir), (text,), path)
