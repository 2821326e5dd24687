"""Export formats: CSV and JSON carry exactly the shown weights; images render through Chromium."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from mha_core import run
from mha_core.analysis.display import attention_view
from mha_core.figures import charts
from mha_core.serving.export import attention_csv, attention_json, figure_image, image_export_status


def test_csv_and_json_hold_the_view(bundled):
    view = attention_view(run(bundled, "It was too tired."), 0, hide_special=True)
    rows = list(csv.DictReader(io.StringIO(attention_csv(view, [2], [5]))))
    n = len(view.labels)
    assert len(rows) == n * n
    assert rows[1]["query"] == view.labels[0] and rows[1]["key"] == view.labels[1]
    assert np.isclose(float(rows[1]["weight"]), view.maps[2, 5, 0, 1], atol=1e-6)
    data = json.loads(attention_json(view, range(6), range(12), {"text": "It was too tired."}))
    assert data["tokens"] == list(view.labels) and data["hidden_special"] is True and len(data["maps"]) == 72
    assert np.allclose(np.array(data["maps"][29]["weights"]), view.maps[2, 5], atol=1e-6)


@pytest.mark.slow
def test_png_and_svg_export():
    ok, reason = image_export_status()
    assert ok, reason  # `make test` installs Debian's chromium
    fig = charts.layer_head_grid(np.eye(3), "grid")
    assert figure_image(fig, "png").startswith(b"\x89PNG")
    assert b"<svg" in figure_image(fig, "svg")[:500]
