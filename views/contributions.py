"""What heads contribute, not only where they look: value-weighted attention, attention rollout, head ablation."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.heads.roles import head_label
from mha_core.analysis.lm.ablation import MODES
from mha_core.analysis.lm.measures import MEASURE_HELP, default_measure, measures_for
from mha_core.figures import charts, colours
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.serving.export import json_text, matrix_csv
from views._inputs import sentence_box
from views._state import chart, checked_run, current_model, queued, run_one, server
from views._text import literal
from views._visit import tabs, widget


def pickers(model: LoadedModel) -> tuple[int, int]:
    left, right = st.columns(2)
    layer = widget(left.selectbox, "c_layer", 0, tr("Layer"), options=range(model.n_layers), format_func=tr)
    head = widget(right.selectbox, "c_head", 0, tr("Head"), options=range(model.n_heads), format_func=tr)
    return layer, head


def show_value_weighted(model: LoadedModel, text: str, labels: tuple[str, ...]) -> None:
    st.caption(tr("Kobayashi et al. (2020), 'Attention is Not Only a Weight': head h moves α_ij·f(x_j) from token j to "
                  "token i, with f(x_j) = (x_j W_V + b_V) W_O (the head's slices). A large weight on a token whose "
                  "transformed vector is tiny moves almost nothing; ‖α_ij f(x_j)‖ shows what is really moved."))
    key = ("value-weighted", str(model.model_dir), text)
    result = run_one(text)  # main() ran checked_run: bad input stopped there, its notes shown once
    summary = queued(computed.value_weighted_summary_of, model, text)
    if summary is None:
        return
    layer, head = pickers(model)
    vw = computed.value_weighted_of(server(), model, text, layer)
    left, right = st.columns(2)
    with left:  # α rebuilt only when this figure is not already built (the fused path keeps no maps)
        chart(
            (*key, "alpha", layer, head),
            lambda: charts.head_figure(
                result.text_layer_maps(0, layer)[head].numpy(),
                labels,
                tr("Layer {layer}, head {head}: attention α", layer=layer, head=head),
            ),
            key="vw_alpha",
        )
    with right:
        chart(
            (*key, "weighted", layer, head),
            lambda: charts.head_figure(
                vw.weighted[head], labels, tr("Layer {layer}, head {head}: ‖α f(x)‖", layer=layer, head=head)
            ),
            key="vw_weighted",
        )
    chart(
        (*key, "norms", layer, head),
        lambda: charts.token_bar_figure(
            labels,
            vw.value_norms[head],
            tr("‖f(x_j)‖ per token, layer {layer} head {head}", layer=layer, head=head),
            y_max=None,
        ),
        key="vw_norms",
    )
    raw, weighted = summary.raw_special_share, summary.weighted_special_share  # (L,H) each
    left, right = st.columns(2)
    with left:
        chart(
            (*key, "raw_share"),
            lambda: charts.layer_head_grid(raw, N_("Share of raw attention to special tokens"), N_("share")),
            key="vw_raw_share",
        )
    with right:
        chart(
            (*key, "weighted_share"),
            lambda: charts.layer_head_grid(
                weighted, N_("Share of norm-weighted attention to special tokens"), N_("share")
            ),
            key="vw_weighted_share",
        )
    said = (
        N_(
            "Mean over heads: {raw:.2f} of the raw attention goes to special tokens (and the first token), but "
            "{moved:.2f} of what is moved."
        )
        if model.causal
        else N_(
            "Mean over heads: {raw:.2f} of the raw attention goes to special tokens, but {moved:.2f} of what is moved."
        )
    )
    st.caption(tr(said, raw=raw.mean(), moved=weighted.mean()))
    st.download_button(
        tr("CSV: ‖α f(x)‖ of this head"),
        lambda: matrix_csv(vw.weighted[head], labels),
        f"value_weighted_L{layer}_H{head}.csv",
        "text/csv",
        key="vw_csv",
    )
    chart(
        (*key, "overview", layer, head),
        lambda: charts.overview_figure(summary.overview, selected=(layer, head)),
        key="vw_overview",
    )
    st.caption(
        tr(
            "Every head's ‖α f(x)‖, each row scaled to sum to 1 (long texts pooled into blocks); the red box is "
            "the head chosen above."
        )
    )


def show_rollout(model: LoadedModel, text: str, labels: tuple[str, ...]) -> None:
    st.caption(
        tr(
            "Abnar & Zuidema (2020): Â_l = 0.5·mean over heads of A_l + 0.5·I (the residual), rows renormalised; "
            "the rollout to layer l is Â_l ··· Â_0: how much each input token reaches each position."
        )
    )
    key = ("rollout", str(model.model_dir), text)
    rolled = queued(computed.rollout_result_of, model, text)
    if rolled is None:
        return
    last_layer = model.n_layers - 1
    layer = widget(st.slider, "c_roll_layer", last_layer, tr("Up to layer"), 0, last_layer,
                   fits=lambda v: 0 <= v <= last_layer)
    query = widget(st.selectbox, "c_roll_query", len(labels) - 1, tr("Query token"), context=key,
                   options=range(len(labels)), format_func=lambda i: f"{i}: {labels[i]}")
    chart(
        (*key, layer),
        lambda: charts.head_figure(rolled[layer], labels, tr("Rollout up to layer {layer}", layer=layer)),
        key="rollout_map",
    )
    st.download_button(
        tr("CSV: this rollout"),
        lambda: matrix_csv(rolled[layer], labels),
        f"rollout_L{layer}.csv",
        "text/csv",
        key="rollout_csv",
    )
    chart(
        (*key, "reach", query),
        lambda: charts.layer_head_grid(
            rolled[:, query, :],
            tr("How much each input token reaches '{query}', layer by layer", query=labels[query]),
            N_("share"),
            columns=labels,
        ),
        key="rollout_reach",
    )
    if model.causal:
        st.caption(
            tr(
                "In a decoder every query sees the first token, and many heads park their attention there (the "
                "attention sink): rolled out over many layers, most of the flow ends on it. Compare the "
                "value-weighted view, which shows how little such attention moves."
            )
        )


def show_ablation(model: LoadedModel, text: str) -> None:
    st.caption(
        tr(
            "Remove one head (its output before W_O set to zero, or to its mean over this text's positions) and "
            "measure what changes downstream. Every head is ablated on its own, in chunks that fit the server's "
            "memory limit; each variant reruns only the layers from its head's onward."
        )
    )
    c1, c2, c3, c4 = st.columns(4)
    mode = widget(c1.radio, "c_mode", MODES[0], tr("Ablation"), options=MODES, horizontal=True, format_func=tr)
    measures = list(measures_for(model))
    measure = widget(c2.selectbox, "c_measure", default_measure(model), tr("Measure"), options=measures,
                     help="; ".join(f"{tr(m)}: {tr(MEASURE_HELP[m])}" for m in measures), format_func=tr)
    target = widget(c3.text_input, "c_target", " Paris", tr("Target token"), disabled=measure != "target")
    position = widget(c4.number_input, "c_position", None, tr("After position (empty: the last)"), min_value=0,
                      value=None, like=0, step=1, disabled=measure != "target", context=(str(model.model_dir), text))
    target, position = (target, position) if measure == "target" else (None, None)
    key = ("ablation", str(model.model_dir), text, mode, measure, target, position)
    grid = queued(computed.ablation_of, model, text, mode, measure, target, position)
    if grid is None:
        return
    if len(grid.target_pieces) > 1:
        st.caption(
            literal(
                tr(
                    "The target is scored whole: the sum of the log-probabilities of its {target_pieces} "
                    "piece(s) {target_pieces2}, each after the ones before it.",
                    target_pieces=len(grid.target_pieces),
                    target_pieces2=" · ".join(grid.target_pieces),
                )
            )
        )
    chart(
        key,
        lambda: charts.layer_head_grid(
            grid.effects,
            tr("Effect of ablating each head ({measure})", measure=tr(MEASURE_HELP[measure])),
            measure,
            zmid=0 if measure != "embedding" else None,
            colorscale=colours.SIGNED if measure != "embedding" else colours.WEIGHTS,
        ),
        key="ablation_grid",
    )
    top = grid.strongest()
    st.dataframe(
        pd.DataFrame(
            [
                {tr("head"): head_label(layer, head), tr("effect"): round(float(grid.effects[layer, head]), 5)}
                for layer, head in top
            ]
        ),
        hide_index=True,
        key="ablation_top",
    )
    chosen = widget(st.multiselect, "c_joint", top[:3], tr("Ablate these heads together"), context=key, options=top,
                    format_func=lambda lh: head_label(*lh))  # a new grid: its own top heads
    if chosen:
        joint = computed.joint_ablation_of(server(), model, text, chosen, mode, measure, target, position)
        st.metric(
            tr("Joint effect of {chosen} heads", chosen=len(chosen)),
            f"{joint:.5f}",
            help=tr("Sum of their single effects: {value:.5f}", value=sum(grid.effects[lh] for lh in chosen)),
        )
    data = grid.as_json(model.name)  # the same fields as the CLI's ablate --json
    c1, c2 = st.columns(2)
    c1.download_button(tr("JSON: the grid"), lambda: json_text(data), "ablation.json", "application/json")
    c2.download_button(
        tr("CSV: the grid"), lambda: pd.DataFrame(grid.effects).to_csv(index_label="layer"), "ablation.csv", "text/csv"
    )


def main() -> None:
    model = current_model()
    st.title(tr("What heads contribute"))
    text = sentence_box()
    labels = checked_run(text).labels[0]
    weighted, rolled, ablated = tabs("c_tab", (N_("Value-weighted"), N_("Rollout"), N_("Ablation")))
    if weighted.open:
        with weighted:
            show_value_weighted(model, text, labels)
    if rolled.open:
        with rolled:
            show_rollout(model, text, labels)
    if ablated.open:
        with ablated:
            show_ablation(model, text)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
