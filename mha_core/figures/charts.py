"""Plotly figure builders: arrays in, go.Figure out. No streamlit here.

Shapes: L layers, H heads, N display units (pieces or words), n tile side after pooling.
User text reaches figures only through `safe_label`, so nothing typed is rendered as markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from mha_core.engine.held import kept
from mha_core.engine.words import OVERVIEW_MAX_BINS, pool_map
from mha_core.figures import colours
from mha_core.figures.capped import without_cell_numbers
from mha_core.figures.spec import FigureDict, array_of, finished, named_colorscale, typed_array
from mha_core.figures.summary import lines_of_heads, overview_sentence, strongest_link, with_summary
from mha_core.figures.title_lines import NARROW_TITLE_CHARS, display_width, wrapped
from mha_core.i18n import tr
from mha_core.messages import N_, visible

ROW_PX = 18  # a matrix figure is at least this tall per row, so every row keeps its label


def layer_tick(layer: int) -> str:
    """How an axis names a layer (0-based), as head_label does in texts."""
    return f"L{layer}"


def head_tick(head: int) -> str:
    return f"H{head}"


def safe_label(text: str) -> str:
    """Escape plotly's HTML-like markup so user text shows literally, an invisible or line-turning character as its
    code (mha_core.messages.INVISIBLE)."""
    return html.escape(visible(text), quote=False)


def indexed_labels(labels: Sequence[str]) -> list[str]:
    """Unique category labels ("3 it") so repeated tokens stay distinct on an axis."""
    return [f"{i} {safe_label(t)}" for i, t in enumerate(labels)]


def tile_origin(layer: int, head: int, n: int) -> tuple[int, int]:
    """Top-left (row, col) of tile (layer, head) in the tiled overview; tiles are n wide, 1 apart."""
    return layer * (n + 1), head * (n + 1)


def tile_overview(maps: np.ndarray, bins: int = OVERVIEW_MAX_BINS) -> np.ndarray:
    """(L,H,N,N) -> one (L*(n+1)-1, H*(n+1)-1) canvas: layers down, heads across, NaN gaps."""
    n_layers, n_heads = maps.shape[:2]
    pooled = pool_map(maps, bins).astype(np.float32)  # (L,H,n,n)
    n = pooled.shape[-1]
    padded = np.pad(pooled, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=np.nan)  # (L,H,n+1,n+1)
    canvas = padded.transpose(0, 2, 1, 3).reshape(n_layers * (n + 1), n_heads * (n + 1))
    return canvas[:-1, :-1]  # tile (l,h) starts at tile_origin(l, h, n)


def layer_tiles_figure(layer_maps: np.ndarray, layer: int, selected_head: int, per_row: int = 3,
                       bins: int = OVERVIEW_MAX_BINS) -> FigureDict:
    """One layer's heads (H,N,N) as tiles, `per_row` to a row, so that a phone's narrow screen keeps them legible;
    clicking a tile opens that head, as in overview_figure."""
    n_heads = len(layer_maps)
    rows = -(-n_heads // per_row)
    padded = np.full((rows * per_row, *layer_maps.shape[1:]), np.nan, dtype=np.float32)
    padded[:n_heads] = layer_maps
    spec = overview_figure(padded.reshape(rows, per_row, *layer_maps.shape[1:]), bins,
                           (selected_head // per_row, selected_head % per_row),
                           tr("Layer {layer}: every head (tap a tile to open it)", layer=layer))
    markers = spec["data"][1]
    kept = [i for i, (row, col) in enumerate(markers["customdata"]) if row * per_row + col < n_heads]
    for name in ("x", "y"):
        markers[name] = typed_array(array_of(markers[name])[kept])
    markers["customdata"] = [[layer, row * per_row + col] for row, col in (markers["customdata"][i] for i in kept)]
    layout = spec["layout"]
    last_of_row = [min(n_heads, (r + 1) * per_row) - 1 for r in range(rows)]
    layout["yaxis"]["ticktext"] = [head_tick(r * per_row) + (f"–{last}" if last > r * per_row else "")
                                   for r, last in enumerate(last_of_row)]  # a row of one head: "H3", not "H3–3"
    layout["yaxis"]["title"]["text"] = tr("heads")
    layout["xaxis"]["ticktext"] = [f"+{c}" for c in range(per_row)]
    layout["xaxis"]["title"]["text"] = tr("head in the row")
    layout["margin"]["t"] = 140  # the title above the axis title
    return with_summary(spec, overview_sentence(layer_maps[None], (layer, selected_head), layout["title"]["text"],
                                                first_layer=layer))


def layers_across_figure(maps: np.ndarray, selected: tuple[int, int], bins: int = OVERVIEW_MAX_BINS) -> FigureDict:
    """All heads with the layers across and the heads down: a model with many more layers than heads (Gemma 3's
    18 × 4) fills a wide screen (a projector) instead of a thin strip; clicking a tile opens that head, as in
    overview_figure."""
    n_layers, n_heads = maps.shape[:2]
    spec = overview_figure(np.swapaxes(maps, 0, 1), bins, (selected[1], selected[0]))
    markers = spec["data"][1]
    markers["customdata"] = [[layer, head] for head, layer in markers["customdata"]]  # a new list: click_targets'
    layout = spec["layout"]  # is shared
    layout["xaxis"]["ticktext"] = [layer_tick(layer) for layer in range(n_layers)]
    layout["xaxis"]["title"]["text"] = tr("layer")
    layout["yaxis"]["ticktext"] = [head_tick(head) for head in range(n_heads)]
    layout["yaxis"]["title"]["text"] = tr("head")
    return with_summary(spec, overview_sentence(maps, selected, layout["title"]["text"]))


TILE_SPOTS = 4  # click targets across a tile (and down): a tap anywhere on a tile opens it
CLICK_TARGET_COLOUR = colours.CLEAR  # invisible: under a height cap (the lesson on a projector) 26-px targets
# overlapped 16 to a tile and their 1 % opacities added up to an orange wash over every map (hover and clicks still
# find them)
LEVELS = 255  # the overview's colours: a weight in [0, 1] as one of 254 levels (1..255), a gap as 0
COLORBAR_TICKS = (0, 0.25, 0.5, 0.75, 1)


def weight_level(weight: float | np.ndarray) -> float | np.ndarray:
    """The colour level (1..LEVELS) of a weight in [0, 1]."""
    return 1 + np.clip(weight, 0, 1) * (LEVELS - 1)


def colour_levels(canvas: np.ndarray) -> np.ndarray:
    """A tiled canvas of weights (NaN gaps) as uint8 colour levels (0 gaps): a quarter of float32's bytes, and no
    colour a screen shows is lost (the overview has no hover values; one head's own map keeps float32)."""
    levels = np.rint(weight_level(np.nan_to_num(canvas, nan=0.0)))
    return np.where(np.isnan(canvas), 0, levels).astype(np.uint8)


def level_weights(levels: np.ndarray) -> np.ndarray:
    """colour_levels undone: each level's weight (within half a level, 1/508), NaN for gaps."""
    levels = np.asarray(levels, dtype=np.float64)
    return np.where(levels == 0, np.nan, (levels - 1) / (LEVELS - 1))


def levels_colorscale(scale: Sequence[Sequence]) -> list[list]:
    """A weight colour scale over the levels 1..LEVELS, the gap level 0 transparent (the page's background)."""
    first = 1 / LEVELS
    return [[0, colours.CLEAR], [first * 0.5, colours.CLEAR],
            *[[first + position * (1 - first), colour] for position, colour in scale]]


@kept("click targets", 64)
def click_targets(n_layers: int, n_heads: int, n: int) -> tuple[dict, dict, list[list[int]]]:
    """The overview's click targets, TILE_SPOTS × TILE_SPOTS on each n × n tile: x and y (typed arrays) and each
    one's [layer, head]; the same for every sentence of a length (made once, shared by every figure: never mutated).
    Ordered layer, head, then row and column within the tile."""
    spots = (np.arange(TILE_SPOTS) + 0.5) * n / TILE_SPOTS - 0.5  # a grid of click targets over each tile
    layer, head, dr, dc = np.meshgrid(np.arange(n_layers), np.arange(n_heads), spots, spots, indexing="ij")
    top, left = tile_origin(layer, head, n)  # (L,H,S,S) each
    customdata = np.stack([layer, head], axis=-1).reshape(-1, 2).tolist()  # [[layer, head], ...] one per target
    return (typed_array((left + dc).ravel().astype(np.float32)), typed_array((top + dr).ravel().astype(np.float32)),
            customdata)


def overview_figure(maps: np.ndarray, bins: int = OVERVIEW_MAX_BINS, selected: tuple[int, int] | None = None,
                    title: str = N_("Every head at a glance (click a tile to open it)")) -> FigureDict:
    """All heads at a glance, as a plotly figure dict (built without plotly's validation: on a new sentence it
    cost a tenth of the Heads page's CPU): one heatmap of tiles, one clickable marker per tile, the chosen head
    outlined."""
    n_layers, n_heads = maps.shape[:2]
    n = min(maps.shape[-1], bins)
    tick = (n - 1) / 2
    heatmap = {"type": "heatmap", "z": colour_levels(tile_overview(maps, bins)), "zmin": 0, "zmax": LEVELS,
               "colorscale": levels_colorscale(named_colorscale(colours.WEIGHTS)), "hoverinfo": "skip",
               "colorbar": {"title": {"text": tr("weight")}, "tickvals": [weight_level(w) for w in COLORBAR_TICKS],
                            "ticktext": [f"{w:g}" for w in COLORBAR_TICKS]}}
    x, y, customdata = click_targets(n_layers, n_heads, n)
    markers = {"type": "scatter", "x": x, "y": y, "customdata": customdata, "mode": "markers",
               "name": tr("heads"),
               "marker": {"size": 26, "opacity": 0.01, "symbol": "square", "color": CLICK_TARGET_COLOUR},
               "hovertemplate": tr("layer %{customdata[0]}, head %{customdata[1]}<extra>click to open</extra>")}
    layout = {
        "title": {"text": safe_label(tr(title)), "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 12}},
        "showlegend": False, "plot_bgcolor": colours.PAPER,  # the title at the very top: the head axis's own title
        "height": 210 + 70 * n_layers, "margin": {"l": 40, "r": 10, "t": 140, "b": 10},  # and ticks sit below it
        "xaxis": {"tickvals": [h * (n + 1) + tick for h in range(n_heads)],
                  "ticktext": [head_tick(h) for h in range(n_heads)], "showgrid": False, "zeroline": False,
                  "side": "top", "title": {"text": tr("head")}},
        "yaxis": {"tickvals": [layer * (n + 1) + tick for layer in range(n_layers)],
                  "ticktext": [layer_tick(layer) for layer in range(n_layers)], "autorange": "reversed",
                  "showgrid": False,
                  "zeroline": False, "scaleanchor": "x", "title": {"text": tr("layer")}},
    }
    if selected is not None:
        r, c = tile_origin(*selected, n)
        layout["shapes"] = [{"type": "rect", "x0": c - 0.5, "x1": c + n - 0.5, "y0": r - 0.5, "y1": r + n - 0.5,
                             "line": {"color": colours.SELECTED, "width": 2}}]
    spec = {"data": [heatmap, markers], "layout": layout}
    return with_summary(finished(spec), overview_sentence(maps, selected, tr(title)))


def head_figure(z: np.ndarray, labels: Sequence[str], title: str, numbers: bool = False,
                scores: bool = False) -> FigureDict:
    """One head's (N,N) map: query rows top to bottom, key columns; hover gives query, key, value. A plotly figure
    dict built without plotly's validation (as matrix_spec)."""
    axis = indexed_labels(labels)
    value = tr("score") if scores else tr("weight")
    trace = {"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": axis, "y": axis,
             "colorscale": named_colorscale(colours.SIGNED if scores else colours.WEIGHTS),
             "hovertemplate": tr("query %{{y}}<br>key %{{x}}<br>{value} %{{z:.4f}}<extra></extra>", value=value),
             "colorbar": {"title": {"text": tr(value)}}}
    trace.update({"zmid": 0} if scores else {"zmin": 0, "zmax": float(max(z.max(), 1e-9))})
    if numbers:
        trace.update(texttemplate="%{z:.2f}", textfont={"size": 9})
    size = min(900, 220 + 22 * len(labels))
    ticks = tick_subset(axis)
    spec = {"data": [trace], "layout": {
        "yaxis": {"autorange": "reversed", "title": {"text": tr("query")}, "type": "category", **ticks},
        "xaxis": {"title": {"text": tr("key")}, "type": "category", "side": "top", "tickangle": -60, **ticks},
        "title": {"text": safe_label(tr(title)), "y": 0.995, "yanchor": "top"}, "height": size + 110,
        "margin": {"l": 10, "r": 10, "t": 150, "b": 10}}}
    return with_summary(finished(spec), strongest_link(z, labels, tr(title), scores))


def tick_subset(axis: Sequence[str], max_ticks: int = 60) -> dict:
    """Label every k-th category on long axes (hover still names every cell); {} when all fit."""
    if len(axis) <= max_ticks:
        return {}
    step = -(-len(axis) // max_ticks)
    return {"tickmode": "array", "tickvals": list(axis[::step]), "ticktext": list(axis[::step])}


def line_view_figure(layer_maps: np.ndarray, labels: Sequence[str], heads: Sequence[int],
                     min_weight: float = 0.05, title: str = "") -> FigureDict:
    """BertViz-style head view: queries left, keys right, a line per weight >= min_weight.

    Lines are bucketed by weight into a few opacity levels so each head needs at most 4 traces."""
    n = len(labels)
    fig = go.Figure()
    levels = (0.25, 0.5, 0.75, 1.01)
    for head in heads:
        lo = min_weight
        for hi in levels:
            q, k = np.nonzero((layer_maps[head] >= lo) & (layer_maps[head] < hi))
            lo = hi
            if q.size == 0:
                continue
            xs = np.tile([0.0, 1.0, np.nan], q.size)
            ys = np.column_stack([q, k, np.full(q.size, np.nan)]).ravel()
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", line=colours.series_line(head, width=1 + 3 * min(hi, 1)),
                opacity=min(hi, 1) * 0.8, name=tr("head {head}", head=head), legendgroup=f"h{head}",
                showlegend=not any(t.legendgroup == f"h{head}" for t in fig.data), hoverinfo="skip",
            ))
    for side, anchor in ((0.0, "right"), (1.0, "left")):
        fig.add_trace(go.Scatter(x=[side] * n, y=list(range(n)), mode="text", text=[safe_label(t) for t in labels],
                                 textposition=f"middle {'left' if anchor == 'right' else 'right'}", showlegend=False,
                                 hoverinfo="skip"))
    fig.update_xaxes(visible=False, range=[-0.6, 1.6])
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(title=safe_label(title), height=max(300, 22 * n + 100),
                      margin={"l": 10, "r": 10, "t": 60, "b": 10}, plot_bgcolor=colours.PAPER,
                      legend={"orientation": "h"})
    return with_summary(finished(fig), lines_of_heads(layer_maps, labels, heads, title))


def layer_head_grid(values: np.ndarray, title: str, colorbar: str = N_("weight"), zmid: float | None = None,
                    colorscale: str = colours.WEIGHTS, columns: Sequence[str] | None = None,
                    zrange: tuple[float, float] | None = None, rows: Sequence[str] | None = None,
                    across: bool = False) -> FigureDict:
    """A (L,H) grid of one number per head, values written in the cells; `columns` names other columns
    (tokens, say) instead of heads, `rows` other rows (one head, say) instead of layers; `zrange`: the colour
    scale's ends (grids to compare share one); `across`: the layers across and the heads down (a model with many
    more layers than heads in a short chart: Gemma 3's 18 × 4)."""
    n_layers, n_heads = values.shape
    x = indexed_labels(columns) if columns is not None else [head_tick(h) for h in range(n_heads)]
    y = list(rows) if rows is not None else [layer_tick(layer) for layer in range(n_layers)]
    z, x, y = (values.T, y, x) if across else (values, x, y)  # z (rows, columns) as drawn
    ends = {"zmin": zrange[0], "zmax": zrange[1]} if zrange is not None else {"zmid": zmid}
    fig = go.Figure(go.Heatmap(
        z=z, x=x, y=y,
        colorscale=colorscale, **ends, texttemplate="%{z:.2f}", colorbar={"title": tr(colorbar)},
        hovertemplate=tr("%{y} %{x}: %{z:.4f}<extra></extra>"),
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(title=safe_label(tr(title)), height=120 + 45 * len(z),
                      margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return finished(fig)


def margin_change_figure(delta: np.ndarray, flips: np.ndarray, name_a: str, name_b: str,
                         across: bool = False) -> FigureDict:
    """(L,H) change in a head's margin between two sentences, the heads that flip as a reader does outlined
    (`across`: the layers across, as layer_head_grid draws them)."""
    spec = layer_head_grid(delta, tr("Change in margin ('{a}' − '{b}'), sentence 2 minus sentence 1", a=name_a,
                                     b=name_b), N_("Δ margin"), zmid=0, colorscale=colours.SIGNED, across=across)
    layers, heads = np.nonzero(flips)  # outlines in cell units, so they fit the cells on any screen
    cells = zip(layers.tolist(), heads.tolist(), strict=True)
    spec["layout"]["shapes"] = [{"type": "rect", "x0": x - 0.45, "x1": x + 0.45, "y0": y - 0.45, "y1": y + 0.45,
                                 "line": {"color": colours.INK, "width": 3}}
                                for x, y in ((layer, h) if across else (h, layer) for layer, h in cells)]
    return spec


def token_bar_figure(labels: Sequence[str], values: np.ndarray, title: str, y_max: float | None = 1.1) -> FigureDict:
    """One bar per token, its value written above it (y from 0 to y_max; None: fitted to the values)."""
    fig = go.Figure(go.Bar(x=indexed_labels(labels), y=values, text=[f"{v:.2f}" for v in values],
                           textposition="outside", marker_color=colours.ONE_SERIES))
    fig.update_layout(title=safe_label(tr(title)), height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      yaxis_range=[0, y_max if y_max is not None else 1.15 * float(np.max(values))])
    return finished(fig)


def matrix_spec(z: np.ndarray, rows: Sequence[str], title: str, height: int = 320, cols: Sequence[str] | None = None,
                colorscale: str = colours.SIGNED, zmid: float | None = 0) -> FigureDict:
    """A (R,C) matrix as a heatmap, rows named by token, as a plotly figure dict: built without plotly's
    per-property validation (a third of a new sentence's CPU on the Walkthrough), arrays base64-encoded."""
    y = indexed_labels(rows)
    trace = {"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "y": y,
             "colorscale": named_colorscale(colorscale),  # plotly.py's scale: plotly.js orders some names the other way
             "hovertemplate": tr("%{y}, %{x}: %{z:.3f}<extra></extra>")}
    if cols is not None:
        trace["x"] = list(cols)
    if zmid is not None:
        trace["zmid"] = zmid
    every_row = tick_subset(y) or {"tickmode": "linear", "dtick": 1}
    spec = {"data": [trace], "layout": {
        "yaxis": {"autorange": "reversed", "type": "category", **every_row},
        "title": {"text": safe_label(tr(title))}, "height": max(height, ROW_PX * len(rows) + 80),
        "margin": {"l": 10, "r": 10, "t": 40, "b": 10}}}
    return finished(spec)


def with_column_separators(spec: dict, every: int, count: int, n_rows: int) -> FigureDict:
    """Vertical lines between column blocks (the heads of a concatenation) as one line trace on an overlaid axis
    (add_vline per block re-validated the whole layout each time)."""
    xs = [x for i in range(1, count) for x in (i * every - 0.5, i * every - 0.5, None)]
    ys = [y for _ in range(1, count) for y in (-0.5, n_rows - 0.5, None)]
    spec["data"].append({"type": "scatter", "x": xs, "y": ys, "mode": "lines", "yaxis": "y2", "hoverinfo": "skip",
                         "line": {"color": colours.INK, "width": 1}, "showlegend": False})
    spec["layout"]["yaxis2"] = {"overlaying": "y", "range": [n_rows - 0.5, -0.5], "visible": False}
    return spec


def for_narrow_screen(spec: dict) -> FigureDict:
    """A phone's copy of a figure dict: no numbers written in cells (they run together in narrow cells; words, as
    the logit lens writes, stay), a long title wrapped onto lines that fit, the plot moved down to make room, and a
    legend of several lines under the plot."""
    data = without_cell_numbers(spec["data"])
    layout = dict(spec.get("layout", {}))
    title = layout.get("title")
    text = title.get("text", "") if isinstance(title, dict) else (title or "")
    if display_width(text) > NARROW_TITLE_CHARS and "<br>" not in text:
        lines = wrapped(text, NARROW_TITLE_CHARS)
        layout["title"] = {**(title if isinstance(title, dict) else {}), "text": "<br>".join(lines),
                           "font": {"size": 13}}
        margin = dict(layout.get("margin") or {})
        margin["t"] = max(margin.get("t", 50), 30 + 18 * len(lines))
        layout["margin"] = margin
        if "height" in layout:
            layout["height"] = layout["height"] + 18 * (len(lines) - 1)
    return {**spec, "data": data, "layout": legend_below(data, layout)}


def legend_below(data: list[dict], layout: dict) -> dict:
    """A phone's legend of several lines under the plot, as wide as the screen: at the right it took half the width
    from the plot and cut its names ("（∝ n" without its bracket)."""
    named = [trace for trace in data if trace.get("name") and trace.get("showlegend") is not False
             and trace.get("type", "scatter") in ("scatter", "scattergl", "bar")]
    legend = dict(layout.get("legend") or {})
    if len(named) < 2 or legend.get("orientation") == "h":
        return layout
    height = {"height": layout["height"] + 22 * len(named)} if "height" in layout else {}
    return {**layout, **height, "legend": {**legend, "orientation": "h", "yanchor": "top", "y": -0.25, "x": 0}}


def with_segment_lines(figure: FigureDict, start: int, n: int) -> FigureDict:
    """A (N,N) map's figure with dashed lines where a sentence pair's second text begins (unit `start`): the blocks
    above and left of them are the first text's own, the top-right block its queries reading the second's keys."""
    edge = start - 0.5
    lines = [{"type": "line", "x0": edge, "x1": edge, "y0": -0.5, "y1": n - 0.5},
             {"type": "line", "x0": -0.5, "x1": n - 0.5, "y0": edge, "y1": edge}]
    shapes = [{**line, "xref": "x", "yref": "y", "line": {"color": colours.INK, "width": 2, "dash": "dash"}}
              for line in lines]
    layout = {**figure.get("layout", {}), "shapes": [*figure.get("layout", {}).get("shapes", []), *shapes]}
    return {**figure, "layout": layout}
