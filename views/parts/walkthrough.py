"""The Walkthrough's attention step (scores, softmax, the weighted values of one head), which the lesson's second
step draws too."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_core import LoadedModel
from mha_core.figures import charts, colours
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.teaching.step_shapes import StepShapes, scale_name, scale_sentence, softmax_formula
from mha_core.teaching.walkthrough import Walkthrough, code_for_step, row_entropy, softmax_at_scale
from views._fit import BODY, CAPTION, HEADING, Style
from views._state import chart
from views._text import literal
from views._visit import widget


def step_attention(w: Walkthrough, model: LoadedModel, s: StepShapes, query: int, base: tuple,
                   brief: bool = False) -> str:
    """The scores and the softmax of one head, one row at a scale of the visitor's, the output and the code
    (`brief`, the lesson's: the scores and the softmax under a heading and its sentence drawn as one element, the
    output line returned for the caller to draw with its own words: a class's follower is sent fewer elements)."""
    dk = s.d_k
    if brief:  # under the lesson's own numbered title: a heading without a number of its own
        st.markdown(f"### {brief_heading(w)}\n\n{scale_sentence(s)}")
    else:
        st.header(tr("2. Scaled dot-product attention (head {head})", head=w.head))
        st.markdown(scale_sentence(s))
    if not w.visible.all():
        st.caption(causal_note())
    if w.position_bias is not None:
        title = tr("ALiBi's bias of head {head}, added to the scaled scores", head=w.head) if model.arch.alibi else tr(
            "Head {head}'s relative-position bias (learned per bucket of distance), added to the scores", head=w.head)
        seen = np.where(w.visible, w.position_bias, np.nan)  # the keys each query sees
        chart((*base, "alibi"), lambda: charts.matrix_spec(seen, list(w.tokens), title,
                                                      cols=charts.indexed_labels(w.tokens)), key="alibi")
    if w.group > 1:
        st.caption(shared_keys_note(w))
    left, right = (st.grid(2),) * 2 if brief else st.columns(2)  # the lesson: one element, not three
    cols = charts.indexed_labels(w.tokens)
    with left:
        chart(
            (*base, "raw"),
            lambda: charts.matrix_spec(w.raw_scores, list(w.tokens), N_("QKᵀ before scaling"), cols=cols),
            key="raw_scores",
        )
    with right:
        chart(
            (*base, "probs"),
            lambda: charts.matrix_spec(
                w.probs, list(w.tokens), softmax_formula(s), cols=cols, colorscale=colours.WEIGHTS, zmid=None
            ),
            key="probs",
        )
    if not brief:
        scaled_row(w, s, query, base)
    output = output_line(w, query, dk)
    if not brief:
        st.markdown(output)
        st.code(code_for_step(2), language="python", wrap_lines=True)
    return output


def brief_heading(w: Walkthrough) -> str:
    return tr("Scaled dot-product attention (head {head})", head=w.head)


def causal_note() -> str:
    return tr("A causal model: before the softmax, each query's scores for later tokens are set to the lowest number "
              "(the mask), so a token attends only to itself and the tokens before it.")


def shared_keys_note(w: Walkthrough) -> str:
    return tr("Grouped-query attention: head {head} uses the keys and values of key/value head {head2}, shared with "
              "query heads {head3}–{head4}.", head=w.head, head2=w.kv_head, head3=w.sharing[0], head4=w.sharing[-1])


def output_line(w: Walkthrough, query: int, dk: int) -> str:
    """The query's output: its strongest keys' weighted values and its first numbers."""
    parts = " + ".join(f"{w.probs[query, j]:.2f}·v[{literal(w.tokens[j])}]" for j in w.strongest_keys(query))
    out = w.context[w.head, query]
    return tr("Output for '{tokens}' = {parts} + … = [{value}, …] ({dk} numbers)", tokens=literal(w.tokens[query]),
              parts=parts, value=", ".join(f"{x:.2f}" for x in out[:6]), dk=dk)


def brief_texts(w: Walkthrough, s: StepShapes, query: int) -> list[tuple[str, Style]]:
    """What the lesson's brief attention step writes around its two charts, each with how it is set."""
    texts = [(brief_heading(w), HEADING), (scale_sentence(s), BODY)]
    texts += [(causal_note(), CAPTION)] * (not w.visible.all()) + [(shared_keys_note(w), CAPTION)] * (w.group > 1)
    return [*texts, (output_line(w, query, s.d_k), BODY)]


def scaled_row(w: Walkthrough, s: StepShapes, query: int, base: tuple) -> None:
    """One query's row of weights at a scale the visitor picks (the model's own by default)."""
    scale = widget(st.slider, "wt_scale", float(round(w.scale, 3)),  # another model: its own scale
                   tr("Scale applied before softmax (the model uses {rule} = {scale:.4f})", rule=scale_name(s),
                      scale=s.scale), 0.01, 1.0, step=0.001,
                   context=(w.scale,), fits=lambda v: 0.01 <= v <= 1.0)
    row = softmax_at_scale(
        w.raw_scores[query], scale, w.visible[query],
        None if w.position_bias is None else w.position_bias[query], w.softcap
    )
    chart(
        (*base, "row", query, scale),
        lambda: charts.token_bar_figure(
            list(w.tokens),
            row,
            tr("Row of '{token}' at scale {scale:.3f}: entropy {entropy:.2f} nats (model's: {model:.2f})",
               token=w.tokens[query], scale=scale, entropy=row_entropy(row), model=row_entropy(w.probs[query])),
        ),
        key="scaled_row",
    )
