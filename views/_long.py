"""The Heads page for a long text (over arch.MAX_PIECES pieces, up to the model's own limit): every head summarised,
one head downsampled with an exact zoom, one query's row over the whole text, exports; and the long-context roles
(sinks as a text grows, retrieval heads) of the Roles page. Computation lives in mha_core.analysis.long.text and
long_roles; this module only draws."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from mha_core import AttentionResult, InputError, LoadedModel
from mha_core.analysis.heads.display import uniform_piece_weight
from mha_core.analysis.heads.roles import head_label, ranked_heads
from mha_core.analysis.long import roles as long_roles
from mha_core.analysis.long.text import (
    MAX_CELLS,
    SUMMARIES,
    TOP_KEYS,
    ZOOM_MAX,
    HeadSummaries,
    block_side,
    chosen_rows,
    downsampled_map,
    kept_bytes,
    map_block,
    query_row,
    top_row_keys,
    zoom_ranges,
)
from mha_core.figures import long as figures
from mha_core.figures.charts import layer_head_grid
from mha_core.i18n import tr, worded
from mha_core.messages import N_
from mha_core.serving.computed import corpus as computed_corpus
from mha_core.serving.export import json_text
from mha_core.serving.limits import MAX_PIECES, megabytes
from views._state import chart, narrow_screen, path_caption, reading_notes, server, waiting
from views._text import literal
from views._visit import stop, tabs, widget

PHONE_HEIGHT = 440  # a square map on a phone's width


def reads_long(model: LoadedModel, text: str) -> bool:
    """Whether `text` is read the long way (q, k and the log-sum-exp kept, maps rebuilt on demand)."""
    return computed_corpus.reads_long(server(), model, text)


def show_long_heads(model: LoadedModel, text: str, pick_head: Callable[[int, int], tuple[int, int]]) -> None:
    """The whole Heads page for a long text."""
    try:
        with waiting() as wait:
            long = computed_corpus.long_text_of(server(), model, text, wait)
    except InputError as err:
        st.info(worded(err))
        stop()
    result, summaries = long.result, long.summaries
    n = result.lengths[0]
    reading_notes(result)
    st.caption(path_caption(result))
    st.info(tr("A long text: {n:,} pieces (over {limit:,}). Each layer's queries, keys and log-sum-exp are kept "
               "({kept}) instead of {maps:,} attention maps of {n:,} × {n:,}; every weight shown is rebuilt exactly "
               "from them. Word merging, hiding special tokens and the One layer view are off for long texts.",
               n=n, limit=MAX_PIECES, kept=megabytes(kept_bytes(result)),
               maps=result.n_layers * result.n_heads))
    if result.truncated[0]:
        st.warning(tr("The text was cut to the model's {kept:,} word pieces: {n:,} of {n2:,} pieces at the end are "
                      "not shown.", kept=n, n=result.n_tokens[0] - n, n2=result.n_tokens[0]))
    layer, head = pick_head(result.n_layers, result.n_heads)
    base = ("long", str(model.model_dir), text)
    one_head, one_token, export = tabs("long_view", (N_("One head"), N_("One token"), N_("Export")))
    if one_head.open:
        with one_head:
            show_downsampled(result, layer, head, base)
            show_zoom(result, layer, head, base)
    if one_token.open:
        with one_token:
            show_row(result, layer, head, base)
    if export.open:
        with export:
            show_long_export(result, summaries, layer, head, model.name)
    show_summaries(summaries, base)


def show_downsampled(result: AttentionResult, layer: int, head: int, base: tuple) -> None:
    n = result.lengths[0]
    how = widget(st.radio, "pool", "max", tr("Each cell shows"), options=["max", "mean"], horizontal=True,
                 format_func=lambda h: tr("block maximum") if h == "max" else tr("block mean"))
    side = block_side(n)
    st.caption(tr("The map pooled into blocks of {side} × {side} pieces (at most {cells:,} a side): the maximum shows "
                  "where any single weight is strong, the mean where weight is spread. Zoom with the chart's own "
                  "tools; the exact cells of a region are below.", side=side, cells=MAX_CELLS))

    def build() -> dict:
        cells, side = downsampled_map(result, 0, layer, head, how)
        title = tr("Layer {layer}, head {head}: {n:,} × {n:,} map in {side} × {side} blocks", layer=layer,
                   head=head, n=n, side=side)
        return figures.downsampled_figure(cells, side, n, title, how, PHONE_HEIGHT if narrow_screen() else 780)

    chart((*base, "downsampled", layer, head, how), build, key="long_map")


def show_zoom(result: AttentionResult, layer: int, head: int, base: tuple, end: int | None = None) -> None:
    """An exact region; it opens on the last `end` positions (those holding the input: a clip's speech, not the
    silence padding Whisper's window), by default the whole text's end."""
    n = result.lengths[0]
    end = n if end is None else max(1, min(end, n))
    st.subheader(tr("Exact cells of a region"))
    c1, c2, c3 = st.columns(3)
    context = base[1:]  # the model and the text
    size = widget(c3.number_input, "zoom_size", 24 if narrow_screen() else 64, tr("Size (rows and columns)"), 8,
                  ZOOM_MAX, step=8, fits=lambda v: 8 <= v <= ZOOM_MAX)
    q0 = widget(c1.number_input, "zoom_query", max(0, end - int(size)), tr("First query row"), 0, n - 1,
                context=context, fits=lambda v: 0 <= v < n)
    k0 = widget(c2.number_input, "zoom_key", 0, tr("First key column"), 0, n - 1, context=context,
                fits=lambda v: 0 <= v < n)
    rows, cols = zoom_ranges(n, int(q0), int(k0), int(size))
    st.caption(tr("Rows {r0:,}–{r1:,} and columns {c0:,}–{c1:,}, rebuilt from q, k and the log-sum-exp of this block "
                  "only.", r0=rows.start, r1=rows.stop - 1, c0=cols.start, c1=cols.stop - 1))
    labels = result.labels[0]

    def build() -> dict:
        z = map_block(result, 0, layer, slice(head, head + 1), rows, cols)[0].numpy()
        title = tr("Layer {layer}, head {head}: exact weights", layer=layer, head=head)
        return figures.block_figure(z, figures.positioned_labels(labels[rows.start:rows.stop], rows.start),
                                    figures.positioned_labels(labels[cols.start:cols.stop], cols.start), title,
                                    PHONE_HEIGHT + 100 if narrow_screen() else None)

    chart((*base, "zoom", layer, head, rows.start, cols.start, len(rows)), build, key="long_zoom")


def show_row(result: AttentionResult, layer: int, head: int, base: tuple, end: int | None = None,
             unit: str = N_("piece")) -> None:
    """One query's row, opening on the last of the first `end` positions; `unit` names what a key is (a piece,
    or a frame's time in seconds)."""
    n, labels = result.lengths[0], result.labels[0]
    end = n if end is None else max(1, min(end, n))
    query = int(widget(st.number_input, "long_query", end - 1, tr("Query position"), 0, n - 1, context=base[1:],
                       fits=lambda v: 0 <= v < n))
    st.caption(tr("Query {query:,}: '{label}'. Its weights over all {n:,} keys in layer {layer}, head {head}.",
                  query=query, label=literal(labels[query]), n=n, layer=layer, head=head))
    row = query_row(result, 0, layer, head, query)
    chart((*base, "row", layer, head, query), lambda: figures.row_figure(
        row, labels, tr("Layer {layer}, head {head}: query {query:,}", layer=layer, head=head, query=query)),
        key="long_row")
    top = top_row_keys(row)
    st.dataframe(pd.DataFrame({tr("key position"): [j for j, _ in top], tr(unit): [labels[j] for j, _ in top],
                               tr("weight"): [round(w, 4) for _, w in top]}), hide_index=True)
    uniform = uniform_piece_weight(n, query, result.causal, result.window(layer))
    st.caption(tr("The {k} keys with the most weight; uniform over the keys this query sees would be {uniform:.5f}.",
                  k=TOP_KEYS, uniform=uniform))


def show_summaries(summaries: HeadSummaries, base: tuple) -> None:
    st.subheader(tr("All heads at a glance"))
    name = widget(st.selectbox, "summary", next(iter(SUMMARIES)), tr("Summary"), options=list(SUMMARIES),
                  format_func=lambda s: figures.summary_name(s, summaries.window))
    st.caption(tr("Each cell is one head's mean over all {n:,} query rows, computed a band of rows at a time without "
                  "building any head's whole map. A sink parks its weight on the first token; a local head keeps it "
                  "within a few pieces; a windowed layer cannot look further back than its window.",
                  n=summaries.n_tokens))
    chart((*base, "summary", name), lambda: figures.summary_grid_figure(summaries, name), key="long_summary")
    chart((*base, "profiles"), lambda: figures.profiles_figure(summaries), key="long_profiles")


def show_long_export(result: AttentionResult, summaries: HeadSummaries, layer: int, head: int, model_name: str
                     ) -> None:
    """Every head's summaries (CSV), and the chosen head's rows of the zoomed region (JSON)."""
    table = pd.DataFrame([{"layer": la, "head": h, **{s: float(getattr(summaries, s)[la, h]) for s in SUMMARIES}}
                          for la in range(result.n_layers) for h in range(result.n_heads)])
    st.download_button(tr("CSV: every head's summaries"), table.to_csv(index=False), "long_summaries.csv",
                       "text/csv")
    n = result.lengths[0]
    rows = range(max(0, n - ZOOM_MAX), n)

    def rows_json() -> str:  # what the CLI's attention --heads L:H --rows A:B writes
        return json_text({"model": model_name, **chosen_rows(result, [(layer, head)], rows)})

    st.download_button(tr("JSON: this head's last {rows} query rows over the whole text", rows=len(rows)), rows_json,
                       "long_rows.json", "application/json")
    st.caption(tr("Other heads and rows, from the command line:"))
    st.code("python -m mha_core attention --text-file FILE --heads L:H --rows A:B --json OUT", language="bash",
            wrap_lines=True)  # no sideways scrolling on a phone (a region a keyboard cannot reach)


def show_long_roles(model: LoadedModel) -> None:
    """Sinks as a text grows and the needle probe's retrieval heads (Roles page)."""
    lengths, refusal = long_roles.affordable_lengths(model, long_roles.sink_lengths(model))
    st.subheader(tr("Attention sinks as the text grows"))
    if refusal is not None:  # said before any work starts; the lengths that fit are still read
        st.info(worded(refusal))
    if not lengths:
        show_needle(model, ("long roles", str(model.model_dir)))
        return
    st.caption(tr("Xiao et al. (2023): many heads park weight on the first token whatever it is, and keep doing so "
                  "as the text grows. Each line is the mean over a layer's heads of the weight on the first token, "
                  "on the bundled corpus's text cut to {lengths} pieces.",
                  lengths=", ".join(f"{n:,}" for n in lengths)))
    with waiting() as wait:
        growth = computed_corpus.sink_growth_of(server(), model, lengths, wait)
    base = ("long roles", str(model.model_dir))
    chart((*base, "sinks", lengths), lambda: figures.sink_growth_figure(growth.lengths, growth.first),
          key="sink_growth")
    last = growth.first[-1]
    st.dataframe(pd.DataFrame([{tr("head"): head_label(*lh),
                                **{tr("{n:,} pieces", n=n): round(float(growth.first[k][lh]), 3)
                                   for k, n in enumerate(growth.lengths)}} for lh in ranked_heads(last, 10)]),
                 hide_index=True)
    show_needle(model, base)


def show_needle(model: LoadedModel, base: tuple) -> None:
    st.subheader(tr("Retrieval heads: a needle in a haystack"))
    st.caption(tr("Wu et al. (2024): a fact (\"{needle}\") is put at a chosen depth of a long filler text, then a "
                  "question asks for it with the answer written after it. An answer piece is copied when the model's "
                  "top next piece is the needle's piece; a head's retrieval score is the share of copied pieces for "
                  "which its strongest key is exactly the needle's piece being copied.",
                  needle=long_roles.NEEDLE.strip().format(code=long_roles.CODE)))
    lengths = long_roles.needle_lengths(model.arch.long_max_length)
    c1, c2 = st.columns(2)
    n = widget(c1.select_slider, "needle_length", long_roles.default_needle_length(lengths), tr("Length (pieces)"),
               options=lengths)
    depth = widget(c2.slider, "needle_depth", long_roles.NEEDLE_DEPTH, tr("Needle depth (share of the text before it)"),
                   0.0, 1.0, step=0.1, fits=lambda d: 0.0 <= d <= 1.0)
    try:
        with waiting() as wait:
            probe = computed_corpus.needle_of(server(), model, n, depth, wait)
    except InputError as err:
        st.info(worded(err))
        return
    copied = sum(probe.copied)
    st.markdown(tr("The model copies **{copied} of {total}** pieces of the code ({text}): it predicts {predicted} "
                   "({n:,} pieces, needle at {depth:.0%}).", copied=copied, total=len(probe.code),
                   text=literal("".join(probe.code)), predicted=literal(" · ".join(probe.predicted)),
                   n=probe.n_pieces, depth=probe.depth))
    if copied == 0:
        st.info(tr("Nothing is copied, so no head can be credited: try a shorter text or another depth."))
        return
    chart((*base, "needle", n, depth), lambda: layer_head_grid(
        probe.scores, tr("Retrieval score of every head"), colorbar=N_("score"), zrange=(0.0, 1.0)),
        key="needle_grid")
