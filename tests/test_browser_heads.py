"""End to end in a real browser: streamlit run + Debian's Chromium driven by Playwright."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest

from mha_core.engine.loading.bundled import DECODER_NAME
from mha_core.figures.charts import TILE_SPOTS
from tests.browser import ARTIFACTS, choose_option, chromium_page, open_with_sentence, wait_idle
from tests.conftest import ANIMAL_WIDE, converted

pytestmark = pytest.mark.browser


def test_heads_page_minimal_pair_open_head_change_token(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        open_with_sentence(page, app_url, ANIMAL_WIDE)
        # the overview is drawn for the new sentence (its head map axis carries "wide")
        overview = page.locator(".st-key-overview .js-plotly-plot")
        overview.wait_for(timeout=60_000)
        page.locator("svg text", has_text="wide").first.wait_for(timeout=60_000)
        # open layer 3, head 5 by clicking its tile in the overview (below the head views)
        overview.scroll_into_view_if_needed()
        spots = TILE_SPOTS**2  # click targets per tile: one near the tile's corner
        overview.locator(".scatterlayer .point").nth((3 * 12 + 5) * spots).click(force=True)
        wait_idle(page)
        page.get_by_text("Layer 3, head 5: attention weights").wait_for(timeout=60_000)
        # change the query token in the token view
        page.get_by_role("tab", name="One token").click()  # a tab records itself: a run
        wait_idle(page)  # else the next wait could end on this run, before the query is in the address
        choose_option(page, "Query token", ": animal")
        wait_idle(page)
        page.get_by_text("Weight from 'animal' to").first.wait_for(timeout=60_000)
        state = parse_qs(urlparse(page.url).query)
        page.screenshot(path=str(ARTIFACTS / "heads_e2e.png"), full_page=True)
    assert state["text"] == [ANIMAL_WIDE]
    assert state["layer"] == ["3"] and state["head"] == ["5"]
    assert state["query"] == ["2"]  # [CLS] the animal


def test_heads_page_on_the_bundled_decoder_shows_readable_token_labels(app_url):
    config = json.loads((converted(DECODER_NAME) / "config.json").read_text())
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{app_url}/?model={DECODER_NAME}&layer=5&head=2")
        page.get_by_label("Sentence", exact=True).wait_for(timeout=120_000)
        page.get_by_text("Layer 5, head 2: attention weights").wait_for(timeout=120_000)
        wait_idle(page, timeout=120_000)
        head_map = page.locator(".st-key-head_map .js-plotly-plot")
        labels = [t or "" for t in head_map.locator("svg text").all_text_contents()]
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        page.screenshot(path=str(ARTIFACTS / "heads_decoder.png"), full_page=True)
    assert f"{config['num_hidden_layers']} layers × {config['num_attention_heads']} heads" in sidebar
    assert any(label.endswith("␣animal") for label in labels) and any("<|im_start|>" in label for label in labels)
    assert not any("Ġ" in label for label in labels)
