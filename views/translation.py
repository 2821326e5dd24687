"""Translation: a decoder (Gemma 3) translates with a few-shot prompt, and its self-attention from the translation's
words back to the source's is the cross-lingual alignment (issue 46). Computed in mha_core.analysis.translation."""

from __future__ import annotations

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.lm.head import predicts_next
from mha_core.analysis.translation.choices import METHOD_NAMES
from mha_core.analysis.translation.translate import Translation
from mha_core.analysis.translation.words import LANGUAGES
from mha_core.figures import translation as figures
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import translation as computed
from mha_core.serving.computed.translation import GEMMA_NAME
from mha_core.teaching.examples import TRANSLATED
from views._inputs import model_card, open_bundled
from views._patching import json_button
from views._state import answered, chart, current_model, queued
from views._text import literal
from views._visit import page_link, stop, widget
from views.parts.translation import alignment_views, simplified_note

DIRECTIONS = {"zh-en": N_("Chinese → English"), "en-zh": N_("English → Chinese")}
MODES = {"translate": N_("The model translates"), "align": N_("Align my translation")}


def not_a_translator(model: LoadedModel) -> None:
    st.info(tr("{name} does not write text after a prompt. Translation here is done by a decoder with a "
               "language-model head that reads Chinese as words: {bundled} (bundled).", name=model.name,
               bundled=GEMMA_NAME))
    open_bundled(GEMMA_NAME)
    stop()


def one_head(model: LoadedModel, result: Translation, key: tuple) -> None:
    st.subheader(tr("One head large"))
    left, right = st.columns(2)
    best = result.heads[0]
    layer = widget(left.selectbox, "t_layer", best[0], tr("Layer"), options=list(range(model.n_layers)), context=key)
    head = widget(right.selectbox, "t_head", best[1], tr("Head"), options=list(range(model.n_heads)), context=key,
                  format_func=lambda h: tr("head {head}", head=h))
    chart(("t_head_map", *key, layer, head), lambda: figures.alignment_matrix_figure(
        result, result.maps.maps[layer, head], tr("Layer {layer}, head {head}", layer=layer, head=head)),
        width="stretch")


def heads_view(model: LoadedModel, source_language: str, target_language: str) -> None:
    choice = queued(computed.head_choice_of, model, source_language, target_language)
    if choice is None:
        return
    chart(("t_aer", str(model.model_dir), choice.direction), lambda: figures.head_aer_figure(choice), width="stretch")
    st.caption(tr("Alignment error rate, AER = 1 − (|A∩S| + |A∩P|)/(|A| + |S|) (A: a head's links, S and P: the "
                  "hand-made sure and possible links), on the first 75 of 150 hand-aligned news sentence pairs "
                  "(DeNero's zh–en set): lower is better. The ringed heads are combined: chosen there alone, the "
                  "other 75 held back. Combined: {combined:.2f}; guessing the diagonal: {diagonal:.2f}.",
                  combined=choice.combined_aer, diagonal=choice.diagonal_aer))


SETTINGS = {**DIRECTIONS, "argmax": "ArgMax", "itermax": "IterMax", "intersection": N_("intersection"),
            "union": N_("union")}  # a table row's setting as shown (grow-diag… keep their Moses names)
COLUMNS = {"development": N_("AER, development half"), "held_back": N_("AER, held-back half"),
           "cross_validated": N_("AER, cross-validated"), "precision": N_("precision"), "recall": N_("recall"),
           "seconds": N_("seconds per pair")}


def representations_view(model: LoadedModel, result: Translation, source: str, key: tuple) -> None:
    """What the heads say beside what the representations say (SimAlign on the same model's hidden states), and
    every method measured on the hand alignments."""
    if queued(computed.method_choices_of, model) is None:
        return
    hidden = answered(computed.forced_alignment_of, model, source, result.translation, result.source_language,
                      result.target_language, "hidden")
    if hidden is None or (hidden.source_words, hidden.target_words) != (result.source_words, result.target_words):
        return
    st.subheader(tr("What the heads say, what the representations say"))
    both = len(result.links & hidden.links)
    heads_view_, representations = st.columns(2)
    with heads_view_:
        chart(("t_agree", *key), lambda: figures.agreement_figure(result, hidden), width="stretch")
    with representations:
        chart(("t_hidden", *key), lambda: figures.alignment_matrix_figure(
            hidden, title=tr("What the representations say")),
            width="stretch")
    layers = hidden_layers(model)
    st.caption(tr("The heads read attention: where each word of the translation looks back in the source. The "
                  "representations read the words' hidden states: the two sentences' words compared by cosine in "
                  "hidden states {first}–{last} (0 is the embeddings, n the output of layer n; each dimension "
                  "standardized over the pair's words first), linked where each word is the other's most similar, "
                  "then again among the words left (IterMax, as SimAlign). They agree on {both} links; {heads_only} "
                  "are the heads' alone, {hidden_only} the representations' alone.", first=layers[0],
                  last=layers[-1], both=both, heads_only=len(result.links) - both,
                  hidden_only=len(hidden.links) - both))
    methods_table(model)


