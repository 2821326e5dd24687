"""Parameters page: where multi-head attention's parameters and compute go, counted from real modules."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.heads.roles import ranked_heads
from mha_core.analysis.params.counts import (
    PATCHES,
    TOKEN_PARAMETERS,
    ModelBreakdown,
    biased_projections,
    calculator_check,
    head_slices,
    layer_group,
)
from mha_core.analysis.params.shapes import (
    MAX_DIM,
    AttentionShape,
    ShapeError,
    count_shape,
    count_walk,
    make_shape,
    two_bias_miscount,
)
from mha_core.figures import charts
from mha_core.figures import params as param_figures
from mha_core.i18n import tr, worded
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.teaching.walkthrough import design_notes
from views._inputs import model_card
from views._state import current_model, plain_chart, server
from views._text import literal
from views._visit import page_link, tabs, widget
from views.parts.parameters import attention_label, show_costs, show_single_vs_multi


def show_model(model: LoadedModel) -> None:
    b = computed.breakdown_of(server(), model)
    c1, c2, c3 = st.columns(3)
    c1.metric(tr("Parameters"), f"{b.total:,}")
    c2.metric(attention_label(b), f"{b.attention_total:,}")
    c3.metric(tr("Attention's share"), f"{b.attention_total / b.total:.1%}")
    st.caption(tr("Counted with numel() from the loaded modules; the total equals sum(p.numel() for p in "
                  "model.parameters()) (tied embeddings counted once)."))
    check_against_calculator(model, b)
    if model.encoder_decoder:
        show_two_blocks(model, b)
    if model.arch.image:
        show_patch_embedding(model, b)
    notes = design_notes(model, 0)
    if notes:
        with st.expander(tr("What {name}'s attention adds to the four steps (and where it shows in the table)",
            name=model.name)):
            st.markdown("\n".join(f"- {literal(note)}" for note in notes))
            st.caption(tr("QK-norm's gains are the self_attn q_norm and k_norm rows below; ALiBi and RoPE hold no "
                          "parameters; a window or a soft-cap changes the scores, not the weights."))
    left, right = st.columns(2)
    with left:
        plain_chart(param_figures.layer_stack_figure(b), key="layer_stack")
    with right:
        plain_chart(param_figures.model_sunburst(b, model.name), key="sunburst")
    table = pd.DataFrame([{
        tr("group"): param_figures.group_label(r.group), tr("part"): param_figures.part_label(r.part),
        tr("kind"): tr(r.kind), tr("shape"): " × ".join(map(str, r.shape)), tr("parameters"): r.count,
        tr("module name"): r.name} for r in b.rows])
    st.dataframe(table, hide_index=True, key="param_table")
    st.download_button(tr("CSV of this table"), table.to_csv(index=False), "parameters.csv", "text/csv")
    show_head_slices(model)


TOKEN_PARTS = tuple(part for key, part in TOKEN_PARAMETERS.items() if key != "position_embeddings")


def show_patch_embedding(model: LoadedModel, b: ModelBreakdown) -> None:
    """A Vision Transformer's first step, counted from its modules: the patch convolution, its tokens, positions."""
    patch, d_model = model.arch.patch_size, model.d_model
    st.info(tr("A Vision Transformer: each {patch} × {patch} patch of the image (× 3 colours = {inputs:,} numbers) "
               "becomes a token of {d_model} through one convolution of stride {patch}: {convolution:,} parameters "
               "(the weights {d_model} × 3 × {patch} × {patch}, and a bias); with its own tokens ({tokens}) and "
               "position embeddings, {embeddings:,} parameters come before the first layer.", patch=patch,
               inputs=3 * patch * patch, d_model=d_model, convolution=b.part_total(PATCHES),
               tokens=", ".join(dict.fromkeys(r.part for r in b.rows if r.part in TOKEN_PARTS)) or "[CLS]",
               embeddings=b.group_total("embeddings")))


