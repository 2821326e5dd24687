"""What each lesson step says about its figure is what the figure shows (issue 77.2): every step's claims, computed
by mha_core.teaching.claims from the numbers its view draws, read back against those numbers on every bundled text
model, for the class's sentence in English and in Chinese, and worded in both languages. Computed from the teaching
functions the views call, on the figures' own objects (no page runs)."""

from __future__ import annotations

import re
import string

import numpy as np
import pytest

from mha_core.analysis.coref.sentence import (
    align_pair,
    blind_to_change,
    candidates_before,
    compare_pair,
    default_pronoun,
    with_probe,
)
from mha_core.analysis.heads.display import words_by_default
from mha_core.analysis.heads.roles import role_labels
from mha_core.engine.loading.bundled import DECODER_NAME, GEMMA_NAME, WHISPER_NAME
from mha_core.i18n import catalogue
from mha_core.serving.computed import seq2seq as computed_seq2seq
from mha_core.serving.computed import text as computed
from mha_core.serving.computed import translation as computed_translation
from mha_core.serving.server import Server
from mha_core.teaching import claims as said
from mha_core.teaching.examples import PRONOUNS, TRANSLATED, focus, written_language
from mha_core.teaching.explain_step import attention_beside, explanation_claims
from mha_core.teaching.lesson import STEPS
from tests.conftest import bundled_model

MODELS = ("all-MiniLM-L6-v2", DECODER_NAME, GEMMA_NAME)
TROPHY = "The trophy didn't fit into the suitcase because it was too big."
CLOSE = 1e-5  # weights are float32 probabilities: a claim rounds them only when worded
STEP_CLAIMS = {"why", "four_steps", "heads", "parameters", "roles", "coreference", "explanation", "cross",
               "translation", "cost"}
FIXED = {"images"}  # their words are the teaching part only: no number, word or head of a figure


def value(claims: tuple[said.Claim, ...], template_part: str, name: str) -> object:
    found = [c.kwargs()[name] for c in claims if template_part in c.template]
    assert len(found) == 1, (template_part, [c.template for c in claims])
    return found[0]


def worded_in_both(claims: tuple[said.Claim, ...]) -> None:
    """Every claim has a Chinese wording with the same placeholders, and both format."""
    for language in ("en", "zh"):
        words = catalogue(language).gettext
        for c in claims:
            text = words(c.template)
            assert language == "en" or text != c.template, c.template
            fields = {f for _, f, _, _ in string.Formatter().parse(c.template) if f}
            assert {f for _, f, _, _ in string.Formatter().parse(text) if f} == fields, c.template
            assert text.format(**c.kwargs())


def test_every_step_has_claims_or_only_teaching_words():
    assert {s.key for s in STEPS} == STEP_CLAIMS | FIXED
    for step in STEPS:
        if step.key in FIXED:
            assert not re.search(r"\d", step.text), step.key


def test_step_3_says_it_hides_the_special_pieces_step_5_counts():
    """Gemma, Chinese: step 3 said 0 heads look at the first word and 30 at the word itself, step 5 38 on the first
    token and 2 on themselves, with no word on why (step 3's maps hide <bos> and rescale the rows)."""
    habits = said.HeadHabits(previous=11, first=0, itself=30, elsewhere=31)
    assert len(said.heads_claims(habits, (9, 2))) == 1  # nothing hidden (a model without special pieces)
    counts, hidden = said.heads_claims(habits, (9, 2), hidden=1)
    worded_in_both((counts, hidden))
    assert hidden.kwargs() == {"n": 1} and "step 5" in hidden.template


def test_step_9_says_which_of_two_equal_pronouns_it_means():
    """English class, Gemma's 牠不跨了路，因為牠太累了。: "'牠' aligns to 'The animal'. '牠' aligns to no word"."""
    target = ["牠", "不", "跨", "了", "路", "，", "因為", "牠", "太", "累", "了", "。"]
    first, second = said.translation_claims(["The", "animal", "it"], target, [(1, 0)], PRONOUNS["zh"])
    worded_in_both((first, second))
    assert first.kwargs() == {"word": "牠", "index": 0, "linked": "animal"} and second.kwargs()["index"] == 7
    only, = said.translation_claims(["The", "animal", "it"], target[1:], [(2, 6)], PRONOUNS["zh"])
    assert only.kwargs() == {"word": "牠", "linked": "it"}  # one 牠: no number needed
    *_, unlinked = said.translation_claims(["The", "animal", "it"], target, [(1, 0)], PRONOUNS["zh"], PRONOUNS["en"])
    worded_in_both((unlinked,))  # issue 77: the figure drew 'it' without a line and the step said nothing of it
    assert unlinked.kwargs() == {"word": "it"} and "source" in unlinked.template
    assert len(said.translation_claims(["The", "animal", "it"], target, [(1, 0), (2, 7)], PRONOUNS["zh"],
                                       PRONOUNS["en"])) == 2  # 'it' linked: nothing more to say


