"""AppTest: every page runs on an encoder–decoder, in English and Chinese. Tiny T5 and BART: the Heads, Roles and
Walkthrough pages read each of the three kinds of attention (the sidebar's picker: the encoder alone, as an
encoder; the decoder's and cross-attention from the seq2seq run), Predictions shows what the decoder writes,
Parameters both stacks, the other pages the encoder. The bundled Whisper hears the page's sentence spoken; the pages
that read a sentence's pieces with one stack refuse it in one sentence and show the first listed model."""

from __future__ import annotations

import re

import pytest

from mha_core import i18n
from mha_core.engine.loading.bundled import ENCODER_NAME, WHISPER_NAME
from mha_core.teaching.examples import EXAMPLES
from tests.conftest import open_app
from tests.i18n_check import untranslated
from tests.tiny_models import make_tiny_seq2seq

STACK_PAGES = ("views/heads.py", "views/roles.py", "views/walkthrough.py")
WHOLE_PAGES = ("views/predictions.py", "views/parameters.py", "views/seq2seq.py")
ENCODER_PAGES = ("views/coreference.py", "views/contributions.py", "views/corpus.py", "views/explanations.py")
KINDS = ("encoder", "decoder", "cross")


@pytest.fixture(scope="module")
def tiny_seq2seq(tmp_path_factory):
    root = tmp_path_factory.mktemp("stack_models")
    for family in ("t5", "bart"):
        make_tiny_seq2seq(family, root / family)
    return root


def runs(model: str, lang: str) -> dict[tuple[str, str], object]:
    """Every page on `model` (the pages with a picker once per kind of attention)."""
    out = {}
    for page in STACK_PAGES:
        for kind in KINDS:
            out[page, kind] = open_app(page, model=model, lang=lang, stack_kind=kind)
    for page in WHOLE_PAGES + ENCODER_PAGES:
        out[page, ""] = open_app(page, model=model, lang=lang)
    return out


def user_texts(at: object) -> list[str]:
    """The sentence, what the tiny model wrote (random pieces), and the pieces it reads."""
    shown = [box.value for box in at.text_area] + [box.value for box in at.text_input]
    shown += [example.text for example in EXAMPLES]  # offered in English on models that read no Chinese
    shown += [m.value.split("：", 1)[-1].replace("\\", "") for m in at.markdown if "：" in m.value]
    return shown + [w for s in shown for w in re.findall(r"[A-Za-z#]+", s)]


