"""A translation's alignment: the combined heads' word map with each link marked, the links drawn between the two
sentences, and every head's AER on the hand alignments with the chosen heads marked.

Shapes: S source words, T target words, L layers, H heads.
"""

from __future__ import annotations

import numpy as np

from mha_core.analysis.translation.align import links_of
from mha_core.analysis.translation.heads import HeadChoice
from mha_core.analysis.translation.translate import Translation
from mha_core.figures import charts, colours
from mha_core.figures.charts import indexed_labels, safe_label
from mha_core.figures.spec import FigureDict, named_colorscale
from mha_core.i18n import tr


def alignment_matrix_figure(translation: Translation, matrix: np.ndarray | None = None,
                            title: str | None = None) -> FigureDict:
    """(T,S) target words (rows) over source words (columns), the links ringed: the translation's, or for another
    `matrix` (one head's) the links the same rule reads from it."""
    z = translation.matrix if matrix is None else matrix
    links = translation.links if matrix is None else links_of(matrix, translation.rule, translation.maps.allowed())
    rows, columns = indexed_labels(translation.target_words), indexed_labels(translation.source_words)
    scale = value_name(translation)
    heat = {"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": columns, "y": rows,
            "colorscale": named_colorscale(colours.WEIGHTS), "zmin": 0, "zmax": float(max(np.max(z), 1e-9)),
            "colorbar": {"title": {"text": scale}},
            "hovertemplate": tr("%{{y}} → %{{x}}<br>{value} %{{z:.3f}}<extra></extra>", value=scale)}
    ordered = sorted(links, key=lambda link: link[1])
    marks = {"type": "scatter", "mode": "markers", "x": [columns[s] for s, _ in ordered],
             "y": [rows[t] for _, t in ordered], "name": tr("link"), "hoverinfo": "skip",
             "marker": {"symbol": "square-open", "size": 18, "line": {"width": 3}, "color": colours.SELECTED}}
    return charts.finished({"data": [heat, marks], "layout": {
        "title": {"text": safe_label(title or tr("Alignment: the chosen heads' mean, each word's link ringed"))},
        "xaxis": {"title": {"text": tr("source words")}, "type": "category", "side": "top"},
        "yaxis": {"title": {"text": tr("translation's words")}, "type": "category", "autorange": "reversed"},
        "height": min(900, 220 + 28 * len(rows)), "showlegend": False,
        "margin": {"l": 10, "r": 10, "t": 110, "b": 10}}})


def value_name(translation: Translation) -> str:
    """What a matrix cell holds, by the method that made it (methods.py)."""
    if translation.method == "hidden":
        return tr("similarity")
    if translation.method in ("weighted", "ensemble"):
        return tr("link probability")
    return tr("weight") if translation.scaling == "plain" else tr("relative weight")


def links_figure(translation: Translation) -> FigureDict:
    """The source's words down the left, the translation's down the right, a line for each link: readable at a
    phone's width however long the sentences are."""
    return word_lines(translation, [(translation.links, {"color": colours.SELECTED}, tr("link"))],
                      tr("Which source word each word of the translation aligns to"))


def agreement_figure(heads: Translation, representations: Translation) -> FigureDict:
    """word_lines of two alignments of the same pair: the links both make, those only the heads make and those only
    the representations make, each in its colour."""
    both = heads.links & representations.links
    groups = [(both, colours.series_line(0), tr("both")),  # a dash of its own each, as well as a colour
              (heads.links - both, colours.series_line(1, dash="dash"), tr("only the heads")),
              (representations.links - both, colours.series_line(2, dash="dot"), tr("only the representations"))]
    spec = word_lines(heads, groups, tr("What the heads say and what the representations say"))
    spec["layout"].update(showlegend=True, legend={"orientation": "h", "y": -0.02, "yanchor": "top"})
    return spec


def word_lines(translation: Translation, groups: list[tuple[frozenset, dict, str]], title: str) -> FigureDict:
    """The words of both sentences in two columns and a line per link, one style per group (links, the lines'
    colour and dash, name)."""
    source, target = translation.source_words, translation.target_words
    n = max(len(source), len(target), 2)
    ys = lambda count: [i * (n - 1) / max(count - 1, 1) for i in range(count)]  # noqa: E731 -- spread over n rows
    y_source, y_target = ys(len(source)), ys(len(target))
    lines = [{"type": "scatter", "mode": "lines", "hoverinfo": "skip", "line": {**line, "width": 2},
              "name": name, "x": [v for _ in links for v in (0, 1, None)],
              "y": [v for s, t in sorted(links) for v in (y_source[s], y_target[t], None)]}
             for links, line, name in groups]
    words = [{"type": "scatter", "mode": "markers+text", "x": [x] * len(labels), "y": y, "text": list(labels),
              "textposition": position, "textfont": {"size": 15}, "hoverinfo": "text", "marker": {"size": 5},
              "showlegend": False}
             for x, y, labels, position in ((0, y_source, source, "middle left"),
                                            (1, y_target, target, "middle right"))]
    return charts.finished({"data": [*lines, *words], "layout": {
        "title": {"text": safe_label(title)},
        "xaxis": {"visible": False, "range": [-0.9, 1.9], "fixedrange": True},
        "yaxis": {"visible": False, "range": [n - 0.5, -0.5], "fixedrange": True},
        "height": 80 + 26 * n, "showlegend": False, "margin": {"l": 10, "r": 10, "t": 50, "b": 10}}})


def head_aer_figure(choice: HeadChoice) -> FigureDict:
    """Every head's AER on the development half (lower is better), the chosen heads' cells ringed."""
    spec = charts.layer_head_grid(choice.aers, tr("Each head's alignment error rate on the hand alignments (lower "
                                                   "is better)"), "AER", colorscale=colours.LOWER_IS_NEARER,
                                  zrange=(0.0, 1.0))
    heads = [charts.head_tick(h) for _, h in choice.heads]
    layers = [charts.layer_tick(layer) for layer, _ in choice.heads]
    spec["data"].append({"type": "scatter", "mode": "markers", "x": heads, "y": layers, "hoverinfo": "skip",
                         "marker": {"symbol": "square-open", "size": 30, "line": {"width": 3},
                                    "color": colours.SELECTED}})
    spec["layout"]["showlegend"] = False
    return spec
