"""Issue 82: a figure as projector mode draws it (mha_core/figures/projector.py): larger type in black, lines and
outlines twice as thick, markers larger, and the weights' scale without its pale end (the overview's levels too)."""

from __future__ import annotations

import numpy as np

from mha_core.figures import charts, colours
from mha_core.figures.projector import FONT_PX, for_projector, projected_scale
from mha_core.figures.spec import named_colorscale
from mha_core.figures.summary import describe
from tests.test_colours import contrast, srgb

PAPER = srgb(colours.PAPER)


def palest(scale: list) -> float:
    """The contrast of a scale's palest colour on the chart's paper (clear stops left out)."""
    return min(contrast(srgb(c), PAPER) for _, c in scale if c != colours.CLEAR)


def test_the_weights_scale_loses_its_pale_end_and_keeps_its_positions():
    plain = named_colorscale(colours.WEIGHTS)
    projected = projected_scale(plain)
    assert palest(plain) < 1.1 and palest(projected) >= 3
    assert [p for p, _ in projected] == [p for p, _ in plain]
    levels = charts.levels_colorscale(plain)
    projected_levels = projected_scale(levels)
    assert projected_levels[:2] == levels[:2] and palest(projected_levels) >= 3  # the gaps stay clear
    assert projected_scale(colours.SIGNED) == colours.SIGNED  # no pale end: as it is


def test_a_projected_figure_has_larger_black_type_and_thicker_marks():
    maps = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)
    overview = for_projector(charts.overview_figure(maps, selected=(1, 2)))
    assert palest(overview["data"][0]["colorscale"]) >= 3
    assert overview["layout"]["shapes"][0]["line"]["width"] == 4  # the chosen head's outline, 2 px
    assert overview["layout"]["font"] == {"size": FONT_PX, "color": colours.INK}
    assert overview["layout"]["xaxis"]["tickfont"]["color"] == colours.INK
    lines = for_projector(charts.line_view_figure(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"], [0, 1]))
    widths = [t["line"]["width"] for t in lines["data"] if t.get("mode") == "lines"]
    assert widths and min(widths) >= 4 and min(t["opacity"] for t in lines["data"] if t.get("mode") == "lines") >= 0.6
    plain_bars = charts.token_bar_figure(["a", "b"], np.array([0.2, 0.8]), "t")
    bars = for_projector(plain_bars)
    assert bars["data"][0]["textfont"]["color"] == colours.INK
    assert describe(bars) == describe(plain_bars) and describe(overview).startswith("Every head")  # the same sentence


def test_a_grid_squeezed_under_a_projector_s_cap_drops_numbers_its_rows_cannot_hold():
    """The lesson's pair grid on Gemma (18 layers) was capped at 200 px on a projector: its cells' numbers ran into
    each other. Where a capped row is lower than a line of text the numbers go (the hover keeps them); a grid whose
    rows still hold them, or one under no cap, keeps them."""
    rng = np.random.default_rng(0)
    gemma_like = charts.margin_change_figure(rng.normal(size=(18, 4)), np.zeros((18, 4), bool), "a", "b")
    minilm_like = charts.margin_change_figure(rng.normal(size=(6, 12)), np.zeros((6, 12), bool), "a", "b")
    squeezed = charts.within_height(gemma_like, 200)
    assert squeezed["layout"]["height"] == 200 and "texttemplate" not in squeezed["data"][0]
    assert squeezed["data"][0]["hovertemplate"] == gemma_like["data"][0]["hovertemplate"]
    assert "texttemplate" in gemma_like["data"][0]  # the figure itself is left as it was
    assert "texttemplate" in charts.within_height(gemma_like, 1000)["data"][0]  # rows of 45 px: kept
    assert "texttemplate" in charts.within_height(minilm_like, 200)["data"][0]  # 6 rows of 18 px: kept


def test_the_cap_s_rows_are_counted_over_stacked_heatmaps_and_words_stay():
    """The review's cases: two heatmaps stacked on two y axes share the height (9 + 9 rows of 12.8 px: numbers go);
    a template of words and numbers keeps its words; unset or empty parts of a figure are read as plotly reads them."""
    grid = {"type": "heatmap", "z": np.zeros((9, 4)).tolist(), "texttemplate": "%{z:.2f}"}
    stacked = {"data": [grid, {**grid, "yaxis": "y2"}], "layout": {"height": 600, "margin": {"t": 20, "b": 20}}}
    assert all("texttemplate" not in t for t in charts.within_height(stacked, 300)["data"])
    assert all("texttemplate" in t for t in charts.within_height({**stacked, "data": [grid]}, 300)["data"])
    worded = {**grid, "z": np.zeros((18, 4)).tolist(), "texttemplate": "%{text}<br>%{z:.2f}", "textfont": {}}
    (kept,) = charts.within_height({"data": [worded], "layout": {"height": 900}}, 200)["data"]
    assert kept["texttemplate"] == "%{text}" and "textfont" not in kept
    odd = {"data": [{"type": "heatmap", "z": None}, {**grid, "z": list(range(18))}],
           "layout": {"height": None, "margin": {"t": None}}}
    assert charts.within_height(odd, 200) is odd
    assert charts.within_height({**odd, "layout": {"height": 900, "margin": {"t": None}}}, 300)["data"][1][
        "texttemplate"] == "%{z:.2f}"  # one row of 18 numbers, 90 px under plotly's own margins
