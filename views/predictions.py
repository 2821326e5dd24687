"""What the model predicts, and which heads write it: next pieces, the logit lens, direct logit attribution,
activation patching on a minimal pair and generation (issue 21). Computed in mha_core.analysis.predict, .patching
and .generate."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.generate import MAX_NEW, generate, has_chat_template
from mha_core.analysis.lm_head import answer_slot, lm_head, read_at, token_id
from mha_core.analysis.predict import attribute, logit_lens, predict
from mha_core.engine.tokens import InputError
from mha_core.figures import charts
from mha_core.figures.predict import lens_figure
from views._patching import CAPTION, json_button, patching_view
from views._state import chart, current_model, literal, sentence_box, set_sentence, small_store
from views._uploads import cached_analysis

PROBE = " The word 'it' refers to the"
CORRUPTED = "The animal didn't cross the street because it was too wide."
ANSWER, WRONG = " animal", " street"


def show_prediction(model: LoadedModel, text: str, masked: bool) -> None:
    if masked:
        st.caption("The model's probabilities for the piece in the chosen position, which it reads as masked: the "
                   "softmax of the last layer's output through the masked-LM head (a dense layer, its activation "
                   "and a norm, then the unembedding).")
    else:
        st.caption("The model's probabilities for the next piece after the chosen position: the softmax of the last "
                   "layer's output, through the final norm and the unembedding (the language-model head).")
    c1, c2 = st.columns(2)
    where = f"At position (empty: the first {model.tokenizer.mask_token})" if masked else (
        "After position (empty: the last piece)")
    position = c1.number_input(where, min_value=0, value=None, step=1, key="p_position")
    typed = c2.text_input("Rank of a piece", ANSWER, key="p_piece", help="one piece, with its leading space")
    key = ("predict", str(model.model_dir), text, position)
    pred = cached_analysis(key, "Predicting", lambda _: predict(model, text, position), small_store(), light=True)
    if pred is None:
        return
    chart(key, lambda: charts.token_bar_figure(list(pred.top_pieces), pred.top_probs, pred.title), key="p_top")
    try:
        rank, prob = pred.rank_of(token_id(model, typed))
        st.markdown(f"{literal(repr(typed))}: rank {rank:,} of {len(pred.logits):,}, probability {prob:.4f}.")
    except InputError as err:
        st.info(literal(str(err)))
    json_button(pred, model, "JSON: the top pieces", "predict.json", "p_json")


def show_lens(model: LoadedModel, text: str, masked: bool) -> None:
    preposition, what, _ = read_at(masked)
    st.caption("nostalgebraist (2020), the logit lens: every layer's output read through the final norm and the "
               f"language-model head, as if the model stopped there. Each cell names the layer's most likely {what} "
               f"{preposition} that position; the colour is its probability. Where the answer settles shows which "
               "layers decide it.")
    key = ("lens", str(model.model_dir), text)
    lens = cached_analysis(key, "Reading every layer through the unembedding",
                           lambda _: logit_lens(model, text), small_store())
    if lens is None:
        return
    chart(key, lambda: lens_figure(lens), key="p_lens")
    json_button(lens, model, "JSON: the lens", "lens.json", "p_lens_json")


def answer_pair(prefix: str) -> tuple[str, str]:
    c1, c2 = st.columns(2)
    answer = c1.text_input("Answer piece", ANSWER, key=f"{prefix}_answer", help="one piece, with its leading space")
    wrong = c2.text_input("Wrong piece", WRONG, key=f"{prefix}_wrong", help="one piece, with its leading space")
    return answer, wrong


def show_attribution(model: LoadedModel, text: str) -> None:
    st.caption("Elhage et al. (2021), direct logit attribution: what each head and each MLP writes straight into "
               "logit(answer) − logit(wrong) at the last piece (its output through the final norm, frozen at its "
               "value on the whole stream, and the unembedding). The shares add up to the model's logit "
               "difference; a head that works through later layers shows here only as far as it writes directly.")
    answer, wrong = answer_pair("a")
    key = ("attribute", str(model.model_dir), text, answer, wrong)
    result = cached_analysis(key, "Attributing", lambda _: attribute(model, text, answer, wrong), small_store(),
                             light=True)
    if result is None:
        return
    st.markdown(f"logit({literal(repr(answer))}) − logit({literal(repr(wrong))}) = **{result.logit_diff:.3f}** = "
                f"heads {result.heads.sum():.3f} + MLPs {result.mlps.sum():.3f} + embeddings "
                f"{result.embeddings:.3f} + biases {result.biases:.3f}.")
    left, right = st.columns([4, 1])
    with left:
        chart((*key, "heads"), lambda: charts.layer_head_grid(result.heads, "Each head's direct share", "logit",
                                                               zmid=0, colorscale="RdBu"), key="p_dla_heads")
    with right:
        chart((*key, "mlps"), lambda: charts.layer_head_grid(result.mlps[:, None], "MLPs", "logit", zmid=0,
                                                              colorscale="RdBu", columns=["MLP"]), key="p_dla_mlps")
    json_button(result, model, "JSON: the attribution", "attribute.json", "p_dla_json")


def show_patching(model: LoadedModel, text: str, continuation: str) -> None:
    st.caption(CAPTION)
    corrupted = st.text_input("Corrupted sentence", CORRUPTED, key="p_corrupted") + continuation
    answer, wrong = answer_pair("pt")
    patching_view(model, text, corrupted, answer, wrong, "p_patch")


def show_generation(model: LoadedModel, text: str) -> None:
    st.caption("Continue the text one piece at a time: each step runs only the new piece through the layers, "
               "reading the earlier pieces' keys and values from a cache. Temperature 0 always takes the most "
               "likely piece; above 0 it samples (the same seed gives the same text). The table gives each "
               "piece's probability and the alternatives the model weighed.")
    chat = st.toggle("Answer it as a chat message (the tokenizer's chat template)", False, key="g_chat",
                     disabled=not has_chat_template(model),
                     help="Instruct models are trained on their chat template: the text becomes a user's message "
                          "and the model writes the assistant's answer" if has_chat_template(model) else
                          f"{model.name}'s tokenizer has no chat template")
    c1, c2, c3, c4 = st.columns(4)
    new = c1.slider("New pieces", 1, MAX_NEW, 20, key="g_new")
    temperature = c2.slider("Temperature", 0.0, 2.0, 0.0, 0.1, key="g_temperature")
    top_k = c3.number_input("Top-k (empty: all)", min_value=1, value=None, step=1, key="g_top_k",
                            disabled=temperature == 0)
    seed = c4.number_input("Seed", min_value=0, value=0, step=1, key="g_seed", disabled=temperature == 0)
    key = ("generate", str(model.model_dir), text, new, temperature, top_k, seed, chat)
    result = cached_analysis(key, "Generating", lambda _: generate(model, text, new, temperature, top_k, int(seed),
                                                                   chat=chat), small_store(), light=True)
    if result is None:
        return
    continuation = result.continuation
    body = continuation.strip()  # bold needs no space inside its marks
    if chat:
        st.code(result.prompt, language=None, wrap_lines=True)
        st.markdown(f"**{literal(body)}**" if body else "(no answer)")
    else:
        st.markdown(literal(result.prompt) + continuation[:len(continuation) - len(continuation.lstrip())]
                    + (f"**{literal(body)}**" if body else ""))
    st.caption(f"Stopped: {result.stopped}.")
    st.dataframe(pd.DataFrame([{"piece": s.piece, "probability": round(s.prob, 4),
                                "alternatives": ", ".join(f"{p} {q:.2f}" for p, q in s.alternatives)}
                               for s in result.steps]), hide_index=True, key="g_steps")
    c1, c2 = st.columns(2)
    grown = f"{text} {body}" if chat else result.text  # a chat's markers would be typed text on the other pages
    c1.button("Use as the sentence on every page", on_click=set_sentence, args=(grown,), key="g_use",
              help="the grown text goes into the sentence box: each new piece's attention row is then on the Heads "
                   "page (query = that piece)" + ("; the question and the answer, without the chat's markers"
                                                  if chat else ""))
    json_button(result, model, "JSON: the generation", "generate.json", "g_json", c2)


def main() -> None:
    model = current_model()
    st.title("What the model predicts")
    sentence = sentence_box()
    head = lm_head(model)
    if head is None:
        st.info(f"{model.name} has no language-model head: it predicts no piece (all-MiniLM-L6-v2 is a "
                "sentence-embedding model). Choose a decoder such as SmolLM2-135M-Instruct in the sidebar, or an "
                "encoder saved with its masked-LM head. The Coreference page patches this model's heads by the "
                "pronoun's attention instead.")
        st.stop()
    probe = PROBE + answer_slot(model)
    continuation = st.text_input("Continue the sentence with", probe, key="p_probe_mask" if head.masked else "p_probe",
                                 help="appended to the sentence (and to the corrupted one) before predicting")
    text = sentence + continuation
    st.caption(literal(f"Predicting {'in' if head.masked else 'after'}: {text}"))
    views = {"Fill the mask" if head.masked else "Next piece": lambda: show_prediction(model, text, head.masked),
             "Logit lens": lambda: show_lens(model, text, head.masked),
             "Attribution": lambda: show_attribution(model, text),
             "Patching": lambda: show_patching(model, text, continuation),
             "Continue": lambda: show_generation(model, text)}
    if head.masked:  # post-norm encoders: nothing writes to the logits directly; a masked head continues nothing
        del views["Attribution"], views["Continue"]
    tabs = st.tabs(list(views), key="p_tab", bind="query-params")
    for tab, view in zip(tabs, views.values(), strict=True):
        if tab.open:
            with tab:
                view()


main()
