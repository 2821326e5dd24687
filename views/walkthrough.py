"""Classroom walkthrough: multi-head attention on the user's sentence in the four steps of the
paper, with the real tensors of the model, and guided lessons checked against the live model."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import AttentionResult, LoadedModel, i18n
from mha_core.analysis.lm.head import has_lm_head, lm_head, read_at
from mha_core.figures import charts
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.teaching.lessons import is_right, load_lessons, not_applicable, reveal
from mha_core.teaching.step_shapes import StepShapes, concat_sentence, output_sentence, projection_sentence, step_shapes
from mha_core.teaching.walkthrough import Walkthrough, backend_words, code_for_step, design_notes
from views._images import chosen_image, show_steps
from views._inputs import model_card, sentence_box, set_sentence
from views._stacks import attention_kind, show_kind_walkthrough
from views._state import chart, check_length, checked_run, current_model, server
from views._text import literal
from views._visit import page_link, tabs, widget
from views.parts.walkthrough import step_attention


def pickers(model: LoadedModel, result: AttentionResult) -> tuple[int, int, int]:
    """Layer, head and query token; the query defaults to the sentence's pronoun ("it", or an example's own, 她),
    else its first word, and is reset when the sentence or the model changes (the old index would name another
    piece)."""
    labels, text = result.labels[0], result.batch.texts[0]
    c1, c2, c3 = st.columns(3)
    layer = widget(c1.selectbox, "wt_layer", model.n_layers // 2, tr("Layer"), options=range(model.n_layers),
                   format_func=tr)
    head = widget(c2.selectbox, "wt_head", min(1, model.n_heads - 1), tr("Head"), options=range(model.n_heads),
                  format_func=tr)
    pronoun, _ = computed.focus_of(server(), text)  # 她 in the Chinese examples
    fallback = min(1 + int(model.bos_id is not None), len(labels) - 1)
    default = next(iter(result.word_pieces(0, pronoun)), fallback) if pronoun else fallback
    query = widget(c3.selectbox, "wt_query", default, tr("Query token"), context=(str(model.model_dir), text),
                   options=range(len(labels)), format_func=lambda i: f"{i}: {labels[i]}")
    return layer, head, query


def design_box(model: LoadedModel, layer: int) -> None:
    notes = design_notes(model, layer)
    if notes:
        st.info(tr("**What {name} does beyond the four steps**", name=literal(model.name)) + "\n\n" + "\n".join(
            f"- {literal(note)}" for note in notes))


def step_projections(w: Walkthrough, model: LoadedModel, s: StepShapes, base: tuple) -> None:
    t, d, dk = s.tokens, s.d_model, s.d_k
    design_box(model, w.layer)
    st.header(tr("1. Linear projections"))
    st.markdown(projection_sentence(s, model.arch.pre_norm))
    left, right = st.columns(2)
    with left:
        chart((*base, "x"), lambda: charts.matrix_spec(w.x[:, :48], list(w.tokens),
                                                  tr("X: what layer {layer}'s attention reads (first 48 of {d})",
                                                     layer=w.layer, d=d)),
              key="x_map")
    with right:
        title = (tr("Q of head {head}: ({t}, {dk}) after RoPE", head=w.head, t=t, dk=dk) if w.q_unrotated is not None
                 else tr("Q of head {head}: ({t}, {dk})", head=w.head, t=t, dk=dk))
        chart((*base, "q"), lambda: charts.matrix_spec(w.q[w.head], list(w.tokens), title),
              key="q_map")
    st.code(code_for_step(1), language="python", wrap_lines=True)
    if w.q_projected is not None:
        step_qk_norm(w, base)
    if w.q_unrotated is not None:
        step_rope(w, base)


def side_by_side(w: Walkthrough, base: tuple, panels: tuple[tuple[str, object, str], ...]) -> None:
    """Two (T,Dh) matrices of the chosen head next to each other: (key, matrix, title) each."""
    for column, (key, matrix, title) in zip(st.columns(len(panels)), panels, strict=True):
        with column:
            chart((*base, key), lambda matrix=matrix, title=title: charts.matrix_spec(matrix, list(w.tokens), title),
                  key=key)


def step_qk_norm(w: Walkthrough, base: tuple) -> None:
    st.subheader(tr("QK-norm"))
    st.markdown(tr("Before RoPE, each head's query (and key) vector is RMS-normalised over its d_k features and "
                   "multiplied by a learned gain: its length no longer depends on the input's scale, so the scores "
                   "cannot grow without bound."))
    normed = w.q_unrotated if w.q_unrotated is not None else w.q
    side_by_side(w, base, (("q_projected", w.q_projected[w.head], tr("Q of head {head} from W_Q", head=w.head)),
                           ("q_normed", normed[w.head], N_("after QK-norm"))))


def step_rope(w: Walkthrough, base: tuple) -> None:
    st.subheader(tr("Rotary position embedding (RoPE)"))
    st.markdown(tr("Before the scores, each query and key is rotated by its position: feature pairs (i, i + d_k/2) "
                   "turn by an angle proportional to the position, so q·k depends on how far apart two tokens are. No "
                   "position vector is added to the input."))
    side_by_side(w, base, (("q_unrotated", w.q_unrotated[w.head], tr("Q of head {head} before rotation", head=w.head)),
                           ("q_rotation", w.q[w.head] - w.q_unrotated[w.head],
                            N_("What the rotation changed (after − before)"))))


def step_concat_and_output(w: Walkthrough, model: LoadedModel, s: StepShapes, base: tuple) -> None:
    t, d, width = s.tokens, s.d_model, s.heads_width
    st.header(tr("3. Concatenate the heads"))
    st.markdown(concat_sentence(s))
    chart(
        (*base, "concat"),
        lambda: charts.with_column_separators(
            charts.matrix_spec(w.concat, list(w.tokens), tr("Concatenated heads ({t} × {width})", t=t, width=width)),
            s.d_k, s.heads, t),
        key="concat",
    )
    st.code(code_for_step(3), language="python", wrap_lines=True)
    st.header(tr("4. Output projection W_O"))
    st.markdown(output_sentence(s))
    chart(
        (*base, "output"),
        lambda: charts.matrix_spec(
            w.output[:, :48], list(w.tokens), tr("Multi-head attention output (first 48 of {d})", d=d)
        ),
        key="output",
    )
    st.code(code_for_step(4), language="python", wrap_lines=True)
    st.caption(tr("The same four steps with Q from one sequence and K, V from another are cross-attention: an "
                  "encoder–decoder's decoder reading its source. A decoder alone does the same inside one sequence "
                  "when it translates: its words attend back to the source it was given."))
    left, right = st.columns(2)
    page_link("views/seq2seq.py", where=left, label=tr("Cross-attention in an encoder–decoder"),
              icon=":material/translate:")
    page_link("views/translation.py", where=right, label=tr("Translation's alignment inside a decoder"),
              icon=":material/g_translate:")


def step_prediction(model: LoadedModel, text: str, layer: int, query: int) -> None:
    st.header(tr("5. What this layer does to the prediction"))
    if not has_lm_head(model):
        st.info(
            tr(
                "{name} has no language-model head: it predicts no piece, so there is no prediction for this layer "
                "to change.",
                name=model.name,
            )
        )
        return
    effect = computed.layer_effect_of(server(), model, text, layer, query)
    preposition, _, several = read_at(lm_head(model).masked)
    st.markdown(
        literal(
            tr(
                "The stream {preposition} piece {query} ('{piece}') read through the final norm and the "
                "language-model head, as if the model stopped here (the logit lens): the most likely "
                "{several} entering layer {layer} and leaving it. The model's final answer is '{answer}'.",
                preposition=preposition,
                query=query,
                piece=effect.piece,
                several=several,
                layer=layer,
                answer=effect.answer,
            )
        )
    )
    answer_column = f"p('{effect.answer}')"
    st.dataframe(
        pd.DataFrame(
            [
                {
                    tr("stage"): tr(stage),
                    answer_column: round(prob, 6),
                    tr("most likely"): ", ".join(f"{piece} {q:.2f}" for piece, q in top),
                }
                for stage, prob, top in zip(effect.stages, effect.answer_probs, effect.top, strict=True)
            ]
        ),
        hide_index=True,
        key="wt_effect",
        column_config={answer_column: st.column_config.NumberColumn(format="percent")},
    )
    st.caption(
        tr(
            "Every layer adds its attention's and its MLP's output to the stream; the Predictions page shows all "
            "layers at once (Logit lens) and each head's direct share (Attribution)."
        )
    )


def parity_badge(model: LoadedModel, text: str) -> None:
    p = computed.parity_of(server(), model, text)
    st.header(tr("Parity"))
    (st.success if p.ok else st.error)(
        tr(
            "Max |ours − model| over every attention map: {maps:.2e}; last hidden state: {hidden:.2e} (its values "
            "reach {scale:.3g}; float precision allows {tolerance:.1e}). Explicit vs fused ({backend}) maps: "
            "{fused:.2e}.",
            maps=p.max_map_vs_model,
            hidden=p.max_hidden_vs_model,
            scale=p.hidden_scale,
            tolerance=p.hidden_tolerance,
            backend=backend_words(p.backend),
            fused=p.max_map_explicit_vs_fused,
        )
    )
    if not widget(st.toggle, "wt_timing", False, tr("Time the three paths on this sentence")):
        return
    times = computed.timings_of(server(), model, text)
    st.caption(
        tr("Fastest of {repeats} runs after a warm-up, on this server, for this sentence.", repeats=times.repeats)
    )
    c1, c2, c3 = st.columns(3)
    c1.metric(tr("Explicit path"), f"{times.explicit_ms:.1f} ms")
    c2.metric(tr("Fused path ({backend})", backend=backend_words(p.backend)), f"{times.fused_ms:.1f} ms")
    c3.metric(tr("The model itself (eager)"), f"{times.model_ms:.1f} ms")


def show_lessons(model: LoadedModel) -> None:
    st.caption(tr("Each answer is checked against the live model, not a stored key."))
    for lesson in load_lessons(language=i18n.current()):
        reason = not_applicable(model, lesson)
        if reason is not None:
            st.caption(
                literal(
                    tr(
                        "{title}: not asked on {name}, because {reason}.",
                        title=lesson.title,
                        name=model.name,
                        reason=reason,
                    )
                )
            )
            continue
        with st.expander(tr("{title} — {question}", title=lesson.title, question=lesson.question)):
            st.markdown(tr("Sentence: *{sentence}*", sentence=literal(lesson.sentence)))
            st.button(
                tr("Put this sentence in the sentence box"),
                key=f"load_{lesson.id}",
                on_click=set_sentence,
                args=(lesson.sentence,),
            )
            st.caption(tr("Hint: {hint}", hint=lesson.hint))
            if lesson.written_for != model.name:
                st.caption(
                    tr(
                        "Written for {written_for}; the answer is computed live from {name}, and the lesson says "
                        "so when it does not apply.",
                        written_for=lesson.written_for,
                        name=model.name,
                    )
                )
            answer = widget(st.text_input, f"answer_{lesson.id}", "", tr("Your answer"))
            check_length(answer, N_("The answer"))
            if st.button(tr("Check"), key=f"check_{lesson.id}"):
                result = reveal(model, lesson)
                if answer.strip():
                    why = result.why_wrong(answer)
                    (st.success if is_right(result, answer) else st.warning)(
                        tr("Right.") if is_right(result, answer) else why or tr("Not this time.")
                    )
                st.markdown(result.explanation)


def image_walkthrough(model: LoadedModel) -> None:
    """A Vision Transformer: the photo cut into patches that become tokens, the patch embedding, then one chosen
    token's row in one head (views/_images.py, as the Images page's Step by step)."""
    model_card()
    st.caption(tr("{name} reads images: an image is worth 16×16 words. Choose a photo, then a patch (or [CLS]) and a "
                  "head: its row is followed from the pixels.", name=model.name))
    data, side, heads = chosen_image(model)
    show_steps(model, data, side, heads)


def main() -> None:
    model = current_model()
    st.title(tr("Multi-head attention, step by step"))
    if model.arch.image:
        image_walkthrough(model)
        return
    text = sentence_box()
    kind = attention_kind()
    if model.encoder_decoder:  # its decoder's or cross-attention (a text model's encoder is read below, alone)
        check_length(text)
        show_kind_walkthrough(model, text, kind)
        return
    walk, lessons = tabs("wt_tab", (N_("Walkthrough"), N_("Lessons")))
    if lessons.open:
        with lessons:
            show_lessons(model)
    if not walk.open:
        return
    with walk:
        result = checked_run(text, path="explicit")
        tokens = list(result.labels[0])
        layer, head, query = pickers(model, result)
        base = ("walkthrough", str(model.model_dir), text, layer, head)
        w = computed.walkthrough_of(server(), model, text, layer, head)
        shapes = step_shapes(model, layer, len(tokens))
        step_projections(w, model, shapes, base)
        step_attention(w, model, shapes, query, base)
        step_concat_and_output(w, model, shapes, base)
        step_prediction(model, text, layer, query)
        parity_badge(model, text)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
