"""AppTest for the parameters page."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import open_app


def open_page(tab: str | None = None) -> AppTest:
    return open_app("views/parameters.py", **({"ptab": tab} if tab else {}))


def test_model_view_counts_from_modules(bundled):
    at = open_page()
    assert not at.exception
    total = sum(p.numel() for p in bundled.model.parameters())
    assert at.metric[0].value == f"{total:,}"
    attention = sum(p.numel() for layer in bundled.model.encoder.layer
                    for m in (layer.attention.self, layer.attention.output.dense) for p in m.parameters())
    assert at.metric[1].value == f"{attention:,}"
    table = at.dataframe[0].value
    assert int(table["parameters"].sum()) == total


def test_calculator_default_and_changed_shape():
    at = open_page("Any shape")
    assert not at.exception
    assert at.metric[0].value == "1,050,624"
    assert "matches" in at.success[0].value and "1,049,600" in at.info[0].value
    at.number_input(key="calc_kv").set_value(2).run()
    assert at.metric[0].value == f"{2 * 512 * 512 + 2 * 512 * 128 + 2 * 512 + 2 * 128:,}"
    assert "grouped-query" in at.metric[0].label


@pytest.mark.parametrize(("key", "value", "message"), [
    ("calc_heads", 7, "not divisible"),
    ("calc_heads", 0, "positive"),
    ("calc_d_model", -512, "positive"),
    ("calc_d_model", 10**9, "limit"),
])
def test_impossible_shape_gives_a_clear_message(key, value, message):
    at = open_page("Any shape")
    at.number_input(key=key).set_value(value).run()
    assert not at.exception
    assert any(message in e.value for e in at.error)


def test_head_norms_grid_links_to_heads_page():
    at = open_page("Head weight norms")
    assert not at.exception
    assert len(at.get("plotly_chart")) == 2
