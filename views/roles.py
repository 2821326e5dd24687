"""Head roles: every head labelled (positional, [CLS]/[SEP], punctuation, broad, syntactic,
coreference) for the typed sentence, the bundled corpus or an uploaded file, with baselines."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import CorefResult, LoadedModel, SyntaxResult
from mha_core.analysis.coref.gap import CLARK_COREF, COREF_GAIN, COREF_TOP
from mha_core.analysis.corpus.readers import BUNDLED_CORPUS, CHINESE_TREEBANK, ParsedSentence, read_conllu, spacy_parse
from mha_core.analysis.corpus.syntax import MIN_DEPENDENTS, MIN_GAIN
from mha_core.analysis.heads.induction import INDUCTION_LENGTHS, INDUCTION_MIN, InductionScores
from mha_core.analysis.heads.pairs import CROSS_MIN, PairShares
from mha_core.analysis.heads.roles import (
    BROAD_MIN,
    PATTERN_RULES,
    POSITIONAL_MIN,
    SPECIAL_MIN,
    head_label,
    ranked_heads,
    role_labels,
)
from mha_core.figures import charts
from mha_core.figures.roles import role_grid_figure
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import corpus as computed_corpus
from mha_core.serving.computed import text as computed
from mha_core.serving.limits import without_spaces
from views._inputs import pair_box, sentence_box
from views._long import show_long_roles
from views._stacks import attention_kind, show_kind_roles
from views._state import chart, check_length, checked_run, current_model, plain_chart, queued, server
from views._text import literal
from views._uploads import capped_upload, gap_analysis, parsed_corpus
from views._visit import choose, stop, widget

SENTENCE, BUNDLED, TREEBANK, CONLLU, LONG = (N_("This sentence"), N_("Bundled corpus"), N_("Chinese treebank"),
                                             N_("Uploaded CoNLL-U"), N_("Long texts"))
SOURCES = (SENTENCE, BUNDLED, TREEBANK, CONLLU, LONG)


def source_sentences(source: str, text: str) -> tuple[str, list[ParsedSentence], str] | None:
    """(cache key, parsed sentences, what was left out) for the chosen source; None when an upload is still
    missing or unusable (the reason is shown)."""
    if source == SENTENCE:
        return f"sentence:{text}", spacy_parse([text]), ""
    if source == BUNDLED:
        parsed = parsed_corpus()
        return None if parsed is None else (computed_corpus.corpus_key(BUNDLED_CORPUS), parsed, "")
    if source == TREEBANK:
        return computed_corpus.corpus_key(CHINESE_TREEBANK), computed_corpus.chinese_treebank_of(server()), ""
    return capped_upload(N_("CoNLL-U file (gold trees)"), ["conllu", "txt"], "conllu_upload", read_conllu,
                         N_("Upload a CoNLL-U file (for example a Universal Dependencies treebank split)."))


def relation_table(syntax: SyntaxResult) -> pd.DataFrame:
    rows = []
    for row in syntax.relation_rows():
        clark = row["clark_bert_base"]
        rows.append({
            tr("relation"): row["relation"], tr("count"): row["count"],
            tr("best head"): head_label(row["best_layer"], row["best_head"]), tr("direction"): row["best_direction"],
            tr("accuracy %"): round(100 * row["best_accuracy"], 1),
            tr("baseline offset"): f"{row['baseline_offset']:+d}",
            tr("baseline %"): round(100 * row["baseline_accuracy"], 1),
            tr("syntactic head"): tr("yes") if row["syntactic"] else "",
            tr("Clark BERT-base % (baseline)"): f"{clark[0]} ({clark[1]})" if clark else "",
        })
    return pd.DataFrame(rows)


def show_rules() -> None:
    with st.expander(tr("How heads are labelled")):
        st.markdown(tr(
            "- **previous / self / next**: mean attention to that position ≥ {positional} (Clark et al.)\n"
            "- **[CLS] / [SEP] / punctuation**: mean attention mass ≥ {special} (Clark et al.)\n"
            "- **broad**: mean row entropy / ln(n) ≥ {broad} (normalised by length; Clark's 3.8 nats cannot fire on "
            "short sentences)\n"
            "- **syntactic (rel)**: the best head for a relation beats the best fixed offset by ≥ {gain:.0f} points "
            "over ≥ {dependents} dependents (Voita et al.)\n"
            "- **coreference**: among the top {coref_top} GAP heads, beating the nearest-candidate baseline by "
            "≥ {coref_gain:.0f} points\n"
            "- **induction**: induction score ≥ {induction} on repeated random sequences (Olsson et al.); measured "
            "on its own probe, it takes precedence over every other label\n"
            "- **first token** (decoders): as [CLS], for the first token every query can see (the attention sink)\n"
            "- Positional labels take precedence, then special tokens, then broad, then syntactic/coreference.\n\n"
            "Pattern types (Kovaleva et al. 2019, written as rules): ", positional=POSITIONAL_MIN, special=SPECIAL_MIN,
            broad=BROAD_MIN, gain=100 * MIN_GAIN, dependents=MIN_DEPENDENTS, coref_top=COREF_TOP,
            coref_gain=100 * COREF_GAIN, induction=INDUCTION_MIN)
            + "; ".join(f"**{tr(name)}**: {tr(rule)}" for name, rule in PATTERN_RULES)
        )


def show_coref(model: LoadedModel) -> CorefResult | None:
    st.subheader(tr("Coreference heads (GAP)"))
    result = gap_analysis(model)
    if result is None:
        return None
    top = result.ranking()[:COREF_TOP]
    st.dataframe(pd.DataFrame([{tr("head"): head_label(layer, head), tr("GAP accuracy %"): round(100 * acc, 1)}
                               for layer, head, acc in top]), hide_index=True)
    st.caption(
        tr(
            "{examples} examples ({skipped} left out). Baselines: always A {value:.1f}%, always B {value2:.1f}%, "
            "nearest candidate {value3:.1f}%. Clark et al. (BERT-base, CoNLL-2012, another model and data): best "
            "coreference head {clark_coref}% vs {clark_coref2}% for the nearest mention.",
            examples=result.examples,
            skipped=result.skipped,
            value=100 * result.always_a,
            value2=100 * result.always_b,
            value3=100 * result.nearest,
            clark_coref=CLARK_COREF[0],
            clark_coref2=CLARK_COREF[1],
        )
    )
    return result


def show_induction(model: LoadedModel) -> InductionScores:
    """Induction and duplicate-token scores of every head (computed once per model and server)."""
    st.subheader(tr("Induction and duplicate-token heads"))
    with st.spinner(tr("Running repeated random sequences…")):
        scores = computed.induction_of(server(), model)
    left, right = st.columns(2)
    with left:
        chart(
            ("induction", str(model.model_dir), "grid"),
            lambda: charts.layer_head_grid(
                scores.induction, N_("Induction score: to the token after the earlier occurrence"), N_("attention"),
                zrange=(0.0, 1.0),  # a weight's own scale: scores near the uniform baseline stay pale
            ),
            key="induction_grid",
        )
    with right:
        chart(
            ("induction", str(model.model_dir), "duplicate"),
            lambda: charts.layer_head_grid(
                scores.duplicate, N_("Duplicate-token score: to the earlier occurrence"), N_("attention"),
                zrange=(0.0, 1.0),
            ),
            key="duplicate_grid",
        )
    heads = scores.induction_heads()
    st.caption(
        tr("{sequences} random sequences of {shortest}–{longest} tokens, each repeated once after the first special "
           "token (Olsson et al., 2022). Uniform attention over the visible positions would score {baseline:.3f}. "
           "Heads scoring ≥ {induction} are labelled induction: {count} here.", sequences=scores.sequences,
           shortest=INDUCTION_LENGTHS[0], longest=INDUCTION_LENGTHS[1], baseline=scores.baseline,
           induction=INDUCTION_MIN, count=len(heads))
        + (" " + tr("Best: {head}.", head=head_label(*heads[0])) if heads else "")
    )
    return scores


def show_relations(syntax: SyntaxResult, causal: bool) -> None:
    st.dataframe(relation_table(syntax), hide_index=True, key="relations")
    st.caption(
        tr(
            "For each relation, the head whose attention best finds the other word. direction: dep2head = the "
            "dependent's strongest attention lands on its syntactic head; head2dep = the head's lands on the "
            "dependent. accuracy % is over `count` occurrences (one occurrence gives 0 or 100 %); baseline: "
            "always guessing the word at the most common offset."
        )
    )
    st.caption(
        tr(
            "Clark et al.'s column is another model (BERT-base) on another treebank (WSJ, Stanford "
            "dependencies), for comparison only; UD's obj and nmod:poss correspond to their dobj and poss."
        )
    )
    if causal:
        st.caption(
            tr(
                "A causal model only looks back: a word can attend to its head only when the head comes first "
                "(dep2head), and to its dependents only when they come first (head2dep)."
            )
        )


def show_pair_heads(labels: object, shares: PairShares) -> None:
    """What a sentence pair adds: the [SEP] heads and the cross-sentence heads, counted and ranked."""
    crossing = [(layer, head) for layer, head in ranked_heads(shares.crossing, 5)]
    st.caption(tr("A sentence pair: [SEP] heads put at least {sep:.0%} of their weight on the separators; "
                  "cross-sentence heads send at least {cross:.0%} of it to the other sentence, on average both ways "
                  "({n_sep} [SEP] and {n_cross} cross-sentence heads here). Most crossing: {top}.",
                  sep=SPECIAL_MIN, cross=CROSS_MIN, n_sep=int((labels == "[SEP]").sum()),
                  n_cross=int((labels == "cross-sentence").sum()),
                  top=", ".join(f"{head_label(layer, head)} ({shares.crossing[layer, head]:.2f})"
                                for layer, head in crossing)))


def main() -> None:
    model = current_model()
    st.title(tr("Head roles"))
    text = sentence_box()
    kind = attention_kind()
    if model.encoder_decoder:  # its decoder's or cross-attention (a text model's encoder is read below, alone)
        check_length(text)
        show_kind_roles(model, text, kind)
        stop()
    source = widget(st.radio, "source", SENTENCE, tr("Analyse"), options=SOURCES, horizontal=True, format_func=tr)
    if source == LONG:  # sinks as a text grows, retrieval heads: texts of thousands of pieces
        show_long_roles(model)
        stop()
    pair = pair_box(model) if source == SENTENCE else None
    sentence_result = checked_run(text, pair=pair) if source == SENTENCE else None  # stops on bad input
    chosen = source_sentences(source, text)
    if chosen is None:
        stop()
    key, sentences, note = chosen
    analysis = queued(computed_corpus.corpus_analysis_of, model, key, sentences, source == SENTENCE,
                      note=note)
    if analysis is None:
        stop()
    if note:
        st.caption(literal(note))
    roles, shares = (
        (analysis.roles, None) if sentence_result is None
        else computed.pair_roles_of(server(), model, text, pair) if pair is not None
        else (computed.head_roles_of(server(), model, text), None)
    )
    st.caption(
        tr(
            "{sentences} sentence(s) analysed, {skipped} skipped (longer than {max_length} word pieces); head "
            "metrics over {rows:,} query rows.",
            sentences=analysis.syntax.sentences,
            skipped=analysis.syntax.skipped,
            max_length=model.max_length,
            rows=roles.rows,
        )
        + ("" if sentence_result is not None else " " + tr(
            "Each sentence is read as its parse's words, as Clark et al. fed them (the syntactic analysis needs each "
            "word's pieces); Across a corpus reads the sentences as typed, so a word the parser splits (do|n't) can "
            "give the two pages a few rows apart."))
    )
    grid = st.container()
    show_rules()
    st.subheader(tr("Syntactic relations"))
    if source == SENTENCE and without_spaces(text):  # spaCy's English parser would invent a tree
        st.info(tr("Syntactic relations need a parse, and the bundled parser (spaCy's English model) does not read "
                   "Chinese: analyse the bundled Chinese treebank (300 sentences of Universal Dependencies' Chinese "
                   "GSDSimp, parsed by hand) to find the heads that follow syntax, or upload a CoNLL-U file."))
        st.button(tr("Analyse the Chinese treebank"), on_click=choose, args=("source", TREEBANK), key="to_treebank")
    else:
        show_relations(analysis.syntax, model.causal)
    coref = show_coref(model)
    induction = show_induction(model)
    with grid:
        st.subheader(tr("Every head's role"))
        labels = role_labels(roles, model.causal, (analysis.syntax, coref, shares), probed=induction)
        plain_chart(role_grid_figure(labels, roles, model.causal), key="role_grid")
        if shares is not None:
            show_pair_heads(labels, shares)
        if model.causal:
            st.caption(
                tr(
                    "Baselines of a causal model: uniform attention over the positions each query can see. "
                    "'first token' heads park their attention on the first token (an attention sink)."
                )
            )


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
