"""Explanations (issue 81): is attention the explanation? The sentence's words scored by attention and by its
alternatives side by side, for one target, and each method's faithfulness measured. Computed in
mha_core.analysis.explain; the figures in mha_core.figures.explain."""

from __future__ import annotations

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.explain.choices import BASELINE_NAMES, METHOD_NAMES, METHOD_NOTES
from mha_core.analysis.explain.explain import Explanation
from mha_core.analysis.explain.targets import COREF
from mha_core.analysis.lm.head import has_lm_head
from mha_core.figures import explain as figures
from mha_core.i18n import tr
from mha_core.serving.computed import explain as computed
from mha_core.teaching.examples import question_for, readable_first_piece
from views._inputs import sentence_box
from views._state import chart, current_model, narrow_screen, queued
from views._text import literal
from views._visit import stop, widget


def asked(model: LoadedModel, text: str) -> tuple[str, str | None, str | None]:
    """What the model reads and the target's answer and wrong word: a decoder is asked about the pronoun."""
    if not model.causal:
        return text, None, None
    if not has_lm_head(model):  # saved without its head: the pronoun's attention is what it can be asked
        st.info(tr("This decoder was saved without the head that predicts words: the target is the coreference "
                   "margin, the pronoun's attention to the first noun minus the second."))
        return text, None, None
    question = question_for(text, model.name)
    if question is None:
        st.info(tr("A decoder is asked which word the pronoun refers to: type a sentence with a pronoun and two "
                   "nouns before it."))
        stop()
    st.caption(tr("The model reads: {text}", text=literal(question.text)))
    first_answer, first_wrong = first_pieces(model, question.answer, question.wrong)
    notes = st.container()  # above the boxes, drawn once their values are known
    left, right = st.columns(2)
    answer = widget(left.text_input, "explain_answer", first_answer, tr("Answer"), context=(text,))
    wrong = widget(right.text_input, "explain_wrong", first_wrong, tr("Wrong word"), context=(text,))
    for word, piece, typed in ((question.answer, first_answer, answer), (question.wrong, first_wrong, wrong)):
        if piece and piece != word and typed.strip() == piece:  # said while its box holds the noun's first piece
            notes.caption(tr("{model} writes '{word}' in several pieces: its first, '{piece}', is compared.",
                             model=model.name, word=literal(word), piece=literal(piece)))
    if not answer.strip():  # mha_core.analysis.explain.targets.own_answer
        left.caption(tr("The Answer box is empty: the answer is the model's own most likely piece after the last "
                        "one (perhaps no noun of the sentence), as the Target line below names it."))
    return question.text, answer.strip() or None, wrong.strip() or None


def first_pieces(model: LoadedModel, answer: str, wrong: str) -> tuple[str, str]:
    """The nouns' first pieces, the answer and wrong word the page starts from (as the lesson's step compares them:
    玛丽 is 玛 | 丽 on Gemma 3); ("", "") where a noun has no readable piece of its own: the model's own next piece
    is explained then."""
    pieces = [readable_first_piece(model, word).strip() for word in (answer, wrong)]
    return (pieces[0], pieces[1]) if all(pieces) else ("", "")


def bold_piece(piece: str) -> str:
    """A piece for inside **…**: without the space a word-initial piece starts with (" animal"), which kept markdown
    from bolding it (the page said logit(** animal**))."""
    return literal(piece.strip() or repr(piece))


def target_line(explanation: Explanation) -> None:
    target = explanation.target
    if target.kind == COREF:
        st.markdown(tr("Target: the coreference margin, attention from the pronoun to **{a}** minus **{b}** in the "
                       "last-layer head where it is largest: **{score:.3f}**.", a=bold_piece(target.answer),
                       b=bold_piece(target.wrong), score=explanation.score))
    elif target.wrong is not None:
        st.markdown(tr("Target: logit(**{a}**) − logit(**{b}**) after the last piece: **{score:.3f}**.",
                       a=bold_piece(target.answer), b=bold_piece(target.wrong), score=explanation.score))
    else:
        st.markdown(tr("Target: the model's score for **{a}**: **{score:.3f}**.", a=bold_piece(target.answer),
                       score=explanation.score))


def faithfulness_table(explanation: Explanation) -> None:
    rows = [{tr("Method"): tr(METHOD_NAMES[name]),
             tr("Comprehensiveness (AOPC)"): round(m.faithfulness.aopc_comprehensiveness, 4),
             tr("Sufficiency (AOPC)"): round(m.faithfulness.aopc_sufficiency, 4),
             tr("Seconds"): round(m.seconds, 2)} for name, m in explanation.methods.items()]
    st.dataframe(rows, hide_index=True, width="stretch")
    best = explanation.most_faithful()
    if best is not None:
        st.markdown(tr("Most faithful here: **{method}** (removing its top words changes the score most, keeping "
                       "only them least).", method=tr(METHOD_NAMES[best])))
    if explanation.ig is not None:
        ig = explanation.ig
        st.caption(tr("Integrated Gradients: {steps} steps from the {baseline} baseline (score {base:.3f}); "
                      "convergence delta {delta:.3f}.", steps=ig.steps, baseline=tr(BASELINE_NAMES[ig.baseline]),
                      base=ig.baseline_score, delta=ig.delta))


def main() -> None:
    st.title(tr("Explanations: is attention the explanation?"))
    st.caption(tr("Attention says where each word looks; an explanation should say which words the answer depends "
                  "on. Here attention stands beside gradient methods and occlusion, and each is measured: remove a "
                  "method's top words and see how much the answer moves."))
    model = current_model()
    text, answer, wrong = asked(model, sentence_box())
    explanation = queued(computed.explanation_of, model, text, answer, wrong)
    if explanation is None:
        stop()
    target_line(explanation)
    key = (str(model.model_dir), text, answer, wrong)
    narrow = narrow_screen()  # a phone: a row per word, the methods across (9 method names left no room for words)
    chart(("explain methods", *key, narrow), lambda: figures.methods_figure(explanation, narrow),
          key="explain_methods")
    layer, head = explanation.head
    st.caption(tr("The chosen head: L{layer} H{head}, the one whose output moves the target most (its gradient "
                  "times its output).", layer=layer, head=head))
    faithfulness_table(explanation)
    chart(("explain deletion", *key), lambda: figures.deletion_figure(explanation), key="explain_deletion")
    with st.expander(tr("What each method measures")):
        for name in explanation.methods:
            st.markdown(f"**{tr(METHOD_NAMES[name])}**: {tr(METHOD_NOTES[name])}")


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
