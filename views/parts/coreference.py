"""The Coreference page's words, pronoun and candidates, its ranked heads and its minimal pair, which the lesson's
pronoun step draws too."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import AttentionResult, CorefResult, LoadedModel
from mha_core.analysis.coref.sentence import (
    TABLE_HEADS,
    AntecedentScores,
    InspectorError,
    PairComparison,
    Word,
    align_pair,
    blind_to_change,
    candidates_before,
    compare_pair,
    default_pronoun,
    probe_for,
    with_probe,
)
from mha_core.analysis.heads.roles import head_label
from mha_core.analysis.lm.head import has_lm_head
from mha_core.analysis.lm.predict import asked, first_piece
from mha_core.figures import charts, colours
from mha_core.i18n import quoted, tr, worded
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.teaching.claims import PairFigure
from mha_core.teaching.examples import compared, focus, patched_unasked
from views._patching import CAPTION as PATCH_CAPTION
from views._patching import patching_view
from views._state import chart, check_length, checked_run, current_model, server
from views._text import literal
from views._visit import widget


def words_of(text: str) -> list[Word]:
    """spaCy's words of a sentence, parsed once per server."""
    return computed.words_of(server(), text)


def scores_of(text: str, words: list[Word], pronoun: int, candidates: list[int],
              result: AttentionResult | None = None) -> AntecedentScores:
    """The candidates' scores in every head, computed once per server for this text and choice (`result`: the text's
    run, already checked; else it is checked here, bad input stopping the page with its message)."""
    if result is None:
        checked_run(text)
    return computed.antecedents_of(server(), current_model(), text, "auto", words, pronoun, candidates)


def pick_words(words: list[Word], context: tuple) -> tuple[int, list[int]]:
    """The pronoun (the sentence's first with a noun before it, by default) and its candidates (those nouns), the
    visitor's for this model and text (`context`)."""
    options = [w.index for w in words]
    label = lambda i: f"{i}: {words[i].text}"  # noqa: E731
    left, right = st.columns([1, 2])
    pronoun = widget(left.selectbox, "pronoun", default_pronoun(words) or 0, tr("Pronoun (or any token)"),
                     context=context, options=options, format_func=label)
    others = [i for i in options if i != pronoun]
    chosen = widget(right.multiselect, "candidates", candidates_before(words, pronoun),
                    tr("Candidate antecedents (nouns before it; add any other word)"), context=(*context, pronoun),
                    options=others, format_func=label)
    return pronoun, chosen


def show_heads(scores: AntecedentScores, gap: CorefResult | None, listed: int = TABLE_HEADS,
               headline: bool = True, layers: object | None = None) -> None:
    """The heads ranked by how strongly the pronoun prefers one candidate (the first `listed`), (`headline`) the
    verdict, counted over the heads the table lists, and layer by layer, folded (in `layers`; else under them)."""
    names = [c.text for c in scores.candidates]
    margin, preferred = scores.top_two_margin(), scores.preferred()
    gap_rank = {(layer, head): (rank, acc) for rank, (layer, head, acc) in enumerate(gap.ranking()[:10])} if gap else {}
    rows = []
    for layer, head in scores.ranked_heads()[:listed]:
        row = {tr("head"): head_label(layer, head), tr("prefers"): names[preferred[layer, head]],
               tr("margin"): round(float(margin[layer, head]), 3)}
        row.update({f"→ {n}": round(float(scores.scores[c, layer, head]), 3) for c, n in enumerate(names)})
        if (layer, head) in gap_rank:
            rank, acc = gap_rank[(layer, head)]
            row[tr("GAP coreference head")] = f"#{rank + 1} ({100 * acc:.0f}%)"
        rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="ranked_heads")
    if headline:
        st.markdown("**" + literal(scores.headline(listed)) + "**")
    n_heads = margin.shape[1]
    pronoun = literal(scores.pronoun.text)
    with (st if layers is None else layers).expander(tr("Layer by layer")):
        for layer, cand, count in scores.layer_verdicts():
            st.markdown(tr("In {count} of {n_heads} heads of layer {layer} '{pronoun}' attends most to '{names}'.",
                count=count, n_heads=n_heads, layer=layer, pronoun=pronoun, names=literal(names[cand])))


