"""AppTest for the "Across a corpus" page (issue 13): the head map, the query-key view, URL state, uploads."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core import run
from mha_core.analysis.corpus import readers as corpora
from mha_core.analysis.corpus.passes import corpus_pass
from mha_core.analysis.heads.qk_view import TOP_TOKENS
from tests.conftest import SHARED_DATA, chart_json, corpus_uploader, decode, open_app

PAGE = "views/corpus.py"
QK = "Query–key view of one head"


@pytest.fixture(scope="module")
def bundled_corpus(bundled):
    return corpus_pass(bundled, corpora.bundled_corpus())


@pytest.mark.slow  # a pass over the whole bundled corpus
def test_the_head_map_shows_every_head_once_and_the_matrix(bundled, bundled_corpus):
    at = open_app(PAGE)
    assert not at.exception and not at.error
    heads = sorted(tuple(c) for trace in chart_json(at, "head_map")["data"] for c in trace["customdata"])
    assert heads == sorted(bundled_corpus.heads)
    shown = decode(chart_json(at, "distances")["data"][0]["z"])
    assert np.allclose(shown, bundled_corpus.distance, atol=1e-9)
    texts = corpora.bundled_corpus()  # derived, not typed in: every sentence's pieces as the tokenizer makes them
    pieces = sum(len(bundled.tokenizer(text)["input_ids"]) for text in texts)
    assert any(f"{pieces:,} query tokens of {len(texts):,} sentences" in c.value for c in at.caption)
    assert len(at.dataframe) == 1 and len(at.get("download_button")) == 1


@pytest.mark.slow  # a pass over the whole bundled corpus
def test_the_query_key_view_reads_its_state_from_the_url(bundled, bundled_corpus):
    at = open_app(PAGE, g_view=QK, g_layer="2", g_head="5", g_colour="token")
    assert not at.exception and not at.error
    assert (at.selectbox(key="g_layer").value, at.selectbox(key="g_head").value) == (2, 5)
    figure = chart_json(at, "qk_points")
    assert {t["type"] for t in figure["data"]} == {"scattergl"} and len(figure["data"]) <= TOP_TOKENS + 1
    pieces = sum(len(bundled.tokenizer(text)["input_ids"]) for text in corpora.bundled_corpus())
    assert sum(len(t["customdata"]) for t in figure["data"]) == 2 * pieces  # every piece as a query and as a key
    assert "L2 H5" in figure["layout"]["title"]["text"]
    assert any("translated by one vector c" in c.value for c in at.caption)


@pytest.mark.slow  # a pass over the whole bundled corpus
def test_a_chosen_query_lists_the_keys_it_attends_to(bundled, bundled_corpus):
    label = bundled_corpus.labels[int(bundled_corpus.starts[7]) + 4]
    at = open_app(PAGE, g_view=QK, g_layer="1", g_head="3", g_sentence="7", g_query=f"4: {label}")  # as in the URL
    assert not at.exception and at.selectbox(key="g_query").value == 4
    table = at.dataframe[0].value
    text = bundled_corpus.texts[7]
    row = run(bundled, text, path="explicit").head_map(1, 3)[0, 4].numpy()
    assert list(table["position"]) == list(np.argsort(-row, kind="stable")[:5])
    assert np.allclose(table["attention"], np.sort(row)[::-1][:5], atol=1e-4)
    assert any(t.value == text for t in at.text)


def test_the_decoder_view_names_rope_and_the_key_value_head(listed_decoder):
    """On a corpus of three lines (the bundled corpus's 312 sentences cost SmolLM2 about 20 s: the caption is the
    same on any corpus)."""
    at = open_app(PAGE, model="SmolLM2-135M-Instruct", g_source="Uploaded text file", g_view=QK, g_layer="3",
                  g_head="7")
    lines = "The cat sat on the mat.\nA dog barked twice.\nRain fell all night.\n"
    corpus_uploader(at, 0).set_value(("lines.txt", lines.encode(), "text/plain")).run()
    assert not at.exception and not at.error and at.selectbox(key="g_head").value == 7
    caption = next(c.value for c in at.caption if "translated" in c.value)
    assert "key/value head 2" in caption and "after RoPE" in caption


@pytest.fixture
def listed_decoder(decoder):
    return decoder  # loaded (converted once) before the page asks for it


@pytest.mark.parametrize("source", ["Uploaded CoNLL-U", "Uploaded text file"])
def test_uploads_give_their_own_map(source):
    at = open_app(PAGE, g_source=source)
    assert not at.exception and any("Upload" in i.value for i in at.info)
    if source == "Uploaded CoNLL-U":
        blocks = (SHARED_DATA / "ud-ewt" / "en_ewt-ud-dev.conllu").read_text(encoding="utf-8").split("\n\n")[40:52]
        name, data = "ewt.conllu", "\n\n".join(blocks) + "\n"
    else:
        name, data = "lines.txt", "The cat sat on the mat.\n\nA dog barked twice.\nRain fell all night.\n"
    corpus_uploader(at, 0).set_value((name, data.encode(), "text/plain")).run()
    assert not at.exception and not at.error
    n = 12 if source == "Uploaded CoNLL-U" else 3
    assert any(f"of {n} sentences" in c.value for c in at.caption)


def test_an_empty_text_file_is_one_message():
    at = open_app(PAGE, g_source="Uploaded text file")
    corpus_uploader(at, 0).set_value(("empty.txt", b"\n  \n", "text/plain")).run()
    assert not at.exception
    assert len(at.error) == 1 and "no sentences found" in at.error[0].value


@pytest.mark.slow  # a pass over the whole bundled corpus
def test_gap_heads_scored_on_the_roles_page_colour_the_map(bundled, bundled_corpus):
    from mha_core.analysis.coref.gap import CorefResult

    layer, head = (int(i) for i in np.argwhere(bundled_corpus.roles.labels() == "other")[0])  # no positional label
    correct = np.zeros((bundled.n_layers, bundled.n_heads), dtype=np.int64)
    correct[layer, head] = 90  # one head far above the nearest-candidate baseline
    gap = CorefResult(examples=100, skipped=0, correct=correct, always_a=0.5, always_b=0.5, nearest=0.5)
    assert gap.head_labels() == {(layer, head): "coreference"}
    at = open_app(PAGE)
    at.session_state["gap_results"] = {str(bundled.model_dir): gap}
    at.run()
    assert not at.exception
    traces = {t["name"]: t["customdata"] for t in chart_json(at, "head_map")["data"]}
    assert traces["coreference"] == [[layer, head]]


@pytest.mark.long  # a pass over the Chinese treebank on Gemma 3, unless make prepare kept it (as make test does)
def test_the_chinese_treebank_is_a_corpus_with_its_own_trees(gemma):
    """Issue 42, item 12: Across a corpus reads the bundled Chinese treebank (its texts as annotated) and labels the
    heads from its gold trees, with no parser and no upload; on the bundled model that reads Chinese as words."""
    at = open_app(PAGE, model=gemma.name, g_source="Chinese treebank", g_syntax="true")
    assert not at.exception and not at.error
    from mha_core.serving.computed.corpus import head_distances_of
    from mha_core.serving.server import no_wait
    from views._state import server

    trees = corpora.chinese_treebank()
    texts = [t.text for t in trees]
    # Asked of the server by the treebank's key: the page's own distances when the page asked for them, else read or
    # computed here from the treebank's texts; either way a pass of exactly those texts (it keeps what it read).
    expected = head_distances_of(server(), gemma, f"corpus:{corpora.CHINESE_TREEBANK}", texts, no_wait)
    assert expected.texts == tuple(texts) and not expected.selection.left_out
    heads = sorted(tuple(c) for trace in chart_json(at, "head_map")["data"] for c in trace["customdata"])
    assert heads == sorted(expected.heads)
    shown = decode(chart_json(at, "distances")["data"][0]["z"])
    assert np.allclose(shown, expected.distance, atol=1e-9)  # the same pass as over the treebank's texts
    assert any(f"of {len(trees)} sentences" in c.value for c in at.caption)
