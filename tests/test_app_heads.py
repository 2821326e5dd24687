"""AppTest for the heads page: views, options, URL state, bad input."""

from __future__ import annotations

import io

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import (
    ANIMAL_WIDE,
    chart_json,
    decode,
    download,
    open_app,
    transformers_attentions,
    transformers_encoder,
)


def start(**query: str) -> AppTest:
    return open_app(**query)


def head_axis(at: AppTest) -> list[str]:
    return chart_json(at, "head_map")["data"][0]["x"]


def chart_keys(at: AppTest) -> set[str]:
    keys = ("overview", "head_map", "line_view", "token_grid")
    return {k for c in at.get("plotly_chart") for k in keys if k in c.proto.id}


def test_default_sentence_renders_overview_and_head():
    at = start()
    assert not at.exception and not at.error
    assert chart_keys(at) == {"overview", "head_map"}  # other tabs run only when opened
    assert any("path" in c.value and "backend" in c.value for c in at.caption)
    assert head_axis(at)[0] == "0 [CLS]"


def test_each_tab_renders_its_view():
    at = start(view="One layer")
    assert chart_keys(at) == {"overview", "line_view"} and not at.exception
    at = start(view="One token")
    assert chart_keys(at) == {"overview", "token_grid"} and not at.exception
    grid = chart_json(at, "token_grid")
    assert "'it' to 'animal'" in grid["layout"]["title"]["text"]  # the default pair for the default sentence
    assert len(at.dataframe[0].value) == 72  # top keys for every layer x head
    at = start(view="Export")
    assert not at.exception
    assert {b.label for b in at.get("download_button")} >= {"CSV: this head", "JSON: this head", "JSON: all heads"}


def test_the_export_tab_downloads_transformers_weights():
    """The payloads themselves (not their labels): every head's JSON, one head's JSON and CSV, against transformers'
    eager BertModel on the page's sentence."""
    import csv
    import json

    at = start(view="Export")
    theirs, tokens = transformers_attentions(at.text_area(key="text").value)  # (L,H,T,T)
    layer, head = at.selectbox(key="layer").value, at.selectbox(key="head").value
    every = json.loads(download(at, "JSON: all heads"))
    assert every["tokens"] == tokens and np.abs(np.array(every["attention"]) - theirs).max() <= 1e-5
    one = json.loads(download(at, "JSON: this head"))
    assert one["heads"] == [[layer, head]] and np.abs(np.array(one["attention"][0]) - theirs[layer, head]).max() <= 1e-5
    rows = list(csv.DictReader(io.StringIO(download(at, "CSV: this head").decode())))
    assert len(rows) == len(tokens) ** 2 and {(r["layer"], r["head"]) for r in rows} == {(str(layer), str(head))}
    weights = np.zeros_like(theirs[layer, head])
    for r in rows:
        weights[int(r["query_index"]), int(r["key_index"])] = float(r["weight"])
    assert np.abs(weights - theirs[layer, head]).max() <= 1e-5


def test_options_change_the_views():
    at = start()
    at.checkbox(key="hide_special").check().run()
    assert "[CLS]" not in " ".join(head_axis(at))
    z = decode(chart_json(at, "head_map")["data"][0]["z"])
    assert np.allclose(z.sum(axis=1), 1.0, atol=1e-4)
    at.checkbox(key="hide_special").uncheck().run()
    at.text_area(key="text").input("Unbelievably, the tokenizer works.").run()
    at.checkbox(key="merge_words").check().run()
    assert "1 Unbelievably" in head_axis(at)
    at.checkbox(key="avg_heads").check().run()
    overview = chart_json(at, "overview")
    assert [t for t in overview["layout"]["xaxis"]["ticktext"]] == ["H0"]  # one column: the layer mean
    assert at.selectbox(key="head").disabled


def transformers_scores(text: str, layer: int, head: int) -> np.ndarray:
    """(T,T) one head's scores before the softmax, q·k/√d_head, from the query and key projections of transformers'
    own BertModel (forward hooks on the layer's query and key)."""
    import torch

    model, tokenizer = transformers_encoder()
    attention, caught = model.encoder.layer[layer].attention.self, {}
    hooks = [getattr(attention, name).register_forward_hook(lambda m, i, out, name=name: caught.update({name: out}))
             for name in ("query", "key")]
    try:
        with torch.inference_mode():
            model(**tokenizer(text, return_tensors="pt"))
    finally:
        for hook in hooks:
            hook.remove()
    d = model.config.hidden_size // model.config.num_attention_heads
    q, k = (caught[name][0, :, head * d:(head + 1) * d].double() for name in ("query", "key"))  # (T,d)
    return (q @ k.T / d**0.5).numpy()