def show_pair(first_text: str, words: list[Word], pronoun: int, candidates: list[int], context: tuple,
              detail: bool = True, inputs: object | None = None,
              fit: Callable[[PairFigure], None] | None = None) -> PairFigure | None:
    """The minimal pair: how each head's margin changed and (`detail`) both sentences' margins and which heads cause
    the change; returns what its grid drew (None where no pair was compared). `inputs`: a container for its inputs
    (the lesson's folded panel in projector mode; else they stand here, under the pair's heading); `fit`: told the
    pair's figure before its grid is drawn (the lesson sizes the grid to the sentences it says of that figure)."""
    here = st.container()
    with inputs or here:
        if inputs is None:
            st.subheader(tr("Minimal pair"))
        found = focus(first_text, current_model().name)  # the sentence's own pair: its pronoun swapped, an example's
        second_text = widget(st.text_input, "pair", found.pair, tr("Second sentence (differs in a few words)"),
                             context=context)
    check_length(second_text, N_("The second sentence"))
    names = [words[i].text for i in candidates]
    if len(candidates) < 2:
        here.info(tr("Choose two candidates to compare their margins across the pair."))
        return None
    with inputs or here:
        a, b, c3 = pick_pair(names, found, (*context, pronoun, tuple(candidates)))
    if a == b:
        here.info(tr("Pick two different candidates."))
        return None
    words_2 = words_of(second_text) if second_text.strip() else []
    try:
        alignment = align_pair(words, words_2)
    except InspectorError as err:
        here.warning(literal(worded(err)))
        return None
    if inputs is None:  # the lesson's sentences say it too (in projector mode they alone: the screen is full)
        c3.caption(tr("Changed: {changes}", changes=", ".join(f"{quoted(literal(x))} → {quoted(literal(y))}"
                                                               for x, y in alignment.changed)))
    # Aligned word for word: the second sentence's pronoun is its word at the same index (她 → 他 asks about 他).
    pronoun_2 = words_2[pronoun]
    originals = (first_text, second_text, words[pronoun], pronoun_2, words[candidates[a]], words[candidates[b]])
    probed = blind_to_change(current_model().causal, pronoun, alignment)
    if probed:
        with inputs or here:  # a projector's panel is folded already: its note is not folded again
            note = st.info if detail else c3.caption if inputs is not None else c3.expander(
                tr("Why both sentences are continued with a probe")).caption
            probed = probe_note(words[pronoun].text, pronoun, first_text, note, detail)
    if probed:
        first_text, second_text = with_probe(first_text, words[pronoun]), with_probe(second_text, pronoun_2)
        words, words_2 = words_of(first_text), words_of(second_text)
        pronoun = len(words) - 1  # the probe's last word asks the question
        with inputs or here:
            (st.caption if detail else note)(literal(tr("Attention from the probe's last word '{text}' in: "
                                                        "{first_text}", text=words[pronoun].text,
                                                        first_text=first_text)))
    scores_1 = scores_of(first_text, words, pronoun, candidates)
    scores_2 = scores_of(second_text, words_2, pronoun, candidates)
    base = ("coref", str(current_model().model_dir), first_text, second_text, pronoun, tuple(candidates), a, b)
    drawn = PairFigure(compare_pair(scores_1, scores_2, a, b), alignment.changed, names[a], names[b], probed)
    if fit is not None:
        fit(drawn)
    with here:
        show_margin_grids(drawn.comparison, names[a], names[b], base, detail)
        if detail:
            show_pair_patching(current_model(), *originals)
    return drawn


def probe_note(text: str, pronoun: int, first_text: str, note: Callable[[str], object], detail: bool) -> bool:
    """Why a decoder's pair is continued with a probe (its pronoun `text`, word `pronoun`, comes before every changed
    word), said with `note`; whether both sentences are continued (the page's toggle; always in the lesson)."""
    note(literal(tr("In this decoder '{text}' (word {pronoun}) comes before every changed word, and a decoder's "
                    "word attends only to itself and the words before it: its attention is the same in both "
                    "sentences. The decoder form of the test continues both with a probe, {value!r}, whose last "
                    "word comes after the change.",
        text=text, pronoun=pronoun, value='…' + probe_for(first_text, text))))
    return not detail or widget(st.toggle, "pair_probe", True, tr("Continue both sentences with the probe"))