def show_two_blocks(model: LoadedModel, b: ModelBreakdown) -> None:
    """An encoder–decoder's decoder layer holds two attention blocks; both counted from its modules."""
    blocks = b.block_totals(layer_group(model, 0, "decoder"))
    st.info(tr("An encoder–decoder: each of the {n_decoder} decoder layers holds two attention blocks. In decoder "
               "layer 0, self-attention over what has been written: {self:,} parameters; cross-attention (W_Q reads "
               "the decoder's states, W_K and W_V the encoder's output): {cross:,}. The {n_encoder} encoder layers "
               "hold one each. Cross-attention in all: {total:,} of the {attention:,} attention parameters.",
               n_decoder=model.decoder.n_layers, self=blocks.get("attention", 0),
               cross=blocks.get("cross-attention", 0), n_encoder=model.n_layers, total=b.cross_attention_total,
               attention=b.attention_total))


def check_against_calculator(model: LoadedModel, b: ModelBreakdown) -> None:
    """The calculator's shape for this model's attention must count the weight matrices the modules hold."""
    check = calculator_check(model, b)
    shape = check.shape
    (st.success if check.agrees else st.warning)(tr(
        "Checked: the calculator's {kind} shape (d_model {d_model}, {n_heads} query heads, {n_kv_heads} key/value "
        "heads, d_k {d_k}) counts {calculated:,} weights in W_Q, W_K, W_V and W_O per layer; layer 0's modules hold "
        "{counted:,}.", kind=tr(shape.kind), d_model=shape.d_model, n_heads=shape.n_heads,
        n_kv_heads=shape.n_kv_heads, d_k=shape.d_k, calculated=check.calculated, counted=check.counted))


def show_head_slices(model: LoadedModel) -> None:
    st.subheader(tr("One head's slice"))
    slices = head_slices(model)
    st.dataframe(pd.DataFrame([{
        tr("matrix"): s.matrix, tr("full shape (out × in)"): " × ".join(map(str, s.full_shape)),
        tr("head owns"): s.owner, tr("slice shape"): " × ".join(map(str, s.slice_shape)), tr("weights"): s.weights,
        tr("bias"): s.bias, tr("per slice"): s.count, tr("slices"): s.slices} for s in slices]), hide_index=True,
        key="head_slices")
    biased = biased_projections(model, 0)
    caption = tr("Counted from layer 0's modules.") + " " + (
        tr("Biases on {matrices};", matrices=", ".join(f"W_{x}" for x in "QKV" if x in biased))
        if biased & set("QKV") else tr("This model has no biases on W_Q, W_K, W_V;")) + " " + (
        tr("W_O's bias of {d_model} is shared by all heads and belongs to none.", d_model=model.d_model)
        if "O" in biased else tr("W_O has no bias.")) + " " + tr(
        "The slices of each matrix tile it exactly: stacking them gives back the full weight.")
    if model.n_kv_heads < model.n_heads:
        caption += " " + tr("Grouped-query attention: {n_heads} query heads share {n_kv_heads} key/value heads, so W_K "
                            "and W_V have {n_kv_heads} slices, each serving {group} query heads.",
                            n_heads=model.n_heads, n_kv_heads=model.n_kv_heads,
                            group=model.n_heads // model.n_kv_heads)
    st.caption(caption)


def shape_inputs() -> dict:
    bounds = {"min_value": 1, "max_value": MAX_DIM, "step": 1,
              "help": tr("A whole number from 1 to {max_dim:,}.", max_dim=MAX_DIM)}
    fits = lambda v: 1 <= v <= MAX_DIM  # noqa: E731
    c1, c2, c3 = st.columns(3)
    d_model = widget(c1.number_input, "calc_d_model", 512, tr("d_model"), fits=fits, **bounds)
    heads = widget(c2.number_input, "calc_heads", 8, tr("heads h"), fits=fits, **bounds)
    kv = widget(c3.number_input, "calc_kv", None, tr("key/value heads (empty = h)"), value=None, like=0, fits=fits,
                **bounds)
    c4, c5, c6 = st.columns(3)
    d_k = widget(c4.number_input, "calc_dk", None, tr("d_k (empty = d_model / h)"), value=None, like=0, fits=fits,
                 **bounds)
    d_v = widget(c5.number_input, "calc_dv", None, tr("d_v (empty = d_model / h)"), value=None, like=0, fits=fits,
                 **bounds)
    bias = widget(c6.toggle, "calc_bias", True, tr("biases"))
    as_int = lambda v: None if v is None else int(v)  # noqa: E731
    return {"d_model": int(d_model), "n_heads": int(heads), "n_kv_heads": as_int(kv), "d_k": as_int(d_k),
            "d_v": as_int(d_v), "bias": bias}


def show_calculator() -> AttentionShape | None:
    st.subheader(tr("Calculator for any shape"))
    try:
        shape = make_shape(**shape_inputs())
    except ShapeError as err:
        st.error(worded(err))
        return None
    count = count_shape(shape)
    rows = [{tr("matrix"): k, tr("parameters"): v} for k, v in count.per_matrix.items()]
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="calc_table")
    st.metric(tr("Total ({kind})", kind=tr(shape.kind)), f"{count.total:,}")
    if count.torch_mha_total is None:
        st.caption(tr("torch.nn.MultiheadAttention cannot express this shape (it needs h key/value heads and d_k = d_v "
                      "= d_model / h); counted from four nn.Linear modules."))
    else:
        said = (N_("Checked: a freshly built torch.nn.MultiheadAttention({d_model}, {n_heads}, bias={bias}) has "
                   "{torch_mha_total:,} parameters, which matches this count.")
                if count.torch_mha_total == count.total else
                N_("Checked: a freshly built torch.nn.MultiheadAttention({d_model}, {n_heads}, bias={bias}) has "
                   "{torch_mha_total:,} parameters, which DIFFERS FROM this count."))
        (st.success if count.torch_mha_total == count.total else st.error)(tr(
            said, d_model=shape.d_model, n_heads=shape.n_heads, bias=shape.bias,
            torch_mha_total=count.torch_mha_total))
    with st.expander(tr("The count, step by step"), expanded=True):
        st.markdown("\n".join(f"{i}. {step}" for i, step in enumerate(count_walk(shape), 1)))
    miscount = two_bias_miscount(shape)
    if miscount is not None:
        d = shape.d_model
        st.info(
            tr(
                "Some tutorials print {miscount:,} for this shape. The real module has {total:,} = 4·{d}² + 4·{d}: "
                "four weight matrices and four bias vectors. {miscount:,} = 4·{d}² + 2·{d} counts only two of the "
                "four biases.",
                miscount=miscount,
                total=count.total,
                d=d,
            )
        )
    return shape


