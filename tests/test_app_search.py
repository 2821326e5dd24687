"""AppTest for the Heads page's corpus search (issue 37): the bundled corpus searched on every bundled text model (its
index built at first use), the summary shifting with the layer, a head mask, an index the server lists, a damaged
one said in one sentence, and the tab in Chinese."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from mha_core.analysis.index.build import build_index, conllu_corpus
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME, GEMMA_NAME
from tests.conftest import SHARED_DATA, chart_json, download, open_app
from tests.i18n_check import untranslated
from tests.index_reference import nearest_pieces

PAGE = "views/heads.py"
TAB = "Search a corpus"


def matches_table(at: object) -> object:
    frames = [d.value for d in at.dataframe if "similarity" in d.value.columns or "相似度" in d.value.columns]
    assert len(frames) == 1
    return frames[0]


def summary_words(at: object) -> list[str]:
    figure = chart_json(at, "search_summary")
    return list(figure["data"][0]["y"])


@pytest.mark.slow
@pytest.mark.parametrize("model", [ENCODER_NAME, DECODER_NAME, GEMMA_NAME])
def test_the_bundled_corpus_is_searched_on_every_bundled_model(model):
    at = open_app(PAGE, model=model, view=TAB)
    assert not at.exception and not at.error and not at.warning
    table = matches_table(at)
    assert len(table) == 50
    assert table["similarity"].is_monotonic_decreasing and (table["similarity"] <= 1.0001).all()
    assert all("【" in context and "】" in context for context in table["in its sentence"])
    said = " ".join(m.value for m in at.markdown)
    assert "The 50 pieces nearest to **" in said
    layers = at.select_slider(key="search_layer").options
    assert len(layers) >= 2 and layers[0] == "0"
    first = summary_words(at)
    at.select_slider(key="search_layer").set_value(int(layers[0])).run()
    assert not at.exception
    assert summary_words(at) != first  # the nearest pieces change with the layer
    assert "part of speech" in matches_table(at).columns


def held_to_plain_cosines(at: object, layer: int, heads: tuple[int, ...]) -> None:
    """The tab's matches (its JSON download: sentence, position, score) against plain cosines over transformers' own
    vectors of the bundled corpus: the 50 best scores, and each match's own score (ties may swap)."""
    import json

    from mha_core.analysis.corpus.readers import bundled_corpus

    data = json.loads(download(at, "JSON: the matches"))
    corpus = bundled_corpus()  # one sentence a line, as the bundled index reads them
    places, scores = nearest_pieces(corpus, at.text_area(key="text").value, data["query"]["position"], layer, heads)
    found = np.array([m["score"] for m in data["matches"]])
    assert len(found) == 50 and np.abs(found - scores[:50]).max() <= 2e-5
    score_of = dict(zip(places, scores, strict=True))
    assert max(abs(score_of[m["sentence"], m["position"]] - m["score"]) for m in data["matches"]) <= 2e-5
    shown = matches_table(at)
    assert list(shown["sentence"]) == [m["sentence"] for m in data["matches"]]
    assert np.abs(shown["similarity"].to_numpy() - found).max() <= 5e-5  # the table's 4 digits


def test_a_head_mask_searches_by_those_heads(bundled):
    at = open_app(PAGE, view=TAB, search_layer="3")
    by_state = list(matches_table(at)["in its sentence"])
    held_to_plain_cosines(at, 3, ())
    at.multiselect(key="search_heads").set_value([0, 5]).run()
    assert not at.exception and not at.warning
    said = " ".join(m.value for m in at.markdown)
    assert ", by heads 0, 5" in said
    assert list(matches_table(at)["in its sentence"]) != by_state
    held_to_plain_cosines(at, 3, (0, 5))
    last = at.select_slider(key="search_layer").options[-1]
    at.select_slider(key="search_layer").set_value(int(last)).run()
    assert not at.exception and any("No head runs on the last layer" in c.value for c in at.caption)


def test_an_index_the_server_lists_and_a_damaged_one(bundled, tmp_path, monkeypatch):
    listed = tmp_path / "indexes"
    build_index(bundled, conllu_corpus(SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu", 40), [0, 3], listed / "ewt")
    monkeypatch.setenv("MHA_INDEX_DIR", str(listed))
    at = open_app(PAGE, view=TAB, search_index=str(listed / "ewt"))
    assert not at.exception and not at.warning
    options = at.selectbox(key="search_index").options
    assert len(options) == 2 and "en_ewt-ud-dev.conllu · " in options[1]
    assert at.select_slider(key="search_layer").options == ["0", "3"]
    assert set(matches_table(at)["sentence"]) <= set(range(40))
    shutil.copytree(listed / "ewt", listed / "damaged")
    faiss_file = listed / "damaged" / "L3.hidden.faiss"
    data = bytearray(faiss_file.read_bytes())
    data[len(data) // 3] ^= 0x55
    faiss_file.write_bytes(bytes(data))
    at = open_app(PAGE, view=TAB, search_index=str(listed / "damaged"), search_layer="3")
    assert not at.exception
    assert any("faiss is corrupted" in w.value for w in at.warning)  # (the page escapes the path's markdown)


@pytest.mark.slow  # the fast tier (make check) stays within 2 minutes
def test_the_tab_in_chinese_has_no_english_left(bundled):
    from mha_core.serving.menu import available_models

    at = open_app(PAGE, view=TAB, lang="zh")
    assert not at.exception and not at.warning
    names = [choice.name for choice in available_models()]
    left = untranslated(at, [*names, "exBERT", "spaCy"])
    assert not left, list(left.items())[:4]


@pytest.mark.slow
def test_a_chinese_class_searches_the_bundled_chinese_treebank_on_gemma():
    """Issue 42, item 12: the search had only English sentences; on Gemma in Chinese it opens on the bundled Chinese
    treebank's index (built at first use), whose matches are the treebank's sentences and words."""
    from mha_core import i18n
    from mha_core.analysis.corpus.readers import CHINESE_TREEBANK, read_conllu

    trees = read_conllu(CHINESE_TREEBANK)
    i18n.use("zh")
    try:
        at = open_app(PAGE, model=GEMMA_NAME, view=i18n.catalogue("zh").gettext(TAB), lang="zh")
        assert not at.exception and not at.error
        table = matches_table(at)
    finally:
        i18n.use("en")
    assert len(table) == 50
    for context, word, sentence in zip(table["所在句子"], table["词"], table["句子"], strict=True):
        marked = context[context.index("【") + 1:context.index("】")]
        parts = [p for p in context.replace("【", "").replace("】", "").split("…") if p]
        assert all(p in trees[int(sentence)].text for p in parts)  # the treebank's own sentence, by its id
        assert word in trees[int(sentence)].words and (marked in word or word in marked)  # a piece, its word
