"""What the model predicts, and which heads write it: next pieces, the logit lens, direct logit attribution,
activation patching on a minimal pair and generation (issue 21). Computed in mha_core.analysis.lm.predict, .patching
and .generate."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import InputError, LoadedModel
from mha_core.analysis.lm.generate import MAX_NEW, has_chat_template
from mha_core.analysis.lm.head import answer_slot, lm_head, read_at, token_id
from mha_core.figures import charts, colours
from mha_core.figures.predict import LENS_MAX_COLUMNS, LENS_PHONE_COLUMNS, lens_figure
from mha_core.i18n import quoted, tr, worded
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.teaching.examples import Question
from views._inputs import sampling_settings, sentence_box, set_sentence
from views._patching import CAPTION, json_button, patching_view
from views._stacks import show_written
from views._state import answered, chart, check_length, current_model, narrow_screen, queued, server
from views._text import emphasised, literal, literal_lines
from views._visit import stop, tabs, widget

PIECE_HELP = N_("one piece; in spaced text with its leading space")


def left_out_note(result: object) -> None:
    """A text over the model's limit is read from its end, where the prediction is made: say what was left out."""
    if getattr(result, "left_out", 0):
        st.warning(tr("The text is longer than the model reads: its first {n:,} pieces after the start are left out, "
                      "and the rest, up to where the prediction is made, is read.", n=result.left_out))


def question(model: LoadedModel, sentence: str) -> Question:
    """The page's default question about the sentence (mha_core.teaching.examples.default_question)."""
    return computed.question_of(server(), model, sentence)


def asked_box(draw: object, name: str, default: str, label: str, context: tuple, **kwargs: object) -> str:
    """A text box whose default is derived from the sentence: the visitor's text for this sentence and model stays,
    another sentence brings its own default."""
    return widget(draw, name, default, label, context=context, **kwargs)


def show_prediction(model: LoadedModel, text: str, masked: bool, asked: Question, context: tuple) -> None:
    if masked:
        st.caption(tr("The model's probabilities for the piece in the chosen position, which it reads as masked: the "
                      "softmax of the last layer's output through the masked-LM head (a dense layer, its activation "
                      "and a norm, then the unembedding)."))
    else:
        st.caption(tr("The model's probabilities for the next piece after the chosen position: the softmax of the last "
                      "layer's output, through the final norm and the unembedding (the language-model head)."))
    c1, c2 = st.columns(2)
    where = (tr("At position (empty: the first {mask})", mask=model.tokenizer.mask_token) if masked
             else tr("After position (empty: the last piece)"))
    position = widget(c1.number_input, "p_position", None, where, min_value=0, value=None, like=0, step=1,
                      context=context)
    typed = asked_box(c2.text_input, "p_piece", asked.answer, tr("Rank of a piece"), context, help=tr(PIECE_HELP))
    key = ("predict", str(model.model_dir), text, position)  # its chart's
    pred = answered(computed.prediction_of, model, text, position)
    if pred is None:
        return
    left_out_note(pred)
    chart(key, lambda: charts.token_bar_figure(list(pred.top_pieces), pred.top_probs, pred.title), key="p_top")
    if typed:  # an empty box asks for no rank (the default is empty where the answer is no readable piece)
        try:
            rank, prob = pred.rank_of(token_id(model, typed))
            st.markdown(tr("{typed}: rank {rank:,} of {logits:,}, probability {prob:.4f}.",
                typed=literal(quoted(typed)), rank=rank, logits=len(pred.logits), prob=prob))
        except InputError as err:
            st.info(literal(worded(err)))
    json_button(pred, model, tr("JSON: the top pieces"), "predict.json", "p_json")


