"""AppTest for the Encoder–decoder page: the bundled Whisper hears the spoken sentence and every tab draws (in
English and Chinese); tiny text encoder–decoders (T5, BART) show the three kinds of maps and the word alignment; a
tiny Whisper without a feature extractor's settings runs; a one-stack model is offered Whisper (the other pages on an
encoder–decoder: tests/test_app_stacks.py)."""

from __future__ import annotations

import pytest

from mha_core.engine.bundled import ENCODER_NAME, WHISPER_NAME
from mha_core.i18n import catalogue
from mha_core.teaching.examples import SPOKEN
from tests.conftest import open_app
from tests.i18n_check import untranslated
from tests.tiny_models import make_tiny_seq2seq

PAGE = "views/seq2seq.py"
TABS = ("Cross-attention", "Every head", "Word timestamps", "Encoder over time")


@pytest.fixture(scope="module")
def tiny_seq2seq(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq2seq_models")
    for family in ("t5", "bart", "whisper"):
        make_tiny_seq2seq(family, root / family)
    return root


def test_whisper_hears_the_spoken_sentence_and_every_tab_draws():
    at = open_app(PAGE)  # the page opens on the bundled Whisper, the sentence spoken by espeak-ng
    assert not at.exception and not at.error and at.query_params.get("model") is None
    assert any(SPOKEN["en"].rstrip(".") in m.value.replace("\\", "") for m in at.markdown)
    for tab in TABS:
        at = open_app(PAGE, x_tab=tab)
        assert not at.exception and not at.error, tab
        assert at.get("plotly_chart"), tab
    assert len(at.dataframe) == 1  # the encoder over time: one position's most-weighted keys
    words = open_app(PAGE, x_tab="Word timestamps")
    assert len(words.dataframe[0].value) == 11  # a row per word, its start and end


def test_whisper_page_in_chinese_has_no_english_left():
    from mha_core.serving.menu import available_models

    zh, names = catalogue("zh").gettext, [choice.name for choice in available_models()]
    for tab in TABS:
        at = open_app(PAGE, lang="zh", x_tab=zh(tab))
        assert not at.exception, tab
        heard = [m.value for m in at.markdown]
        spoken = [box.value for box in at.text_input]
        left = untranslated(at, [*names, *spoken, *heard, "L", "H", "espeak-ng", "Whisper", "WAV", "FLAC", "OGG",
                                 "MP3", "openai-whisper"])
        assert not left, (tab, list(left.items())[:5])


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_text_encoder_decoders_show_three_kinds_and_the_alignment(family, tiny_seq2seq, monkeypatch):
    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_seq2seq))
    for kind in ("encoder", "decoder", "cross"):
        at = open_app(PAGE, model=family, kind=kind, target="Das Tier ging nicht.")
        assert not at.exception and not at.error, (family, kind)
        assert len(at.get("plotly_chart")) == 1
        assert len(at.dataframe) == (2 if kind == "cross" else 0)  # cross: the word alignment, the steps
    own = open_app(PAGE, model=family)  # no target: the model writes its own
    assert not own.exception and any("Target" in m.value for m in own.markdown)


def test_a_tiny_whisper_without_a_preprocessor_config_runs(tiny_seq2seq, monkeypatch):
    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_seq2seq))
    at = open_app(PAGE, model="whisper")
    assert not at.exception and not at.error and at.get("plotly_chart")


def test_this_page_offers_whisper_to_a_one_stack_model():
    at = open_app(PAGE, model=ENCODER_NAME)
    assert not at.exception and "encoder–decoders" in at.info[0].value
    at.button[0].click().run()
    assert not at.exception and at.query_params["model"] == WHISPER_NAME and at.get("plotly_chart")


def test_one_cross_attention_head_step_by_step_matches_the_run(tiny_seq2seq, monkeypatch):
    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_seq2seq))
    at = open_app(PAGE, model="t5", kind="cross", x_layer="2", x_head="1", target="Das Tier ging nicht.")
    assert not at.exception and len(at.dataframe) == 2  # the alignment, then the steps
    from mha_core import load_model, run_seq2seq

    model = load_model(tiny_seq2seq / "t5")
    result = run_seq2seq(model, [at.text_area(key="text").value], ["Das Tier ging nicht."])
    t, s = result.decoder.lengths[0], result.encoder.lengths[0]
    steps = at.dataframe[1].value
    assert list(steps.iloc[:, 2])[-3:] == [f"{t} × {s}", f"{t} × {s}", f"{t} × 8"]  # scores, weights; context
    import re

    said = [re.search(r"at most (\d\.\de[+-]\d\d)", c.value) for c in at.caption]
    assert [float(m.group(1)) for m in said if m] and all(float(m.group(1)) <= 1e-5 for m in said if m)
