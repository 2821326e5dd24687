"""Issue 42, items 10 and 11: the image figures a class reads on a projector and a phone — the mosaic's layer and
head labels at a legible size, distance by depth with a legend and solid points."""

from __future__ import annotations

import io

import numpy as np
import pytest

from mha_core.figures.vision import LABEL, LABEL_FONT_PX, distance_figure, mosaic_png, no_taller, png_at_width, png_size


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


def test_the_wide_mosaic_puts_layers_across_and_each_tile_where_its_head_is():
    """The projector's mosaic (layers across, heads down) holds the same tiles as the page's, transposed."""
    from PIL import Image

    from mha_core.figures.vision import GAP

    photo = np.full((224, 224, 3), 200, np.uint8)
    maps = np.random.default_rng(1).random((4, 3, 16, 16))
    tall, wide = (np.asarray(Image.open(io.BytesIO(mosaic_png(photo, maps, tile=32, wide=w)))) for w in (False, True))
    assert tall.shape[:2] == (LABEL + 4 * (32 + GAP), LABEL + 3 * (32 + GAP))
    assert wide.shape[:2] == (LABEL + 3 * (32 + GAP), LABEL + 4 * (32 + GAP))
    for layer, head in ((0, 0), (3, 1), (2, 2)):
        at = lambda row, column: (slice(LABEL + row * (32 + GAP), LABEL + row * (32 + GAP) + 32),  # noqa: E731
                                  slice(LABEL + column * (32 + GAP), LABEL + column * (32 + GAP) + 32))
        assert np.array_equal(tall[at(layer, head)], wide[at(head, layer)])


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


def wcag_contrast(a: float, b: float) -> float:
    """WCAG 2 contrast ratio of two grey levels (0..255)."""
    def luminance(level: float) -> float:
        c = level / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("grey", [40, 60, 120, 200])
def test_where_a_head_looks_stands_out_on_a_dark_photo_too(grey):
    """Issue 42, item 11: overlays were low-contrast (a dark photo lit where a head looks was only as bright as the
    photo: 60-grey against its dimmed self 1.8:1). The patch a head looks at against the rest: at least 4.5:1 on a
    photo of grey 60 and brighter (3.5:1 at grey 40), in the mosaic (overlay) and in one head's figure alike (its
    shade's two ends composite over the photo to the overlay's two ends)."""
    from mha_core.figures.vision import SHADE, head_overlay_figure, overlay

    photo = np.full((28, 28, 3), grey, dtype=np.uint8)
    patch_map = np.zeros((2, 2))
    patch_map[0, 1] = 1.0  # the head looks at the top-right patch only
    shown = overlay(photo, patch_map)[..., 0].astype(float)
    looked, elsewhere = shown[:14, 14:], shown[14:, :14]
    assert np.ptp(looked) == 0 and np.ptp(elsewhere) == 0
    assert wcag_contrast(looked[0, 0], elsewhere[0, 0]) >= (3.5 if grey < 60 else 4.5)

    def composite(rgba: str) -> float:  # the heatmap's colour over the photo's grey
        *rgb, alpha = (float(v) for v in rgba[rgba.index("(") + 1:-1].split(","))
        return alpha * rgb[0] + (1 - alpha) * grey

    assert head_overlay_figure(photo, patch_map, "t")["data"][0]["colorscale"] == SHADE
    assert abs(composite(SHADE[0][1]) - elsewhere[0, 0]) <= 1 and abs(composite(SHADE[-1][1]) - looked[0, 0]) <= 1


@pytest.mark.parametrize("tallest", [1000, 300, 2, 1, 0])
def test_the_mosaic_scaled_under_any_room_is_a_picture_no_taller_than_it(tallest):
    """Issue 84 (hostile review): the mosaic scaled once to be no taller than the room a step leaves (mosaic_of's
    tallest): a room under the picture's aspect gave a width or height of 0 and PIL refused to scale (ValueError) - the
    lesson leaves 200 px at least, mosaic_of itself checked nothing. Never wider than it was, at least a pixel."""
    png = mosaic_png(np.zeros((32, 32, 3), np.uint8), np.random.default_rng(0).random((12, 6, 4, 4)), wide=True)
    width, height = png_size(png)
    scaled = png_size(png_at_width(png, no_taller(png, tallest)))
    assert 1 <= scaled[0] <= width and 1 <= scaled[1] <= max(1, min(height, tallest)), (scaled, tallest)
