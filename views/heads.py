"""Heads explorer: every head at a glance, then one head, one layer, one token; share and export."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import AttentionResult
from mha_core.analysis.heads.display import (
    AttentionView,
    score_map,
    segment_b_start,
    top_keys,
    uniform_weight,
    words_by_default,
)
from mha_core.analysis.heads.roles import ranked_heads
from mha_core.figures import charts
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.serving.export import (
    attention_csv,
    attention_json,
    figure_image,
    image_export_status,
    token_pair_csv,
    token_pair_json,
)
from mha_core.teaching.walkthrough import PATH_HELP
from views._inputs import pair_box, sentence_box
from views._long import reads_long, show_long_heads
from views._search import show_search
from views._stacks import attention_kind, show_kind_heads
from views._state import chart, check_length, checked_run, current_model, narrow_screen, path_caption, server
from views._text import literal
from views._visit import chosen, tabs, widget
from views.parts.heads import show_overview

NUMBERS_MAX_UNITS = 20  # write weights in cells only when they stay readable
LINE_VIEW_MAX_UNITS = 60


def options_sidebar(text: str) -> tuple[bool, bool, bool]:
    """Display options; words are merged by default where the text's pieces are not its words (Chinese)."""
    with st.sidebar:
        st.markdown(tr("**View options**"))
        hide = widget(st.checkbox, "hide_special", False,
                      tr("Hide special tokens ([CLS], [SEP], a decoder's first token; rows renormalised)"))
        merge = widget(st.checkbox, "merge_words", words_by_default(text), tr("Merge word pieces into words"))
        avg = widget(st.checkbox, "avg_heads", False, tr("Average the heads of each layer"))
    return hide, merge, avg


