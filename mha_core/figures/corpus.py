"""Figures for heads across a corpus: the head map (MDS), the distance heatmap, the query-key scatter.

Built as plotly figure dicts (no per-point validation): the query-key scatter holds thousands of points.
Shapes: N heads (layer-major), P = 2M points (queries, then keys).
"""

from __future__ import annotations

import numpy as np

from mha_core.analysis.corpus.distances import HeadMap
from mha_core.analysis.corpus.passes import CorpusPass
from mha_core.analysis.heads.qk_view import BY_KIND, BY_POSITION, QKView, colour_groups, marked_sentence
from mha_core.analysis.heads.roles import head_label
from mha_core.figures import colours
from mha_core.figures.charts import layer_tick, safe_label
from mha_core.figures.roles import role_category, role_text
from mha_core.figures.spec import FigureDict
from mha_core.i18n import tr

LAYER_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "x", "triangle-down", "star", "hexagon",
                 "pentagon")  # cycled when a model has more layers
FONT = {"size": 12}
GLYPHS = {"circle": "●", "x": "×", "diamond": "◆", "cross": "+", "square": "■", "star": "★", "triangle-up": "▲",
          "asterisk-open": "✳"}  # a marker symbol as the title writes it


def kind_glyphs(n_groups: int) -> dict[str, str]:
    """The queries' and the keys' symbols as a title writes them ("●", "×"; "● ◆", "× +" with a second round of
    colour groups)."""
    laps = [colours.series_style(i)["symbols"] for i in range(0, n_groups, len(colours.SERIES))]
    return {"queries": " ".join(GLYPHS[query] for query, _ in laps), "keys": " ".join(GLYPHS[key] for _, key in laps)}


def head_map_figure(head_map: HeadMap, labels: np.ndarray, distance: np.ndarray) -> FigureDict:
    """One point per head at its MDS position: colour = role label, symbol = layer; hover names the head,
    its role and its three nearest heads."""
    traces = []
    categories = [role_category(str(labels[layer, head])) for layer, head in head_map.heads]
    for category in dict.fromkeys(categories):
        members = [i for i, c in enumerate(categories) if c == category]
        hover = []
        for i in members:
            layer, head = head_map.heads[i]
            near = ", ".join(f"{head_label(*head_map.heads[j])} ({distance[i, j]:.3f})" for j in head_map.nearest[i])
            hover.append(f"<b>{head_label(layer, head)}</b><br>" + tr("role: {role}<br>nearest: {near}",
                         role=safe_label(role_text(str(labels[layer, head]))), near=near))
        traces.append({
            "type": "scatter", "mode": "markers", "name": safe_label(tr(category)),
            "x": head_map.xy[members, 0].tolist(), "y": head_map.xy[members, 1].tolist(),
            "marker": {"size": 11, "color": colours.ROLE_COLOURS.get(category, colours.NEUTRAL),
                       "line": {"width": 1, "color": colours.OUTLINE},
                       "symbol": [LAYER_SYMBOLS[head_map.heads[i][0] % len(LAYER_SYMBOLS)] for i in members]},
            "customdata": [list(head_map.heads[i]) for i in members],
            "hovertext": hover, "hovertemplate": tr("%{hovertext}<extra></extra>"),
        })
    traces += layer_symbol_legend(1 + max(layer for layer, _ in head_map.heads))
    return {"data": traces, "layout": {
        "title": {"text": tr("Heads by attention similarity (MDS, stress {stress:.3f}); symbol = layer",
                             stress=head_map.stress)},
        "xaxis": {"title": {"text": tr("MDS 1")}, "zeroline": False},
        "yaxis": {"title": {"text": tr("MDS 2")}, "zeroline": False, "scaleanchor": "x"},
        "height": 560, "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": FONT,
        "legend": {"title": {"text": tr("role")}},
    }}


def layer_symbol_legend(n_layers: int) -> list[dict]:
    """Legend entries (no points) saying which layers each marker symbol stands for."""
    count = len(LAYER_SYMBOLS)
    return [{"type": "scatter", "mode": "markers", "x": [None], "y": [None], "customdata": [], "legendgroup": "layers",
             "legendgrouptitle": {"text": tr("symbol = layer")}, "hoverinfo": "skip",
             "name": tr("layer {layers}", layers=", ".join(str(layer) for layer in range(first, n_layers, count))),
             "marker": {"size": 10, "color": colours.NEUTRAL, "symbol": LAYER_SYMBOLS[first]}}
            for first in range(min(count, n_layers))]


