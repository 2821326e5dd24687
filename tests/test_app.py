"""AppTest: the app starts on the bundled model and renders a head's map."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT


def test_app_starts_and_shows_a_head():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 1
    assert "path" in at.caption[0].value