def head_pickers(n_layers: int, n_heads: int, default: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    left, right = st.columns(2)
    layer = widget(left.selectbox, "layer", default[0], tr("Layer"), options=range(n_layers), format_func=tr)
    head = widget(right.selectbox, "head", default[1], tr("Head"), options=range(n_heads), disabled=n_heads == 1,
                  format_func=lambda h: tr("mean of heads") if n_heads == 1 else str(h))
    return layer, (0 if n_heads == 1 else head)


def show_one_head(result: AttentionResult, view: AttentionView, layer: int, head: int, avg: bool, base: tuple
                  ) -> None:
    n = len(view.labels)
    can_score = not (view.merged_words or avg)
    left, right = st.columns(2)
    scores = widget(left.toggle, "scores", False, tr("Pre-softmax scores (q·k/√d_k)"), disabled=not can_score)
    narrow = narrow_screen()  # a phone's cells are narrower than the numbers
    numbers = widget(right.toggle, "numbers", n <= NUMBERS_MAX_UNITS and not narrow, tr("Numbers in cells"),
                     disabled=n > 40 or narrow)
    scores, numbers = scores and can_score, numbers and n <= 40
    start = segment_b_start(view, result)
    chart((*base, "head", layer, head, scores, numbers),
          lambda: head_map_figure(result, view, layer, head, avg, scores, numbers, start), key="head_map")
    if start is not None:
        st.caption(tr("A sentence pair: the dashed lines mark where the second sentence (segment B) begins, at "
                      "{label}. Top left: the first sentence reading itself; top right: its words reading the second "
                      "sentence; bottom left: the second reading the first.", label=literal(view.labels[start])))


def head_map_figure(result: AttentionResult, view: AttentionView, layer: int, head: int, avg: bool,
                    scores: bool, numbers: bool, segment_b: int | None = None) -> dict:
    if scores:
        z = score_map(result, 0, layer, head, view.hidden_special)
        title = tr("Layer {layer}, head {head}: scaled scores before softmax", layer=layer, head=head)
    else:
        z = view.maps[layer, head]
        which = tr("mean of heads") if avg else tr("head {head}", head=head)
        title = tr("Layer {layer}, {which}: attention weights", layer=layer, which=which)
    figure = charts.head_figure(z, view.labels, title, numbers=numbers, scores=scores)
    return figure if segment_b is None else charts.with_segment_lines(figure, segment_b, len(view.labels))


def show_line_view(view: AttentionView, layer: int, head: int, base: tuple) -> None:
    n_heads, n = view.maps.shape[1], len(view.labels)
    heads = widget(st.multiselect, "line_heads", [head], tr("Heads shown"), options=range(n_heads), format_func=tr)
    min_weight = widget(st.slider, "line_min", 0.1, tr("Hide lines below weight"), 0.0, 0.5, step=0.01,
                        fits=lambda w: 0.0 <= w <= 0.5)
    start = 0
    if n > LINE_VIEW_MAX_UNITS:  # a window keeps long texts readable; weights stay those of the full text
        last = n - LINE_VIEW_MAX_UNITS
        start = widget(st.slider, "line_start", 0, tr("First token shown"), 0, last, fits=lambda s: 0 <= s <= last)
        st.caption(tr("Showing tokens {start}–{start2} of {n} (lines within the window).",
            start=start, start2=start + LINE_VIEW_MAX_UNITS - 1, n=n))
    window = slice(start, start + LINE_VIEW_MAX_UNITS)
    title = tr("Layer {layer}: each query (left) joined to the keys it attends to (right), heads {heads}, weights ≥ "
               "{min_weight:.2f}", layer=layer, heads=", ".join(map(str, heads)) or "–", min_weight=min_weight)
    chart((*base, "lines", layer, tuple(heads), min_weight, start), lambda: charts.line_view_figure(
        view.maps[layer][:, window, window], view.labels[window], heads, min_weight, title), key="line_view")


def default_pair(view: AttentionView, result: AttentionResult) -> tuple[int, int]:
    """The units holding the sentence's pronoun and the word it names (mha_core.teaching.examples.focus), found by
    AttentionResult.word_pieces (the rule every page and lesson uses); else the last unit and the first."""
    pronoun, antecedent = computed.focus_of(server(), result.batch.texts[0])
    last = len(view.labels) - 1
    return (view.unit_of(result.word_pieces(0, pronoun), last) if pronoun else last,
            view.unit_of(result.word_pieces(0, antecedent), 0) if antecedent else 0)


def opening_head(view: AttentionView, result: AttentionResult) -> tuple[int, int]:
    """The head the page opens on: the one whose pronoun row gives the word it names the most weight (layer 0, head
    0 for a sentence without a pronoun)."""
    pronoun, antecedent = computed.focus_of(server(), result.batch.texts[0])
    if not (pronoun and antecedent):
        return 0, 0
    return view.strongest_head(*default_pair(view, result))


def chosen_pair(view: AttentionView, result: AttentionResult, context: tuple) -> tuple[int, int]:
    """The token view's query and key: the visitor's for this text, model and display (`context`), else the
    default pair."""
    defaults, units = default_pair(view, result), range(len(view.labels))
    return tuple(chosen(name, default, context, units) for name, default in zip(("query", "key"), defaults,
                                                                                  strict=True))


def show_one_token(view: AttentionView, result: AttentionResult, base: tuple, meta: dict) -> None:
    labels = view.labels
    context, units = base[1:5], range(len(labels))  # model, text, hidden specials, merged words
    default_query, default_key = default_pair(view, result)
    left, right = st.columns(2)
    query = widget(left.selectbox, "query", default_query, tr("Query token"), context=context, options=units,
                   format_func=lambda i: f"{i}: {labels[i]}")
    key = widget(right.selectbox, "key", default_key, tr("Key token"), context=context, options=units,
                 format_func=lambda i: f"{i}: {labels[i]}")
    grid = view.maps[:, :, query, key]  # (L,H)
    chart((*base, "token", query, key), lambda: charts.layer_head_grid(
        grid, pair_title(labels[query], labels[key])), key="token_grid")
    best = ranked_heads(grid, 1)[0]
    uniform = uniform_weight(view, query, result.causal, result.window(best[0]))
    st.markdown(tr("Strongest: layer {layer}, head {head} gives **{weight:.2f}** of the attention from '{query}' to "
                   "'{key}' (uniform would be {uniform:.3g}).", layer=best[0], head=best[1], weight=grid[best],
                   query=literal(labels[query]), key=literal(labels[key]), uniform=uniform))
    st.caption(tr("Each head's three strongest keys for this query:"))  # a phone's table toolbar sits over this line
    st.dataframe(top_keys_table(view, query), hide_index=True)
    c1, c2 = st.columns(2)
    c1.download_button(
        tr("CSV: this pair in every head"),
        lambda: token_pair_csv(view, query, key),
        "token_pair.csv",
        "text/csv",
        key="pair_csv",
    )
    c2.download_button(
        tr("JSON: this pair in every head"),
        lambda: token_pair_json(view, query, key, meta),
        "token_pair.json",
        "application/json",
        key="pair_json",
    )


def pair_title(query: str, key: str) -> str:
    return tr("Weight from '{query}' to '{key}' in every head", query=query, key=key)


def top_keys_table(view: AttentionView, query: int, k: int = 3) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                tr("layer"): layer,
                tr("head"): head,
                **{tr("top {rank}", rank=i + 1): f"{label} ({weight:.2f})" for i, (label, weight) in enumerate(keys)},
            }
            for layer, head, keys in top_keys(view, query, k)
        ]
    )


