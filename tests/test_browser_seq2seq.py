"""Whisper in a real browser (streamlit run + Debian's Chromium): the Encoder–decoder page's spectrogram views on a
desktop, and on a phone's width the Heads page's cross-attention under the spectrogram, a head opened by tapping its
tile. Screenshots go to test-artifacts/."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from mha_core.engine.loading.bundled import WHISPER_NAME
from mha_core.figures.charts import TILE_SPOTS
from tests.browser import ARTIFACTS, chromium_page, wait_idle

pytestmark = pytest.mark.browser


def test_whisper_spectrogram_views_on_a_desktop_and_a_phone(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{app_url}/seq2seq?model={WHISPER_NAME}")
        page.get_by_text("Heard", exact=False).first.wait_for(timeout=180_000)
        wait_idle(page, timeout=180_000)
        page.locator("svg text", has_text="seconds").first.wait_for(timeout=60_000)  # under the spectrogram
        page.locator("svg text", has_text="mel bin").first.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "whisper_desktop.png"), full_page=True)
    with chromium_page(width=390, height=2400, phone=True) as page:
        page.goto(f"{app_url}/?model={WHISPER_NAME}&lang=zh")
        tiles = page.locator(".st-key-kind_overview .js-plotly-plot")
        tiles.wait_for(timeout=180_000)
        wait_idle(page, timeout=180_000)
        tiles.scroll_into_view_if_needed()
        # a phone shows the chosen layer's heads three to a row; tap head 4's tile (second row, second column)
        tiles.locator(".scatterlayer .point").nth(4 * TILE_SPOTS**2).click(force=True)
        wait_idle(page, timeout=60_000)
        page.get_by_text("头 4").first.wait_for(timeout=60_000)
        page.locator("svg text", has_text="秒").first.wait_for(timeout=60_000)  # seconds, in Chinese
        state = parse_qs(urlparse(page.url).query)
        page.screenshot(path=str(ARTIFACTS / "whisper_phone_zh.png"), full_page=True)
    assert state["k_head"] == ["4"] and state["model"] == [WHISPER_NAME]
