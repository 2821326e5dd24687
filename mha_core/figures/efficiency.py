"""Figures for the Efficiency page: which keys a pattern lets each query see, what it keeps of each head, how far
each layer drifts, and the kernels' measured cost. Data in, figure dict out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from mha_core.analysis.efficiency.cost import AttentionCost
from mha_core.figures import charts, colours
from mha_core.figures.spec import FigureDict, finished
from mha_core.i18n import tr
from mha_core.messages import N_

KERNEL_NAMES = {"explicit": N_("explicit (n² weights stored)"), "fused": N_("fused (SDPA)"),
                "window": N_("window (band in blocks)"), "linear": N_("linear (φ(q)·(φ(k)ᵀv))")}


def pattern_figure(allowed: np.ndarray, labels: Sequence[str], spec: str) -> FigureDict:
    """(T,T) bool: the keys each query sees, dark where seen."""
    return charts.matrix_spec(allowed.astype(float), list(labels),
                              tr("Keys each query sees: {spec}", spec=spec),
                              height=360, cols=charts.indexed_labels(labels), colorscale=colours.WEIGHTS, zmid=None)


def kept_mass_figure(kept: np.ndarray, spec: str) -> FigureDict:
    """(L,H) the share of each head's dense weight the pattern keeps."""
    return charts.layer_head_grid(kept, tr("Share of each head's attention kept under {spec}", spec=spec),
                                  N_("kept"), zrange=(0.0, 1.0))


def layer_change_figure(change: np.ndarray) -> FigureDict:
    """(L,) relative change of each layer's output."""
    fig = go.Figure(go.Bar(x=[f"L{layer}" for layer in range(len(change))], y=change,
                           text=[f"{value:.2f}" for value in change], textposition="outside",
                           marker_color=colours.ONE_SERIES))
    fig.update_layout(title=tr("How far each layer's output moves: ‖patterned − dense‖ / ‖dense‖"), height=300,
                      margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      yaxis_range=[0, max(0.05, 1.2 * float(np.max(change)))])
    return finished(fig)


def cost_figure(cost: AttentionCost, memory: bool) -> FigureDict:
    """Seconds (or peak MB) against length, log–log, a line per kernel, its fitted slope in the legend."""
    fig = go.Figure()
    for index, (kernel, seconds) in enumerate(cost.seconds.items()):
        values = cost.peak_mb.get(kernel) if memory else seconds
        if values is None:
            continue
        named = tr(KERNEL_NAMES[kernel])
        name = named if memory else tr("{kernel} — slope {slope:.2f}", kernel=named, slope=cost.slopes[kernel])
        shown = [max(v, 0.1) for v in values] if memory else values  # a log axis: a peak too small to see as 0.1 MB
        fig.add_trace(go.Scatter(x=list(cost.lengths), y=shown, name=name, mode="lines+markers",
                                 line=colours.series_line(index),
                                 marker={"symbol": colours.series_style(index)["symbols"][0]}))
    fig.update_xaxes(type="log", title=tr("sequence length n"))
    fig.update_yaxes(type="log", title=tr("peak memory (MB)") if memory else tr("seconds per layer"))
    title = (tr("Peak memory of one layer's attention ({heads} heads × {dim})", heads=cost.heads, dim=cost.head_dim)
             if memory else tr("Time of one layer's attention ({heads} heads × {dim}, {device})", heads=cost.heads,
                               dim=cost.head_dim, device=cost.device))
    fig.update_layout(title=title, height=380, margin={"t": 50, "b": 10}, legend={"orientation": "h", "y": -0.25})
    return finished(fig)