def shortened(text: str, limit: int = 80) -> str:
    """A sentence for a figure's title: whole up to `limit` characters, else its start and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def export_meta(view: AttentionView, result: AttentionResult) -> dict:
    return {
        "text": result.batch.texts[0],
        "path": result.path,
        "backend": result.backend,
        "averaged_heads": view.maps.shape[1] == 1,
    }


def show_export(view: AttentionView, result: AttentionResult, layer: int, head: int, avg: bool, base: tuple) -> None:
    """Downloads are built only when clicked (callables), so big texts cost nothing until then."""
    meta = export_meta(view, result)
    query, key = chosen_pair(view, result, base[1:5])
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        tr("CSV: this head"), lambda: attention_csv(view, [layer], [head]), "attention_head.csv", "text/csv"
    )
    c2.download_button(
        tr("JSON: this head"),
        lambda: attention_json(view, [(layer, head)], meta),
        "attention_head.json",
        "application/json",
    )
    c3.download_button(
        tr("JSON: all heads"),
        lambda: attention_json(view, None, meta),
        "attention_all.json",
        "application/json",
    )
    st.markdown(tr("**Figures as images**"))
    ok, reason = image_export_status()
    if not ok:
        st.info(reason)
        return
    builders = {
        N_("overview"): lambda: charts.overview_figure(view.maps, selected=(layer, head), title=tr(
            "{model}: every head at a glance, layer {layer} head {head} outlined — {text}", model=current_model().name,
            layer=layer, head=head, text=shortened(result.batch.texts[0]))),
        N_("head"): lambda: head_map_figure(result, view, layer, head, avg, False, False),
        N_("token grid"): lambda: charts.layer_head_grid(
            view.maps[:, :, query, key], pair_title(view.labels[query], view.labels[key])
        ),
    }
    name = widget(st.selectbox, "export_fig", next(iter(builders)), tr("Figure"), options=list(builders),
                  format_func=tr)
    fmt = widget(st.radio, "export_fmt", "png", tr("Format"), options=["png", "svg"], horizontal=True, format_func=tr)
    if st.button(tr("Render image"), key="export_render"):
        figure = builders[name]()  # outside the try: a bug in a figure is a bug, not a rendering failure
        try:
            with st.spinner(tr("Rendering with Chromium…")):
                data = figure_image(figure, fmt)
        except Exception as err:  # noqa: BLE001 - kaleido/Chromium failures are a message, not a crash
            st.error(
                tr(
                    "The image could not be rendered ({name}); the camera icon on each chart still downloads a PNG.",
                    name=err.__class__.__name__,
                )
            )
            return
        mime = "image/svg+xml" if fmt == "svg" else "image/png"
        st.download_button(tr("Download {value}", value=fmt.upper()), data, f"{name.replace(' ', '_')}.{fmt}", mime)


def main() -> None:
    model = current_model()
    st.title(tr("Attention heads"))
    st.caption(tr("Type a sentence or pick an example. Each head of each layer decides how much every word piece "
                  "(query, a row) takes from every other (key, a column): pick a layer and a head, or click a tile of "
                  "the overview at the bottom, to see one head large; One token shows a pair of words in every head."))
    text = sentence_box()
    kind = attention_kind()
    check_length(text)
    if model.encoder_decoder:  # its decoder's or cross-attention (a text model's encoder is read below, alone)
        show_kind_heads(model, text, kind)
        return
    pair = pair_box(model)
    if pair is None and reads_long(model, text):
        show_long_heads(model, text, head_pickers)
        return
    hide, merge, avg = options_sidebar(text)
    result = checked_run(text, pair=pair)
    st.caption(path_caption(result), help=tr(PATH_HELP))
    view = computed.view_of(server(), model, text, "auto", hide, merge, avg, pair)
    base = ("heads", str(model.model_dir), text, hide, merge, avg, pair)  # what every figure below depends on
    n_layers, n_heads = view.maps.shape[:2]
    layer, head = head_pickers(n_layers, n_heads, opening_head(view, result))
    # Tabs bound to the URL run lazily: only the open tab's figures are built and sent. They come before the
    # overview, which for a 30-layer model is 2,000 px tall.
    one_head, one_layer, one_token, search, export = tabs("view", (N_("One head"), N_("One layer"), N_("One token"),
                                                                  N_("Search a corpus"), N_("Export")))
    if one_head.open:
        with one_head:
            show_one_head(result, view, layer, head, avg, base)
    if one_layer.open:
        with one_layer:
            show_line_view(view, layer, head, base)
    if one_token.open:
        with one_token:
            show_one_token(view, result, base, export_meta(view, result))
    if search.open:
        with search:
            show_search(model, text)
    if export.open:
        with export:
            show_export(view, result, layer, head, avg, base)
    show_overview(view.maps, (layer, head), base)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
