"""AppTest for the Encoder–decoder page: the bundled Whisper hears the spoken sentence and every tab draws (in
English and Chinese); tiny text encoder–decoders (T5, BART) show the three kinds of maps and the word alignment; a
tiny Whisper without a feature extractor's settings runs; a one-stack model is offered Whisper (the other pages on an
encoder–decoder: tests/test_app_stacks.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_core.engine.loading.bundled import ENCODER_NAME, WHISPER_NAME
from mha_core.i18n import catalogue
from mha_core.teaching.examples import SPOKEN
from tests.conftest import bundled_model, decode, open_app
from tests.i18n_check import untranslated
from tests.test_seq2seq import transformers_maps
from tests.tiny_models import make_tiny_seq2seq

PAGE = "views/seq2seq.py"
TABS = ("Cross-attention", "Every head", "Word timestamps", "Encoder over time")


@pytest.fixture(scope="module")
def tiny_seq2seq(tmp_path_factory):
    root = tmp_path_factory.mktemp("seq2seq_models")
    for family in ("t5", "bart", "whisper"):
        make_tiny_seq2seq(family, root / family)
    return root


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_whisper_hears_the_spoken_sentence_and_every_tab_draws():
    at = open_app(PAGE)  # the page opens on the bundled Whisper, the sentence spoken by espeak-ng
    assert not at.exception and not at.error and at.query_params.get("model") is None
    assert any(SPOKEN["en"].rstrip(".") in m.value.replace("\\", "") for m in at.markdown)
    runs = {}
    for tab in TABS:
        runs[tab] = at = open_app(PAGE, x_tab=tab)
        assert not at.exception and not at.error, tab
        assert at.get("plotly_chart"), tab
    assert len(at.dataframe) == 1  # the encoder over time: one position's most-weighted keys
    assert len(runs["Word timestamps"].dataframe[0].value) == 11  # a row per word, its start and end


@pytest.mark.slow
def test_whisper_cross_attention_tab_shows_transformers_weights():
    """Layer 4, head 2 as drawn under the spectrogram: each written piece's row over the speech, against
    transformers' own Whisper (its feature extractor, its generate, its cross_attentions) on the page's audio."""
    import math

    import torch
    from transformers import WhisperFeatureExtractor

    from mha_core.engine.seq2seq.audio import RATE, read_audio
    from mha_core.serving.computed.seq2seq import spoken_of
    from mha_core.serving.server import Server

    at = open_app(PAGE, x_tab="Cross-attention", x_layer="4", x_head="2")
    assert not at.exception and not at.error
    (spec,) = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if "under the spectrogram" in c.proto.spec]
    shown = decode(spec["data"][1]["z"])  # (rows, speech positions)
    whisper, clip = bundled_model(WHISPER_NAME), read_audio(spoken_of(Server(), SPOKEN["en"], "en"))
    features = WhisperFeatureExtractor.from_pretrained(whisper.model_dir)(clip.samples, sampling_rate=RATE,
                                                                          return_tensors="pt").input_features
    with torch.inference_mode():
        ids = whisper.model.generate(features, language="en", task="transcribe", return_dict_in_generate=True)
        cross = whisper.model(input_features=features, decoder_input_ids=ids["sequences"],
                              output_attentions=True).cross_attentions[4][0, 2].numpy()  # (T,1500)
    prompt = 4  # start of transcript, language, task, no timestamps: row 3 reads the last and writes the first piece
    theirs = cross[prompt - 1: prompt - 1 + shown.shape[0], : shown.shape[1]]
    assert shown.shape[0] == len(ids["sequences"][0]) - prompt + 1 and shown.shape[1] == math.ceil(clip.seconds / 0.02)
    assert np.abs(shown - theirs).max() <= 1e-4


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_whisper_page_in_chinese_has_no_english_left():
    from mha_core.serving.computed.seq2seq import heard_of
    from mha_core.serving.menu import available_models
    from views._state import server

    zh, names = catalogue("zh").gettext, [choice.name for choice in available_models()]
    # what the pages hear, asked of the process's server (the pages' own transcript, computed once for both)
    heard = heard_of(server(), bundled_model(WHISPER_NAME), SPOKEN["zh"]).text  # the user's text is only what was
    for tab, task in [(tab, "transcribe") for tab in TABS] + [(TABS[0], "translate")]:  # heard (every markdown
        at = open_app(PAGE, lang="zh", x_tab=zh(tab), task=task)  # line was taken for it: the check could not fail)
        assert not at.exception, tab
        assert any(heard in m.value for m in at.markdown), tab
        spoken = [box.value for box in at.text_input]
        english = [m.value.rsplit("**", 1)[-1] for m in at.markdown if task == "translate" and "Whisper" in m.value]
        left = untranslated(at, [*names, *spoken, heard, *english, "L", "H", "espeak-ng", "Whisper", "WAV", "FLAC",
                                 "OGG", "MP3", "openai-whisper"])
        assert not left, (tab, list(left.items())[:5])
    # whisper-base loops translating espeak-ng's Mandarin: the decode stopped where its text first compressed above
    # 2.4:1, and the page says so under its warning
    assert len(at.warning) == 1 and any("解码在第" in c.value and "224" in c.value for c in at.caption)


@pytest.mark.parametrize("family", ["t5", "bart"])
def test_text_encoder_decoders_show_three_kinds_and_the_alignment(family, tiny_seq2seq, monkeypatch):
    """Each kind's map as drawn (layer 1, head 2) against transformers' own encoder_attentions, decoder_attentions
    and cross_attentions."""
    from mha_core import load_model
    from mha_core.engine.seq2seq.forward import text_targets

    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_seq2seq))
    model = load_model(tiny_seq2seq / family)
    target_ids = text_targets(model, ["Das Tier ging nicht."]).input_ids[0].tolist()  # the start piece first
    theirs = None  # every kind from one forward of the page's sentence
    for kind in ("encoder", "decoder", "cross"):
        at = open_app(PAGE, model=family, kind=kind, target="Das Tier ging nicht.", x_layer="1", x_head="2")
        assert not at.exception and not at.error, (family, kind)
        assert len(at.get("plotly_chart")) == 1
        assert len(at.dataframe) == (2 if kind == "cross" else 0)  # cross: the word alignment, the steps
        shown = decode(json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["z"])
        theirs = theirs or transformers_maps(model, at.text_area(key="text").value, target_ids)
        assert shown.shape == theirs[kind][1, 2].shape, (family, kind)
        assert np.abs(shown - theirs[kind][1, 2]).max() <= 1e-5, (family, kind)
    own = open_app(PAGE, model=family)  # no target: the model writes its own
    assert not own.exception and any("Target" in m.value for m in own.markdown)


def test_a_tiny_whisper_without_a_preprocessor_config_runs(tiny_seq2seq, monkeypatch):
    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_seq2seq))
    at = open_app(PAGE, model="whisper")
    assert not at.exception and not at.error and at.get("plotly_chart")


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
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


@pytest.mark.slow
def test_the_encoder_over_time_opens_on_the_speech_and_names_its_times():
    """Issue 42, item 7: a 3.5 s clip's region opened at rows 1,436–1,499 and its row at 29.98 s, in the padding."""
    import math

    from mha_core.engine.seq2seq.audio import read_audio
    from mha_core.engine.seq2seq.frames import POSITION_SECONDS
    from mha_core.serving.computed import seq2seq as computed_seq2seq
    from mha_core.serving.server import Server

    at = open_app(PAGE, x_tab="Encoder over time")
    assert not at.exception
    clip = read_audio(computed_seq2seq.spoken_of(Server(), SPOKEN["en"], "en"))
    speech = math.ceil(clip.seconds / POSITION_SECONDS)  # the positions holding the clip
    region, query = at.number_input(key="zoom_query").value, at.number_input(key="long_query").value
    assert 0 <= region < speech and speech - 2 <= query < speech, (region, query, speech)
    table = at.dataframe[0].value
    assert "time" in table.columns and "piece" not in table.columns
    assert all(str(t).endswith(" s") for t in table["time"])


@pytest.mark.slow
def test_a_page_that_reads_another_model_than_the_page_before_says_so_with_a_way_back():
    """Issue 42, item 8: the Encoder–decoder page showed Whisper; Heads then showed MiniLM without a word."""
    at = open_app(PAGE)
    assert not at.exception and not [i for i in at.info if "page before" in i.value]
    at.switch_page("views/heads.py").run()
    assert not at.exception
    note = next(i.value for i in at.info if "page before" in i.value).replace("\\", "")
    assert ENCODER_NAME in note and WHISPER_NAME in note
    back = next(b for b in at.button if b.key == "read_previous_model")
    back.click().run()
    assert not at.exception and at.selectbox(key="model").value == WHISPER_NAME
    at.switch_page("views/roles.py").run()  # a model the visitor chose: no note
    assert not at.exception and not [i for i in at.info if "page before" in i.value]