def pick_pair(names: list[str], found: object, context: tuple) -> tuple[int, int, object]:
    """Candidates a and b (indices into `names`, the pair's own by default), and the row's third column."""
    first, second = compared(names, found)
    c1, c2, c3 = st.columns(3)
    a = widget(c1.selectbox, "cand_a", first, tr("Candidate a"), context=context, options=range(len(names)),
               format_func=lambda i: names[i])
    b = widget(c2.selectbox, "cand_b", second, tr("Candidate b"), context=context, options=range(len(names)),
               format_func=lambda i: names[i])
    return a, b, c3


def show_margin_grids(pair: PairComparison, name_a: str, name_b: str, base: tuple, both: bool = True) -> None:
    """The change of margin per head (flipped heads outlined), and (`both`) each sentence's margins. The lesson's
    short grid (`both` False) draws a model with more layers than heads with its layers across."""
    m1, m2, delta, flips = pair.margin_1, pair.margin_2, pair.delta, pair.flips
    across = not both and delta.shape[0] > delta.shape[1]
    chart((*base, "delta", across), lambda: charts.margin_change_figure(delta, flips, name_a, name_b, across),
          key="delta_grid")
    st.caption(outlined_caption(pair, name_a, name_b))
    if not both:
        return
    left, right = st.columns(2)
    reach = float(max(np.abs(m1).max(), np.abs(m2).max(), 1e-6))  # one colour range for both grids
    for col, m, number in ((left, m1, 1), (right, m2, 2)):
        with col:
            chart((*base, number), lambda m=m, number=number: charts.layer_head_grid(
                m, tr("Margin in sentence {number}", number=number), N_("margin"), colorscale=colours.SIGNED,
                zrange=(-reach, reach)), key=f"margin_{number}")


def outlined_caption(pair: PairComparison, name_a: str, name_b: str) -> str:
    """What the change grid's outlines and colours mean (the lesson sizes the grid to it)."""
    return tr("Outlined: {value} head(s) that prefer '{name_a}' in sentence 1 and '{name_b}' in sentence 2, as a "
              "human reader does. Blue cells moved towards '{name_a}', red towards '{name_b}'.",
        value=int(pair.flips.sum()), name_a=literal(name_a), name_b=literal(name_b))


def show_pair_patching(model: LoadedModel, first_text: str, second_text: str, pronoun: Word, pronoun_2: Word,
                       a: Word, b: Word) -> None:
    """The pair as a patching grid: which heads carry the difference, by the model's answer where it has a
    language-model head (both texts continued with the probe), else by the pronoun's coreference margin."""
    st.subheader(tr("Which heads cause the difference"))
    st.caption(literal(tr(PATCH_CAPTION) + " " + tr("Clean: sentence 1; corrupted: sentence 2.")))
    example = patched_unasked(first_text, second_text, model.name)
    if not example and not widget(
            st.toggle, "c_patch_run", False, tr("Run the grid for this pair"),
            context=(str(model.model_dir), first_text, second_text)):
        st.caption(tr("The grid runs sentence 2 once for each of the model's {heads:,} heads, in turn with the "
                      "server's other heavy analyses: an example's grid is computed once for everyone, a typed "
                      "pair's when you turn it on.", heads=model.n_layers * model.n_heads))
        return
    if has_lm_head(model):
        clean, corrupted = asked(model, first_text, pronoun), asked(model, second_text, pronoun_2)
        answer, wrong, coref = first_piece(model, a.text), first_piece(model, b.text), None
    else:
        clean, corrupted, answer, wrong, coref = first_text, second_text, None, None, (pronoun, a, b)
    patching_view(model, clean, corrupted, answer, wrong, "c_patch", coref, kept=example)