def layer_ticks(heads: tuple[tuple[int, int], ...], max_ticks: int = 80, max_layers: int = 30) -> dict:
    """Axis ticks for heads in layer-major order: every head when they fit, else the first head of every layer
    (of every k-th layer, so that at most `max_layers` are named)."""
    names = [head_label(*h) for h in heads]
    if len(names) <= max_ticks:
        return {}
    first = [i for i, (_, head) in enumerate(heads) if head == 0]
    first = first[::-(-len(first) // max_layers)]
    return {"tickmode": "array", "tickvals": [names[i] for i in first],
            "ticktext": [layer_tick(heads[i][0]) for i in first]}


def distance_heatmap(distance: np.ndarray, heads: tuple[tuple[int, int], ...]) -> FigureDict:
    """The full (N,N) matrix of mean JS divergences, heads in layer-major order."""
    names = [head_label(*h) for h in heads]
    ticks = layer_ticks(heads)
    return {"data": [{
        "type": "heatmap", "z": distance.tolist(), "x": names, "y": names, "colorscale": colours.LOWER_IS_NEARER,
        "colorbar": {"title": {"text": tr("JS (nats)")}},
        "hovertemplate": tr("%{y} vs %{x}: %{z:.4f}<extra></extra>"),
    }], "layout": {
        "title": {"text": tr("Mean Jensen-Shannon divergence between heads")},
        "yaxis": {"autorange": "reversed", "title": {"text": tr("head (layer by layer)")}, **ticks},
        "xaxis": {"title": {"text": tr("head (layer by layer)")}, **layer_ticks(heads, max_layers=10)}, "height": 560,
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": FONT,
    }}


def qk_hover(corpus: CorpusPass) -> list[str]:
    """(P,) hover text: query or key, the token, its position and its sentence with the token marked."""
    sentences = [safe_label(marked_sentence(corpus, t)) for t in range(len(corpus.labels))]
    position = corpus.position
    return [f"<b>{tr(kind)}</b> {safe_label(corpus.labels[t])} " + tr("(position {position})", position=position[t])
            + f"<br>{sentences[t]}" for kind in ("query", "key") for t in range(len(corpus.labels))]


def qk_figure(view: QKView, corpus: CorpusPass, colour_by: str, hover: list[str],
              pos: tuple[str, ...] | None = None) -> FigureDict:
    """Scattergl, one trace per colour group (never one per point); queries are circles, keys crosses (past
    colours.SERIES's colours, each round of groups with symbols of its own: diamonds and pluses, …).
    customdata holds each point's index (0..P-1: queries first)."""
    m = view.n_tokens
    is_key = np.arange(2 * m) >= m  # (P,)
    traces, positions = [], np.concatenate([corpus.position] * 2)  # (P,)
    groups = colour_groups(corpus, colour_by, pos)
    for i, (name, members) in enumerate(groups):
        style = colours.series_style(i)
        marker = {"size": 5, "opacity": 0.7, "symbol": [style["symbols"][k] for k in is_key[members].tolist()],
                  "color": style["color"]}
        if colour_by == BY_POSITION:  # position: a continuous colour, one trace per kind
            marker.update(color=positions[members].tolist(), colorscale=colours.SPECTRUM,
                          showscale=i == 0, colorbar={"title": {"text": tr("position")}})
        shown = tr(name) if colour_by in (BY_KIND, BY_POSITION) or name == "other" else name  # tokens, tags: as read
        traces.append({
            "type": "scattergl", "mode": "markers", "name": safe_label(shown),
            "x": view.xy[members, 0].tolist(), "y": view.xy[members, 1].tolist(), "marker": marker,
            "customdata": members.tolist(), "hovertext": [hover[j] for j in members],
            "hovertemplate": tr("%{hovertext}<extra></extra>"),
        })
    axes = ("PC 1", "PC 2") if view.explained else (f"{view.method} 1", f"{view.method} 2")
    if view.explained:
        axes = tuple(tr("{axis} ({share:.0f}% of the variance)", axis=a, share=100 * share)
                     for a, share in zip(axes, view.explained, strict=True))
    return {"data": traces, "layout": {
        "title": {"text": tr("Queries ({queries}) and keys ({keys}) of {head}, {method}",
                             head=head_label(view.layer, view.head), method=view.method,
                             **kind_glyphs(len(groups)))},
        "xaxis": {"title": {"text": axes[0]}, "zeroline": False},
        "yaxis": {"title": {"text": axes[1]}, "zeroline": False, "scaleanchor": "x"},
        "height": 620, "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": FONT, "dragmode": "pan",
        "legend": {"title": {"text": tr(colour_by)}},
    }}