def test_scores_toggle_shows_pre_softmax_scores():
    at = start()
    at.toggle(key="scores").set_value(True).run()
    spec = chart_json(at, "head_map")
    z = decode(spec["data"][0]["z"])
    assert (z < 0).any() and "before softmax" in spec["layout"]["title"]["text"]
    layer, head = at.selectbox(key="layer").value, at.selectbox(key="head").value
    theirs = transformers_scores(at.text_area(key="text").value, layer, head)
    assert z.shape == theirs.shape and np.abs(z - theirs).max() <= 1e-4 * np.abs(theirs).max()


def test_query_params_restore_the_view():
    at = start(layer="3", head="7", hide_special="true", text=ANIMAL_WIDE)
    assert not at.exception
    assert at.selectbox(key="layer").value == 3 and at.selectbox(key="head").value == 7
    assert at.checkbox(key="hide_special").value is True
    assert at.text_area(key="text").value == ANIMAL_WIDE
    assert "Layer 3, head 7" in chart_json(at, "head_map")["layout"]["title"]["text"]
    assert "wide" in " ".join(head_axis(at))


def test_picking_an_example_fills_the_box():
    at = start()
    at.selectbox(key="example").set_value(ANIMAL_WIDE).run()
    assert at.text_area(key="text").value == ANIMAL_WIDE


@pytest.mark.parametrize(("text", "expect"), [
    ("", "empty"),
    ("   \n\t  ", "empty"),
    ("\x00\x01\x02\x7f", "no word pieces"),
])
def test_bad_input_gets_a_message(text, expect):
    at = start()
    at.text_area(key="text").input(text).run()
    assert not at.exception
    assert any(expect in i.value for i in at.info)
    assert at.text_area(key="text").value == text  # nothing the user typed is lost


def test_huge_paste_is_cut_with_a_notice():
    at = start()
    at.text_area(key="text").input("word " * 20_000).run()  # 100,000 characters
    assert not at.exception
    assert any("cut" in w.value and "20,002" in w.value for w in at.warning)


def test_markup_and_special_tokens_render_as_text():
    at = start()
    at.text_area(key="text").input("<script>alert(1)</script> [SEP] <b>hi</b>").run()
    assert not at.exception
    axis = " ".join(head_axis(at))
    assert "<script>" not in axis and "<b>" not in axis and "&lt;" in axis
    assert axis.count("[SEP]") == 1 and "sep" in axis  # the typed [SEP] is three plain pieces


@pytest.mark.slow
def test_export_renders_a_png_with_system_chromium():
    at = start(view="Export")
    at.button(key="export_render").click().run()
    assert not at.exception
    from PIL import Image

    png = download(at, "Download PNG")  # the image itself: a PNG at twice the export's 1,100 px width
    assert png.startswith(b"\x89PNG") and Image.open(io.BytesIO(png)).size[0] == 2200


def test_a_bug_in_a_figure_is_a_bug_not_a_rendering_failure(monkeypatch):
    """Issue 34: the export caught every Exception around the figure's builder too, so a bug in a figure showed as
    "could not be rendered"; only the rendering (kaleido, Chromium) is a message now."""
    from mha_core.figures import charts

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the figure")

    at = start(view="Export")
    monkeypatch.setattr(charts, "overview_figure", broken)
    at.button(key="export_render").click().run()
    assert any("a bug in the figure" in str(e.value) for e in at.exception)
    assert not any("could not be rendered" in e.value for e in at.error)


def test_long_text_line_view_uses_a_window():
    at = start(view="One layer")
    at.text_area(key="text").input("word " * 120).run()
    assert not at.exception
    at.slider(key="line_start").set_value(30).run()
    spec = chart_json(at, "line_view")
    labels = [t for trace in spec["data"] if trace.get("mode") == "text" for t in trace["text"]]
    assert len(labels) == 2 * 60  # 60 tokens per side
    assert any("Showing tokens 30–89 of 122" in c.value for c in at.caption)


def test_sentence_survives_a_page_switch():
    at = start()
    at.text_area(key="text").input(ANIMAL_WIDE).run()
    at.switch_page("views/parameters.py").run()
    at.switch_page("views/heads.py").run()
    assert not at.exception
    assert at.text_area(key="text").value == ANIMAL_WIDE


