"""Figures of long texts (issue 24): every head's summaries and distance profiles, a head's downsampled map, an
exact zoomed block with its labels, a query's row over the whole text, the first token's share as a text grows.

Shapes: L layers, H heads, T pieces, M downsampled cells a side, NB distance bins, K lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mha_core.analysis.long.text import SUMMARIES, HeadSummaries
from mha_core.figures import colours
from mha_core.figures.charts import layer_head_grid, layer_tick, safe_label
from mha_core.figures.spec import FigureDict, finished, named_colorscale
from mha_core.i18n import tr


def summary_name(name: str, window: int) -> str:
    """A summary's name in the page's language (`window`: the ±w of the local share)."""
    return tr(SUMMARIES[name], window=window)


def summary_grid_figure(summaries: HeadSummaries, name: str) -> FigureDict:
    """(L,H) one summary of every head, values in the cells."""
    label = summary_name(name, summaries.window)
    values = getattr(summaries, name)
    zrange = None if name in ("entropy", "distance") else (0.0, 1.0)
    return layer_head_grid(values, tr("{summary} of every head ({n:,} pieces)", summary=label,
                                      n=summaries.n_tokens), colorbar=label, zrange=zrange)


def bin_labels(edges: Sequence[int]) -> list[str]:
    """"0", "1", "2–3", "4–7", … for distance bins [edges[k], edges[k+1])."""
    return [str(lo) if hi - lo == 1 else f"{lo}–{hi - 1}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def profiles_figure(summaries: HeadSummaries) -> FigureDict:
    """Every head's weight by distance (rows: heads layer by layer; columns: log-spaced distance bins)."""
    n_layers, n_heads, n_bins = summaries.profile.shape
    rows = [f"{layer_tick(layer)} H{head}" for layer in range(n_layers) for head in range(n_heads)]
    z = summaries.profile.reshape(n_layers * n_heads, n_bins).astype(np.float32)
    trace = {"type": "heatmap", "z": z, "x": bin_labels(summaries.edges), "y": rows, "zmin": 0, "zmax": 1,
             "colorscale": named_colorscale(colours.WEIGHTS), "colorbar": {"title": {"text": tr("weight")}},
             "hovertemplate": tr("%{y}, distance %{x}: %{z:.3f}<extra></extra>")}
    layer_ticks = [f"{layer_tick(layer)} H0" for layer in range(n_layers)]
    spec = {"data": [trace], "layout": {
        "title": {"text": tr("Attention by distance, every head (query − key, in pieces)")},
        "xaxis": {"type": "category", "title": {"text": tr("distance (pieces)")}},
        "yaxis": {"autorange": "reversed", "type": "category", "tickmode": "array", "tickvals": layer_ticks,
                  "ticktext": [layer_tick(layer) for layer in range(n_layers)]},
        "height": min(1600, 160 + 5 * len(rows)), "margin": {"l": 10, "r": 10, "t": 50, "b": 10}}}
    return finished(spec)


def downsampled_figure(cells: np.ndarray, side: int, n: int, title: str, how: str, height: int = 780) -> FigureDict:
    """A head's map pooled to (M,M) cells of side × side pieces; axes in piece positions (`height`: a phone's is
    about its width)."""
    centres = np.minimum(np.arange(cells.shape[0]) * side + (side - 1) / 2, n - 1).astype(np.float32)
    value = tr("block maximum") if how == "max" else tr("block mean")
    trace = {"type": "heatmap", "z": cells.astype(np.float32), "x": centres, "y": centres, "zmin": 0,
             "zmax": float(max(cells.max(), 1e-9)), "colorscale": named_colorscale(colours.WEIGHTS),
             "colorbar": {"title": {"text": value}},
             "hovertemplate": tr("queries near %{{y:.0f}}<br>keys near %{{x:.0f}}<br>{value} %{{z:.4f}}<extra></extra>",
                                 value=value)}
    spec = {"data": [trace], "layout": {
        "title": {"text": safe_label(title), "y": 0.995, "yanchor": "top"},
        "xaxis": {"title": {"text": tr("key position")}, "side": "top", "range": [-0.5, n - 0.5]},
        "yaxis": {"title": {"text": tr("query position")}, "autorange": "reversed"},
        "height": height, "margin": {"l": 10, "r": 10, "t": 110, "b": 10}}}
    return finished(spec)


def positioned_labels(labels: Sequence[str], start: int) -> list[str]:
    """Unique axis labels with each piece's position in the whole text ("4097 the")."""
    return [f"{start + i} {safe_label(t)}" for i, t in enumerate(labels)]


def block_figure(z: np.ndarray, query_labels: list[str], key_labels: list[str], title: str,
                 height: int | None = None) -> FigureDict:
    """An exact block of a head's map (R,C), rows and columns named by position and piece."""
    trace = {"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": key_labels, "y": query_labels,
             "zmin": 0, "zmax": float(max(z.max(), 1e-9)), "colorscale": named_colorscale(colours.WEIGHTS),
             "colorbar": {"title": {"text": tr("weight")}},
             "hovertemplate": tr("query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>")}
    ticks = {"nticks": 40}
    spec = {"data": [trace], "layout": {
        "title": {"text": safe_label(title), "y": 0.995, "yanchor": "top"},
        "xaxis": {"type": "category", "side": "top", "tickangle": -60, "title": {"text": tr("key")}, **ticks},
        "yaxis": {"type": "category", "autorange": "reversed", "title": {"text": tr("query")}, **ticks},
        "height": height or min(900, 260 + 4 * len(query_labels)), "margin": {"l": 10, "r": 10, "t": 150, "b": 10}}}
    return finished(spec)


def row_figure(row: np.ndarray, labels: Sequence[str], title: str) -> FigureDict:
    """One query's weights over every key of the text (x: key position; hover names the piece)."""
    trace = {"type": "scatter", "mode": "lines", "x": np.arange(len(row), dtype=np.int32),
             "y": row.astype(np.float32), "customdata": [safe_label(t) for t in labels],
             "line": {"width": 1, "color": colours.ONE_SERIES},
             "hovertemplate": tr("key %{x} %{customdata}: %{y:.4f}<extra></extra>")}
    spec = {"data": [trace], "layout": {
        "title": {"text": safe_label(title)}, "height": 320, "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
        "xaxis": {"title": {"text": tr("key position")}}, "yaxis": {"title": {"text": tr("weight")}}}}
    return finished(spec)


def sink_growth_figure(lengths: Sequence[int], first: np.ndarray) -> FigureDict:
    """Each layer's mean first-token share (over its heads), one line per text length."""
    n_layers = first.shape[1]
    traces = [{"type": "scatter", "mode": "lines+markers", "x": [layer_tick(layer) for layer in range(n_layers)],
               "y": first[k].mean(-1).astype(np.float32), "name": tr("{n:,} pieces", n=n),
               "line": colours.series_line(k),
               "hovertemplate": tr("%{{x}}: %{{y:.3f}}<extra>{n:,} pieces</extra>", n=n)}
              for k, n in enumerate(lengths)]
    spec = {"data": traces, "layout": {
        "title": {"text": tr("Weight on the first token as the text grows (mean of each layer's heads)")},
        "yaxis": {"title": {"text": tr("weight on the first token")}, "range": [0, 1]},
        "height": 360, "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "legend": {"orientation": "h"}}}
    return finished(spec)
