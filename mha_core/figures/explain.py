"""The Explanations page's figures: every method's word scores side by side, and the deletion curves."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mha_core.analysis.explain.choices import METHOD_NAMES
from mha_core.analysis.explain.explain import Explanation
from mha_core.figures import colours
from mha_core.figures.charts import ROW_PX, indexed_labels, matrix_spec, safe_label
from mha_core.figures.spec import FigureDict, finished
from mha_core.i18n import tr

LABEL_CHAR_PX = 13  # a method's name turned upright under a phone's grid takes about this much height a character


def scaled(rows: np.ndarray) -> np.ndarray:
    """(M,W) each row divided by its largest |value| (rows in -1..1; a zero row stays zero)."""
    top = np.abs(rows).max(-1, keepdims=True)
    return np.divide(rows, top, out=np.zeros_like(rows), where=top > 0)


def methods_figure(explanation: Explanation, words_down: bool = False) -> FigureDict:
    """(M,W) heatmap: a row per method, a column per word, each row scaled to its largest |score| (`words_down`: a
    row per word, for a phone)."""
    names = [tr(METHOD_NAMES[name]) for name in explanation.methods]
    return word_scores_figure(np.stack([m.word_scores for m in explanation.methods.values()]), names,
                              explanation.words, tr("Each method's word scores (scaled to its largest)"), words_down)


def word_scores_figure(rows: np.ndarray, names: Sequence[str], words: Sequence[str], title: str,
                       words_down: bool = False) -> FigureDict:
    """(M,W) methods' word scores, each method scaled to its largest |score|: a row per method and a column per word,
    or (`words_down`, a phone's narrow screen) a row per word and a column per method."""
    z = scaled(np.asarray(rows, dtype=np.float64))
    if words_down:
        cols = [safe_label(name) for name in names]  # drawn upright under the grid: the longest takes its height
        height = ROW_PX * len(words) + 80 + LABEL_CHAR_PX * max((len(c) for c in cols), default=0)
        return matrix_spec(z.T, list(words), title, height=height, cols=cols, colorscale=colours.SIGNED, zmid=0)
    return matrix_spec(z, list(names), title, cols=indexed_labels(words), colorscale=colours.SIGNED, zmid=0)


def deletion_figure(explanation: Explanation) -> FigureDict:
    """The target's score as each method's top k words are removed, at the curves' k (steeper: more faithful)."""
    faithful = [(name, m) for name, m in explanation.methods.items() if m.faithfulness is not None]
    data = [{"type": "scatter", "mode": "lines+markers", "name": safe_label(tr(METHOD_NAMES[name])),
             "x": list(m.faithfulness.curve_ks), "y": np.asarray(m.faithfulness.deletion),
             "line": colours.series_line(index), "marker": {"symbol": colours.series_style(index)["symbols"][0]}}
            for index, (name, m) in enumerate(faithful)]
    spec = {"data": data, "layout": {
        "title": {"text": safe_label(tr("The score as each method's top words are removed"))},
        "xaxis": {"title": {"text": tr("words removed")}}, "yaxis": {"title": {"text": tr("score")}},
        "height": 360, "margin": {"l": 10, "r": 10, "t": 40, "b": 10}}}
    return finished(spec)
