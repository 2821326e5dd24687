"""AppTest of the lesson's step "Is attention the explanation?" (issue 81): in English on the bundled MiniLM and in
Chinese on Gemma 3 (the Chinese lesson's model, its Chinese sentence), the step draws the numbers the API gives
(each method's word scores scaled to its largest) and says the claims computed from them, in the page's language
with no English left; on a phone the figure has a row per word."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.figures.explain import scaled
from mha_core.i18n import catalogue
from mha_core.serving.menu import available_models
from mha_core.teaching.examples import TRANSLATED
from mha_core.teaching.explain_step import attention_beside, explanation_claims
from mha_core.teaching.lesson import step_number
from tests.conftest import chart_json, decode, open_app
from tests.i18n_check import untranslated

PAGE = "views/lesson.py"

pytestmark = [pytest.mark.slow, pytest.mark.long]


def shown_claims(at) -> str:
    return " ".join(m.value.replace("\\", "") for m in at.markdown)


def worded(found, language: str) -> list[str]:
    """Each claim as the page words it (numbers formatted by its template)."""
    words = catalogue(language).gettext
    return [words(c.template).format(**c.kwargs()) for c in explanation_claims(found)]


def check_step(at, found, language: str) -> None:
    assert not at.exception and not at.error, at.exception
    figure = chart_json(at, "lesson_explanation")
    rows = np.stack(list(found.scores.values()))
    assert np.allclose(decode(figure["data"][0]["z"]), scaled(rows), atol=1e-6)
    assert [x.split(" ", 1)[1] for x in figure["data"][0]["x"]] == list(found.words)
    text = shown_claims(at)
    for sentence in worded(found, language):
        assert sentence in text, (sentence, text)


def test_the_step_in_english_says_what_its_figure_draws(bundled):
    at = open_app(PAGE, step=str(step_number("explanation")))
    check_step(at, attention_beside(bundled, TRANSLATED["en"]), "en")
    assert any("coreference margin" in m.value for m in at.markdown)  # an encoder's number explained


def test_the_step_in_chinese_on_gemma_reads_the_chinese_question(gemma):
    at = open_app(PAGE, lang="zh", step=str(step_number("explanation")), model=gemma.name)
    found = attention_beside(gemma, TRANSLATED["zh"])
    assert found.asked.text.startswith(TRANSLATED["zh"]) and found.asked.text.endswith("是指")
    check_step(at, found, "zh")
    assert any(found.asked.text in c.value for c in at.caption)  # the question the model reads, shown
    names = [choice.name for choice in available_models()]
    typed = [box.value for box in at.text_area] + [box.value for box in at.text_input]
    left = untranslated(at, [*names, *typed, "L", "H"])
    assert not left, list(left.items())[:4]


def test_on_a_phone_the_figure_has_a_row_per_word(bundled, monkeypatch):
    import views._state

    monkeypatch.setattr(views._state, "narrow_screen", lambda: True)
    at = open_app(PAGE, step=str(step_number("explanation")))
    assert not at.exception and not at.error
    found = attention_beside(bundled, TRANSLATED["en"])
    figure = chart_json(at, "lesson_explanation")["data"][0]
    assert [y.split(" ", 1)[1] for y in figure["y"]] == list(found.words) and len(figure["x"]) == 3
    assert np.allclose(decode(figure["z"]), scaled(np.stack(list(found.scores.values()))).T, atol=1e-6)
