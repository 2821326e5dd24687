"""Candidate finder, minimal-pair alignment and the live lessons."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from mha_core import run
from mha_core.analysis.coref.sentence import (
    InspectorError,
    align_pair,
    antecedent_scores,
    candidates_before,
    default_pronoun,
    human_flips,
    sentence_words,
)
from mha_core.analysis.heads.roles import head_roles
from mha_core.teaching.lessons import is_right, load_lessons, normalise_answer, not_applicable, reveal
from tests.conftest import ANIMAL_TIRED, ANIMAL_WIDE


def test_candidates_are_nouns_before_the_pronoun():
    words = sentence_words(ANIMAL_TIRED)
    pronoun = default_pronoun(words)
    assert words[pronoun].text == "it"
    assert [words[i].text for i in candidates_before(words, pronoun)] == ["animal", "street"]
    mary = sentence_words("Mary gave the book to John because she had already read it.")
    she = [w.index for w in mary if w.text == "she"][0]
    assert [mary[i].text for i in candidates_before(mary, she)] == ["Mary", "book", "John"]


def test_pronoun_without_candidates():
    words = sentence_words("It was raining over the hills.")
    assert candidates_before(words, 0) == []
    with pytest.raises(InspectorError, match="No candidate is chosen for 'It'"):
        antecedent_scores(None, 0, words, 0, [])


def test_minimal_pair_alignment():
    first, second = sentence_words(ANIMAL_TIRED), sentence_words(ANIMAL_WIDE)
    alignment = align_pair(first, second)
    assert alignment.changed == (("tired", "wide"),) and alignment.positions == (11,)


@pytest.mark.parametrize(("second", "message"), [
    ("", "empty"),
    ("The animal didn't cross the busy street because it was too wide.", "differ in length"),
    ("A dog never walked along that road since he felt very sleepy.", r"differ in \d+ words"),
    (ANIMAL_TIRED, "the same"),
])
def test_bad_pairs_say_why(second, message):
    with pytest.raises(InspectorError, match=message):
        align_pair(sentence_words(ANIMAL_TIRED), sentence_words(second) if second else [])


def test_scores_are_word_level_attention(bundled):
    words = sentence_words(ANIMAL_TIRED)
    result = run(bundled, ANIMAL_TIRED)
    scores = antecedent_scores(result, 0, words, 8, [1, 6])
    tokens = result.tokens[0]
    it, animal = tokens.index("it"), tokens.index("animal")
    maps = result.attention()[0]  # (L,H,T,T)
    assert np.allclose(scores.scores[0], maps[:, :, it, animal].numpy(), atol=1e-6)
    assert np.array_equal(scores.preferred(), (scores.scores[1] > scores.scores[0]).astype(int))  # ties: the first
    assert np.allclose(scores.top_two_margin(), np.abs(scores.margin(0, 1)))


def test_human_flips():
    m1, m2 = np.array([[0.2, -0.1, 0.3]]), np.array([[-0.1, -0.2, 0.1]])
    assert human_flips(m1, m2).tolist() == [[True, False, False]]


def test_answers_are_normalised():
    assert normalise_answer("layer 3, head 1") == normalise_answer("L3H1") == "L3 H1"
    assert normalise_answer("1,050,624") == "1050624" and normalise_answer(" Sharper ") == "sharper"


def test_lessons_reveal_live_answers(bundled):
    lessons = {lesson.id: lesson for lesson in load_lessons()}
    assert len(lessons) >= 5
    it_animal = reveal(bundled, lessons["it-animal"])
    result = run(bundled, lessons["it-animal"].sentence)
    tokens = list(result.tokens[0])
    weights = result.attention()[0][:, :, tokens.index("it"), tokens.index("animal")]  # (L,H)
    layer, head = divmod(int(torch.argmax(weights)), weights.shape[1])
    assert it_animal.accepted[0] == f"L{layer} H{head}" and is_right(it_animal, f"layer {layer} head {head}")
    heads = reveal(bundled, lessons["eight-heads"])
    assert heads.accepted == (str(sum(p.numel() for p in torch.nn.MultiheadAttention(512, 8).parameters())),)
    assert not is_right(heads, "1,049,600")
    for lesson in lessons.values():  # every lesson has a right answer on the model it was written for
        assert reveal(bundled, lesson).accepted, lesson.id
    for lesson_id, metric in (("previous-word", "prev"), ("cls-sink", "cls")):
        lesson = lessons[lesson_id]
        values = head_roles(run(bundled, lesson.sentence)).metrics[metric]  # (L,H)
        qualifying = {f"L{layer} H{head}" for layer, head in zip(*np.nonzero(values >= lesson.check["min"]),
                                                                  strict=True)}
        assert set(reveal(bundled, lesson).accepted) == qualifying  # exactly the heads over the threshold


def test_a_role_lesson_without_a_qualifying_head_accepts_nothing(tiny):
    lesson = next(lesson for lesson in load_lessons() if lesson.id == "cls-sink")
    strict = replace(lesson, check={**lesson.check, "min": 1.01})  # no head can give more than all its attention
    shown = reveal(tiny, strict)
    assert shown.accepted == () and "no right answer" in shown.explanation
    assert not is_right(shown, "L0 H0")


def test_lessons_adapt_to_another_model_or_say_they_do_not_apply(tiny, decoder):
    lessons = load_lessons()
    assert {lesson.written_for for lesson in lessons} == {"all-MiniLM-L6-v2"}
    for model in (tiny, decoder):
        for lesson in lessons:
            shown = reveal(model, lesson)  # never raises
            reason = not_applicable(model, lesson)
            if reason is not None:  # not asked: no answer, and the reason given
                assert shown.accepted == () and reason in shown.explanation
            else:  # asked: every accepted answer is right, and the explanation gives live numbers
                assert all(is_right(shown, answer) for answer in shown.accepted)
                assert shown.accepted or "no right answer" in shown.explanation
                assert re.search(r"\d", shown.explanation)
    scaling = next(lesson for lesson in lessons if lesson.id == "scaling")
    assert "(layer 1, head 0)" in reveal(tiny, scaling).explanation  # layer 3 head 1 does not exist: middle, head 0
    it_animal = reveal(decoder, next(lesson for lesson in lessons if lesson.id == "it-animal"))
    assert it_animal.accepted  # ' it' and ' animal' are single pieces for SmolLM2 too


def test_a_word_without_pieces_says_why_with_the_models_own_length(tiny):  # the tiny BERT reads 64 pieces
    from dataclasses import replace as replace_batch

    from mha_core.analysis.coref.sentence import InspectorError, antecedent_scores

    text = "The animal was tired. " * 13 + "Then it slept."  # the pronoun comes after piece 64
    words = sentence_words(text)
    pronoun = max(i for i, w in enumerate(words) if w.text == "it")
    result = run(tiny, text)
    with pytest.raises(InspectorError, match="beyond the model's 64 word pieces"):
        antecedent_scores(result, 0, words, pronoun, [1])
    short = run(tiny, ANIMAL_TIRED)
    words = sentence_words(ANIMAL_TIRED)
    offsets = tuple((0, 0) if s <= words[8].start < e else (s, e) for s, e in short.batch.offsets[0])
    blind = replace(short, batch=replace_batch(short.batch, offsets=(offsets,)))
    with pytest.raises(InspectorError, match="do not map back to 'it'"):
        antecedent_scores(blind, 0, words, 8, [1])