def written_pieces(path: object, sentence: str) -> list[str]:
    """The pieces a tiny model writes for `sentence` (random words: the user's text, as the page shows it)."""
    from mha_core import load_model
    from mha_core.analysis.seq2seq.decode import decode

    model = load_model(path)
    return [p.strip("#") for p in model.tokenizer.convert_ids_to_tokens(list(decode(model, sentence, 64).ids))]


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
@pytest.mark.parametrize("family", ["t5", "bart"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_runs_on_a_tiny_text_encoder_decoder(family, lang, tiny_seq2seq, monkeypatch):
    from mha_core.serving.menu import available_models

    monkeypatch.setenv("MHA_MODELS_DIR", str(tiny_seq2seq))
    names = [choice.name for choice in available_models()]
    written = written_pieces(tiny_seq2seq / family, open_app(model=family, lang=lang).text_area(key="text").value)
    for (page, kind), at in runs(family, lang).items():
        assert not at.exception and not at.error, (page, kind, [e.value for e in at.exception + at.error])
        assert at.selectbox(key="model").value == family, (page, kind)
        if lang == "zh":
            left = untranslated(at, [*names, str(tiny_seq2seq / family), "T5", "BART", *written, *user_texts(at)])
            assert not left, (page, kind, list(left.items())[:3])
        if page == "views/heads.py" and kind != "encoder":  # every head of the kind, then the chosen one
            assert len(at.get("plotly_chart")) == 2 and at.get("download_button"), kind
        if page == "views/heads.py" and kind == "encoder":  # the encoder read as an encoder: the page's own tabs
            assert len(at.tabs) == 5
        if page == "views/walkthrough.py" and kind == "cross":  # Q from the decoder, K and V from the encoder
            shapes = [shape.split(" × ") for shape in at.dataframe[0].value.iloc[:, 2]]
            source = shapes[0][0]  # the encoder's output: S × D
            assert shapes[-2][1] == source and shapes[-2][0] != source  # the weights: T × S


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_every_page_runs_on_whisper_in_english_and_chinese():
    spoken = "The animal didn't cross the street because it was too tired."
    for lang in ("en", "zh"):
        for page in STACK_PAGES + WHOLE_PAGES:
            at = open_app(page, model=WHISPER_NAME, lang=lang, text=spoken)
            assert not at.exception and not at.error, (page, lang, [e.value for e in at.exception + at.error])
            if page in STACK_PAGES + ("views/predictions.py",):  # they hear the sentence, word for word
                assert any(spoken.rstrip(".") in m.value.replace("\\", "") for m in at.markdown), page
        for page in ENCODER_PAGES:  # pieces read by one stack: refused in one sentence, the first model shown
            at = open_app(page, model=WHISPER_NAME, lang=lang, text=spoken)
            assert not at.exception and not at.error, page  # a notice: the model works on the other pages
            (said,) = [m for m in (i.value.replace("\\", "") for i in at.info) if WHISPER_NAME in m]
            assert WHISPER_NAME in said and ENCODER_NAME in said, said
            assert ("hears audio" in said) == (lang == "en") and ("音频" in said) == (lang == "zh")


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_whisper_on_the_heads_page_reads_each_kind_and_its_encoder_over_frames():
    zh = i18n.catalogue("zh").gettext
    for kind in KINDS:
        at = open_app("views/heads.py", model=WHISPER_NAME, stack_kind=kind)
        assert not at.exception and not at.error, kind
        charts = at.get("plotly_chart")
        # cross: every head, then one over the spectrogram; decoder: every head, one head; encoder: every head,
        # one head over the speech, the exact region, one position's row, the summaries and their profiles
        assert len(charts) == (6 if kind == "encoder" else 2), (kind, len(charts))
    roles = open_app("views/roles.py", model=WHISPER_NAME, lang="zh", stack_kind="cross")
    assert not roles.exception and any(zh("**Alignment heads found** (✓): {found}. **Published with the model** "
                                          "(●): {published}.").split("（")[0] in m.value for m in roles.markdown)


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_whisper_on_the_roles_page_names_its_decoder_and_encoder_heads():
    """Issue 42, item 6: Roles said "choose encoder self-attention" on the decoder and "choose cross-attention" on
    the encoder, a circle. The decoder's heads are named by the Roles page's rules, its previous-piece share equal
    to a naive loop over the decoder's maps; the encoder's are summarised over the frames."""
    import numpy as np

    from mha_core.serving.computed import seq2seq as computed_seq2seq
    from tests.conftest import ANIMAL_TIRED, bundled_model
    from views._state import server

    decoder = open_app("views/roles.py", model=WHISPER_NAME, stack_kind="decoder", text=ANIMAL_TIRED)
    assert not decoder.exception and not decoder.error and not decoder.info
    assert any("role_grid" in c.proto.id for c in decoder.get("plotly_chart"))
    shared, whisper = server(), bundled_model(WHISPER_NAME)  # the page's own roles and what it heard, held there
    roles = computed_seq2seq.decoder_roles_of(shared, whisper, ANIMAL_TIRED)
    maps = np.asarray(computed_seq2seq.heard_of(shared, whisper, ANIMAL_TIRED).result.decoder.text_attention(0))
    n = maps.shape[-1]  # every query row counts, the first (no previous piece) with 0
    previous = np.array([[sum(maps[layer, head, i, i - 1] for i in range(1, n)) / n
                          for head in range(maps.shape[1])] for layer in range(maps.shape[0])])
    assert np.allclose(roles.metrics["prev"], previous, atol=1e-5)
    encoder = open_app("views/roles.py", model=WHISPER_NAME, stack_kind="encoder", text=ANIMAL_TIRED)
    assert not encoder.exception and not encoder.error and not encoder.info
    assert len(encoder.get("plotly_chart")) == 2  # the summaries' grid and their profiles


@pytest.mark.slow  # Whisper's whole page: the slow tier's (README)
def test_whisper_s_walkthrough_draws_the_four_steps_of_a_cross_attention_head():
    """Issue 42, item 6: the Walkthrough's cross-attention was a table of shapes; it draws Q and K, the scores, the
    weights (and the share each row puts on the padding) and the context, each the size the table states."""

    from tests.conftest import ANIMAL_TIRED, decode

    at = open_app("views/walkthrough.py", model=WHISPER_NAME, stack_kind="cross", text=ANIMAL_TIRED)
    assert not at.exception and not at.error
    steps = [json_of(c) for c in at.get("plotly_chart")]
    assert len(steps) == 5
    q, k, scores, weights, context = (decode(s["data"][0]["z"]) for s in steps)
    t, s = weights.shape
    assert q.shape[0] == t == context.shape[0] and k.shape[0] == s == scores.shape[1] and q.shape[1] == k.shape[1]
    outside = 1 - weights.sum(-1)  # the rest of each row is on the window's padding silence, and said so
    assert (outside >= -1e-3).all() and f"{outside.mean():.0%}" in " ".join(c.value for c in at.caption)
    table = at.dataframe[0].value.iloc[:, 2]
    assert table.iloc[-1] == f"{t} × {q.shape[1]}"  # the context, as the table says


def json_of(element) -> dict:
    import json

    return json.loads(element.proto.spec)
