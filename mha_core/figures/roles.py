"""Figures for the roles page: a layer x head grid coloured by role, hover with every metric."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_core.analysis.heads.roles import METRIC_TITLES, HeadRoles, metric_title
from mha_core.figures.charts import head_tick, layer_tick, safe_label
from mha_core.figures.colours import ROLE_COLOURS
from mha_core.figures.spec import FigureDict, finished
from mha_core.figures.summary import counted, with_summary
from mha_core.i18n import tr


def role_text(label: str) -> str:
    """A head's role label in the page's language: its category translated, the details ("(nsubj)") as they are."""
    category = role_category(label)
    return tr(category) + label[len(category):]


def role_category(label: str) -> str:
    return label.split(" (")[0]


def hover_lines(roles: HeadRoles, layer: int, head: int, pattern: str, causal: bool) -> str:
    lines = [f"<b>L{layer} H{head}</b>", tr("pattern: {pattern}", pattern=tr(pattern))]
    for name in METRIC_TITLES:
        lines.append(tr("{metric}: {value:.2f} (uniform {uniform:.2f})", metric=tr(metric_title(name, causal)),
                        value=roles.metrics[name][layer, head], uniform=roles.baselines[name]))
    return "<br>".join(lines)


def role_grid_figure(labels: np.ndarray, roles: HeadRoles, causal: bool,
                     notes: dict[tuple[int, int], str] | None = None) -> FigureDict:
    """(L,H) labels as coloured cells with the label written in; hover gives metrics and baselines."""
    n_layers, n_heads = labels.shape
    cats = list(ROLE_COLOURS)
    z = np.vectorize(lambda lab: cats.index(role_category(lab)))(labels).astype(float) + 0.5  # mid-band
    scale = []
    for i, cat in enumerate(cats):  # a stepped colourscale: one flat band per category
        lo, hi = i / len(cats), (i + 1) / len(cats)
        scale += [[lo, ROLE_COLOURS[cat]], [hi, ROLE_COLOURS[cat]]]
    patterns = roles.patterns()
    hover = [[hover_lines(roles, layer, head, patterns[layer, head], causal) +
              (f"<br>{safe_label(notes[(layer, head)])}" if notes and (layer, head) in notes else "")
              for head in range(n_heads)] for layer in range(n_layers)]
    text = [[safe_label(role_text(labels[layer, head])).replace(" (", "<br>(") for head in range(n_heads)]
            for layer in range(n_layers)]
    fig = go.Figure(go.Heatmap(
        z=z, x=[head_tick(h) for h in range(n_heads)], y=[layer_tick(layer) for layer in range(n_layers)],
        colorscale=scale, zmin=0, zmax=len(cats), showscale=False, text=text,
        texttemplate="%{text}", textfont={"size": 10}, hovertext=hover, hovertemplate=tr("%{hovertext}<extra></extra>"),
        xgap=2, ygap=2,
    ))
    fig.update_yaxes(autorange="reversed")
    title = tr("Every head's role (hover for its metrics and their uniform baselines)")
    fig.update_layout(title=title, height=160 + 60 * n_layers, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return with_summary(finished(fig), counted([tr(role_category(str(label))) for label in labels.ravel()], title))
