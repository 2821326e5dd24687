"""Heads explorer: every head at a glance, then one head, one layer, one token; share and export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import AttentionResult
from mha_core.analysis.long_text import is_long
from mha_core.engine.attention import PATH_HELP
from mha_core.figures import charts
from mha_core.figures.view import AttentionView, score_map, top_keys
from mha_core.i18n import N_, tr
from mha_core.serving.export import (
    attention_csv,
    attention_json,
    figure_image,
    image_export_status,
    token_pair_csv,
    token_pair_json,
)
from mha_core.teaching.examples import focus_words
from views._inputs import sentence_box
from views._long import pieces_of, show_long_heads
from views._state import (
    chart,
    check_length,
    checked_run,
    current_model,
    forget_on_change,
    literal,
    narrow_screen,
    page_language,
    path_caption,
    view_of,
)

NUMBERS_MAX_UNITS = 20  # write weights in cells only when they stay readable
LINE_VIEW_MAX_UNITS = 60


def options_sidebar() -> tuple[bool, bool, bool]:
    with st.sidebar:
        st.markdown(tr("**View options**"))
        hide = st.checkbox(tr("Hide special tokens ([CLS], [SEP], a decoder's first token; rows renormalised)"),
                           key="hide_special", bind="query-params")
        merge = st.checkbox(tr("Merge word pieces into words"), key="merge_words", bind="query-params")
        avg = st.checkbox(tr("Average the heads of each layer"), key="avg_heads", bind="query-params")
    return hide, merge, avg


def pick_head_from_overview() -> None:
    points = st.session_state["overview"].selection.points
    if points:
        layer, head = points[0]["customdata"]
        st.session_state["layer"], st.session_state["head"] = int(layer), int(head)


def head_pickers(n_layers: int, n_heads: int) -> tuple[int, int]:
    left, right = st.columns(2)
    layer = left.selectbox(tr("Layer"), list(range(n_layers)), key="layer", bind="query-params", format_func=tr)
    head = right.selectbox(tr("Head"), list(range(n_heads)), key="head", bind="query-params",
                           disabled=n_heads == 1, format_func=lambda h: tr("mean of heads") if n_heads == 1 else str(h))
    return layer, (0 if n_heads == 1 else head)


def show_overview(maps: np.ndarray, selected: tuple[int, int], base: tuple) -> None:
    st.subheader(tr("All heads at a glance"))
    st.caption(tr("Each tile is one head's map (query rows, key columns); click a tile to open that head in the views "
                  "above. Longer texts are pooled (keys summed, queries averaged) to at most "
                  "{overview_max_bins}×{overview_max_bins} per tile.", overview_max_bins=charts.OVERVIEW_MAX_BINS))
    if narrow_screen():  # a phone: one layer, three heads to a row, stays legible
        st.caption(tr("On a narrow screen the overview shows layer {selected}: pick another layer above.",
            selected=selected[0]))
        build = lambda: charts.layer_tiles_figure(maps[selected[0]], *selected)  # noqa: E731
    else:
        build = lambda: charts.overview_figure(maps, selected=selected)  # noqa: E731
    chart((*base, "overview", selected), build, key="overview", on_select=pick_head_from_overview,
          selection_mode="points")


def show_one_head(result: AttentionResult, view: AttentionView, layer: int, head: int, avg: bool, base: tuple
                  ) -> None:
    n = len(view.labels)
    can_score = not (view.merged_words or avg)
    left, right = st.columns(2)
    scores = left.toggle(tr("Pre-softmax scores (q·k/√d_k)"), key="scores", bind="query-params", disabled=not can_score)
    narrow = narrow_screen()  # a phone's cells are narrower than the numbers
    numbers = right.toggle(tr("Numbers in cells"), value=n <= NUMBERS_MAX_UNITS and not narrow, key="numbers",
                           disabled=n > 40 or narrow)
    scores, numbers = scores and can_score, numbers and n <= 40
    chart((*base, "head", layer, head, scores, numbers),
          lambda: head_map_figure(result, view, layer, head, avg, scores, numbers), key="head_map")


def head_map_figure(result: AttentionResult, view: AttentionView, layer: int, head: int, avg: bool,
                    scores: bool, numbers: bool) -> dict:
    if scores:
        z = score_map(result, 0, layer, head, view.hidden_special)
        title = tr("Layer {layer}, head {head}: scaled scores before softmax", layer=layer, head=head)
    else:
        z = view.maps[layer, head]
        which = tr("mean of heads") if avg else tr("head {head}", head=head)
        title = tr("Layer {layer}, {which}: attention weights", layer=layer, which=which)
    return charts.head_figure(z, view.labels, title, numbers=numbers, scores=scores)


def show_line_view(view: AttentionView, layer: int, base: tuple) -> None:
    n_heads, n = view.maps.shape[1], len(view.labels)
    heads = st.multiselect(tr("Heads shown"), list(range(n_heads)), default=list(range(min(3, n_heads))),
                           key="line_heads", format_func=tr)
    min_weight = st.slider(tr("Hide lines below weight"), 0.0, 0.5, 0.1, 0.01, key="line_min")
    start = 0
    if n > LINE_VIEW_MAX_UNITS:  # a window keeps long texts readable; weights stay those of the full text
        start = st.slider(tr("First token shown"), 0, n - LINE_VIEW_MAX_UNITS, 0, key="line_start")
        st.caption(tr("Showing tokens {start}–{start2} of {n} (lines within the window).",
            start=start, start2=start + LINE_VIEW_MAX_UNITS - 1, n=n))
    window = slice(start, start + LINE_VIEW_MAX_UNITS)
    chart((*base, "lines", layer, tuple(heads), min_weight, start), lambda: charts.line_view_figure(
        view.maps[layer][:, window, window], view.labels[window], heads, min_weight), key="line_view")


def chosen_pair(view: AttentionView, result: AttentionResult) -> tuple[int, int]:
    """The token view's query and key: this run's widgets, else the URL's ("3: it"), else the units holding "it"
    and "animal" (found by AttentionResult.word_pieces, the rule every page and lesson uses)."""
    n = len(view.labels)
    forget_on_change(("query", "key"), view.labels)  # another sentence, model or display: its own "it", "animal"
    pair = []
    for name, word in zip(("query", "key"), focus_words(result.batch.texts[0]), strict=True):
        value = st.session_state.get(name, st.query_params.get(name))
        if isinstance(value, str):
            value = int(value.split(":")[0]) if value.split(":")[0].isdigit() else None
        pair.append(value if isinstance(value, int) and 0 <= value < n else view.unit_of(result.word_pieces(0, word)))
    return pair[0], pair[1]


def show_one_token(view: AttentionView, result: AttentionResult, base: tuple, meta: dict) -> None:
    labels = view.labels
    options = list(range(len(labels)))
    default_query, default_key = chosen_pair(view, result)
    left, right = st.columns(2)
    query = left.selectbox(tr("Query token"), options, index=default_query, key="query",
                           bind="query-params", format_func=lambda i: f"{i}: {labels[i]}")
    key = right.selectbox(tr("Key token"), options, index=default_key, key="key",
                          bind="query-params", format_func=lambda i: f"{i}: {labels[i]}")
    grid = view.maps[:, :, query, key]  # (L,H)
    chart((*base, "token", query, key), lambda: charts.layer_head_grid(
        grid, pair_title(labels[query], labels[key])), key="token_grid")
    best = np.unravel_index(int(grid.argmax()), grid.shape)
    st.markdown(tr("Strongest: layer {layer}, head {head} gives **{weight:.2f}** of the attention from '{query}' to "
                   "'{key}' (uniform would be {uniform:.2f}).", layer=best[0], head=best[1], weight=grid[best],
                   query=literal(labels[query]), key=literal(labels[key]), uniform=1 / len(labels)))
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


def export_meta(view: AttentionView, result: AttentionResult) -> dict:
    return {
        "text": result.batch.texts[0],
        "path": result.path,
        "backend": result.backend,
        "averaged_heads": view.maps.shape[1] == 1,
    }


def show_export(view: AttentionView, result: AttentionResult, layer: int, head: int, avg: bool) -> None:
    """Downloads are built only when clicked (callables), so big texts cost nothing until then."""
    n_layers, n_heads = view.maps.shape[:2]
    meta = export_meta(view, result)
    query, key = chosen_pair(view, result)
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        tr("CSV: this head"), lambda: attention_csv(view, [layer], [head]), "attention_head.csv", "text/csv"
    )
    c2.download_button(
        tr("JSON: this head"),
        lambda: attention_json(view, [layer], [head], meta),
        "attention_head.json",
        "application/json",
    )
    c3.download_button(
        tr("JSON: all heads"),
        lambda: attention_json(view, range(n_layers), range(n_heads), meta),
        "attention_all.json",
        "application/json",
    )
    st.markdown(tr("**Figures as images**"))
    ok, reason = image_export_status()
    if not ok:
        st.info(reason)
        return
    builders = {
        N_("overview"): lambda: charts.overview_figure(view.maps, selected=(layer, head)),
        N_("head"): lambda: head_map_figure(result, view, layer, head, avg, False, False),
        N_("token grid"): lambda: charts.layer_head_grid(
            view.maps[:, :, query, key], pair_title(view.labels[query], view.labels[key])
        ),
    }
    name = st.selectbox(tr("Figure"), list(builders), key="export_fig", format_func=tr)
    fmt = st.radio(tr("Format"), ["png", "svg"], horizontal=True, key="export_fmt", format_func=tr)
    if st.button(tr("Render image"), key="export_render"):
        try:
            with st.spinner(tr("Rendering with Chromium…")):
                data = figure_image(builders[name](), fmt)
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
    page_language()
    model = current_model()
    st.title(tr("Attention heads"))
    text = sentence_box()
    check_length(text)
    if is_long(pieces_of(str(model.model_dir), text)):  # q, k and the log-sum-exp kept, maps rebuilt on demand
        show_long_heads(model, text, head_pickers)
        return
    hide, merge, avg = options_sidebar()
    result = checked_run(text)
    st.caption(path_caption(result), help=PATH_HELP)
    view = view_of(str(model.model_dir), text, "auto", hide, merge, avg)
    base = ("heads", str(model.model_dir), text, hide, merge, avg)  # what every figure below depends on
    n_layers, n_heads = view.maps.shape[:2]
    layer, head = head_pickers(n_layers, n_heads)
    # Tabs bound to the URL run lazily: only the open tab's figures are built and sent. They come before the
    # overview, which for a 30-layer model is 2,000 px tall.
    one_head, one_layer, one_token, export = st.tabs(
        [tr("One head"), tr("One layer"), tr("One token"), tr("Export")], key="view", bind="query-params"
    )
    if one_head.open:
        with one_head:
            show_one_head(result, view, layer, head, avg, base)
    if one_layer.open:
        with one_layer:
            show_line_view(view, layer, base)
    if one_token.open:
        with one_token:
            show_one_token(view, result, base, export_meta(view, result))
    if export.open:
        with export:
            show_export(view, result, layer, head, avg)
    show_overview(view.maps, (layer, head), base)


main()
