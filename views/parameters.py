"""Parameters page: where multi-head attention's parameters and compute go, counted from real modules."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.params import ModelBreakdown, biased_projections, calculator_check, head_slices
from mha_core.analysis.shapes import (
    MAX_DIM,
    AttentionShape,
    ShapeError,
    count_shape,
    make_shape,
    single_head_equivalent,
    two_bias_miscount,
)
from mha_core.figures import charts
from mha_core.figures import params as param_figures
from mha_core.teaching.walkthrough import design_notes
from views._state import current_model, literal, model_breakdown_of, model_card, weight_norms_of


def show_model(model: LoadedModel) -> None:
    b = model_breakdown_of(str(model.model_dir))
    c1, c2, c3 = st.columns(3)
    c1.metric("Parameters", f"{b.total:,}")
    c2.metric("In attention (W_Q, W_K, W_V, W_O + biases)", f"{b.attention_total:,}")
    c3.metric("Attention's share", f"{b.attention_total / b.total:.1%}")
    st.caption("Counted with numel() from the loaded modules; the total equals "
               "sum(p.numel() for p in model.parameters()) (tied embeddings counted once).")
    check_against_calculator(model, b)
    notes = design_notes(model, 0)
    if notes:
        with st.expander(f"What {model.name}'s attention adds to the four steps (and where it shows in the table)"):
            st.markdown("\n".join(f"- {literal(note)}" for note in notes))
            st.caption("QK-norm's gains are the self_attn q_norm and k_norm rows below; ALiBi and RoPE hold no "
                       "parameters; a window or a soft-cap changes the scores, not the weights.")
    left, right = st.columns(2)
    left.plotly_chart(param_figures.layer_stack_figure(b), key="layer_stack")
    right.plotly_chart(param_figures.model_sunburst(b, model.name), key="sunburst")
    table = pd.DataFrame([{"group": r.group, "part": r.part, "kind": r.kind, "shape": " × ".join(map(str, r.shape)),
                           "parameters": r.count, "module name": r.name} for r in b.rows])
    st.dataframe(table, hide_index=True, key="param_table")
    st.download_button("CSV of this table", table.to_csv(index=False), "parameters.csv", "text/csv")
    show_head_slices(model)


def check_against_calculator(model: LoadedModel, b: ModelBreakdown) -> None:
    """The calculator's shape for this model's attention must count the weight matrices the modules hold."""
    check = calculator_check(model, b)
    shape = check.shape
    (st.success if check.agrees else st.warning)(
        f"Checked: the calculator's {shape.kind} shape (d_model {shape.d_model}, {shape.n_heads} query heads, "
        f"{shape.n_kv_heads} key/value heads, d_k {shape.d_k}) counts {check.calculated:,} weights in W_Q, W_K, W_V "
        f"and W_O per layer; layer 0's modules hold {check.counted:,}.")


def show_head_slices(model: LoadedModel) -> None:
    st.subheader("One head's slice")
    slices = head_slices(model)
    st.dataframe(pd.DataFrame([{
        "matrix": s.matrix, "full shape (out × in)": " × ".join(map(str, s.full_shape)), "head owns": s.owner,
        "slice shape": " × ".join(map(str, s.slice_shape)), "weights": s.weights, "bias": s.bias,
        "per slice": s.count, "slices": s.slices} for s in slices]), hide_index=True, key="head_slices")
    biased = biased_projections(model, 0)
    caption = ("Counted from layer 0's modules. " + (
        f"Biases on {', '.join(f'W_{x}' for x in 'QKV' if x in biased)}; " if biased & set("QKV") else
        "This model has no biases on W_Q, W_K, W_V; ") + (
        f"W_O's bias of {model.d_model} is shared by all heads and belongs to none. " if "O" in biased else
        "W_O has no bias. ") + "The slices of each matrix tile it exactly: stacking them gives back the full weight.")
    if model.n_kv_heads < model.n_heads:
        caption += (f" Grouped-query attention: {model.n_heads} query heads share {model.n_kv_heads} key/value heads, "
                    f"so W_K and W_V have {model.n_kv_heads} slices, each serving {model.n_heads // model.n_kv_heads} "
                    "query heads.")
    st.caption(caption)


def shape_inputs() -> dict:
    bounds = {"min_value": 1, "max_value": MAX_DIM, "step": 1, "help": f"A whole number from 1 to {MAX_DIM:,}."}
    c1, c2, c3 = st.columns(3)
    d_model = c1.number_input("d_model", value=512, key="calc_d_model", **bounds)
    heads = c2.number_input("heads h", value=8, key="calc_heads", **bounds)
    kv = c3.number_input("key/value heads (empty = h)", value=None, key="calc_kv", **bounds)
    c4, c5, c6 = st.columns(3)
    d_k = c4.number_input("d_k (empty = d_model / h)", value=None, key="calc_dk", **bounds)
    d_v = c5.number_input("d_v (empty = d_model / h)", value=None, key="calc_dv", **bounds)
    bias = c6.toggle("biases", value=True, key="calc_bias")
    as_int = lambda v: None if v is None else int(v)  # noqa: E731
    return {"d_model": int(d_model), "n_heads": int(heads), "n_kv_heads": as_int(kv), "d_k": as_int(d_k),
            "d_v": as_int(d_v), "bias": bias}


def show_calculator() -> AttentionShape | None:
    st.subheader("Calculator for any shape")
    try:
        shape = make_shape(**shape_inputs())
    except ShapeError as err:
        st.error(str(err))
        return None
    count = count_shape(shape)
    rows = [{"matrix": k, "parameters": v} for k, v in count.per_matrix.items()]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="calc_table")
    st.metric(f"Total ({shape.kind})", f"{count.total:,}")
    if count.torch_mha_total is None:
        st.caption("torch.nn.MultiheadAttention cannot express this shape (it needs h key/value heads and "
                   "d_k = d_v = d_model / h); counted from four nn.Linear modules.")
    else:
        verdict = "matches" if count.torch_mha_total == count.total else "DIFFERS FROM"
        st.success(f"Checked: a freshly built torch.nn.MultiheadAttention({shape.d_model}, {shape.n_heads}, "
                   f"bias={shape.bias}) has {count.torch_mha_total:,} parameters, which {verdict} this count.")
    miscount = two_bias_miscount(shape)
    if miscount is not None:
        d = shape.d_model
        st.info(f"Some tutorials print {miscount:,} for this shape. The real module has {count.total:,} = "
                f"4·{d}² + 4·{d}: four weight matrices and four bias vectors. {miscount:,} = 4·{d}² + 2·{d} "
                "counts only two of the four biases.")
    return shape


def show_single_vs_multi(shape: AttentionShape) -> None:
    st.subheader("One head or h heads?")
    single = single_head_equivalent(shape)
    multi_count, single_count = count_shape(shape).total, count_shape(single).total
    left, right = st.columns(2)
    left.metric(f"{shape.n_heads} heads of d_k = {shape.d_k}", f"{multi_count:,} parameters")
    right.metric(f"1 head of d_k = {single.d_k}", f"{single_count:,} parameters")
    st.markdown(
        f"Splitting into heads adds no parameters: head *i* uses columns {shape.d_k}·i … {shape.d_k}·(i+1)−1 of the "
        f"same d_model × {shape.n_heads * shape.d_k} projection, so the {shape.n_heads} slices tile the one matrix. "
        "What changes is the compute of the scores: each head computes its own n × n map from "
        f"d_k = {shape.d_k} features, 2·n²·d_k FLOPs per head, and the h heads together do the same "
        "2·n²·h·d_k FLOPs as one wide head, split h ways (and h maps instead of one)."
    )
    if shape.n_kv_heads != shape.n_heads:
        st.caption("With shared key/value heads (GQA/MQA) the single-head equivalent keeps one key/value head.")


def show_costs(shape: AttentionShape, n_layers: int) -> None:
    st.subheader("Cost against sequence length")
    n_max = st.select_slider("Longest n", [512, 2048, 8192, 32768, 131072], value=8192, key="calc_nmax")
    c1, c2 = st.columns(2)
    c1.plotly_chart(param_figures.flops_figure(shape, n_max), key="flops")
    c2.plotly_chart(param_figures.memory_figure(shape, n_max), key="memory")
    st.plotly_chart(param_figures.kv_cache_figure(shape, n_layers, n_max), key="kv_cache")


def show_norms(model: LoadedModel) -> None:
    qk, ov = weight_norms_of(str(model.model_dir))
    left, right = st.columns(2)
    left.plotly_chart(charts.layer_head_grid(qk, "‖W_Q W_Kᵀ‖ (Frobenius) per head: how sharply it can match",
                                              "norm"), key="qk_norms")
    right.plotly_chart(charts.layer_head_grid(ov, "‖W_V W_O‖ (Frobenius) per head: how much it can write",
                                               "norm"), key="ov_norms")
    st.caption("W_Q W_Kᵀ (D × D) is the bilinear form a head scores query–key pairs with; W_V W_O (D × D) is "
               "what it adds to the residual stream per unit of attention. Both use the head's own slices.")
    layer, head = divmod(int(ov.argmax()), ov.shape[1])
    st.page_link("views/heads.py", label=f"Open layer {layer}, head {head} (largest ‖W_V W_O‖) on the heads page",
                 query_params={"layer": str(layer), "head": str(head)}, icon=":material/grid_view:")


def main() -> None:
    model = current_model()
    model_card()
    st.title("Parameters and compute")
    this_model, calculator, norms = st.tabs(["This model", "Any shape", "Head weight norms"],
                                            key="ptab", bind="query-params")
    if this_model.open:
        with this_model:
            show_model(model)
    if calculator.open:
        with calculator:
            shape = show_calculator()
            if shape is not None:
                show_single_vs_multi(shape)
                show_costs(shape, model.n_layers)
    if norms.open:
        with norms:
            show_norms(model)


main()