def test_a_character_error_rate_counts_edits_over_what_was_spoken():
    assert said.character_error_rate("动物没有过马路", "动物没有过马路。") == 0
    assert said.character_error_rate("abcd", "abxd") == pytest.approx(1 / 4)
    assert said.character_error_rate("当路", "") == 1


def test_the_trophy_sentence_s_pair_changes_big_to_small():
    found = focus(TROPHY)
    assert found.pair == TROPHY.replace("big", "small")
    assert (found.antecedent, found.other) == ("trophy", "suitcase")


def config_windows(config) -> tuple[int, int | None]:
    """(windowed layers, their window) read from a config as transformers reads it: `layer_types` where it has them
    (Gemma 3), else one `sliding_window` for every layer (Mistral); (0, None) without a window."""
    window = getattr(config, "sliding_window", None) or None
    types = getattr(config, "layer_types", None)
    if window is None:
        return 0, None
    if types:
        return sum(kind == "sliding_attention" for kind in types[:config.num_hidden_layers]), window
    return config.num_hidden_layers, window


def check_cost(model) -> None:
    """Step 11 says how many layers pay the square and how many look at a window, as the config says."""
    claims = said.cost_claims(model.name, model.arch.windows, model.causal)
    worded_in_both(claims)
    windowed, window = config_windows(model.config)
    values = claims[0].kwargs()
    assert values["layers"] == model.n_layers == model.config.num_hidden_layers
    assert values.get("windowed", model.n_layers if windowed else 0) == windowed
    assert values.get("full", model.n_layers - windowed) == model.n_layers - windowed
    assert values.get("window") == window
    assert ("earlier" in claims[0].template) == (model.causal and windowed < model.n_layers)


def test_step_11_counts_the_windowed_layers_of_every_windowed_family(tmp_path):
    """Gemma 3's layer_types (sliding, full, sliding) and Mistral's one window for all: the step's words follow the
    config of each, on the tiny models."""
    from mha_core.engine.loading.model import load_model
    from tests.tiny_models import make_tiny

    for family in ("gemma3_text", "mistral", "llama"):
        check_cost(load_model(make_tiny(family, tmp_path / family)))


def check_why(row: said.PronounRow, view, share: np.ndarray, model) -> tuple[said.Claim, ...]:
    claims = said.why_claims(row, model.tokenizer.unk_token)
    worded_in_both(claims)
    assert np.allclose(row.weights, view.maps[row.layer, row.head, row.query])
    if row.antecedent is None:
        return claims
    margin = (view.maps[:, :, row.query, row.antecedent] - view.maps[:, :, row.query, row.other]) * share
    assert margin[row.layer, row.head] >= margin.max() - CLOSE  # the clearest head is the one drawn
    w_a = float(view.maps[row.layer, row.head, row.query, row.antecedent])
    w_o = float(view.maps[row.layer, row.head, row.query, row.other])
    weak = [c for c in claims if "the link is weak" in c.template]
    clear = [c for c in claims if "links them most clearly" in c.template]
    assert (len(weak), len(clear)) == ((1, 0) if w_a <= w_o else (0, 1))
    told = (weak or clear)[0].kwargs()
    assert (told["layer"], told["head"]) == (row.layer, row.head)
    assert told["w_a"] == pytest.approx(w_a, abs=CLOSE) and told["w_o"] == pytest.approx(w_o, abs=CLOSE)
    top = int(np.argmax(row.weights))
    largest = [c.kwargs()["word"] for c in claims if "largest bar" in c.template]
    assert largest == ([] if top == row.antecedent else [row.labels[top]])
    later = [c.kwargs()["later"] for c in claims if "sees only itself" in c.template]
    after = len(view.labels) - 1 - row.query
    assert later == ([after] if model.causal and after else [])
    assert not later or np.allclose(row.weights[row.query + 1:], 0)
    inside = [c.kwargs()["piece"] for c in claims if "inside the piece" in c.template]
    unread = [c.kwargs()["piece"] for c in claims if "cannot read" in c.template]
    label = row.labels[row.query]
    assert unread == ([label] if label == model.tokenizer.unk_token else [])
    assert inside == ([] if unread or said.plain(label) == row.pronoun else [label])
    return claims