def hidden_layers(model: LoadedModel) -> tuple[int, ...]:
    choices = computed.known_method_choices(model)
    return choices.hidden.layers if choices is not None else (0,)


def methods_table(model: LoadedModel) -> None:
    """The methods' AER on the hand alignments, as measured (benchmarks/bench_align.py)."""
    table = computed.methods_table_of(model)
    if table is None:
        st.caption(tr("The methods are measured on the bundled {name} only.", name=GEMMA_NAME))
        return
    shown = [{tr("method"): tr(METHOD_NAMES[row["method"]]),
              tr("setting"): tr(SETTINGS[row["setting"]]) if row["setting"] in SETTINGS else row["setting"] or "–",
              **{tr(name): row[column] for column, name in COLUMNS.items()},
              tr("used by align"): "✓" if row["chosen"] else ""} for row in table.rows]
    st.dataframe(shown, hide_index=True, width="stretch", height="content")  # every row, no scroll box
    st.caption(tr("✓: the setting `align --method` uses for its method, the one with the lowest development AER."))
    st.caption(tr("Each method's settings are chosen on the first {development} hand-aligned pairs only and measured "
                  "on the other {held_back}; cross-validated: each of {folds} parts of all the pairs aligned by the "
                  "settings chosen on the rest. Precision and recall on the held-back pairs; seconds per pair: CPU "
                  "seconds on one thread of the machine that measured them (benchmarks/bench_align.py).",
                  development=table.development, held_back=table.held_back, folds=table.folds))


def translation_page(model: LoadedModel) -> None:
    direction = widget(st.radio, "t_direction", "zh-en", tr("Direction"), options=list(DIRECTIONS),
                       format_func=lambda d: tr(DIRECTIONS[d]), horizontal=True)
    source_language, target_language = direction.split("-")
    source = widget(st.text_input, "t_source", TRANSLATED[source_language],
                    tr("Sentence in {language}", language=tr(LANGUAGES[source_language])), context=(direction,))
    mode = widget(st.radio, "t_mode", "translate", tr("Translation"), options=list(MODES),
                  format_func=lambda m: tr(MODES[m]), horizontal=True)
    if mode == "align":
        given = widget(st.text_input, "t_target", "", tr("Your translation (words may be separated by spaces)"),
                       context=(direction,))
        if not given.strip():
            st.info(tr("Type a translation to align it: the model reads it as its own continuation of the prompt."))
            stop()
        result = answered(computed.forced_alignment_of, model, source, given, source_language, target_language)
    else:
        with st.spinner(tr("Translating…")):
            result = answered(computed.translation_of, model, source, source_language, target_language)
    if result is None:
        stop()
    written = tr("**{name} writes:** {text}", name=model.name, text=literal(result.translation)) if result.generated \
        else tr("**Aligned:** {text}", text=literal(result.translation))
    st.markdown(written)
    simplified_note(result)
    key = (str(model.model_dir), source, result.translation, direction)
    alignment_views(model, result, key)
    heads_view(model, source_language, target_language)
    one_head(model, result, key)
    representations_view(model, result, source, key)
    with st.expander(tr("The prompt the model reads")):
        st.code(result.prompt, language=None, wrap_lines=True)
    json_button(result, model, tr("JSON: the translation and its alignment"), "translation.json", "t_json")


def main() -> None:
    st.title(tr("Translation: alignment inside a decoder"))
    st.caption(tr("Machine translation's classic picture of attention is the alignment between the two languages. "
                  "Here a decoder translates after two example pairs, and as it writes each word it attends back to "
                  "the source: reading those rows of its self-attention gives each translated word its source word. "
                  "An encoder–decoder does the same with cross-attention."))
    page_link("views/seq2seq.py", label=tr("Cross-attention in an encoder–decoder (Whisper translating speech)"),
              icon=":material/translate:")
    model = current_model()
    model_card()
    if not predicts_next(model):
        not_a_translator(model)
    translation_page(model)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
