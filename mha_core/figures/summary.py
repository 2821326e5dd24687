"""Every chart in one sentence (issue 82): what it shows, from the numbers it draws, in the page's language. A screen
reader reads it as the chart's accessible name (views/_state.chart); a sighted visitor asks for it under the chart.

A builder that knows what its figure means writes the sentence itself (`with_summary`: one head's strongest link,
the most focused head of the overview, the commonest role); any other figure is described from its traces:
a heatmap's largest and smallest cell, a bar chart's highest and lowest bar, a line chart's highest line at its
right end, a scatter's points and series, a sunburst's largest part.
"""

from __future__ import annotations

import html
import re
import warnings
from collections import Counter
from collections.abc import Sequence

import numpy as np

from mha_core import i18n
from mha_core.figures.spec import FigureDict, array_of
from mha_core.i18n import tr

LISTED = 6  # names a sentence lists before "…"


def number(value: float) -> str:
    """A number as a sentence writes it: 0.62, 0.0123, 12.3, 1,234."""
    value = float(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def plain(text: object) -> str:
    """A label or title without plotly's markup: tags dropped, entities read, spaces collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", str(text)))).strip()


def listed(items: Sequence[str]) -> str:
    """Items as a sentence lists them ("a, b, c"; "a、b、c" in Chinese), the first LISTED and "…"."""
    shown = [*items[:LISTED], "…"] if len(items) > LISTED else list(items)
    return ("、" if i18n.current() == "zh" else ", ").join(shown)


def title_of(figure: FigureDict) -> str:
    title = figure.get("layout", {}).get("title")
    text = title.get("text", "") if isinstance(title, dict) else title or ""
    return plain(text) or tr("This chart")


def with_summary(figure: FigureDict, sentence: str) -> FigureDict:
    """The figure with its own sentence (kept in layout.meta, which plotly.js keeps and draws nothing of)."""
    layout = figure.setdefault("layout", {})
    meta = layout.get("meta") if isinstance(layout.get("meta"), dict) else {}
    layout["meta"] = {**meta, "summary": sentence}
    return figure


def described(figure: FigureDict) -> FigureDict:
    """A copy of the figure whose layout.meta holds its sentence (the builder's, else one read from its traces)."""
    layout = dict(figure.get("layout", {}))
    meta = layout.get("meta") if isinstance(layout.get("meta"), dict) else {}
    layout["meta"] = {**meta, "summary": describe(figure)}
    return {**figure, "layout": layout}


def describe(figure: FigureDict) -> str:
    """The figure's sentence: its builder's, or one read from its traces."""
    meta = figure.get("layout", {}).get("meta")
    if isinstance(meta, dict) and meta.get("summary"):
        return str(meta["summary"])
    data = [trace for trace in figure.get("data", []) if trace.get("visible", True) is not False]
    title = title_of(figure)
    kinds = {trace.get("type", "scatter") for trace in data}
    if "heatmap" in kinds:
        shown = [t for t in data if t.get("type") == "heatmap" and t.get("showscale", True) is not False]
        return heatmap_sentence(title, (shown or [t for t in data if t.get("type") == "heatmap"])[-1])
    if "bar" in kinds:
        return bar_sentence(title, [t for t in data if t.get("type") == "bar"])
    if "sunburst" in kinds:
        return sunburst_sentence(title, next(t for t in data if t.get("type") == "sunburst"))
    series = [t for t in data if t.get("type", "scatter") in ("scatter", "scattergl") and t.get("name")]
    lines = [t for t in series if "lines" in t.get("mode", "lines")]  # plotly draws a scatter without a mode as lines
    if lines:
        return lines_sentence(title, lines)
    if series:
        return points_sentence(title, series)
    return tr("{title}.", title=title)


def labels_of(trace: dict, axis: str, count: int) -> list[str]:
    """A trace's labels along `axis` ("x", "y"), as many as `count` (positions where it has none)."""
    given = trace.get(axis)
    values = list(array_of(given)) if given is not None else list(range(count))
    return [plain(v) for v in values[:count]] + [str(i) for i in range(len(values), count)]


def heatmap_sentence(title: str, trace: dict) -> str:
    """The largest and the smallest cell, each with its row and column (and what is written in it, if anything)."""
    z = np.asarray(array_of(trace["z"]), dtype=np.float64)
    z = z.reshape(1, -1) if z.ndim == 1 else z
    if not np.isfinite(z).any():
        return tr("{title}.", title=title)
    rows, columns = labels_of(trace, "y", z.shape[0]), labels_of(trace, "x", z.shape[1])
    high = np.unravel_index(np.nanargmax(z), z.shape)
    low = np.unravel_index(np.nanargmin(z), z.shape)
    text = trace.get("text") if "%{text}" in str(trace.get("texttemplate", "")) else None
    written = f" ({plain(text[high[0]][high[1]])})" if text else ""
    return tr("{title}: the largest value, {value}{written}, is at {row}, {column}; the smallest, {low}, at {low_row}, "
              "{low_column}.", title=title, value=number(z[high]), written=written, row=rows[high[0]],
              column=columns[high[1]], low=number(z[low]), low_row=rows[low[0]], low_column=columns[low[1]])


def bar_values(trace: dict) -> tuple[list[str], np.ndarray]:
    """A bar trace's labels and values, horizontal or vertical."""
    along, value = ("y", "x") if trace.get("orientation") == "h" else ("x", "y")
    values = np.asarray(array_of(trace.get(value, [])), dtype=np.float64)
    return labels_of(trace, along, len(values)), values


def bar_sentence(title: str, traces: list[dict]) -> str:
    """One series: its highest and lowest bar; stacked series: the largest in all."""
    if len(traces) > 1 and len({t.get("name") for t in traces}) > 1:
        totals = {plain(t.get("name", "")): float(np.nansum(bar_values(t)[1])) for t in traces}
        largest = max(totals, key=totals.get)
        return tr("{title}: {parts} parts stacked over {bars} bars; the largest in all is {name}, {value}.",
                  title=title, parts=len(traces), bars=len(bar_values(traces[0])[1]), name=largest,
                  value=number(totals[largest]))
    labels, values = bar_values(traces[0])
    if not len(values):
        return tr("{title}.", title=title)
    high, low = int(np.nanargmax(values)), int(np.nanargmin(values))
    return tr("{title}: {count} bars; the highest, '{label}', is {value}; the lowest, '{low_label}', {low}.",
              title=title, count=len(values), label=bare(labels[high]), value=number(values[high]),
              low_label=bare(labels[low]), low=number(values[low]))


def bare(label: str) -> str:
    """An axis label without the position charts.indexed_labels puts before a token ("3 it" -> "it")."""
    return re.sub(r"^\d+ (?=\S)", "", label)


def lines_sentence(title: str, traces: list[dict]) -> str:
    """How many lines; the one highest at its right end, and there."""
    ends = {}
    for trace in traces:
        ys = np.asarray(array_of(trace.get("y", [])), dtype=np.float64)
        finite = np.flatnonzero(np.isfinite(ys))
        if len(finite):
            xs = labels_of(trace, "x", len(ys))
            ends[plain(trace.get("name", ""))] = (xs[finite[-1]], float(ys[finite[-1]]))
    if not ends:
        return tr("{title}.", title=title)
    name = max(ends, key=lambda n: ends[n][1])
    return tr("{title}: {count} lines ({names}); at the right end the highest is {name}, {value} at {x}.", title=title,
              count=len(ends), names=listed(list(ends)), name=name, value=number(ends[name][1]), x=ends[name][0])


def points_sentence(title: str, traces: list[dict]) -> str:
    points = sum(len(array_of(t.get("x", []))) for t in traces)
    names = list(dict.fromkeys(plain(t["name"]) for t in traces))
    return tr("{title}: {points} points in {count} series ({names}).", title=title, points=points, count=len(names),
              names=listed(names))


def sunburst_sentence(title: str, trace: dict) -> str:
    """The whole, and its largest part (a child of the centre)."""
    ids, parents = list(trace.get("ids") or trace["labels"]), list(trace["parents"])
    labels, values = list(trace["labels"]), [float(v) for v in trace["values"]]
    root = parents.index("")
    children = [i for i, parent in enumerate(parents) if parent == ids[root]]
    if not children:
        return tr("{title}.", title=title)
    largest = max(children, key=lambda i: values[i])
    return tr("{title}: {total} in all; the largest part, {label}, holds {value} ({share:.0%}).", title=title,
              total=number(values[root]), label=plain(labels[largest]), value=number(values[largest]),
              share=values[largest] / max(values[root], 1e-12))


def strongest_link(z: np.ndarray, labels: Sequence[str], title: str, scores: bool) -> str:
    """One head's map (N,N): the query that puts the most of its attention on one key (scores: the largest and the
    smallest score)."""
    z = np.asarray(z, dtype=np.float64)
    high, low = np.unravel_index(np.nanargmax(z), z.shape), np.unravel_index(np.nanargmin(z), z.shape)
    if scores:
        return tr("{title}: the largest score, {score}, is '{query}' on '{key}'; the smallest, {low}, '{low_query}' on "
                  "'{low_key}'.", title=plain(title), score=number(z[high]), query=labels[high[0]],
                  key=labels[high[1]], low=number(z[low]), low_query=labels[low[0]], low_key=labels[low[1]])
    return tr("{title}: '{query}' puts {weight} of its attention on '{key}', the largest weight in the map.",
              title=plain(title), query=labels[high[0]], weight=number(z[high]), key=labels[high[1]])


def lines_of_heads(layer_maps: np.ndarray, labels: Sequence[str], heads: Sequence[int], title: str) -> str:
    """The line view (H,N,N) of `heads`: its strongest line, which query to which key in which head."""
    if not len(heads):
        return tr("{title}.", title=plain(title) or tr("This chart"))
    shown = np.asarray(layer_maps[list(heads)], dtype=np.float64)
    k, query, key = np.unravel_index(np.argmax(shown), shown.shape)
    return tr("{title}: heads {heads}; the strongest line joins '{query}' to '{key}' in head {head}, weight {weight}.",
              title=plain(title) or tr("This chart"), heads=listed([str(h) for h in heads]), query=labels[query],
              key=labels[key], head=heads[k], weight=number(shown[k, query, key]))


def overview_sentence(maps: np.ndarray, selected: tuple[int, int] | None, title: str, first_layer: int = 0) -> str:
    """Every head (L,H,N,N; the first numbered `first_layer`): how many, the most focused (its rows' largest weight,
    averaged: NaN rows of padding left out) and the one chosen."""
    with warnings.catch_warnings():  # a padded tile: all NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        focus = np.nanmean(np.nanmax(maps, axis=-1), axis=-1)  # (L,H)
    layer, head = np.unravel_index(np.nanargmax(focus), focus.shape)
    found = {"title": plain(title), "heads": maps.shape[1], "layer": int(layer) + first_layer, "head": int(head),
             "weight": number(focus[layer, head])}
    sentence = (tr("{title}: {heads} heads; the most focused, L{layer} H{head}, puts {weight} of a row on one key on "
                   "average.", **found) if maps.shape[0] == 1 else
                tr("{title}: {layers} layers × {heads} heads; the most focused, L{layer} H{head}, puts {weight} of a "
                   "row on one key on average.", layers=maps.shape[0], **found))
    if selected is None:
        return sentence
    return sentence + (" " if i18n.current() != "zh" else "") + tr("L{layer} H{head} is open.", layer=selected[0],
                                                                  head=selected[1])


def counted(labels: Sequence[str], title: str) -> str:
    """A grid of categories (role labels, translated): how many cells, the commonest categories with their counts."""
    common = Counter(labels).most_common(3)
    return tr("{title}: {count} heads; the commonest: {roles}.", title=plain(title), count=len(labels),
              roles=listed([f"{name} {n}" for name, n in common]))


def brightest_patch(patch_map: np.ndarray, title: str) -> str:
    """One head over a photo (R,C weights per patch): the patch it weighs most."""
    row, column = np.unravel_index(np.argmax(patch_map), patch_map.shape)
    return tr("{title}: the patch in row {row}, column {column} gets the largest weight, {weight}.",
              title=plain(title), row=int(row), column=int(column), weight=number(patch_map[row, column]))


def chosen_patch(query: tuple[int, int] | None, title: str) -> str:
    if query is None:
        return tr("{title}.", title=plain(title))
    return tr("{title}; the chosen patch is in row {row}, column {column}.", title=plain(title), row=query[0],
              column=query[1])


def mosaic_alt(n_layers: int, n_heads: int, wide: bool) -> str:
    """The text alternative of every head's overlay (figures.vision.mosaic_png)."""
    laid_out = tr("layers across, heads down") if wide else tr("layers down, heads across")
    return tr("Every head's attention drawn over the photo, {layers} layers × {heads} heads ({laid_out}): bright where "
              "a head looks, dim where it does not.", layers=n_layers, heads=n_heads, laid_out=laid_out)


def qr_alt(link: str) -> str:
    """The text alternative of the class's QR code."""
    return tr("QR code of the students' link: {link}", link=link)