def show_lens(model: LoadedModel, text: str, masked: bool) -> None:
    preposition, what, _ = read_at(masked)
    st.caption(tr("nostalgebraist (2020), the logit lens: every layer's output read through the final norm and the "
                  "language-model head, as if the model stopped there. Each cell names the layer's most likely {what} "
                  "{preposition} that position; the colour is its probability. Where the answer settles shows which "
                  "layers decide it.", what=what, preposition=preposition))
    key = ("lens", str(model.model_dir), text)  # its chart's
    lens = queued(computed.lens_of, model, text)
    if lens is None:
        return
    left_out_note(lens)
    phone = narrow_screen()
    if phone and len(lens.tokens) > LENS_PHONE_COLUMNS:
        st.caption(tr("On a narrow screen the lens shows the last {n} positions; a wider screen shows up to {wide}.",
                      n=LENS_PHONE_COLUMNS, wide=LENS_MAX_COLUMNS))
    chart(key, lambda: lens_figure(lens, LENS_PHONE_COLUMNS if phone else LENS_MAX_COLUMNS), key="p_lens")
    json_button(lens, model, tr("JSON: the lens"), "lens.json", "p_lens_json")


def answer_pair(prefix: str, asked: Question, context: tuple) -> tuple[str, str]:
    c1, c2 = st.columns(2)
    answer = asked_box(c1.text_input, f"{prefix}_answer", asked.answer, tr("Answer piece"), context,
                       help=tr(PIECE_HELP))
    wrong = asked_box(c2.text_input, f"{prefix}_wrong", asked.wrong, tr("Wrong piece"), context, help=tr(PIECE_HELP))
    return answer, wrong


def show_attribution(model: LoadedModel, text: str, asked: Question, context: tuple) -> None:
    st.caption(tr("Elhage et al. (2021), direct logit attribution: what each head and each MLP writes straight into "
                  "logit(answer) − logit(wrong) at the last piece (its output through the final norm, frozen at its "
                  "value on the whole stream, and the unembedding). The shares add up to the model's logit difference; "
                  "a head that works through later layers shows here only as far as it writes directly."))
    answer, wrong = answer_pair("a", asked, context)
    key = ("attribute", str(model.model_dir), text, answer, wrong)  # its charts'
    result = answered(computed.attribution_of, model, text, answer, wrong)
    if result is None:
        return
    left_out_note(result)
    st.markdown(
        tr(
            "logit({answer}) − logit({wrong}) = **{logit_diff:.3f}** = heads {value:.3f} + MLPs {value2:.3f} + "
            "embeddings {embeddings:.3f} + biases {biases:.3f}.",
            answer=literal(quoted(answer)),
            wrong=literal(quoted(wrong)),
            logit_diff=result.logit_diff,
            value=result.heads.sum(),
            value2=result.mlps.sum(),
            embeddings=result.embeddings,
            biases=result.biases,
        )
    )
    left, right = st.columns([4, 1])
    with left:
        chart(
            (*key, "heads"),
            lambda: charts.layer_head_grid(
                result.heads, N_("Each head's direct share"), "logit", zmid=0, colorscale=colours.SIGNED
            ),
            key="p_dla_heads",
        )
    with right:
        chart(
            (*key, "mlps"),
            lambda: charts.layer_head_grid(
                result.mlps[:, None], N_("MLPs"), "logit", zmid=0, colorscale=colours.SIGNED, columns=["MLP"]
            ),
            key="p_dla_mlps",
        )
    json_button(result, model, tr("JSON: the attribution"), "attribute.json", "p_dla_json")


def show_patching(model: LoadedModel, text: str, continuation: str, asked: Question, context: tuple) -> None:
    st.caption(tr(CAPTION))
    corrupted = asked_box(st.text_input, "p_corrupted", asked.corrupted, tr("Corrupted sentence"), context)
    slot = answer_slot(model)  # the corrupted sentence's probe asks about its own pronoun (她 → 他)
    corrupted += asked.corrupted_probe + slot if continuation == asked.probe + slot else continuation
    answer, wrong = answer_pair("pt", asked, context)
    patching_view(model, text, corrupted, answer, wrong, "p_patch")


