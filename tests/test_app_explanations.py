"""AppTest for the Explanations page (issue 81): on the bundled encoder the page draws the API's word scores of
every method (scaled per method) and its faithfulness table; a decoder is asked about the pronoun with the nouns
before it as answer and wrong word. The page in Chinese: tests/test_i18n.py, as every page; on the decoders here, in
the tests whose runs compute the same explanations (one computation per test process, not one per test)."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.analysis.explain.choices import METHODS
from mha_core.teaching.examples import question_for, readable_first_piece
from tests.conftest import chart_json, decode, open_app
from tests.i18n_check import assert_all_chinese

PAGE = "views/explanations.py"
TEXT = "The animal didn't cross the street because it was too tired."

pytestmark = pytest.mark.slow


def the_page_s_explanation(model: object) -> object:
    """Every method on TEXT, asked of the process's server by the page's key: the page's own when it asked for
    exactly this (the same model and text, no answer or wrong word), else computed here by mha_core.explain (what
    serving.computed.explain.explanation_of runs): a page that passed anything else draws scores that differ."""
    from mha_core.serving.computed.explain import explanation_of
    from mha_core.serving.server import no_wait
    from views._state import server

    return explanation_of(server(), model, TEXT, None, None, no_wait)


def test_the_page_draws_every_methods_word_scores_and_their_faithfulness(bundled):
    at = open_app(PAGE, text=TEXT)
    assert not at.exception and not at.error
    expected = the_page_s_explanation(bundled)
    z = decode(chart_json(at, "explain_methods")["data"][0]["z"])
    rows = np.stack([m.word_scores for m in expected.methods.values()])
    assert np.allclose(z, rows / np.abs(rows).max(-1, keepdims=True), atol=1e-5)
    table = at.dataframe[0].value
    assert len(table) == len(METHODS)
    np.testing.assert_allclose(table.iloc[:, 1], [round(m.faithfulness.aopc_comprehensiveness, 4)
                                                  for m in expected.methods.values()], atol=1e-3)
    assert any("coreference margin" in m.value and "**animal**" in m.value for m in at.markdown)


def test_a_decoder_is_asked_about_the_pronoun():
    question = question_for(TEXT)
    assert question.text.endswith("The word 'it' refers to the") and (question.answer, question.wrong) == (
        "animal", "street")
    assert question_for("No pronoun here at all.") is None
    chinese = question_for("玛丽把书给了约翰，因为她已经读过了。")  # the nouns Coreference compares, not 玛丽 and 书
    assert chinese.text.endswith("句中的“她”是指") and (chinese.answer, chinese.wrong) == ("玛丽", "约翰")


@pytest.mark.long  # the page's every explanation on a decoder: about 12 s
def test_chinese_on_gemma_starts_from_the_nouns_first_pieces(gemma):
    """A new teacher's first visit in Chinese on Gemma 3: 玛丽 is two pieces there (玛 | 丽), so the page starts from
    each noun's first piece and says so, as the lesson's step does, not from a refusal and no chart. The same run is
    the page's check of every Chinese page on the decoders (tests/test_i18n.py): no English left."""
    (at,) = assert_all_chinese(PAGE, gemma.name)  # the page has no tabs: one run
    assert not at.exception and not at.error and not at.warning
    pieces = [readable_first_piece(gemma, word).strip() for word in ("玛丽", "约翰")]
    assert pieces[0] == "玛" and [box.value for box in at.text_input] == pieces
    assert any("“玛丽”" in c.value and "“玛”" in c.value for c in at.caption)
    assert chart_json(at, "explain_methods")["data"]


@pytest.mark.long  # the page's every explanation on a decoder: about 12 s
def test_a_decoders_target_names_its_pieces_in_bold(decoder):
    """SmolLM2's answer is the piece " animal": its line bolds animal, not "** animal**" left as typed. The page in
    Chinese on SmolLM2 (tests/test_i18n.py's check of every page on the decoders) opens on the same English example:
    its explanation, computed for the English run, is the server's for the Chinese one."""
    at = open_app(PAGE, lang="en", model=decoder.name, text=TEXT)
    assert not at.exception and not at.error
    line = next(m.value for m in at.markdown if m.value.startswith("Target: logit("))
    assert "logit(**animal**) − logit(**street**)" in line, line
    assert_all_chinese(PAGE, decoder.name)


def test_on_a_phone_the_methods_figure_has_a_row_per_word(bundled, monkeypatch):
    """At 390 px the nine method names left the words' columns about 70 px in all: a phone gets a row per word."""
    import views._state

    monkeypatch.setattr(views._state, "narrow_screen", lambda: True)
    at = open_app(PAGE, text=TEXT)
    assert not at.exception and not at.error
    expected = the_page_s_explanation(bundled)
    figure = chart_json(at, "explain_methods")["data"][0]
    assert [y.split(" ", 1)[1] for y in figure["y"]] == list(expected.words) and len(figure["x"]) == len(METHODS)
    rows_px = (figure_height := chart_json(at, "explain_methods")["layout"]["height"]) - 80
    assert rows_px >= 18 * len(expected.words) + 10 * max(len(name) for name in figure["x"]), figure_height


def test_an_empty_answer_box_says_the_model_s_own_next_piece_is_explained(tmp_path, monkeypatch):
    """A teacher who clears the Answer box got a new target with no word of why: the page now says the answer is the
    model's own most likely next piece, and the target line names it (transformers' own argmax on a tiny random
    decoder, its language-model head included); the note on a noun's first piece ("ax" of axolotl) is said only
    while its box holds that piece."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.tiny_models import make_tiny

    path = make_tiny("llama", tmp_path / "llama", lm=True)
    monkeypatch.setenv("MHA_MODELS_DIR", str(tmp_path))
    text = TEXT.replace("animal", "axolotl")  # ax | ##olo | ##tl in the word-piece tokenizer
    at = open_app(PAGE, model="llama", text=text)
    said, pieces = "The Answer box is empty", "writes 'axolotl' in several pieces: its first, 'ax'"
    assert not at.exception and at.text_input(key="explain_answer").value == "ax"
    assert not any(said in c.value for c in at.caption) and any(pieces in c.value for c in at.caption)
    at = at.text_input(key="explain_answer").input("").run()
    assert not at.exception and not at.error and any(said in c.value for c in at.caption)
    assert not any(pieces in c.value for c in at.caption)  # its box no longer holds the piece
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    reference = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, attn_implementation="eager")
    with torch.no_grad():
        ids = tokenizer(question_for(text, "llama").text, return_tensors="pt").input_ids
        own = tokenizer.decode([int(reference(ids).logits[0, -1].argmax())]).strip()
    line = next(m.value for m in at.markdown if m.value.startswith("Target: logit(")).replace("\\", "")  # unescaped
    assert line.startswith(f"Target: logit(**{own}**) − logit(**"), (own, line)
