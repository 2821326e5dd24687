"""A figure under a height cap (the lesson on a projector: a step shows without scrolling): no taller than the cap,
its heatmaps' cells without the numbers their rows cannot hold, its colour bars with the ticks their height holds."""

from __future__ import annotations

import re

import numpy as np

from mha_core.figures.projector import FONT_PX, TEXT_SCALE
from mha_core.figures.spec import FigureDict, array_of

CELL_TEXT_PX = 12  # plotly's type: a cell's number, a colour bar's tick (projector mode's are larger)
ROW_LINES = 1.25  # a heatmap's row at least this many of its type's lines high keeps the number in its cells
TICK_LINES = 2  # a colour bar's tick and the gap to the next, in lines of its type
BAR_TICKS = 5  # the ticks plotly writes on a colour bar
AXIS_LABELS_PX = 30  # the height of a plot's axis labels under it


def without_cell_numbers(data: list[dict]) -> list[dict]:
    """The traces with no numbers written in their cells (words, as the logit lens writes, stay)."""
    return [trace if "%{z" not in str(trace.get("texttemplate", "")) else {
        k: v for k, v in trace.items() if k not in ("texttemplate", "textfont")} | words_of(trace["texttemplate"])
        for trace in data]


def words_of(template: str) -> dict:
    """A cell template's words without its numbers ({} where it has none): "%{text}<br>%{z:.2f}" keeps "%{text}"."""
    words = re.sub(r"%\{z[^}]*\}", "", template).strip().removesuffix("<br>").removeprefix("<br>").strip()
    return {"texttemplate": words} if words else {}


def within_height(spec: FigureDict, px: int, projected: bool = False) -> FigureDict:
    """A copy of a figure dict no taller than `px` (a projector's screen shows a lesson's step without scrolling);
    where that leaves a heatmap's rows lower than a line of its cells' type, their numbers are left out (they ran
    into each other: Gemma's 18 layers in a 200-pixel grid) and read in the hover, and a colour bar keeps the ticks
    its height holds. `projected`: the type as projector mode draws it (mha_core/figures/projector.py)."""
    layout = spec.get("layout", {})
    if (layout.get("height") or 0) <= px:
        return spec
    margin = layout.get("margin") or {}
    top, bottom = margin.get("t"), margin.get("b")  # plotly's own where unset
    plot_px = px - (100 if top is None else top) - (80 if bottom is None else bottom) - AXIS_LABELS_PX
    cell_px, tick_px = (CELL_TEXT_PX * TEXT_SCALE, FONT_PX) if projected else (CELL_TEXT_PX, CELL_TEXT_PX)
    rows = heatmap_rows(spec.get("data", []))
    data = without_cell_numbers(spec["data"]) if rows and plot_px < ROW_LINES * cell_px * rows else spec.get("data", [])
    if plot_px < BAR_TICKS * TICK_LINES * tick_px:  # plotly's five ticks ran into each other: its ends and middle
        data = [{**trace, "colorbar": {**trace["colorbar"], **scale_ends(trace)}}
                if isinstance(trace.get("colorbar"), dict) and trace.get("z") is not None else trace for trace in data]
    return {**spec, "data": data, "layout": {**layout, "height": px}}


def scale_ends(trace: dict) -> dict:
    """A colour bar's ticks at its scale's two ends and its middle, as plotly colours the trace: zmin and zmax where
    given, else the values' own, around zmid where given."""
    z = np.asarray(array_of(trace["z"]), dtype=np.float64)
    if not np.isfinite(z).any():
        return {}
    low, high = float(np.nanmin(z)), float(np.nanmax(z))
    if trace.get("zmin") is None or trace.get("zmax") is None:
        if trace.get("zmid") is not None:
            reach = max(abs(low - trace["zmid"]), abs(high - trace["zmid"]))
            low, high = trace["zmid"] - reach, trace["zmid"] + reach
    else:
        low, high = float(trace["zmin"]), float(trace["zmax"])
    ticks = [low, (low + high) / 2, high]
    return {"tickvals": ticks, "ticktext": [f"{tick:.2f}" for tick in ticks]}


def heatmap_rows(data: list[dict]) -> int:
    """The rows of cells stacked in a plot's height: each y axis's tallest heatmap, the axes' summed."""
    tallest: dict[str, int] = {}
    for trace in data:
        if trace.get("z") is not None:
            z = array_of(trace["z"])
            axis = trace.get("yaxis", "y")
            tallest[axis] = max(tallest.get(axis, 0), z.shape[0] if z.ndim == 2 else 1)
    return sum(tallest.values())