def check_four_steps(server: Server, model, text: str, result, view, row: said.PronounRow) -> None:
    w = computed.walkthrough_of(server, model, text, row.layer, row.head)
    query = view.pieces[row.query][0]
    special = [word is None for word in result.word_ids[0]]
    claims = said.four_steps_claims(said.scores_row(w, view, row, query, special))
    worded_in_both(claims)
    if row.antecedent is None:
        return
    told = claims[0].kwargs()
    assert told["weight"] == pytest.approx(float(w.probs[query, list(view.pieces[row.antecedent])].sum()), abs=CLOSE)
    assert told["specials"] == pytest.approx(float(w.probs[query, np.array(special)].sum()), abs=CLOSE)
    assert told["shown"] == pytest.approx(row.weight(row.antecedent), abs=CLOSE)
    if len(view.pieces[row.query]) == 1:  # what the claim says happened between the two steps
        assert told["shown"] == pytest.approx(told["weight"] / (1 - told["specials"]), rel=1e-3)
    else:
        assert "averaged" in claims[0].template


def check_heads_and_roles(server: Server, model, text: str, view, row: said.PronounRow) -> None:
    habits = said.head_habits(view.maps)
    claims = said.heads_claims(habits, (row.layer, row.head))
    worded_in_both(claims)
    told = claims[0].kwargs()
    assert sum(told[k] for k in ("previous", "first", "itself", "elsewhere")) == view.maps.shape[0] * view.maps.shape[1]
    assert (told["layer"], told["head"]) == (row.layer, row.head)
    n = view.maps.shape[-1]
    if n > 2:  # a head looking at the word before in most rows is counted so
        before = (view.maps[:, :, np.arange(1, n), np.arange(n - 1)] > 0.5).mean(axis=-1) > 0.5
        assert told["previous"] >= int(before.sum())
    labels = role_labels(computed.head_roles_of(server, model, text), model.arch.causal)
    roles = said.roles_claims(labels)
    worded_in_both(roles)
    counted = dict(roles[0].kwargs()["roles"])
    assert counted == {str(r): int((labels == r).sum()) for r in np.unique(labels.astype(str))}
    breakdown = computed.breakdown_of(server, model)
    cost = said.parameters_claims(model.name, breakdown.total, breakdown.attention_total)
    worded_in_both(cost)
    assert (cost[0].kwargs()["attention"], cost[0].kwargs()["total"]) == (breakdown.attention_total, breakdown.total)


def lesson_pair(server: Server, model, text: str) -> said.PairFigure | None:
    """The minimal pair as the lesson's step 6 draws it by default (views/parts/coreference.show_pair)."""
    words = computed.words_of(server, text)
    pronoun = default_pronoun(words)
    found = focus(text, model.name)
    if pronoun is None or not found.pair:
        return None
    candidates = candidates_before(words, pronoun)
    names = [words[i].text for i in candidates]
    a, b = names.index(found.antecedent), names.index(found.other)
    words_2 = computed.words_of(server, found.pair)
    alignment = align_pair(words, words_2)
    first, second, pronoun_2 = text, found.pair, pronoun
    probed = blind_to_change(model.causal, pronoun, alignment)
    if probed:
        first, second = with_probe(text, words[pronoun]), with_probe(found.pair, words_2[pronoun])
        words, words_2 = computed.words_of(server, first), computed.words_of(server, second)
        pronoun = pronoun_2 = len(words) - 1
    scores = [computed.antecedents_of(server, model, t, "auto", w, p, candidates)
              for t, w, p in ((first, words, pronoun), (second, words_2, pronoun_2))]
    return said.PairFigure(compare_pair(*scores, a, b), alignment.changed, names[a], names[b], probed)


