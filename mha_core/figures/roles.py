"""Figures for the roles page: a layer x head grid coloured by role, hover with every metric."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_core.analysis.roles import METRIC_TITLES, HeadRoles
from mha_core.figures.charts import head_tick, layer_tick, safe_label
from mha_core.figures.spec import FigureDict, finished

ROLE_COLORS = {
    "previous": "#1f77b4", "self": "#aec7e8", "next": "#17becf", "[CLS]": "#d62728", "[SEP]": "#ff9896",
    "first token": "#d62728", "punctuation": "#e377c2", "broad": "#bcbd22", "syntactic": "#2ca02c",
    "coreference": "#9467bd", "induction": "#ff7f0e", "other": "#e5e5e5",
}


def role_category(label: str) -> str:
    return label.split(" (")[0]


def hover_lines(roles: HeadRoles, layer: int, head: int, pattern: str) -> str:
    lines = [f"<b>L{layer} H{head}</b>", f"pattern: {pattern}"]
    for name, title in METRIC_TITLES.items():
        lines.append(f"{title}: {roles.metrics[name][layer, head]:.2f} (uniform {roles.baselines[name]:.2f})")
    return "<br>".join(lines)


def role_grid_figure(labels: np.ndarray, roles: HeadRoles, notes: dict[tuple[int, int], str] | None = None
                     ) -> FigureDict:
    """(L,H) labels as coloured cells with the label written in; hover gives metrics and baselines."""
    n_layers, n_heads = labels.shape
    cats = list(ROLE_COLORS)
    z = np.vectorize(lambda lab: cats.index(role_category(lab)))(labels).astype(float) + 0.5  # mid-band
    scale = []
    for i, cat in enumerate(cats):  # a stepped colourscale: one flat band per category
        lo, hi = i / len(cats), (i + 1) / len(cats)
        scale += [[lo, ROLE_COLORS[cat]], [hi, ROLE_COLORS[cat]]]
    patterns = roles.patterns()
    hover = [[hover_lines(roles, layer, head, patterns[layer, head]) +
              (f"<br>{safe_label(notes[(layer, head)])}" if notes and (layer, head) in notes else "")
              for head in range(n_heads)] for layer in range(n_layers)]
    text = [[safe_label(labels[layer, head]).replace(" (", "<br>(") for head in range(n_heads)]
            for layer in range(n_layers)]
    fig = go.Figure(go.Heatmap(
        z=z, x=[head_tick(h) for h in range(n_heads)], y=[layer_tick(layer) for layer in range(n_layers)],
        colorscale=scale, zmin=0, zmax=len(cats), showscale=False, text=text,
        texttemplate="%{text}", textfont={"size": 10}, hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
        xgap=2, ygap=2,
    ))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=140 + 60 * n_layers, margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return finished(fig)
