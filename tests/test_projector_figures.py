"""Issue 82: a figure as projector mode draws it (mha_core/figures/projector.py): larger type in black, lines and
outlines twice as thick, markers larger, and the weights' scale without its pale end (the overview's levels too)."""

from __future__ import annotations

import numpy as np

from mha_core.figures import capped, charts, colours
from mha_core.figures.projector import FONT_PX, for_projector, projected_scale
from mha_core.figures.spec import array_of, named_colorscale
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
    each other. Where a capped row is lower than a line of its type the numbers go (the hover keeps them); a grid
    whose rows still hold them, or one under no cap, keeps them. Projector mode's larger type needs taller rows, and
    a colour bar keeps the ticks its height holds (MiniLM's five overlapped: the new-teacher review)."""
    rng = np.random.default_rng(0)
    gemma_like = charts.margin_change_figure(rng.normal(size=(18, 4)), np.zeros((18, 4), bool), "a", "b")
    minilm_like = charts.margin_change_figure(rng.normal(size=(6, 12)), np.zeros((6, 12), bool), "a", "b")
    squeezed = capped.within_height(gemma_like, 200)
    assert squeezed["layout"]["height"] == 200 and "texttemplate" not in squeezed["data"][0]
    assert squeezed["data"][0]["hovertemplate"] == gemma_like["data"][0]["hovertemplate"]
    assert "texttemplate" in gemma_like["data"][0]  # the figure itself is left as it was
    assert "texttemplate" in capped.within_height(gemma_like, 1000)["data"][0]  # rows of 45 px: kept
    assert "texttemplate" in capped.within_height(minilm_like, 200)["data"][0]  # 6 rows of 18 px: kept
    projected = capped.within_height(minilm_like, 200, projected=True)["data"][0]  # 15-px numbers: they touched
    assert "texttemplate" not in projected
    # the colour bar in 110 px of plot: plotly's five 18-px ticks overlapped; its ends and middle (12-px ticks fit)
    reach = float(np.abs(array_of(minilm_like["data"][0]["z"])).max())  # its scale: around 0, as far as its values
    assert projected["colorbar"]["tickvals"] == [-reach, 0.0, reach]
    assert projected["colorbar"]["ticktext"] == [f"{-reach:.2f}", "0.00", f"{reach:.2f}"]
    assert "tickvals" not in capped.within_height(gemma_like, 1000)["data"][0]["colorbar"]  # plotly's, room for 5


def test_the_cap_s_rows_are_counted_over_stacked_heatmaps_and_words_stay():
    """The review's cases: two heatmaps stacked on two y axes share the height (9 + 9 rows of 12.8 px: numbers go);
    a template of words and numbers keeps its words; unset or empty parts of a figure are read as plotly reads them."""
    grid = {"type": "heatmap", "z": np.zeros((9, 4)).tolist(), "texttemplate": "%{z:.2f}"}
    stacked = {"data": [grid, {**grid, "yaxis": "y2"}], "layout": {"height": 600, "margin": {"t": 20, "b": 20}}}
    assert all("texttemplate" not in t for t in capped.within_height(stacked, 300)["data"])
    assert all("texttemplate" in t for t in capped.within_height({**stacked, "data": [grid]}, 300)["data"])
    worded = {**grid, "z": np.zeros((18, 4)).tolist(), "texttemplate": "%{text}<br>%{z:.2f}", "textfont": {}}
    (kept,) = capped.within_height({"data": [worded], "layout": {"height": 900}}, 200)["data"]
    assert kept["texttemplate"] == "%{text}" and "textfont" not in kept
    odd = {"data": [{"type": "heatmap", "z": None}, {**grid, "z": list(range(18))}],
           "layout": {"height": None, "margin": {"t": None}}}
    assert capped.within_height(odd, 200) is odd
    assert capped.within_height({**odd, "layout": {"height": 900, "margin": {"t": None}}}, 300)["data"][1][
        "texttemplate"] == "%{z:.2f}"  # one row of 18 numbers, 90 px under plotly's own margins


def test_a_grid_of_more_layers_than_heads_can_lie_with_its_layers_across():
    """The lesson's pair grid on Gemma 3 (18 layers × 4 heads) in a 200-px chart: 18 thin stripes, its layers
    unlabelled. Across, the grid is 4 rows of 18 cells: the same values and outlines, transposed."""
    delta = np.arange(18 * 4, dtype=float).reshape(18, 4)
    flips = np.zeros((18, 4), bool)
    flips[10, 2] = True
    down, across = (charts.margin_change_figure(delta, flips, "a", "b", across=a) for a in (False, True))
    assert np.array_equal(array_of(across["data"][0]["z"]), delta.T)
    assert across["data"][0]["x"][10] == down["data"][0]["y"][10] == "L10"
    assert across["data"][0]["y"][2] == down["data"][0]["x"][2] == "H2"
    (box,) = across["layout"]["shapes"]
    assert (box["x0"] + box["x1"]) / 2 == 10 and (box["y0"] + box["y1"]) / 2 == 2  # layer 10, head 2
    assert across["layout"]["height"] < down["layout"]["height"]
