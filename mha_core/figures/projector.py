"""A figure as a projector shows it (issue 82, the lesson's `?view=projector`): a projector washes out pale colours
and thin lines, and the class reads it from the back of the room. Larger type, lines and marks thicker, and every
colour scale with a pale end (colours.PROJECTOR_SCALES) drawn without it."""

from __future__ import annotations

from plotly.colors import get_colorscale, sample_colorscale

from mha_core.figures import colours
from mha_core.figures.spec import FigureDict

FONT_PX = 18  # a chart's type (plotly's 12 is read from the front row only)
TITLE_PX = 22
LINE_SCALE, MARKER_SCALE, TEXT_SCALE = 2.0, 1.5, 1.25
LEAST_OPACITY = 0.6  # a faint line (the line view's weakest weights) still stands out from the paper


def projected_scale(scale: object) -> object:
    """A colour scale with PROJECTOR_SCALES's pale ends swapped: the same positions (a levels scale's clear stops
    kept), each colour sampled from the projector's scale; any other scale as it is."""
    if not isinstance(scale, (list, tuple)) and scale not in colours.PROJECTOR_SCALES:
        return scale
    for name, projected in colours.PROJECTOR_SCALES.items():
        named = [colour for _, colour in get_colorscale(name)]
        stops = [list(stop) for stop in get_colorscale(scale)] if isinstance(scale, str) else [list(s) for s in scale]
        coloured = [i for i, (_, colour) in enumerate(stops) if colour != colours.CLEAR]
        if [stops[i][1] for i in coloured] != named:
            continue
        first, last = stops[coloured[0]][0], stops[coloured[-1]][0]
        places = [(stops[i][0] - first) / ((last - first) or 1) for i in coloured]
        for i, colour in zip(coloured, sample_colorscale(projected, places), strict=True):
            stops[i][1] = colour
        return stops
    return scale


def projected_trace(trace: dict) -> dict:
    """A trace with thicker lines and marks, larger text in INK (a heatmap's cells keep plotly's own contrast), and
    its colour scale without a pale end."""
    trace = dict(trace)
    if "colorscale" in trace:
        trace["colorscale"] = projected_scale(trace["colorscale"])
    line = dict(trace.get("line") or {})
    if trace.get("type", "scatter") in ("scatter", "scattergl") and "lines" in trace.get("mode", "lines"):
        trace["line"] = {**line, "width": LINE_SCALE * float(line.get("width", 2))}
        trace["opacity"] = max(LEAST_OPACITY, float(trace.get("opacity", 1)))
    marker = dict(trace.get("marker") or {})
    if "markers" in trace.get("mode", "") and not isinstance(marker.get("size", 6), (list, dict)):
        marker["size"] = MARKER_SCALE * float(marker.get("size", 6))
    if "colorscale" in marker:
        marker["colorscale"] = projected_scale(marker["colorscale"])
    if marker:
        trace["marker"] = marker
    if "texttemplate" in trace or "text" in trace:
        font = {**(trace.get("textfont") or {})}
        font["size"] = TEXT_SCALE * float(font.get("size", 12))
        trace["textfont"] = font if trace.get("type") == "heatmap" else {**font, "color": colours.INK}
    if "colorbar" in trace:
        trace["colorbar"] = inked(trace["colorbar"])
    return trace


def inked(part: dict) -> dict:
    """An axis or a colour bar with its ticks and its title in FONT_PX and INK (a theme's grey ticks fall short of
    7:1 on white)."""
    part = dict(part)
    part["tickfont"] = {**(part.get("tickfont") or {}), "size": FONT_PX, "color": colours.INK}
    title = part.get("title")
    title = dict(title) if isinstance(title, dict) else {"text": title} if title else {}
    part["title"] = {**title, "font": {**(title.get("font") or {}), "size": FONT_PX, "color": colours.INK}}
    return part


def for_projector(spec: FigureDict) -> FigureDict:
    """A projector's copy of a figure dict: type FONT_PX (titles TITLE_PX) in INK, lines and outlines twice as thick,
    markers half as large again, colour scales without a pale end."""
    layout = dict(spec.get("layout", {}))
    layout["font"] = {**(layout.get("font") or {}), "size": FONT_PX, "color": colours.INK}
    title = layout.get("title")
    if title:
        title = dict(title) if isinstance(title, dict) else {"text": title}
        layout["title"] = {**title, "font": {**(title.get("font") or {}), "size": TITLE_PX, "color": colours.INK}}
    for axis in {"xaxis", "yaxis", *(key for key in layout if key.startswith(("xaxis", "yaxis")))}:
        layout[axis] = inked(layout.get(axis) or {})
    layout["legend"] = {**(layout.get("legend") or {}), "font": {"size": FONT_PX, "color": colours.INK}}
    layout["annotations"] = [{**note, "font": {**(note.get("font") or {}), "color": colours.INK}}
                             for note in layout.get("annotations") or ()]
    layout["shapes"] = [{**shape, "line": {**(shape.get("line") or {}),
                                           "width": LINE_SCALE * float((shape.get("line") or {}).get("width", 2))}}
                        for shape in layout.get("shapes") or ()]
    return {**spec, "data": [projected_trace(trace) for trace in spec.get("data", [])], "layout": layout}
