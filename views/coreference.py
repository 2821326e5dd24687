"""Coreference inspector: which heads link a pronoun to which earlier noun, and what a minimal pair
changes ("...because it was too tired." / "...because it was too wide.")."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.coref.sentence import InspectorError, Word
from mha_core.analysis.lm.head import has_lm_head
from mha_core.i18n import tr, worded
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from views._inputs import sentence_box
from views._state import checked_run, current_model, server
from views._text import literal
from views._uploads import gap_analysis
from views._visit import stop
from views.parts.coreference import pick_words, scores_of, show_heads, show_pair, words_of

CAPTION = N_("Attention is evidence about what a head reads, not proof of what the model decides: a head can "
           "look at '{word}' while the decision is made elsewhere, by other heads, the feed-forward layers, "
           "or not at all.")


def show_probe_answers(model: LoadedModel, text: str, words: list[Word], pronoun: int, candidates: list[int]
                       ) -> None:
    """What the model itself answers when asked, beside where its heads look (the Predictions page has more)."""
    answer = computed.probe_answers_of(server(), model, text, words, pronoun, candidates)
    st.subheader(tr("What the model answers"))
    st.caption(literal(tr("Asked: {probe} … The probability of each candidate as the next piece (a word of several "
                          "pieces by its first piece). Attention is where heads look; this is what the model says.",
        probe=answer.probe)))
    st.dataframe(pd.DataFrame([{tr("candidate"): word, tr("piece"): piece, tr("probability"): round(prob, 4),
                                tr("rank"): rank}
                               for word, piece, prob, rank in answer.candidates]), hide_index=True,
                 key="probe_answers")


def main() -> None:
    model = current_model()
    st.title(tr("Coreference inspector"))
    text = sentence_box()
    result = checked_run(text)
    words = words_of(text)
    context = (str(model.model_dir), text)
    pronoun, candidates = pick_words(words, context)
    try:
        scores = scores_of(text, words, pronoun, candidates, result)
    except InspectorError as err:
        st.info(literal(worded(err)))
        stop()
    st.caption(literal(tr(CAPTION, word=scores.candidates[0].text)))
    with st.expander(tr("Coreference heads found on GAP (optional)")):
        gap = gap_analysis(model)
    st.subheader(tr("Where '{text}' looks, head by head", text=literal(scores.pronoun.text)))
    show_heads(scores, gap)
    if has_lm_head(model):
        show_probe_answers(model, text, words, pronoun, candidates)
    show_pair(text, words, pronoun, candidates, context)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
