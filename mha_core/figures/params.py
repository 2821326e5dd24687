"""Figures for the parameters page: where parameters and compute go. Data in, go.Figure out."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha_core.analysis.params.counts import ModelBreakdown
from mha_core.analysis.params.shapes import (
    AttentionShape,
    attention_matrix_bytes,
    crossover_length,
    kv_cache_bytes_per_token,
    make_shape,
    projection_flops,
    score_flops,
)
from mha_core.figures import colours
from mha_core.figures.colours import FUSED_QKV, KIND_COLOURS, PARAMETER_COLOURS, RELATIVE_BIAS
from mha_core.figures.spec import FigureDict, finished
from mha_core.i18n import tr
from mha_core.messages import N_

PART_GROUPS = {  # stacked-bar segments: display part names -> segment
    "W_Q": "W_Q + b_Q", "b_Q": "W_Q + b_Q", "W_K": "W_K + b_K", "b_K": "W_K + b_K",
    "W_V": "W_V + b_V", "b_V": "W_V + b_V", "W_O": "W_O + b_O", "b_O": "W_O + b_O",
    "W_QKV": FUSED_QKV, "b_QKV": FUSED_QKV,
}


GROUP_COLOR = PARAMETER_COLOURS["groups"]  # the model and its layers: grey rings, so colour always means a kind


def segment(part: str, kind: str) -> str:
    if kind == "cross-attention":  # an encoder–decoder's decoder layer: its second attention block, one segment
        return kind
    return PART_GROUPS.get(part, N_("LayerNorms") if kind == "layernorm" else N_("feed-forward")
                           if kind == "feed-forward" else part)


def part_label(part: str) -> str:
    """A parameter's part ("MLP gate W", "word embeddings") in the page's language; module names stay."""
    name, _, suffix = part.rpartition(" ")
    if suffix in ("W", "b", "γ", "β") and name:
        return f"{tr(name)} {suffix}"
    return tr(part)


def group_label(group: str) -> str:
    """A parameter group ("layer 3", "decoder layer 3", "embeddings") in the page's language."""
    stack, _, index = group.rpartition("layer ")
    if not index.isdigit():
        return tr(group)
    return tr(STACK_LAYERS[stack.strip()], index=index)


STACK_LAYERS = {"": N_("layer {index}"), "encoder": N_("encoder layer {index}"),
                "decoder": N_("decoder layer {index}")}


KIND_LABELS = (N_("attention"), N_("layernorm"), N_("feed-forward"), N_("embedding"), N_("pooler"), N_("embeddings"),
               N_("final norm"), N_("encoder final norm"), N_("decoder final norm"), N_("cross-attention"),
               N_("convolution"), N_("layer scale"))  # ModelBreakdown's kinds, groups and parts, marked


def layer_stack_figure(b: ModelBreakdown) -> FigureDict:
    """One stacked bar per layer: Q, K, V, O projections, norms, feed-forward."""
    groups = [g for g in dict.fromkeys(r.group for r in b.rows) if "layer " in g]
    segments = ["W_Q + b_Q", "W_K + b_K", "W_V + b_V", FUSED_QKV, "W_O + b_O", RELATIVE_BIAS,
                "cross-attention", "LayerNorms", "feed-forward"]
    fig = go.Figure()
    for seg in segments:
        counts = [sum(r.count for r in b.rows if r.group == g and segment(r.part, r.kind) == seg) for g in groups]
        if not any(counts):
            continue  # the legend names only what this model has
        name = tr(seg)
        fig.add_trace(go.Bar(x=[group_label(g) for g in groups], y=counts, name=name,
                             marker_color=PARAMETER_COLOURS[seg],
                             hovertemplate="%{x}: %{y:,}<extra>" + name + "</extra>"))
    fig.update_layout(barmode="stack", title=tr("Parameters per layer"), yaxis_title=tr("parameters"),
                      height=420, margin={"t": 50, "b": 10})
    return finished(fig)


def model_sunburst(b: ModelBreakdown, model_name: str) -> FigureDict:
    """The whole model: groups (embeddings, layers, pooler) -> kinds -> named parameters. Groups are grey; a kind and
    its parameters take the stacked bars' colours (W_Q blue in both), so a colour means the same in both charts."""
    ids, labels, parents, values, colors = [model_name], [model_name], [""], [b.total], [GROUP_COLOR]
    for group in dict.fromkeys(r.group for r in b.rows):
        ids.append(group), labels.append(group_label(group)), parents.append(model_name)
        values.append(b.group_total(group)), colors.append(GROUP_COLOR)
        for kind in dict.fromkeys(r.kind for r in b.rows if r.group == group):
            kid = f"{group}/{kind}"
            rows = [r for r in b.rows if r.group == group and r.kind == kind]
            ids.append(kid), labels.append(tr(kind)), parents.append(group), values.append(sum(r.count for r in rows))
            colors.append(KIND_COLOURS.get(kind, GROUP_COLOR))
            for r in rows:
                ids.append(f"{kid}/{r.part}"), labels.append(part_label(r.part)), parents.append(kid)
                values.append(r.count)
                colors.append(PARAMETER_COLOURS.get(segment(r.part, r.kind), KIND_COLOURS.get(kind, GROUP_COLOR)))
    fig = go.Figure(go.Sunburst(ids=ids, labels=labels, parents=parents, values=values, branchvalues="total",
                                marker={"colors": colors},
                                hovertemplate=tr("%{label}: %{value:,} (%{percentRoot:.1%})<extra></extra>"),
                                maxdepth=3))
    fig.update_layout(title=tr("The whole model"), height=520, margin={"t": 50, "b": 10, "l": 10, "r": 10})
    return finished(fig)


