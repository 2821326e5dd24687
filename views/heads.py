"""Heads explorer: every head at a glance, then one head, one layer, one token; share and export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import AttentionResult
from mha_core.engine.attention import PATH_HELP
from mha_core.figures import charts
from mha_core.figures.view import AttentionView, score_map, top_keys
from mha_core.serving.export import (
    attention_csv,
    attention_json,
    figure_image,
    image_export_status,
    token_pair_csv,
    token_pair_json,
)
from views._state import (
    chart,
    checked_run,
    current_model,
    forget_on_change,
    literal,
    narrow_screen,
    path_caption,
    sentence_box,
    view_of,
)

NUMBERS_MAX_UNITS = 20  # write weights in cells only when they stay readable
LINE_VIEW_MAX_UNITS = 60


def options_sidebar() -> tuple[bool, bool, bool]:
    with st.sidebar:
        st.markdown("**View options**")
        hide = st.checkbox("Hide special tokens ([CLS], [SEP], a decoder's first token; rows renormalised)",
                           key="hide_special", bind="query-params")
        merge = st.checkbox("Merge word pieces into words", key="merge_words", bind="query-params")
        avg = st.checkbox("Average the heads of each layer", key="avg_heads", bind="query-params")
    return hide, merge, avg


def pick_head_from_overview() -> None:
    points = st.session_state["overview"].selection.points
    if points:
        layer, head = points[0]["customdata"]
        st.session_state["layer"], st.session_state["head"] = int(layer), int(head)


def head_pickers(n_layers: int, n_heads: int) -> tuple[int, int]:
    left, right = st.columns(2)
    layer = left.selectbox("Layer", list(range(n_layers)), key="layer", bind="query-params")
    head = right.selectbox("Head", list(range(n_heads)), key="head", bind="query-params",
                           disabled=n_heads == 1, format_func=lambda h: "mean of heads" if n_heads == 1 else str(h))
    return layer, (0 if n_heads == 1 else head)


def show_overview(maps: np.ndarray, selected: tuple[int, int], base: tuple) -> None:
    st.subheader("All heads at a glance")
    st.caption("Each tile is one head's map (query rows, key columns); click a tile to open that head in the views "
               f"above. Longer texts are pooled (keys summed, queries averaged) to at most {charts.OVERVIEW_MAX_BINS}"
               f"×{charts.OVERVIEW_MAX_BINS} per tile.")
    if narrow_screen():  # a phone: one layer, three heads to a row, stays legible
        st.caption(f"On a narrow screen the overview shows layer {selected[0]}: pick another layer above.")
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
    scores = left.toggle("Pre-softmax scores (q·k/√d_k)", key="scores", bind="query-params", disabled=not can_score)
    narrow = narrow_screen()  # a phone's cells are narrower than the numbers
    numbers = right.toggle("Numbers in cells", value=n <= NUMBERS_MAX_UNITS and not narrow, key="numbers",
                           disabled=n > 40 or narrow)
    scores, numbers = scores and can_score, numbers and n <= 40
    chart((*base, "head", layer, head, scores, numbers),
          lambda: head_map_figure(result, view, layer, head, avg, scores, numbers), key="head_map")


def head_map_figure(result: AttentionResult, view: AttentionView, layer: int, head: int, avg: bool,
                    scores: bool, numbers: bool) -> dict:
    if scores:
        z = score_map(result, 0, layer, head, view.hidden_special)
        title = f"Layer {layer}, head {head}: scaled scores before softmax"
    else:
        z = view.maps[layer, head]
        title = f"Layer {layer}, {'mean of heads' if avg else f'head {head}'}: attention weights"
    return charts.head_figure(z, view.labels, title, numbers=numbers, scores=scores)


def show_line_view(view: AttentionView, layer: int, base: tuple) -> None:
    n_heads, n = view.maps.shape[1], len(view.labels)
    heads = st.multiselect("Heads shown", list(range(n_heads)), default=list(range(min(3, n_heads))),
                           key="line_heads")
    min_weight = st.slider("Hide lines below weight", 0.0, 0.5, 0.1, 0.01, key="line_min")
    start = 0
    if n > LINE_VIEW_MAX_UNITS:  # a window keeps long texts readable; weights stay those of the full text
        start = st.slider("First token shown", 0, n - LINE_VIEW_MAX_UNITS, 0, key="line_start")
        st.caption(f"Showing tokens {start}–{start + LINE_VIEW_MAX_UNITS - 1} of {n} (lines within the window).")
    window = slice(start, start + LINE_VIEW_MAX_UNITS)
    chart((*base, "lines", layer, tuple(heads), min_weight, start), lambda: charts.line_view_figure(
        view.maps[layer][:, window, window], view.labels[window], heads, min_weight), key="line_view")


def chosen_pair(view: AttentionView, result: AttentionResult) -> tuple[int, int]:
    """The token view's query and key: this run's widgets, else the URL's ("3: it"), else the units holding "it"
    and "animal" (found by AttentionResult.word_pieces, the rule every page and lesson uses)."""
    n = len(view.labels)
    forget_on_change(("query", "key"), view.labels)  # another sentence, model or display: its own "it", "animal"
    pair = []
    for name, word in (("query", "it"), ("key", "animal")):
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
    query = left.selectbox("Query token", options, index=default_query, key="query",
                           bind="query-params", format_func=lambda i: f"{i}: {labels[i]}")
    key = right.selectbox("Key token", options, index=default_key, key="key",
                          bind="query-params", format_func=lambda i: f"{i}: {labels[i]}")
    grid = view.maps[:, :, query, key]  # (L,H)
    chart((*base, "token", query, key), lambda: charts.layer_head_grid(
        grid, f"Weight from '{labels[query]}' to '{labels[key]}' in every head"), key="token_grid")
    best = np.unravel_index(int(grid.argmax()), grid.shape)
    st.markdown(f"Strongest: layer {best[0]}, head {best[1]} gives **{grid[best]:.2f}** of the attention "
                f"from '{literal(labels[query])}' to '{literal(labels[key])}' "
                f"(uniform would be {1 / len(labels):.2f}).")
    st.dataframe(top_keys_table(view, query), hide_index=True)
    c1, c2 = st.columns(2)
    c1.download_button("CSV: this pair in every head", lambda: token_pair_csv(view, query, key), "token_pair.csv",
                       "text/csv", key="pair_csv")
    c2.download_button("JSON: this pair in every head", lambda: token_pair_json(view, query, key, meta),
                       "token_pair.json", "application/json", key="pair_json")


def top_keys_table(view: AttentionView, query: int, k: int = 3) -> pd.DataFrame:
    return pd.DataFrame([{"layer": layer, "head": head, **{f"top {i + 1}": f"{label} ({weight:.2f})"
                                                             for i, (label, weight) in enumerate(keys)}}
                         for layer, head, keys in top_keys(view, query, k)])


def export_meta(view: AttentionView, result: AttentionResult) -> dict:
    return {"text": result.batch.texts[0], "path": result.path, "backend": result.backend,
            "averaged_heads": view.maps.shape[1] == 1}


def show_export(view: AttentionView, result: AttentionResult, layer: int, head: int, avg: bool) -> None:
    """Downloads are built only when clicked (callables), so big texts cost nothing until then."""
    n_layers, n_heads = view.maps.shape[:2]
    meta = export_meta(view, result)
    query, key = chosen_pair(view, result)
    c1, c2, c3 = st.columns(3)
    c1.download_button("CSV: this head", lambda: attention_csv(view, [layer], [head]), "attention_head.csv",
                       "text/csv")
    c2.download_button("JSON: this head", lambda: attention_json(view, [layer], [head], meta),
                       "attention_head.json", "application/json")
    c3.download_button("JSON: all heads", lambda: attention_json(view, range(n_layers), range(n_heads), meta),
                       "attention_all.json", "application/json")
    st.markdown("**Figures as images**")
    ok, reason = image_export_status()
    if not ok:
        st.info(reason)
        return
    builders = {
        "overview": lambda: charts.overview_figure(view.maps, selected=(layer, head)),
        "head": lambda: head_map_figure(result, view, layer, head, avg, False, False),
        "token grid": lambda: charts.layer_head_grid(
            view.maps[:, :, query, key], f"Weight from '{view.labels[query]}' to '{view.labels[key]}' in every head"),
    }
    name = st.selectbox("Figure", list(builders), key="export_fig")
    fmt = st.radio("Format", ["png", "svg"], horizontal=True, key="export_fmt")
    if st.button("Render image", key="export_render"):
        try:
            with st.spinner("Rendering with Chromium…"):
                data = figure_image(builders[name](), fmt)
        except Exception as err:  # noqa: BLE001 - kaleido/Chromium failures are a message, not a crash
            st.error(f"The image could not be rendered ({err.__class__.__name__}); the camera icon on each "
                     "chart still downloads a PNG.")
            return
        mime = "image/svg+xml" if fmt == "svg" else "image/png"
        st.download_button(f"Download {fmt.upper()}", data, f"{name.replace(' ', '_')}.{fmt}", mime)


def main() -> None:
    model = current_model()
    st.title("Attention heads")
    text = sentence_box()
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
        ["One head", "One layer", "One token", "Export"], key="view", bind="query-params"
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
