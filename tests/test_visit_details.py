"""Issue 32, "also seen in the same run": the record's rules (mha_core.serving.visit), the derived question and pair
of any sentence, and the details the visitors met (markdown of model text, phone figures, English left in Chinese,
budget refusals said before any work, the overview's click targets and export title, the one-layer chart, the
induction colour scale, the parameters' colours, the uniform baseline)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_core import i18n
from mha_core.serving.visit import UNBOUND, Visit, decode, encode
from tests.conftest import ANIMAL_TIRED, chart_json, open_app


def test_a_choice_holds_in_its_context_and_gives_way_outside_it():
    visit = Visit()
    assert visit.get("query", 7, ("m", "text 1"), options=range(12)) == 7  # the default until chosen
    visit.choose("query", 3, ("m", "text 1"))
    assert visit.get("query", 7, ("m", "text 1"), options=range(12)) == 3
    assert visit.get("query", 5, ("m", "text 2"), options=range(12)) == 5  # another text: its own default
    assert visit.get("query", 7, ("m", "text 1"), options=range(12)) == 7  # and the old choice is gone
    visit.choose("layer", 9)
    assert visit.get("layer", 0, options=range(6)) == 0  # no longer fits (a smaller model): the default


def test_an_address_is_read_with_the_choices_types_and_bound_to_its_first_context():
    visit = Visit.from_address({"lang": "zh", "query": "11: was", "scores": "true", "line_min": "nan",
                                "c_joint": "5:11,5:7", "g_sentence": "1e309"})
    assert visit.chosen["query"].context == UNBOUND
    assert visit.get("query", 0, ("m", "t"), options=range(20)) == 11  # an older address's "11: was"
    assert visit.chosen["query"].context == ("m", "t")
    assert visit.get("scores", False) is True
    assert visit.get("line_min", 0.1) == 0.1  # not a finite number: the default
    assert visit.get("c_joint", [(0, 0)], ("grid",), options=[(5, 11), (5, 7), (2, 1)]) == [(5, 11), (5, 7)]
    assert visit.get("g_sentence", None, like=0) is None
    assert visit.address("zh") == {"lang": "zh", "query": "11", "scores": "true", "c_joint": "5:11,5:7"}


def test_a_link_within_the_visit_replaces_only_what_it_names():
    visit = Visit()
    visit.choose("text", "my own sentence")
    visit.choose("layer", 1)
    visit.adopt({"layer": "4", "head": "2"})
    assert visit.get("layer", 0, options=range(6)) == 4 and visit.get("head", 0, options=range(12)) == 2
    assert visit.get("text", "default") == "my own sentence"


@pytest.mark.parametrize(("value", "like"), [(True, False), (3, 0), (0.25, 0.1), ("a b", ""), ([1, 2], [0])])
def test_encode_and_decode_are_inverse(value, like):
    assert decode(encode(value), like) == value


@pytest.mark.parametrize(("text", "pronoun", "antecedent", "other", "pair"), [
    (ANIMAL_TIRED, "it", "animal", "street", "The animal didn't cross the street because it was too wide."),
    ("Mary gave the book to John because she had already read it.", "she", "Mary", "John",
     "Mary gave the book to John because he had already read it."),
    ("The dog chased the cat because it was hungry.", "it", "dog", "cat",
     "The dog chased the cat because he was hungry."),
    ("The keys to the cabinet are on the table.", "", "", "", ""),
    # issue 42, item 11: an edited sentence's pair swaps the word that decides the referent, not the pronoun
    ("The dog didn't cross the road because it was too tired.", "it", "dog", "road",
     "The dog didn't cross the road because it was too wide."),
    ("The cat did not jump over the river because it was too Wide.", "it", "cat", "river",
     "The cat did not jump over the river because it was too Tired."),
    ("那只猫没有过马路，因为它太累了。", "它", "猫", "马路", "那只猫没有过马路，因为它太宽了。"),
    ("玛丽把书给了约翰，因为她已经读过了。", "她", "玛丽", "约翰", "玛丽把书给了约翰，因为他已经读过了。"),
])
def test_every_sentence_gets_its_own_question_and_minimal_pair(text, pronoun, antecedent, other, pair):
    from mha_core.teaching.examples import focus

    found = focus(text)
    assert (found.pronoun, found.antecedent, found.other, found.pair) == (pronoun, antecedent, other, pair)


def test_the_predictions_question_follows_the_sentence(lm_dirs):
    from mha_core import load_model
    from mha_core.teaching.examples import default_question

    model = load_model(lm_dirs["llama-tied"])
    asked = default_question(model, "Mary gave the book to John because she had already read it.")
    assert asked.probe == " The word 'she' refers to the" and asked.answer.strip() == "mary"
    assert asked.corrupted_probe == " The word 'he' refers to the"
    assert default_question(model, "The keys to the cabinet are on the table.").probe == ""


def test_model_text_with_blank_lines_stays_bold_and_literal():
    from views._text import emphasised

    said = emphasised("First line\n\nSecond *line*")
    assert said.split("  \n") == ["**First line**", "", "**Second \\*line\\***"]  # no mark spans a blank line


def test_phone_figures_keep_words_and_wrap_long_titles():
    from mha_core.figures.charts import for_narrow_screen, layer_head_grid

    grid = for_narrow_screen(layer_head_grid(np.ones((2, 2)), "A rather long title that no phone shows on one line"))
    assert "texttemplate" not in grid["data"][0] and "<br>" in grid["layout"]["title"]["text"]
    words = {"data": [{"type": "heatmap", "text": [["the"]], "texttemplate": "%{text}"}], "layout": {"title": "x"}}
    assert for_narrow_screen(words)["data"][0]["texttemplate"] == "%{text}"  # the logit lens's words stay

    from mha_core.analysis.params.shapes import make_shape
    from mha_core.figures.params import flops_figure

    desktop = flops_figure(make_shape(640, 4, 256, 256, 1), 8192)
    phone = for_narrow_screen(desktop)  # two named lines: their legend under the plot, the figure taller for it
    assert desktop["layout"].get("legend", {}).get("orientation") != "h"
    assert phone["layout"]["legend"]["orientation"] == "h" and phone["layout"]["legend"]["y"] < 0
    assert phone["layout"]["height"] > desktop["layout"]["height"]


@pytest.mark.parametrize("title", ["第 9 层，第 2 个头：代词“它”读向句子里的哪个词，以及为什么",
                                   "第 12 层 第 3 个头 把代词 读向名词 而其他的头读向句首的标点符号",
                                   "Layer 9, head 2: where the pronoun it looks in this rather long sentence",
                                   "softmax(QKᵀ/√query_pre_attn_scalar): the weights of one head"])
def test_a_phone_title_breaks_where_a_reader_pauses(title):
    """A phone's title broke "第 9 层，第 2 / 个头" (at the space a number keeps from its measure word): a Chinese
    title breaks after its punctuation, never at a space beside a Chinese character; English at its spaces."""
    from mha_core.figures.title_lines import NARROW_TITLE_CHARS, display_width, wrapped

    lines = wrapped(title, NARROW_TITLE_CHARS)
    assert len(lines) > 1 and all(display_width(line) <= NARROW_TITLE_CHARS for line in lines)
    assert "".join(lines).replace(" ", "") == title.replace(" ", "")
    for line in lines:
        assert not line.endswith(tuple("0123456789第")) and not line.startswith(tuple("0123456789层个)"))


def test_the_overviews_click_targets_leave_the_maps_uncoloured():
    """The lesson caps the overview's height on a projector: its 26-px click targets then overlapped 16 to a tile, and
    their 1 % opacities added up to an orange wash that hid every map (Gemma, step 3, 1920 x 1080)."""
    from mha_core.figures.charts import overview_figure

    markers = overview_figure(np.random.default_rng(0).random((18, 4, 10, 10)))["data"][1]
    colour = markers["marker"].get("color", "")
    assert colour.replace(" ", "").startswith("rgba(") and colour.replace(" ", "").endswith(",0)"), colour


def test_the_overview_opens_a_head_from_anywhere_on_its_tile():
    from mha_core.figures.charts import TILE_SPOTS, overview_figure, tile_origin
    from mha_core.figures.spec import array_of

    maps = np.random.default_rng(0).random((2, 3, 10, 10))
    markers = overview_figure(maps)["data"][1]
    x, y = array_of(markers["x"]), array_of(markers["y"])
    assert len(x) == len(y) == len(markers["customdata"]) == 2 * 3 * TILE_SPOTS**2
    for (layer, head), x_i, y_i in zip(markers["customdata"], x, y, strict=True):  # every target on its own tile
        top, left = tile_origin(layer, head, 10)
        assert left - 0.5 < x_i < left + 9.5 and top - 0.5 < y_i < top + 9.5
    spots = [(x, y) for (layer, head), x, y in zip(markers["customdata"], x, y, strict=True)
             if (layer, head) == (1, 2)]
    top, left = tile_origin(1, 2, 10)
    xs, ys = sorted({x for x, _ in spots}), sorted({y for _, y in spots})
    assert xs[0] - left < 2 and left + 10 - xs[-1] < 2.5 and ys[0] - top < 2 and top + 10 - ys[-1] < 2.5


def test_the_uniform_baseline_counts_what_a_query_sees():
    from mha_core.analysis.heads.display import AttentionView, uniform_weight

    view = AttentionView(labels=tuple("abcdef"), maps=np.zeros((1, 1, 6, 6)), hidden_special=False,
                         merged_words=False, pieces=tuple((i,) for i in range(6)))
    assert uniform_weight(view, 3, causal=False) == pytest.approx(1 / 6)
    assert uniform_weight(view, 3, causal=True) == pytest.approx(1 / 4)  # query 3 sees keys 0..3
    assert uniform_weight(view, 5, causal=True, window=2) == pytest.approx(1 / 2)  # keys 4 and 5


def test_chinese_quotes_and_path_names():
    from mha_core.teaching.walkthrough import backend_words, path_words

    i18n.use("zh")
    try:
        assert i18n.quoted("玛丽") == "“玛丽”" and path_words("explicit") == "显式"
        assert "explicit" not in backend_words("explicit (matmul + softmax)")
        assert "causal" not in backend_words("flash (CPU), causal")
    finally:
        i18n.use("en")
    assert i18n.quoted("it") == "'it'"


def test_a_decoder_names_its_first_token_not_cls():
    from mha_core.analysis.heads.roles import metric_title

    assert metric_title("cls", causal=True) == "to the first token" and metric_title("cls", False) == "to [CLS]"


def test_parameters_colour_a_part_the_same_in_both_charts(bundled):
    from mha_core.analysis.params.counts import model_breakdown
    from mha_core.figures.colours import PARAMETER_COLOURS
    from mha_core.figures.params import layer_stack_figure, model_sunburst

    b = model_breakdown(bundled)
    bars = {t["name"]: t["marker"]["color"] for t in layer_stack_figure(b)["data"]}
    sun = model_sunburst(b, bundled.name)["data"][0]
    colour_of = dict(zip(sun["ids"], sun["marker"]["colors"], strict=True))
    w_q = next(i for i in sun["ids"] if i.endswith("/W_Q"))
    assert colour_of[w_q] == bars["W_Q + b_Q"] == PARAMETER_COLOURS["W_Q + b_Q"]
    assert colour_of["layer 0"] not in bars.values()  # a layer is a grey ring, not a part's colour


def test_heads_page_one_layer_chart_is_titled_and_starts_from_the_chosen_head():
    at = open_app(view="One layer", layer="2", head="5")
    assert not at.exception
    assert at.multiselect(key="line_heads").value == [5]
    assert "Layer 2" in chart_json(at, "line_view")["layout"]["title"]["text"]


def test_the_exported_overview_names_model_and_sentence(monkeypatch):
    import mha_core.serving.export as export

    drawn = {}
    monkeypatch.setattr(export, "figure_image", lambda spec, fmt: drawn.setdefault("title", json.dumps(
        spec["layout"]["title"])) and b"png")
    monkeypatch.setattr(export, "image_export_status", lambda: (True, "test"))
    at = open_app(view="Export")
    at.button(key="export_render").click().run()
    assert not at.exception
    assert "all-MiniLM-L6-v2" in drawn["title"] and "animal" in drawn["title"] and "click" not in drawn["title"]


def test_induction_colours_use_the_weight_scale():
    at = open_app("views/roles.py")
    assert not at.exception
    colour = chart_json(at, "induction_grid")["data"][0]
    assert (colour["zmin"], colour["zmax"]) == (0.0, 1.0)


def test_the_path_caption_is_chinese_in_chinese():
    at = open_app(lang="zh", model="all-MiniLM-L6-v2")
    caption = next(c.value for c in at.caption if "路径" in c.value)
    assert "explicit" not in caption and "fused" not in caption and "显式" in caption, caption


def test_a_long_roles_budget_refusal_is_said_before_any_work(monkeypatch, tmp_path):
    from mha_core import load_model
    from mha_core.analysis.long import roles as long_roles
    from mha_core.engine.budget import BudgetError
    from tests.tiny_models import make_tiny

    path = make_tiny("mistral", tmp_path / "windowed", max_position_embeddings=4096)  # a (T,T) mask per text
    model = load_model(path)
    monkeypatch.setenv("MHA_COMPUTE_MB", "64")
    monkeypatch.setattr(long_roles, "run_long", lambda *a, **k: pytest.fail("work started"))
    fitting, refusal = long_roles.affordable_lengths(model, (512, 2048, 4096))
    assert isinstance(refusal, BudgetError) and fitting and max(fitting) < 4096
    with pytest.raises(BudgetError):
        long_roles.sink_growth(model, (512, 4096))


def test_the_same_example_can_be_picked_again_after_editing_the_box():
    at = open_app()
    mary = "Mary gave the book to John because she had already read it."
    at.selectbox(key="example").set_value(mary).run()
    at.text_area(key="text").input("Something else entirely.").run()
    at.selectbox(key="example").set_value(mary).run()
    assert at.text_area(key="text").value == mary and at.selectbox(key="example").value is None