def lengths(n_max: int) -> list[int]:
    """About 200 lengths from 1 to n_max, as Python ints: every cost below is computed in Python's unbounded
    integers and only then turned into float64 for plotting (int64 overflowed at 131,072 in every field)."""
    return [int(n) for n in np.unique(np.geomspace(1, n_max, 200).round())]


def flops_figure(s: AttentionShape, n_max: int) -> FigureDict:
    """Per layer FLOPs against n: projections (linear) vs attention scores (quadratic), crossover marked."""
    ns = lengths(n_max)
    fig = go.Figure([
        go.Scatter(x=ns, y=[float(projection_flops(s, n)) for n in ns], name=tr("projections Q, K, V, O (∝ n)"),
                   line=colours.series_line(0)),
        go.Scatter(x=ns, y=[float(score_flops(s, n)) for n in ns], name=tr("QKᵀ and probs·V (∝ n²)"),
                   line=colours.series_line(1)),
    ])
    cross = crossover_length(s)
    if cross <= n_max:
        fig.add_vline(x=cross, line_dash="dash", annotation_text=tr("crossover n = {cross:,.0f}", cross=cross))
    fig.update_xaxes(type="log", title=tr("sequence length n"))
    fig.update_yaxes(type="log", title=tr("FLOPs per layer"))
    fig.update_layout(title=tr("Compute per layer"), height=380, margin={"t": 50, "b": 10})
    return finished(fig)


def memory_figure(s: AttentionShape, n_max: int) -> FigureDict:
    """Bytes of the attention map per layer: explicit (h n² floats) vs fused (h n log-sum-exps)."""
    ns = lengths(n_max)
    explicit, fused = zip(*(attention_matrix_bytes(s, n) for n in ns), strict=True)
    fig = go.Figure([go.Scatter(x=ns, y=[float(b) for b in explicit], name=tr("explicit: probabilities (∝ n²)"),
                                line=colours.series_line(0)),
                     go.Scatter(x=ns, y=[float(b) for b in fused], name=tr("fused: log-sum-exp only (∝ n)"),
                                line=colours.series_line(1))])
    fig.update_xaxes(type="log", title=tr("sequence length n"))
    fig.update_yaxes(type="log", title=tr("bytes per layer (fp32)"))
    fig.update_layout(title=tr("Attention-map memory"), height=380, margin={"t": 50, "b": 10})
    return finished(fig)


def kv_variants(s: AttentionShape) -> dict[str, AttentionShape]:
    """The same query heads with h (MHA), a GQA group count, and 1 (MQA) key/value heads; the shape's own count
    always among them (SmolLM2's 3 of 9 is the GQA line)."""
    counts = {"MHA": s.n_heads}
    own_gqa = 1 < s.n_kv_heads < s.n_heads
    gqa = s.n_kv_heads if own_gqa else next((g for g in (8, 4, 2) if g < s.n_heads and s.n_heads % g == 0), None)
    if gqa:
        counts[tr("GQA ({gqa} KV heads)", gqa=gqa)] = gqa
    counts["MQA"] = 1
    return {name: make_shape(s.d_model, s.n_heads, s.d_k, s.d_v, g, s.bias) for name, g in counts.items()}


def kv_cache_figure(s: AttentionShape, n_layers: int, n_max: int, owner: str | None = None) -> FigureDict:
    """KV-cache bytes (fp16, all layers) for a context of n tokens: MHA vs GQA vs MQA, d_k and d_v the shape's own;
    the shape's own layout named (`owner`: the model whose shape it is) and drawn thicker."""
    ns = lengths(n_max)
    fig = go.Figure()
    for index, (name, shape) in enumerate(kv_variants(s).items()):
        per_token = kv_cache_bytes_per_token(shape, n_layers)
        label = tr("{name}: {per_token:,} B per token", name=name, per_token=per_token)
        own = shape.n_kv_heads == s.n_kv_heads
        if own:
            label += " " + (tr("({owner}'s own)", owner=owner) if owner else tr("(this shape)"))
        fig.add_trace(go.Scatter(x=ns, y=[float(n * per_token) for n in ns], name=label,
                                 line={"width": 4 if own else 1.5, "dash": "solid" if own else "dot",
                                       "color": colours.series_colour(index)}))
    fig.update_xaxes(type="log", title=tr("context length n"))
    fig.update_yaxes(type="log", title=tr("bytes"))
    fig.update_layout(title=tr("KV cache ({n_layers} layers, fp16, d_k = {d_k}, d_v = {d_v})", n_layers=n_layers,
                               d_k=s.d_k, d_v=s.d_v), height=380, margin={"t": 50, "b": 10},
                      legend={"orientation": "h", "y": -0.25})
    return finished(fig)
