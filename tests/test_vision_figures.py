"""Issue 42, items 10 and 11: the image figures a class reads on a projector and a phone — the mosaic's layer and
head labels at a legible size, distance by depth with a legend and solid points."""

from __future__ import annotations

import io

import numpy as np

from mha_core.figures.vision import LABEL, LABEL_FONT_PX, distance_figure, mosaic_png


def test_distance_by_depth_has_a_legend_entry_per_head_and_solid_points():
    distances = np.random.default_rng(0).random((12, 6)) * 200
    figure = distance_figure(distances, 224)
    assert len(figure["data"]) == 6 and [t["name"] for t in figure["data"]] == [f"head {h}" for h in range(6)]
    for head, trace in enumerate(figure["data"]):
        assert trace["marker"]["opacity"] == 1.0 and trace["y"] == [float(d) for d in distances[:, head]]
    assert len({t["marker"]["color"] for t in figure["data"]}) == 6  # a colour a head


def test_the_mosaic_s_labels_are_drawn_large():
    from PIL import Image

    photo = np.full((224, 224, 3), 200, np.uint8)
    png = mosaic_png(photo, np.random.default_rng(0).random((12, 6, 16, 16)))
    canvas = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    left = canvas[LABEL:, :LABEL] < 128  # the layer labels' ink, in the left margin
    rows = np.nonzero(left.any(axis=1))[0]
    first_label = rows[rows < rows[0] + 96]  # L0's ink, within the first tile's height
    assert first_label.max() - first_label.min() + 1 >= LABEL_FONT_PX * 0.6  # ≥ 13 px tall (it was ~6 px)


def test_the_exported_overview_s_title_stands_clear_of_the_head_axis_title():
    """Issue 42, item 11: the exported PNG's title overlapped the 头 axis label (the SVG's own text positions)."""
    import re

    from mha_core import i18n
    from mha_core.figures import charts
    from mha_core.serving.export import figure_image

    i18n.use("zh")
    try:
        title = i18n.tr("{model}: every head at a glance, layer {layer} head {head} outlined — {text}",
                        model="gemma-3-270m", layer=2, head=3, text="那只动物没有过马路，因为它太累了。")
        spec = charts.overview_figure(np.random.default_rng(0).random((6, 4, 8, 8)), selected=(2, 3), title=title)
    finally:
        i18n.use("en")
    svg = figure_image(spec, "svg").decode()
    def baseline(css: str) -> float:
        tag = re.search(rf'<text class="{css}"[^>]*>', svg).group(0)
        return float(re.search(r'\by="([\d.]+)"', tag).group(1))

    assert baseline("xtitle") - baseline("gtitle") >= 2 * 17  # two lines of the title's font apart