def show_norms(model: LoadedModel) -> None:
    qk, ov = computed.weight_norms_of(server(), model)
    left, right = st.columns(2)
    with left:
        plain_chart(charts.layer_head_grid(qk, N_("‖W_Q W_Kᵀ‖ (Frobenius) per head: how sharply it can match"),
                                           N_("norm")), key="qk_norms")
    with right:
        plain_chart(charts.layer_head_grid(ov, N_("‖W_V W_O‖ (Frobenius) per head: how much it can write"),
                                           N_("norm")), key="ov_norms")
    st.caption(
        tr(
            "W_Q W_Kᵀ (D × D) is the bilinear form a head scores query–key pairs with; W_V W_O (D × D) is what "
            "it adds to the residual stream per unit of attention. Both use the head's own slices."
        )
    )
    layer, head = ranked_heads(np.asarray(ov), 1)[0]
    page_link(
        "views/heads.py",
        label=tr("Open layer {layer}, head {head} (largest ‖W_V W_O‖) on the heads page", layer=layer, head=head),
        query_params={"layer": str(layer), "head": str(head)},
        icon=":material/grid_view:",
    )


def main() -> None:
    model = current_model()
    model_card()
    st.title(tr("Parameters and compute"))
    this_model, calculator, norms = tabs("ptab", (N_("This model"), N_("Any shape"), N_("Head weight norms")))
    if this_model.open:
        with this_model:
            show_model(model)
    if calculator.open:
        with calculator:
            shape = show_calculator()
            if shape is not None:
                show_single_vs_multi(shape)
                show_costs(shape, model.n_layers)
                page_link("views/efficiency.py", icon=":material/speed:",
                          label=tr("Measured, and what sparse or linear attention changes: Efficiency"))
    if norms.open:
        with norms:
            show_norms(model)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