def check_coreference(server: Server, model, text: str) -> None:
    words = computed.words_of(server, text)
    pronoun = default_pronoun(words)
    scores = computed.antecedents_of(server, model, text, "auto", words, pronoun, candidates_before(words, pronoun))
    pair = lesson_pair(server, model, text)
    claims = said.coreference_claims(scores, 5, pair)
    worded_in_both(claims)
    names = [c.text for c in scores.candidates]
    every = np.bincount(scores.preferred().ravel(), minlength=len(names))
    assert value(claims, "all {n} heads", "every") == ", ".join(f"{n} {c}" for n, c in zip(names, every, strict=True))
    assert value(claims, "all {n} heads", "listed") == 5
    a, b = names.index(pair.name_a), names.index(pair.name_b)
    assert any("link is weak" in c.template for c in claims) == (every[a] <= every[b])
    assert any(c.template.startswith("As many heads") for c in claims) == (every[a] == every[b])  # 36 and 36
    assert any(c.template.startswith("More heads") for c in claims) == (every[a] < every[b])
    flips = int(pair.comparison.flips.sum())
    if flips == 1:
        assert any("1 head switches" in c.template for c in claims)
    elif flips:
        assert value(claims, "heads switch", "flips") == flips
    else:
        assert any("No head switches" in c.template for c in claims)
    assert value(claims, "The pair changes", "changes") == ", ".join(f"{x} → {y}" for x, y in pair.changed)


def check_explanation(model, text: str) -> None:
    """Step 7: each method's first word, its removal's change (occlusion's score of that word) and the verdict, as
    the figure's numbers say."""
    found = attention_beside(model, text)
    claims = explanation_claims(found)
    worded_in_both(claims)
    tops = {name: found.words[int(np.argmax(found.scores[name]))] for name in found.scores}
    assert value(claims, "looks most at", "attention") == tops["attention_head"]
    assert value(claims, "ranks '{gradient}' first", "gradient") == tops["inputxgrad"]
    drops = {name: float(found.scores["occlusion"][int(np.argmax(found.scores[name]))]) for name in found.scores}
    assert value(claims, "Removing the head's top word", "occlusion") == pytest.approx(max(found.scores[
        "occlusion"]), abs=CLOSE)
    assert value(claims, "Removing the head's top word", "attention") == pytest.approx(drops["attention_head"],
                                                                                       abs=CLOSE)
    agrees = tops["attention_head"] == tops["occlusion"]
    assert any("does point at" in c.template for c in claims) == (agrees and drops["occlusion"] > 0)
    assert any("not the explanation" in c.template for c in claims) == (not agrees and drops["occlusion"] > 0)


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_every_step_s_claims_match_its_figure(name):
    model, server = bundled_model(name), Server()
    for text in (TRANSLATED["en"], TRANSLATED["zh"], TROPHY):
        result = computed.result_of(server, model, (text,))
        view = computed.view_of(server, model, text, "auto", True, words_by_default(text))
        computed.focus_of(server, text)
        found = focus(text, model.name)
        row = said.pronoun_row(view, result, found.pronoun, found.antecedent, found.other)
        share = said.kept_share(view, result, row.query) if row.antecedent is not None else None
        check_why(row, view, share, model)
        check_four_steps(server, model, text, result, view, row)
        check_heads_and_roles(server, model, text, view, row)
        check_coreference(server, model, text)
        check_explanation(model, text)
    check_cost(model)
    pair = lesson_pair(server, model, TROPHY)
    assert pair.changed == (("big", "small"),) and (pair.name_a, pair.name_b) == ("trophy", "suitcase")


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("text", [TRANSLATED["zh"], TROPHY])
def test_steps_8_and_9_say_what_whisper_heard_and_what_the_pronoun_aligns_to(text):
    server, language = Server(), written_language(text)
    whisper = bundled_model(WHISPER_NAME)
    heard = computed_seq2seq.transcript_of(server, whisper, computed_seq2seq.spoken_of(server, text, language),
                                           language)
    claims = said.cross_claims(whisper.name, text, heard.text)
    worded_in_both(claims)
    assert claims[0].kwargs()["heard"] == heard.text
    rate = said.character_error_rate(text, heard.text)
    assert ("poorly" in claims[0].template) == (rate > said.MISHEARD)
    target = "en" if language == "zh" else "zh"
    result = computed_translation.translation_of(server, bundled_model(GEMMA_NAME), text, language, target)
    lines = said.translation_claims(result.source_words, result.target_words, result.links, PRONOUNS[target])
    worded_in_both(lines)
    found = [t for t, w in enumerate(result.target_words) if w.lower() in PRONOUNS[target]]
    assert [c.kwargs().get("word") for c in lines] == ([result.target_words[t] for t in found] or [None])
    for t, line in zip(found, lines, strict=True):
        linked = " ".join(result.source_words[s] for s, u in sorted(result.links) if u == t)
        assert line.kwargs().get("linked", "") == linked