def show_generation(model: LoadedModel, text: str) -> None:
    st.caption(
        tr(
            "Continue the text one piece at a time: each step runs only the new piece through the layers, "
            "reading the earlier pieces' keys and values from a cache. Temperature 0 always takes the most "
            "likely piece; above 0 it samples (the same seed gives the same text). The table gives each piece's "
            "probability and the alternatives the model weighed."
        )
    )
    chat = widget(
        st.toggle,
        "g_chat",
        False,
        tr("Answer it as a chat message (the tokenizer's chat template)"),
        disabled=not has_chat_template(model),
        help=tr("Instruct models are trained on their chat template: the text becomes a user's message and the model "
                "writes the assistant's answer") if has_chat_template(model)
        else tr("{name}'s tokenizer has no chat template", name=model.name),
    )
    new, temperature, top_k, seed = sampling_settings(MAX_NEW)
    result = answered(computed.generation_of, model, text, new, temperature, top_k, seed, chat)
    if result is None:
        return
    left_out_note(result)
    continuation = result.continuation
    body = continuation.strip()
    if chat:
        st.code(result.prompt, language=None, wrap_lines=True)
        st.markdown(emphasised(body) if body else tr("(no answer)"))
    else:
        lead = continuation[: len(continuation) - len(continuation.lstrip())]
        st.markdown(literal_lines(result.prompt) + ("  \n" if "\n" in lead else lead) + emphasised(body))
    st.caption(tr("Stopped: {stopped}.", stopped=worded(result.stopped)))
    st.dataframe(
        pd.DataFrame(
            [
                {
                    tr("piece"): s.piece,
                    tr("probability"): round(s.prob, 4),
                    tr("alternatives"): ", ".join(f"{p} {q:.2f}" for p, q in s.alternatives),
                }
                for s in result.steps
            ]
        ),
        hide_index=True,
        key="g_steps",
    )
    c1, c2 = st.columns(2)
    grown = f"{text} {body}" if chat else result.text  # a chat's markers would be typed text on the other pages
    c1.button(
        tr("Use as the sentence on every page"),
        on_click=set_sentence,
        args=(grown,),
        key="g_use",
        help=tr("the grown text goes into the sentence box: each new piece's attention row is then on the Heads "
                "page (query = that piece)") + (tr("; the question and the answer, without the chat's markers")
                                               if chat else ""),
    )
    json_button(result, model, tr("JSON: the generation"), "generate.json", "g_json", c2)


def main() -> None:
    model = current_model()
    st.title(tr("What the model predicts"))
    sentence = sentence_box()
    check_length(sentence)
    if model.encoder_decoder:
        show_written(model, sentence)
        return
    head = lm_head(model)
    if head is None:
        st.info(
            tr(
                "{name} has no language-model head: it predicts no piece (all-MiniLM-L6-v2 is a sentence-embedding "
                "model). Choose a decoder such as SmolLM2-135M-Instruct in the sidebar, or an encoder saved with "
                "its masked-LM head. The Coreference page patches this model's heads by the pronoun's attention "
                "instead.",
                name=model.name,
            )
        )
        stop()
    asked, context = question(model, sentence), (str(model.model_dir), sentence)
    continuation = asked_box(st.text_input, "p_probe_mask" if head.masked else "p_probe",
                             asked.probe + answer_slot(model), tr("Continue the sentence with"), context,
                             help=tr("appended to the sentence (and to the corrupted one) before predicting"))
    text = sentence + continuation
    check_length(text)
    said = tr("Predicting in: {text}", text=text) if head.masked else tr("Predicting after: {text}", text=text)
    st.caption(literal(said))
    views = {
        N_("Fill the mask") if head.masked else N_("Next piece"): lambda: show_prediction(model, text, head.masked,
                                                                                         asked, context),
        N_("Logit lens"): lambda: show_lens(model, text, head.masked),
        N_("Attribution"): lambda: show_attribution(model, text, asked, context),
        N_("Patching"): lambda: show_patching(model, text, continuation, asked, context),
        N_("Continue"): lambda: show_generation(model, text),
    }
    if head.masked:  # post-norm encoders: nothing writes to the logits directly; a masked head continues nothing
        del views["Attribution"], views["Continue"]
    for tab, view in zip(tabs("p_tab", tuple(views)), views.values(), strict=True):
        if tab.open:
            with tab:
                view()


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
