"""Head roles: every head labelled (positional, [CLS]/[SEP], punctuation, broad, syntactic,
coreference) for the typed sentence, the bundled corpus or an uploaded file, with baselines."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import CorefResult, LoadedModel, SyntaxResult
from mha_core.analysis.coref import CLARK_COREF, COREF_GAIN, COREF_TOP
from mha_core.analysis.corpora import ParsedSentence, read_conllu, spacy_parse
from mha_core.analysis.induction import INDUCTION_LENGTHS, INDUCTION_MIN, InductionScores, induction_scores
from mha_core.analysis.roles import (
    BROAD_MIN,
    PATTERN_RULES,
    POSITIONAL_MIN,
    SPECIAL_MIN,
    head_label,
    head_roles,
    role_labels,
)
from mha_core.analysis.syntax import DIRECTIONS, MIN_DEPENDENTS, MIN_GAIN, analyse_corpus
from mha_core.figures import charts
from mha_core.figures.roles import role_grid_figure
from views._state import chart, checked_run, current_model, literal, sentence_box, shared
from views._uploads import (
    CORPUS,
    cached_analysis,
    capped_upload,
    gap_analysis,
    parsed_corpus,
    sentence_store,
)

SOURCES = ("This sentence", "Bundled corpus", "Uploaded CoNLL-U")


def source_sentences(source: str, text: str) -> tuple[str, list[ParsedSentence], str] | None:
    """(cache key, parsed sentences, what was left out) for the chosen source; None when an upload is still
    missing or unusable (the reason is shown)."""
    if source == "This sentence":
        return f"sentence:{text}", spacy_parse([text]), ""
    if source == "Bundled corpus":
        return f"corpus:{CORPUS}", parsed_corpus(), ""
    return capped_upload("CoNLL-U file (gold trees)", ["conllu", "txt"], "conllu_upload", read_conllu,
                         "Upload a CoNLL-U file (for example a Universal Dependencies treebank split).")


def relation_table(syntax: SyntaxResult) -> pd.DataFrame:
    rows = []
    for rel, score in syntax.relations.items():
        direction, layer, head, acc = score.best()
        clark = score.clark_reference
        rows.append({
            "relation": rel, "count": score.count, "best head": head_label(layer, head),
            "direction": DIRECTIONS[direction], "accuracy %": round(100 * acc, 1),
            "baseline offset": f"{score.baseline_offset:+d}", "baseline %": round(100 * score.baseline_accuracy, 1),
            "syntactic head": "yes" if score.syntactic else "",
            "Clark BERT-base % (baseline)": f"{clark[0]} ({clark[1]})" if clark else "",
        })
    return pd.DataFrame(rows)


def show_rules() -> None:
    with st.expander("How heads are labelled"):
        st.markdown(
            f"- **previous / self / next**: mean attention to that position ≥ {POSITIONAL_MIN} (Clark et al.)\n"
            f"- **[CLS] / [SEP] / punctuation**: mean attention mass ≥ {SPECIAL_MIN} (Clark et al.)\n"
            f"- **broad**: mean row entropy / ln(n) ≥ {BROAD_MIN} (normalised by length; Clark's 3.8 nats "
            "cannot fire on short sentences)\n"
            f"- **syntactic (rel)**: the best head for a relation beats the best fixed offset by "
            f"≥ {100 * MIN_GAIN:.0f} points over ≥ {MIN_DEPENDENTS} dependents (Voita et al.)\n"
            f"- **coreference**: among the top {COREF_TOP} GAP heads, beating the nearest-candidate baseline by "
            f"≥ {100 * COREF_GAIN:.0f} points\n"
            f"- **induction**: induction score ≥ {INDUCTION_MIN} on repeated random sequences (Olsson et al.); "
            "measured on its own probe, it takes precedence over every other label\n"
            "- **first token** (decoders): as [CLS], for the first token every query can see (the attention sink)\n"
            "- Positional labels take precedence, then special tokens, then broad, then syntactic/coreference.\n\n"
            "Pattern types (Kovaleva et al. 2019, written as rules): "
            + "; ".join(f"**{name}**: {rule}" for name, rule in PATTERN_RULES)
        )


def show_coref(model: LoadedModel) -> CorefResult | None:
    st.subheader("Coreference heads (GAP)")
    result = gap_analysis(model)
    if result is None:
        return None
    top = result.ranking()[:COREF_TOP]
    st.dataframe(pd.DataFrame([{"head": head_label(layer, head), "GAP accuracy %": round(100 * acc, 1)}
                               for layer, head, acc in top]), hide_index=True)
    st.caption(f"{result.examples} examples ({result.skipped} left out). Baselines: always A "
               f"{100 * result.always_a:.1f}%, always B {100 * result.always_b:.1f}%, nearest candidate "
               f"{100 * result.nearest:.1f}%. Clark et al. (BERT-base, CoNLL-2012, another model and data): "
               f"best coreference head {CLARK_COREF[0]}% vs {CLARK_COREF[1]}% for the nearest mention.")
    return result


def show_induction(model: LoadedModel) -> InductionScores:
    """Induction and duplicate-token scores of every head (computed once per model and server)."""
    st.subheader("Induction and duplicate-token heads")
    with st.spinner("Running repeated random sequences…"):
        scores = shared(("induction", str(model.model_dir)), lambda: induction_scores(model))
    left, right = st.columns(2)
    with left:
        chart(("induction", str(model.model_dir), "grid"), lambda: charts.layer_head_grid(
            scores.induction, "Induction score: to the token after the earlier occurrence", "attention"),
            key="induction_grid")
    with right:
        chart(("induction", str(model.model_dir), "duplicate"), lambda: charts.layer_head_grid(
            scores.duplicate, "Duplicate-token score: to the earlier occurrence", "attention"), key="duplicate_grid")
    heads = scores.induction_heads()
    st.caption(f"{scores.sequences} random sequences of {INDUCTION_LENGTHS[0]}–{INDUCTION_LENGTHS[1]} tokens, each "
               "repeated once after the first special token (Olsson et al., 2022). Uniform attention over the "
               f"visible positions would score {scores.baseline:.3f}. Heads scoring ≥ {INDUCTION_MIN} are labelled "
               f"induction: {len(heads)} here" + (f" (best: {head_label(*heads[0])})." if heads else "."))
    return scores


def main() -> None:
    model = current_model()
    st.title("Head roles")
    text = sentence_box()
    source = st.radio("Analyse", SOURCES, horizontal=True, key="source", bind="query-params")
    sentence_result = checked_run(text) if source == "This sentence" else None  # stops on bad input
    chosen = source_sentences(source, text)
    if chosen is None:
        st.stop()
    key, sentences, note = chosen
    analysis = cached_analysis((str(model.model_dir), key), "Running the model over the sentences",
                               lambda progress: analyse_corpus(model, sentences, progress),
                               store=sentence_store() if source == "This sentence" else None, note=note,
                               light=source == "This sentence")
    if analysis is None:
        st.stop()
    if note:
        st.caption(literal(note.strip(" ()").capitalize() + "."))
    roles = analysis.roles if sentence_result is None else shared(
        ("head roles", str(model.model_dir), text), lambda: head_roles(sentence_result))
    st.caption(f"{analysis.syntax.sentences} sentence(s) analysed, {analysis.syntax.skipped} skipped "
               f"(longer than {model.max_length} word pieces); head metrics over {roles.rows:,} query rows.")
    grid = st.container()
    show_rules()
    st.subheader("Syntactic relations")
    st.dataframe(relation_table(analysis.syntax), hide_index=True, key="relations")
    st.caption("For each relation, the head whose attention best finds the other word. direction: dep2head = the "
               "dependent's strongest attention lands on its syntactic head; head2dep = the head's lands on the "
               "dependent. accuracy % is over `count` occurrences (one occurrence gives 0 or 100 %); baseline: "
               "always guessing the word at the most common offset.")
    st.caption("Clark et al.'s column is another model (BERT-base) on another treebank (WSJ, Stanford "
               "dependencies), for comparison only; UD's obj and nmod:poss correspond to their dobj and poss.")
    if model.causal:
        st.caption("A causal model only looks back: a word can attend to its head only when the head comes first "
                   "(dep2head), and to its dependents only when they come first (head2dep).")
    coref = show_coref(model)
    induction = show_induction(model)
    with grid:
        st.subheader("Every head's role")
        labels = role_labels(roles, model.causal, (analysis.syntax, coref), probed=induction)
        st.plotly_chart(role_grid_figure(labels, roles), key="role_grid")
        if model.causal:
            st.caption("Baselines of a causal model: uniform attention over the positions each query can see. "
                       "'first token' heads park their attention on the first token (an attention sink).")


main()
