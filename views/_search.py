"""The Heads page's corpus search (issue 37): a piece of the sentence, a layer, optionally some of its heads; the 50
nearest pieces of an indexed corpus in their sentences, and a summary of what they are."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from mha_core import AttentionResult, LoadedModel, i18n
from mha_core.analysis.index.search import SearchResult
from mha_core.figures.index import summary_figure
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import index as computed_index
from mha_core.serving.computed import text as computed
from mha_core.serving.export import json_text
from views._state import answered, chart, narrow_screen, queued
from views._text import literal
from views._visit import widget

SEARCH_HELP = N_(
    "Each piece of the corpus was run through the model once and stored with its vector at some layers. Pick a piece "
    "of your sentence and a layer: the pieces whose vectors point the same way (cosine similarity, 1 = the same "
    "direction; distance = 1 − similarity) are listed, each in its sentence. Layer 0 is the embeddings: the nearest "
    "pieces are the same word. Deeper layers mix in the context: the nearest pieces share a role (a subject, a "
    "pronoun, the word after 'the'). With heads chosen, pieces are compared by those heads' outputs only (exBERT's "
    "head mask): what this head takes from the sentence for the piece.")


def index_label(choice: computed_index.IndexChoice) -> str:
    if choice.bundled and choice.corpus == computed_index.BUNDLED_CHINESE_SOURCE:
        return tr("The bundled Chinese treebank (UD Chinese GSDSimp, 300 sentences parsed by hand)")
    if choice.bundled:
        return tr("The bundled corpus (English, parsed by spaCy)")
    return tr("{corpus} · {pieces:,} pieces · {folder}", corpus=choice.corpus, pieces=choice.pieces,
              folder=Path(choice.folder).name)


def chosen_index(model: LoadedModel) -> str | None:
    """The index folder to search: the bundled corpus's (built here the first time) or one the server lists."""
    listed = computed_index.index_choices(model)
    choices = {choice.folder: choice for choice in listed}
    folder = computed_index.default_index(listed, i18n.current()).folder
    if len(choices) > 1:
        folder = widget(st.selectbox, "search_index", folder, tr("Corpus"), context=(model.name,),
                        options=list(choices), format_func=lambda f: index_label(choices[f]))
    if choices[folder].bundled:
        return queued(computed_index.bundled_index_of, model, choices[folder].corpus)
    return folder


def query_pickers(model: LoadedModel, result: AttentionResult, layers: tuple[int, ...], text: str,
                  folder: str) -> tuple[int, int, tuple[int, ...]]:
    labels = result.labels[0]
    positions = list(range(len(labels)))
    first, middle_layer = computed_index.default_query(result, layers)
    left, middle, right = st.columns([2, 2, 3])
    position = widget(left.selectbox, "search_token", first, tr("Piece of your sentence"), context=(model.name, text),
                      options=positions, format_func=lambda t: f"{t} · {labels[t]}")
    layer = widget(middle.select_slider, "search_layer", middle_layer, tr("Layer"),
                   context=(model.name, folder), options=list(layers),
                   help=tr("0: the embeddings; {last}: the last layer's output", last=model.n_layers))
    if layer >= model.n_layers:
        right.caption(tr("No head runs on the last layer's output: the search reads its hidden states."))
        return position, layer, ()
    heads = widget(right.multiselect, "search_heads", [], tr("Heads (none: the whole hidden state)"),
                   context=(model.name, folder, layer), options=list(range(model.n_heads)),
                   format_func=lambda h: tr("head {head}", head=h), placeholder=tr("Choose heads"))
    return position, layer, tuple(heads)


def show_matches(found: SearchResult) -> None:
    if narrow_screen():  # a list reads better than a wide table on a phone
        lines = [f"{i + 1}. **{m.score:.3f}** · {literal(m.marked('【', '】'))}" for i, m in enumerate(found.matches)]
        st.markdown("\n".join(lines))
        return
    st.dataframe(pd.DataFrame({
        tr("similarity"): [round(m.score, 4) for m in found.matches],
        tr("distance"): [round(m.distance, 4) for m in found.matches],
        tr("in its sentence"): [m.marked("【", "】") for m in found.matches],
        tr("word"): [m.word for m in found.matches],
        tr("part of speech"): [m.pos or "" for m in found.matches],
        tr("relation"): [m.deprel or "" for m in found.matches],
        tr("sentence"): [m.sentence for m in found.matches],
    }), hide_index=True, width="stretch")


def show_search(model: LoadedModel, text: str) -> None:
    """The search tab: pickers, the summary, the matches, their JSON (the sentence alone, read as the index's
    sentences were: no second text)."""
    st.caption(tr(SEARCH_HELP))
    result = answered(computed.result_of, model, (text,), "explicit")
    if result is None:
        return
    folder = chosen_index(model)
    if folder is None:
        return
    index = answered(computed_index.index_of, folder)
    if index is None:
        return
    position, layer, heads = query_pickers(model, result, index.manifest.layers, text, folder)
    found = answered(computed_index.search_of, model, folder, text, position, layer, heads)
    if found is None or not found.matches:
        return
    st.markdown(tr("The {n} pieces nearest to **{piece}** at layer {layer}", n=len(found.matches),
                   piece=literal(found.piece), layer=layer)
                + (tr(", by heads {heads}", heads=", ".join(map(str, heads))) if heads else ""))
    stacked = narrow_screen()
    chart(("search", str(model.model_dir), folder, text, position, layer, heads, stacked),
          lambda: summary_figure(found, stacked), key="search_summary", width="stretch")
    show_matches(found)
    st.download_button(tr("JSON: the matches"), json_text(found.as_json()), "corpus_search.json", "application/json")
