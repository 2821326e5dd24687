"""Heads across a corpus: every head placed by how alike its attention is to the others' (Clark et al. 2019,
Figure 6), and one head's queries and keys over the whole corpus in one 2-D space (AttentionViz)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import LoadedModel, i18n
from mha_core.analysis.corpus.distances import closest_pairs
from mha_core.analysis.corpus.passes import QK_MAX_MB, QK_MAX_TOKENS, CorpusPass, HeadDistances, selection_note
from mha_core.analysis.corpus.readers import (
    BUNDLED_CORPUS,
    CHINESE_TREEBANK,
    bundled_corpus,
    read_conllu,
    read_text_lines,
)
from mha_core.analysis.heads.projection import TSNE, UMAP, UMAP_EPOCHS, duration_note
from mha_core.analysis.heads.qk_view import BY_POS, COLOUR_BY, PROJECTIONS, QKView, strongest_keys
from mha_core.analysis.heads.roles import head_label, role_labels
from mha_core.figures.corpus import distance_heatmap, head_map_figure, qk_figure
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import corpus as computed_corpus
from mha_core.serving.computed import index as computed_index
from mha_core.serving.computed import text as computed
from mha_core.serving.export import distance_csv, qk_points_csv
from views._inputs import model_card
from views._state import chart, current_model, queued, server
from views._text import literal
from views._uploads import capped_upload, parsed_corpus
from views._visit import choose, stop, widget

BUNDLED, TREEBANK = N_("Bundled corpus"), N_("Chinese treebank")
CONLLU, TEXT_FILE = N_("Uploaded CoNLL-U"), N_("Uploaded text file")
SOURCES = (BUNDLED, TREEBANK, CONLLU, TEXT_FILE)
VIEWS = (N_("Head-similarity map"), N_("Query–key view of one head"))


def chosen_corpus(source: str) -> tuple[str, list[str], list | None, str] | None:
    """(cache key, sentences as typed, parsed trees or None, what was left out); None when an upload is missing
    or unusable (the reason is shown)."""
    if source == BUNDLED:
        return computed_corpus.corpus_key(BUNDLED_CORPUS), bundled_corpus(), None, ""
    if source == TREEBANK:  # gold trees: syntactic labels without a parser
        trees = computed_corpus.chinese_treebank_of(server())
        return computed_corpus.corpus_key(CHINESE_TREEBANK), [s.text for s in trees], trees, ""
    conllu = source == CONLLU
    label = tr("CoNLL-U file (each sentence's # text line)") if conllu else tr("Text file, one sentence per line")
    chosen = capped_upload(label, ["conllu", "txt"] if conllu else ["txt"], "g_conllu" if conllu else "g_text",
                           read_conllu if conllu else read_text_lines,
                           tr("Upload a CoNLL-U file (for example a Universal Dependencies split).") if conllu else
                           tr("Upload a plain-text file with one sentence per line."))
    if chosen is None:
        return None
    key, kept, note = chosen
    return key, [s.text for s in kept] if conllu else kept, kept if conllu else None, note


def corpus_role_labels(model: LoadedModel, corpus: HeadDistances, key: str, trees: list | None, source: str
                       ) -> np.ndarray:
    """The Roles page's labels for these heads: head metrics over this corpus, the induction probe, (on request,
    for sources with trees) the syntactic heads of the same analysis the Roles page runs, and the coreference
    heads of a GAP file scored on the Roles page in this session."""
    scores = computed.induction_of(server(), model)
    analysis = None
    label = tr("Add syntactic labels (Clark's analysis of the trees, as on the Roles page)")
    if widget(st.toggle, "g_syntax", False, label,
              help=tr("The bundled corpus is parsed by spaCy; a CoNLL-U file gives gold trees. The analysis is the "
                      "Roles page's, shared with it: the bundled corpora's is made once and kept; an upload's runs the "
                      "model over its sentences once more.")):
        sentences = trees if trees is not None else (parsed_corpus() if source == BUNDLED else None)
        if sentences is None:
            st.caption(tr("A plain-text file has no trees: syntactic labels need the bundled corpus or a CoNLL-U file."
                ))
        else:
            analysis = queued(computed_corpus.corpus_analysis_of, model, key, sentences, False)
    gap = st.session_state.get("gap_results", {}).get(str(model.model_dir))  # if the Roles page scored GAP
    return role_labels(corpus.roles, model.causal, (analysis.syntax if analysis else None, gap), probed=scores)


def show_head_map(model: LoadedModel, corpus: HeadDistances, key: str, trees: list | None, source: str) -> None:
    labels = corpus_role_labels(model, corpus, key, trees, source)  # (L,H)
    base = (str(model.model_dir), key)
    with st.spinner(tr("Placing the heads (MDS)…")):
        head_map = computed_corpus.head_map_of(server(), model, key, corpus)
    left, right = st.columns(2)
    with left:
        chart(("head map", *base, tuple(labels.ravel())), lambda: head_map_figure(head_map, labels, corpus.distance),
              key="head_map")
    with right:
        chart(("distances", *base), lambda: distance_heatmap(corpus.distance, corpus.heads), key="distances")
    st.caption(tr("Distance between two heads: the mean, over all {rows:,} query tokens of {texts:,} sentences (word "
                  "pieces, special tokens included), of the Jensen–Shannon divergence between their attention rows, in "
                  "nats (0 = identical; at most ln 2 ≈ 0.693). Metric MDS (scikit-learn, fixed seed) places every head "
                  "so that distances on the plane follow these; colour: the head's role label as on the Roles page; "
                  "symbol: its layer.", rows=corpus.rows, texts=len(corpus.texts)))
    st.dataframe(closest_table(corpus), hide_index=True, key="closest")
    st.caption(tr("The most alike pairs of heads in different layers."))
    st.download_button(tr("CSV: the distance matrix"), lambda: distance_csv(corpus.distance, corpus.heads),
                       "head_distances.csv", "text/csv", key="distance_csv")


def closest_table(corpus: HeadDistances) -> pd.DataFrame:
    return pd.DataFrame([{tr("heads"): f"{head_label(*a)} · {head_label(*b)}", tr("JS divergence"): round(d, 4)}
                         for d, a, b in closest_pairs(corpus.distance, corpus.heads)])


def qk_controls(model: LoadedModel, n_points: int) -> tuple[int, int, str, str]:
    c1, c2, c3, c4 = st.columns([1, 1, 2, 2])
    layer = widget(c1.selectbox, "g_layer", 0, tr("Layer"), options=range(model.n_layers), format_func=tr)
    head = widget(c2.selectbox, "g_head", 0, tr("Head"), options=range(model.n_heads), format_func=tr)
    colour = widget(c3.radio, "g_colour", COLOUR_BY[0], tr("Colour by"), options=COLOUR_BY, horizontal=True,
                    format_func=tr)
    method = widget(
        c4.radio,
        "g_projection",
        PROJECTIONS[0],
        tr("Projection"),
        options=PROJECTIONS,
        horizontal=True,
        help=tr(
            "For these {n_points:,} points: PCA exact and instant; UMAP (umap-learn, {umap_epochs} "
            "epochs) {umap}; t-SNE (scikit-learn) {tsne}. Each result is kept for everyone.",
            n_points=n_points,
            umap_epochs=UMAP_EPOCHS,
            umap=duration_note(UMAP, n_points),
            tsne=duration_note(TSNE, n_points),
        ),
        format_func=tr,
    )
    return layer, head, colour, method


def show_qk_view(model: LoadedModel, corpus: CorpusPass, key: str) -> None:
    context = (str(model.model_dir), key)  # the corpus the chosen sentence and query belong to
    n_points = 2 * len(corpus.labels)  # every token's query and key
    layer, head, colour, method = qk_controls(model, n_points)
    base = (str(model.model_dir), key)
    view = queued(computed_corpus.qk_view_of, model, key, corpus, layer, head, method)
    if view is None:
        return
    pos = computed_corpus.token_pos_of(server(), model, key, corpus) if colour == BY_POS else None
    hover = computed_corpus.qk_hover_of(server(), model, key, corpus, i18n.current())  # its words translated
    chart(
        ("qk figure", *base, layer, head, method, colour),
        lambda: qk_figure(view, corpus, colour, hover, pos),
        key="qk_points",
        on_select=lambda: pick_query(corpus, context),
        selection_mode="points",
    )
    explain_normalisation(model, corpus, view)
    show_query(corpus, view, context)
    st.download_button(
        tr("CSV: these points"),
        lambda: qk_points_csv(view.xy, corpus.labels, corpus.sentence_of, corpus.position, pos),
        f"qk_L{layer}_H{head}_{method}.csv",
        "text/csv",
        key="qk_csv",
    )


def explain_normalisation(model: LoadedModel, corpus: CorpusPass, view: QKView) -> None:
    kept = (
        tr("the first {kept:,} of {texts:,} sentences ({tokens:,} tokens; the view keeps at most {max_tokens:,} "
           "tokens and {max_mb} MB of vectors)", kept=corpus.kept, texts=len(corpus.texts),
           tokens=len(corpus.labels), max_tokens=QK_MAX_TOKENS, max_mb=QK_MAX_MB)
        if corpus.kept < len(corpus.texts)
        else tr("all {kept:,} sentences ({tokens:,} tokens)", kept=corpus.kept, tokens=len(corpus.labels))
    )
    rope = tr(" after RoPE,") if model.arch.rotary else ""
    gqa = (tr(" from key/value head {kv_head} (grouped-query attention)", kv_head=view.kv_head)
           if corpus.n_kv_heads < corpus.n_heads else "")
    st.caption(
        tr(
            "Every token's query and key{gqa},{rope} over {kept}. As in AttentionViz, keys are translated by one "
            "vector c (|c| = {translation_norm:.3f}) so that their mean equals the queries' mean, and queries "
            "are multiplied by s = {scale:.4f} and keys divided by s, so both have the same mean norm "
            "({mean_norm:.3f}). Neither changes any attention row: a query's scores all shift by q·c, which "
            "softmax ignores, and (s q)·(k / s) = q·k. Close query–key pairs are pairs with high scores.",
            gqa=gqa,
            rope=rope,
            kept=kept,
            translation_norm=view.translation_norm,
            scale=view.scale,
            mean_norm=view.mean_norm,
        )
    )


def pick_query(corpus: CorpusPass, context: tuple) -> None:
    """The chart's selection -> the query widgets (a selected key picks its own token's query)."""
    points = st.session_state["qk_points"].selection.points
    chosen = next((p.get("customdata") for p in points if p.get("customdata") is not None), None)
    if chosen is None:
        return
    token = int(chosen[0] if isinstance(chosen, list) else chosen) % len(corpus.labels)
    sentence = int(corpus.sentence_of[token])
    choose("g_sentence", sentence, context)
    choose("g_query", int(corpus.position[token]), (*context, sentence))


def show_query(corpus: CorpusPass, view: QKView, context: tuple) -> None:
    """The chosen query's top keys in its sentence (chosen on the chart, or here; both live in the URL)."""
    left, right = st.columns([1, 3])
    sentence = widget(left.number_input, "g_sentence", None, tr("Sentence"), 0, corpus.kept - 1, value=None, like=0,
                      context=context, fits=lambda v: 0 <= v < corpus.kept,
                      placeholder=tr("select a query on the chart"))
    if sentence is None:
        st.caption(
            tr("Select a query (●) on the chart, or type a sentence number, to see the keys it attends to most.")
        )
        return
    sentence = int(sentence)
    start, stop = int(corpus.starts[sentence]), int(corpus.starts[sentence + 1])
    position = widget(right.selectbox, "g_query", 0, tr("Query"), context=(*context, sentence),
                      options=range(stop - start), format_func=lambda j: f"{j}: {corpus.labels[start + j]}")
    st.text(corpus.texts[sentence])
    rows = strongest_keys(corpus, view.layer, view.head, start + position)
    st.dataframe(
        pd.DataFrame([{tr("position"): j, tr("key"): label, tr("attention"): round(w, 4)} for j, label, w in rows]),
        hide_index=True,
        key="top_keys",
    )
    st.caption(tr("Its attention row in this head, recomputed from the kept query and key vectors."))


def main() -> None:
    model = current_model()
    model_card()
    st.title(tr("Heads across a corpus"))
    opening = TREEBANK if computed_index.chinese_first(model, i18n.current()) else BUNDLED  # as the search's index
    source = widget(st.radio, "g_source", opening, tr("Corpus"), options=SOURCES, horizontal=True, format_func=tr)
    chosen = chosen_corpus(source)
    if chosen is None:
        stop()
    key, texts, trees, note = chosen
    view = widget(st.segmented_control, "g_view", VIEWS[0], tr("View"), options=VIEWS, format_func=tr) or VIEWS[0]
    # The map reads distances and role metrics (a bundled corpus's kept on disk); the query-key view, the vectors too
    compute = computed_corpus.head_distances_of if view == VIEWS[0] else computed_corpus.corpus_pass_of
    corpus = queued(compute, model, key, texts, note=note)
    if corpus is None:
        stop()
    if note:
        st.caption(literal(note))
    if corpus.selection is not None and corpus.selection.left_out:
        st.caption(literal(selection_note(corpus.selection, "line" if source == TEXT_FILE else "sentence")))
    if view == VIEWS[0]:
        show_head_map(model, corpus, key, trees, source)
    else:
        show_qk_view(model, corpus, key)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
