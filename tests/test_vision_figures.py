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
