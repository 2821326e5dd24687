"""The Parameters page's one wide head against narrow heads and a model's costs, which the lesson's parameters and
cost steps draw too."""

from __future__ import annotations

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.params.counts import ModelBreakdown, attention_shape
from mha_core.analysis.params.shapes import AttentionShape, count_shape, single_head_equivalent
from mha_core.figures import params as param_figures
from mha_core.i18n import tr
from views._state import chart
from views._visit import widget


def show_single_vs_multi(shape: AttentionShape) -> None:
    st.subheader(tr("One head or h heads?"))
    single = single_head_equivalent(shape)
    multi_count, single_count = count_shape(shape).total, count_shape(single).total
    left, right = st.columns(2)
    left.metric(tr("{n_heads} heads of d_k = {d_k}", n_heads=shape.n_heads, d_k=shape.d_k),
                tr("{count:,} parameters", count=multi_count))
    right.metric(tr("1 head of d_k = {d_k}", d_k=single.d_k), tr("{count:,} parameters", count=single_count))
    st.markdown(
        tr(
            "Splitting into heads adds no parameters: head *i* uses columns {d_k}·i … {d_k}·(i+1)−1 of the same "
            "d_model × {width} projection, so the {n_heads} slices tile the one matrix. What changes is the compute "
            "of the scores: each head computes its own n × n map from d_k = {d_k} features, 2·n²·d_k FLOPs per "
            "head, and the h heads together do the same 2·n²·h·d_k FLOPs as one wide head, split h ways (and h maps "
            "instead of one).",
            d_k=shape.d_k,
            width=shape.n_heads * shape.d_k,
            n_heads=shape.n_heads,
        )
    )
    if shape.n_kv_heads != shape.n_heads:
        st.caption(tr("With shared key/value heads (GQA/MQA) the single-head equivalent keeps one key/value head."))


def show_model_costs(model: LoadedModel, one_row: bool = False) -> None:
    """show_costs for the model's own shape (its modules' d_k, d_v and key/value heads), its layout marked."""
    show_costs(attention_shape(model), model.n_layers, one_row, owner=model.name)


def show_costs(shape: AttentionShape, n_layers: int, one_row: bool = False, owner: str | None = None) -> None:
    """FLOPs, the attention map's bytes and the KV cache against the length (`one_row`, the lesson's: the three side
    by side under the step's own title, no heading of their own; `owner`: the model whose shape it is, named on its
    own KV-cache line)."""
    if not one_row:
        st.subheader(tr("Cost against sequence length"))
    n_max = widget(st.select_slider, "calc_nmax", 8192, tr("Longest n"), options=[512, 2048, 8192, 32768, 131072])
    c1, c2, c3 = (st.grid(3),) * 3 if one_row else (*st.columns(2), st.container())  # a grid: one element, not four
    with c1:  # built once per server for each shape and length (a class on the cost step asks for the same three)
        chart(("flops", shape, n_max), lambda: param_figures.flops_figure(shape, n_max), key="flops")
    with c2:
        chart(("memory", shape, n_max), lambda: param_figures.memory_figure(shape, n_max), key="memory")
    with c3:
        chart(("kv cache", shape, n_layers, n_max, owner),
              lambda: param_figures.kv_cache_figure(shape, n_layers, n_max, owner), key="kv_cache")


def attention_label(breakdown: ModelBreakdown) -> str:
    """The attention blocks' count's label, naming biases only where the model has them (Gemma's have none)."""
    if breakdown.attention_has_biases:
        return tr("In attention (W_Q, W_K, W_V, W_O + biases)")
    return tr("In attention (W_Q, W_K, W_V, W_O)")