def test_models_come_from_the_servers_list_and_a_bad_folder_says_why_once(tiny_dir, tmp_path, monkeypatch):
    root = tmp_path / "models"
    root.mkdir()
    (root / "tiny").symlink_to(tiny_dir)
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text("[1, 2]")
    monkeypatch.setenv("MHA_MODELS_DIR", str(root))
    at = start(model="tiny")  # the choice lives in the URL
    assert not at.exception
    assert at.selectbox(key="model").options == ["all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "gemma-3-270m",
                                                 "whisper-base", "dinov2-small-focus", "broken", "tiny"]
    assert any("2 layers × 4 heads" in c.value for c in at.caption)
    at.selectbox(key="model").select("broken").run()
    assert not at.exception
    assert len(at.error) == 1 and "broken cannot be used" in at.error[0].value
    assert "not a JSON object" in at.error[0].value
    assert any("6 layers × 12 heads" in c.value for c in at.caption)
    assert [w.key for w in at.text_input] == ["segment_b"]  # no free-text server path for visitors (a sentence)


def test_an_unknown_model_in_the_url_falls_back_to_the_default():
    at = start(model="../../etc")
    assert not at.exception and not at.error
    assert at.selectbox(key="model").value == "all-MiniLM-L6-v2"


@pytest.mark.parametrize("query", [
    {"view": "One token", "query": "99: nope", "key": "abc"},
    {"layer": "17", "head": "-3"},
    {"view": "No such tab", "hide_special": "maybe"},
])
def test_stale_or_bad_url_parameters_fall_back_to_defaults(query):
    at = start(**query)
    assert not at.exception and not at.error
    defaults = start(view="One token")
    for key in ("layer", "head"):  # the bad values are gone: the widgets show the page's own defaults
        assert at.selectbox(key=key).value == defaults.selectbox(key=key).value
    if "query" in query:
        assert at.selectbox(key="query").value == defaults.selectbox(key="query").value


def test_a_second_session_reuses_the_first_sessions_results_and_figures():
    from views._state import server

    text = "The lighthouse keeper counted eleven ships before the storm reached the harbour."
    first = open_app(text=text)
    assert not first.exception
    figures, results = server().stores["figures"], server().stores["results"]
    built, computed = figures.computed, results.computed
    second = open_app(text=text)  # another student, same sentence
    assert not second.exception
    assert (figures.computed, results.computed) == (built, computed)  # nothing recomputed, nothing rebuilt
    third = open_app(text=text + " Then it rained.")
    assert results.computed == computed + 1 and figures.computed > built
    assert not third.exception


def test_the_page_jargon_is_explained_where_it_appears():  # issue 19: path, backend, dep2head
    at = open_app()
    path = next(c for c in at.caption if "path" in c.value and "backend" in c.value)
    assert "log-sum-exp" in path.proto.help and "explicit" in path.proto.help
    roles = open_app("views/roles.py")
    assert any("dep2head = the dependent's strongest attention" in c.value for c in roles.caption)


def test_the_token_choice_follows_a_new_sentence():  # issue 19, item 2: no stale index
    at = open_app(view="One token")
    query = at.selectbox(key="query")
    assert query.format_func(query.value).endswith(": it")
    at.text_area(key="text").input("Yesterday my old friend said that it rained.").run()
    query = at.selectbox(key="query")
    assert not at.exception and query.format_func(query.value).endswith(": it")  # the new sentence's "it"


def test_the_page_opens_on_the_pronoun_s_strongest_head(bundled):
    """Issue 42, item 11: the page opened on layer 0, head 0; it opens on the head whose "it" row gives "animal"
    the most weight, found here from transformers' own attentions."""
    import torch

    from tests.conftest import ANIMAL_TIRED

    batch = bundled.tokenizer(ANIMAL_TIRED, return_tensors="pt")
    pieces = bundled.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    with torch.no_grad():
        maps = torch.stack(bundled.model(**batch, output_attentions=True).attentions)[:, 0]  # (L,H,T,T)
    weights = maps[:, :, pieces.index("it"), pieces.index("animal")]
    layer, head = divmod(int(weights.argmax()), weights.shape[1])
    at = start()
    assert not at.exception
    assert (at.selectbox(key="layer").value, at.selectbox(key="head").value) == (layer, head) != (0, 0)
    other = start(text="The keys to the cabinet are on the table.")  # no pronoun: layer 0, head 0
    assert (other.selectbox(key="layer").value, other.selectbox(key="head").value) == (0, 0)


@pytest.mark.slow
def test_gemma_merges_an_english_sentence_into_its_words(gemma):  # issue 77: Gemma called the sentence word 0
    at = start(model=gemma.name)
    at.text_area(key="text").input("The animal didn't cross the street because it was tired.").run()
    at.checkbox(key="merge_words").check().run()
    assert not at.exception
    words = [label.split(" ", 1)[1].strip() for label in head_axis(at)]
    assert words == ["&lt;bos&gt;", "The", "animal", "didn't", "cross", "the", "street", "because", "it", "was",
                     "tired."]
