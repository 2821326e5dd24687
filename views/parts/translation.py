"""The Translation page's alignment views and notes, which the lesson's translation step draws too."""

from __future__ import annotations

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.translation.translate import Translation, pronoun_links
from mha_core.figures import translation as figures
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.teaching.examples import PRONOUNS
from views._state import chart
from views._text import literal

RULES = {"argmax": N_("each word of the translation links to the source word it attends to most"),
         "intersect": N_("a link where a translation word attends to a source word most and that source word is "
                         "attended to most by that translation word"),
         "grow": N_("the links both ways agree on, then the neighbouring one-way links that align a word left "
                    "unaligned (grow-diag, as phrase-based translation symmetrised its aligners)")}
PRONOUN_LINES = {  # (the source's pronoun, linked, linked to a pronoun: never a source's, pronoun_links) -> line
    (False, True, True): N_("**{word}** in the translation aligns to **{linked}** in the source: the pronoun carried "
                            "across languages."),  # which noun it means is the Coreference page's, measured there
    (False, True, False): N_("**{word}** in the translation aligns to **{linked}** in the source."),
    (False, False, False): N_("**{word}** in the translation aligns to no word of the source: no link of this rule "
                              "reaches it."),
    (True, True, False): N_("**{word}** in the source aligns to **{linked}** in the translation."),
    (True, False, False): N_("**{word}** in the source aligns to no word of the translation: no link of this rule "
                             "starts from it."),
}


def pronoun_note(result: Translation) -> None:
    """The cross-lingual side of the coreference story: what each pronoun is linked to, or that nothing is."""
    for found in pronoun_links(result, PRONOUNS):
        line = PRONOUN_LINES[found.in_source, bool(found.linked), found.to_pronoun]
        st.markdown(tr(line, word=literal(found.word), linked=literal(" ".join(found.linked))))


def simplified_note(result: Translation) -> None:
    """The translation in Simplified characters where the model wrote Traditional ones (牠…因為牠 → 它…因为它)."""
    note = simplified_text(result)
    if note:
        st.caption(note)


def simplified_text(result: Translation) -> str:
    """What simplified_note says (nothing where the model wrote Simplified characters)."""
    if result.simplified_translation == result.translation:
        return ""
    return tr("The model wrote Traditional characters; in Simplified characters (OpenCC): {text}",
              text=literal(result.simplified_translation))


def alignment_notes(result: Translation) -> list[str]:
    """What the captions under the alignment say: how it is read, and its scaling where it has one."""
    notes = [tr("Each row is a word of the translation, each column a word of the source; the colour is how much the "
                "chosen heads (their mean) attend from the translation word back to the source word, read from the "
                "model's self-attention over the whole prompt. Rule: {rule}.", rule=tr(RULES[result.rule]))
             + " " + tr("A punctuation mark links only to a punctuation mark and a word only to a word, unless the "
                        "other sentence has none of its kind.")]
    if result.scaling == "columns":
        notes.append(tr("Relative weight: each source word's column is divided by its mean over the translation's "
                        "words, so that a word every translation word attends to (a sink, such as the final full stop) "
                        "does not win every row. Measured on the hand alignments, it aligns better than the weights "
                        "as read."))
    return notes


def alignment_views(model: LoadedModel, result: Translation, key: tuple, beside: bool = False,
                    pronouns: bool = True) -> None:
    """The links and the matrix they are read from (`beside`: side by side, as a projector's wide screen fits)."""
    links, matrix = st.columns(2) if beside else (st.container(), st.container())
    with links:
        chart(("t_links", *key), lambda: figures.links_figure(result), width="stretch")
    with matrix:
        chart(("t_matrix", *key), lambda: figures.alignment_matrix_figure(result), width="stretch")
    for note in alignment_notes(result):
        st.caption(note)
    if pronouns:  # the lesson words its own, from the same links
        pronoun_note(result)
