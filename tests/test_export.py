"""Export formats: CSV and JSON carry exactly the shown weights; images render through Chromium."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from mha_core import run
from mha_core.analysis.heads.display import attention_view
from mha_core.figures import charts
from mha_core.serving.export import attention_csv, attention_json, figure_image, image_export_status
from tests.conftest import cli


def test_csv_and_json_hold_the_view(bundled):
    view = attention_view(run(bundled, "It was too tired."), 0, hide_special=True)
    rows = list(csv.DictReader(io.StringIO(attention_csv(view, [2], [5]))))
    n = len(view.labels)
    assert len(rows) == n * n
    assert rows[1]["query"] == view.labels[0] and rows[1]["key"] == view.labels[1]
    assert np.isclose(float(rows[1]["weight"]), view.maps[2, 5, 0, 1], atol=1e-6)
    data = json.loads(attention_json(view, None, {"text": "It was too tired."}))
    assert data["tokens"] == list(view.labels) and data["hidden_special"] is True
    assert np.array(data["attention"]).shape == view.maps.shape
    assert np.abs(np.array(data["attention"]) - view.maps).max() <= 5e-8  # JSON_DIGITS (7), as the CLI writes
    one = json.loads(attention_json(view, [(2, 5)], {}))
    assert one["heads"] == [[2, 5]] and np.array_equal(np.array(one["attention"][0]), np.array(data["attention"])[2, 5])


def test_the_page_and_the_cli_write_the_same_attention_json(bundled, tmp_path):
    """Issue 34: the page wrote 6 digits and a list of {layer, head, weights}; the CLI 7 digits and one array. The
    CLI itself runs here (it had been stood in for by the function it calls)."""
    text = "It was too tired."
    view = attention_view(run(bundled, text), 0, hide_special=False)
    page = json.loads(attention_json(view, None, {}))
    out = tmp_path / "cli.json"
    assert cli("attention", text, "--json", str(out)).returncode == 0
    written = json.loads(out.read_text())
    assert page["tokens"] == written["tokens"] and page["attention"] == written["attention"]


@pytest.mark.slow
def test_png_and_svg_export():
    ok, reason = image_export_status()
    assert ok, reason  # `make test` installs Debian's chromium
    fig = charts.layer_head_grid(np.eye(3), "grid")
    assert figure_image(fig, "png").startswith(b"\x89PNG")
    assert b"<svg" in figure_image(fig, "svg")[:500]
