"""Issue 82: every chart says what it shows in one sentence, from its own numbers, in the page's language; pages give
it to screen readers as the chart's accessible name and show it under the chart on request; images carry alt text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_core import i18n
from mha_core.figures import charts, long, params, vision
from mha_core.figures.summary import describe, described, mosaic_alt, qr_alt, with_summary
from tests.conftest import ANIMAL_TIRED, open_app

WORDS = ["The", "animal", "it", "tired"]


@pytest.fixture
def chinese():
    i18n.use("zh")
    yield
    i18n.use(i18n.DEFAULT)


def one_head() -> np.ndarray:
    z = np.full((4, 4), 0.1, dtype=np.float32)
    z[2] = [0.08, 0.62, 0.2, 0.1]  # 'it' on 'animal'
    return z


def test_one_head_says_which_word_puts_how_much_on_which():
    sentence = describe(charts.head_figure(one_head(), WORDS, "Layer 3, head 7"))
    assert sentence == "Layer 3, head 7: 'it' puts 0.62 of its attention on 'animal', the largest weight in the map."
    scores = one_head() - 0.3
    sentence = describe(charts.head_figure(scores, WORDS, "Layer 3, head 7", scores=True))
    assert "the largest score, 0.32, is 'it' on 'animal'" in sentence
    assert "the smallest, -0.22, 'it' on 'The'" in sentence


def test_the_sentence_is_in_the_page_s_language(chinese):
    sentence = describe(charts.head_figure(one_head(), WORDS, "第 3 层，第 7 个头"))
    assert "0.62" in sentence and "“it”" in sentence and "“animal”" in sentence and "注意力" in sentence
    assert "attention" not in sentence


def test_the_overview_names_the_most_focused_head_and_the_open_one():
    maps = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)
    maps[1, 2] = np.eye(4)  # layer 1, head 2 puts all of each row on one key
    sentence = describe(charts.overview_figure(maps, selected=(0, 1)))
    assert "2 layers × 3 heads" in sentence and "the most focused, L1 H2, puts 1 of a row" in sentence
    assert sentence.endswith("L0 H1 is open.")
    across = describe(charts.layers_across_figure(maps, (1, 0)))
    tiles = describe(charts.layer_tiles_figure(maps[1], 1, 0))
    assert "L1 H2" in across and "L1 H0 is open" in across and "2 layers × 3 heads" in across
    assert "3 heads; the most focused, L1 H2" in tiles


def test_figures_without_their_own_sentence_are_read_from_their_traces():
    grid = np.arange(6, dtype=float).reshape(2, 3) / 10
    assert describe(charts.layer_head_grid(grid, "Share per head")) == (
        "Share per head: the largest value, 0.5, is at L1, H2; the smallest, 0, at L0, H0.")
    bars = describe(charts.token_bar_figure(WORDS, np.array([0.1, 0.62, 0.2, 0.08]), "Where 'it' looks"))
    assert bars == "Where 'it' looks: 4 bars; the highest, 'animal', is 0.62; the lowest, 'tired', 0.08."
    lines = describe(long.sink_growth_figure([512, 4096], np.stack([np.full((3, 2), 0.2), np.full((3, 2), 0.7)])))
    assert "2 lines (512 pieces, 4,096 pieces)" in lines and "the highest is 4,096 pieces, 0.7 at L2" in lines
    points = describe(vision.distance_figure(np.array([[10.0, 80.0], [30.0, 120.0]]), 224))
    assert "4 points in 2 series (head 0, head 1)" in points


def test_a_sunburst_names_its_largest_part():
    figure = {"data": [{"type": "sunburst", "ids": ["m", "m/a", "m/b"], "labels": ["model", "attention", "mlp"],
                        "parents": ["", "m", "m"], "values": [100, 30, 70]}], "layout": {"title": {"text": "All"}}}
    assert describe(figure) == "All: 100 in all; the largest part, mlp, holds 70 (70%)."


def test_a_builder_s_own_sentence_is_kept():
    figure = with_summary(charts.layer_head_grid(np.ones((1, 1)), "t"), "Its own sentence.")
    assert describe(described(figure)) == "Its own sentence."
    assert described(charts.layer_head_grid(np.ones((1, 1)), "t"))["layout"]["meta"]["summary"].startswith("t: ")


def test_the_photos_have_alt_text():
    assert "12 layers × 6 heads (layers down, heads across)" in mosaic_alt(12, 6, False)
    assert qr_alt("http://10.0.0.2:8501/lesson?class=ABC123").endswith("http://10.0.0.2:8501/lesson?class=ABC123")
    patch_map = np.zeros((4, 4))
    patch_map[1, 3] = 0.4
    overlay = vision.head_overlay_figure(np.zeros((32, 32, 3), dtype=np.uint8), patch_map, "Layer 0, head 1")
    assert describe(overlay).endswith("the patch in row 1, column 3 gets the largest weight, 0.4.")


def test_every_parameters_chart_has_a_sentence():
    from mha_core.analysis.params.shapes import make_shape

    for figure in (params.flops_figure(make_shape(512, 8), 4096), params.kv_cache_figure(make_shape(512, 8), 6, 4096)):
        assert describe(figure).count(";") >= 1 and "lines" in describe(figure)


def test_a_page_s_charts_carry_their_sentence_as_accessible_name_and_under_them_on_request():
    at = open_app(text=ANIMAL_TIRED, describe="true")
    assert not at.exception
    charts_drawn = at.get("plotly_chart")
    assert len(charts_drawn) >= 2
    captions = [c.value for c in at.caption]
    for drawn in charts_drawn:
        sentence = json.loads(drawn.proto.spec)["layout"]["meta"]["summary"]
        assert drawn.proto.alt == sentence and any(char.isdigit() for char in sentence)
        assert any(sentence.replace("'", "") in caption.replace("\\", "").replace("'", "") for caption in captions)
    assert "Describe each chart in words" in [t.label for t in at.toggle if t.value]
