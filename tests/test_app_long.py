"""Issue 24 in the app: a text over 1,024 pieces on the Heads page (summaries, downsampled map, exact zoom with
labels, one query's row and its top keys, exports), the limit other pages state, the .txt upload, and the Roles
page's long-context roles; on a tiny GQA llama with 4,096 positions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mha_core import load_model
from mha_core.analysis.long.text import map_block, run_long
from tests.conftest import chart_json, decode, long_text, open_app


@pytest.fixture(scope="module")
def long_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import make_tiny

    root = tmp_path_factory.mktemp("long_models")
    make_tiny("llama", root / "longllama", max_position_embeddings=4096)
    return root


@pytest.fixture
def served(long_llama, monkeypatch) -> Path:
    monkeypatch.setenv("MHA_MODELS_DIR", str(long_llama))
    return long_llama / "longllama"


TEXT = long_text(1300)


def chart_ids(at) -> set[str]:
    names = ("long_map", "long_zoom", "long_row", "long_summary", "long_profiles", "head_map", "overview")
    return {name for c in at.get("plotly_chart") for name in names if name in c.proto.id}


def test_a_long_text_gets_summaries_a_downsampled_map_and_an_exact_zoom(served):
    at = open_app(model="longllama", text=TEXT, layer="1", head="3")
    assert not at.exception and not at.error
    assert chart_ids(at) == {"long_map", "long_zoom", "long_summary", "long_profiles"}  # no full-map overview
    assert any("A long text" in i.value for i in at.info)
    result = run_long(load_model(served), TEXT)
    n = result.lengths[0]
    assert n > 1024
    zoom = chart_json(at, "long_zoom")["data"][0]
    assert zoom["y"][0] == f"{n - 64} {result.labels[0][n - 64]}"  # the last 64 rows, labelled by position
    expected = map_block(result, 0, 1, slice(3, 4), range(n - 64, n), range(64))[0].numpy()
    np.testing.assert_allclose(decode(zoom["z"]), expected, atol=1e-6)
    pooled = decode(chart_json(at, "long_map")["data"][0]["z"])
    assert pooled.shape == (-(-n // 2),) * 2  # 1,000 cells a side at most: blocks of 2
    at.number_input(key="zoom_key").set_value(100).run()
    assert chart_json(at, "long_zoom")["data"][0]["x"][0].startswith("100 ")
    at.selectbox(key="summary").select("distance").run()
    assert "mean attended distance" in chart_json(at, "long_summary")["layout"]["title"]["text"]


def test_one_query_row_lists_its_top_keys_and_the_exports(served):
    at = open_app(model="longllama", text=TEXT, long_view="One token", long_query="1200")
    assert not at.exception and "long_row" in chart_ids(at)
    row = decode(chart_json(at, "long_row")["data"][0]["y"])
    expected = map_block(run_long(load_model(served), TEXT), 0, 0, slice(0, 1), range(1200, 1201), range(len(row)))
    np.testing.assert_allclose(row, expected[0, 0].numpy(), atol=1e-6)
    top = at.dataframe[0].value
    assert len(top) == 10 and list(top.iloc[:, 0]) == list(np.argsort(-row, kind="stable")[:10])
    at = open_app(model="longllama", text=TEXT, long_view="Export")
    assert {b.label for b in at.get("download_button")} >= {"CSV: every head's summaries"}


def test_other_pages_say_where_they_stop(served):
    at = open_app("views/contributions.py", model="longllama", text=TEXT)
    assert not at.exception
    said = [w.value for w in at.warning if "stops at 1,024 pieces" in w.value]
    assert len(said) == 1 and "Heads page reads up to 4,096" in said[0]  # once, though two views read the text


def test_the_roles_page_shows_sinks_as_the_text_grows(served):
    at = open_app("views/roles.py", model="longllama", source="Long texts")
    assert not at.exception
    sinks = chart_json(at, "sink_growth")
    assert [t["name"] for t in sinks["data"]] == ["512 pieces", "2,048 pieces", "4,096 pieces"]  # its own limit
    assert len(at.dataframe[0].value) == 8  # the ten strongest sinks, of the tiny model's 2 × 4 heads
    assert any("needs a model that predicts the next piece" in i.value for i in at.info)  # no language-model head


def text_uploader(at):
    return next(u for u in at.get("file_uploader") if "text_file" in u.proto.id)


def test_a_txt_file_fills_the_sentence_box_and_a_bad_one_says_why():
    at = open_app()
    typed = at.text_area(key="text").value
    text_uploader(at).set_value(("notes.txt", b"\xff\xfeh\x00i\x00", "text/plain")).run()
    said = at.error[0].value.replace("\\", "")  # literal() escapes markdown
    assert at.text_area(key="text").value == typed and "notes.txt: the file is UTF-16" in said
    text_uploader(at).set_value(("big.txt", b"a " * 100_001, "text/plain")).run()
    assert at.text_area(key="text").value == typed and "at most 200,000 are read" in at.error[0].value.replace("\\", "")
    text_uploader(at).set_value(("story.txt", "\ufeffThe cat sat. It slept.".encode(), "text/plain")).run()
    assert not at.exception and not at.error
    assert at.text_area(key="text").value == "The cat sat. It slept."


@pytest.mark.parametrize("query", [{"long_view": "单个头"}, {"long_view": "单个标记"}, {"long_view": "导出"}])
def test_the_long_views_in_chinese_have_no_english_left(served, query):
    import re

    from tests.i18n_check import EXAMPLE_TEXTS, untranslated

    at = open_app(model="longllama", text=TEXT, lang="zh", **query)
    assert not at.exception
    from mha_core.serving.menu import available_models

    names = [c.name for c in available_models()]  # the model list
    user = [TEXT, *names, str(served), *EXAMPLE_TEXTS, *re.findall(r"[A-Za-z]+", TEXT)]
    assert not untranslated(at, user), list(untranslated(at, user).items())[:5]
    at = open_app("views/roles.py", model="longllama", source="长文本", lang="zh")
    assert not at.exception and not untranslated(at, user), list(untranslated(at, user).items())[:5]


def test_a_long_text_the_model_cannot_read_says_so(served):
    """The tiny llama's tokenizer reads Chinese characters as [UNK]: the long view says so, as the short one does."""
    at = open_app(model="longllama", text="玛丽把书给了约翰，因为她已经读过了。" * 120)
    assert not at.exception and any("A long text" in i.value for i in at.info)
    assert len(at.warning) == 1 and "cannot read 1920 of the text" in at.warning[0].value


def test_the_roles_long_texts_fit_a_model_with_few_positions(tmp_path, monkeypatch):
    """600 positions: sinks at 512 and 600 pieces, the needle slider at 512 (its default was 600, not an option)."""
    from tests.tiny_models import make_tiny

    make_tiny("llama", tmp_path / "short", max_position_embeddings=600)
    monkeypatch.setenv("MHA_MODELS_DIR", str(tmp_path))
    at = open_app("views/roles.py", model="short", source="Long texts")
    assert not at.exception
    assert [t["name"] for t in chart_json(at, "sink_growth")["data"]] == ["512 pieces", "600 pieces"]
    assert at.select_slider(key="needle_length").value == 512
