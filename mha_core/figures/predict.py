"""Figures for predictions (issue 21): the logit lens grid with each cell's top piece written in it. The bar of
the top pieces, the attribution and patching grids reuse charts.token_bar_figure and charts.layer_head_grid."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_core.analysis.lm.head import read_at
from mha_core.analysis.lm.predict import LogitLens
from mha_core.figures import colours
from mha_core.figures.charts import indexed_labels, layer_tick, safe_label
from mha_core.figures.spec import FigureDict, finished
from mha_core.i18n import tr

LENS_MAX_COLUMNS = 48  # positions shown with their pieces written in the cells; longer texts show the last ones
LENS_PHONE_COLUMNS = 5  # on a phone's width: the last five positions, their pieces still readable


def lens_figure(lens: LogitLens, max_columns: int = LENS_MAX_COLUMNS) -> FigureDict:
    """(L,T) each layer's most likely next piece at each position, coloured by its probability; the hover adds
    the probability of the model's final answer there. Long texts: the last `max_columns` positions."""
    preposition, what, _ = read_at(lens.masked)
    start = max(0, len(lens.tokens) - max_columns)
    columns = indexed_labels(lens.tokens)[start:]
    text = [[safe_label(piece) for piece in row[start:]] for row in lens.top_pieces]
    fig = go.Figure(go.Heatmap(
        z=lens.top_probs[:, start:], x=columns, y=[layer_tick(layer) for layer in range(len(lens.top_ids))],
        text=text, texttemplate="%{text}", textfont={"size": 9},
        customdata=np.round(lens.final_probs[:, start:], 4), colorscale=colours.WEIGHTS, zmin=0, zmax=1,
        colorbar={"title": {"text": tr("p(top)")}},
        hovertemplate=tr("{preposition} %{{x}}, %{{y}}: %{{text}} (p %{{z:.3f}}); the final answer p "
                         "%{{customdata}}<extra></extra>", preposition=preposition),
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(tickangle=-60, side="top")
    fig.update_layout(height=200 + 24 * len(lens.top_ids), margin={"l": 10, "r": 10, "t": 160, "b": 10},
                      title=safe_label(tr("Logit lens: each layer's most likely {what} (colour: its probability)",
                                          what=what)))
    return finished(fig)
