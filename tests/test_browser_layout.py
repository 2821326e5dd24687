"""The decoder's Walkthrough and a phone's 390-px screen, in Chromium (issue 19)."""

from __future__ import annotations

import json

import pytest

from tests.browser import ARTIFACTS, chromium_page, wait_idle

pytestmark = pytest.mark.browser
DECODER = "SmolLM2-135M-Instruct"


def test_decoder_walkthrough_picks_it_and_reads_pieces_as_the_charts_do(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(height=4400) as page:
        page.goto(f"{app_url}/walkthrough?model={DECODER}")
        page.get_by_role("heading", name="Parity").wait_for(timeout=180_000)
        wait_idle(page, timeout=120_000)
        query = page.get_by_role("combobox", name="Query token").input_value()
        page.get_by_role("combobox", name="Query token").click()
        options = page.get_by_role("option").all_inner_texts()
        page.keyboard.press("Escape")
        page.screenshot(path=str(ARTIFACTS / "walkthrough_decoder.png"), full_page=True)
        body = page.locator("body").inner_text()
    assert query.strip().endswith("␣it"), query
    assert options and not any("Ġ" in option for option in options)
    assert "1/√64 = 0.1250" in body  # SmolLM2's own scale


def test_a_phone_reaches_the_sentence_box_and_reads_the_grids(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(width=390, height=2400, phone=True) as page:
        page.goto(f"{app_url}/?model={DECODER}&layer=0&head=0")  # (the page opens on the pronoun's strongest head)
        box = page.locator('[data-testid="stMain"]').get_by_label("Sentence", exact=True)  # on the page, not behind »
        box.wait_for(timeout=180_000)
        wait_idle(page, timeout=120_000)
        assert box.is_visible()
        page.get_by_text("On a narrow screen the overview shows layer 0").wait_for(timeout=60_000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)  # drawn after the text, later under load
        grids = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map(p => JSON.stringify("
                              "{data: p.data.map(t => ({type: t.type, text: t.texttemplate || null})), "
                              "bar: !!p.querySelector('.modebar-container .modebar')}))")
        page.screenshot(path=str(ARTIFACTS / "heads_phone.png"), full_page=True)
    figures = [json.loads(g) for g in grids]
    assert figures and all(t["text"] is None for f in figures for t in f["data"])  # no numbers in narrow cells
    assert not any(f["bar"] for f in figures)  # no toolbar over the titles


def test_the_roles_grid_on_a_phone_has_its_whole_title_and_no_toolbar(app_url):
    """Issue 42, item 10: the Roles chart's title was clipped and covered by Plotly's toolbar on a phone."""
    with chromium_page(width=390, height=2400, phone=True) as page:
        page.goto(f"{app_url}/roles")
        page.locator(".js-plotly-plot .gtitle").first.wait_for(timeout=180_000)
        wait_idle(page, timeout=120_000)
        boxes = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].map(p => {"
                              " const t = p.querySelector('.gtitle'), r = p.getBoundingClientRect();"
                              " const b = t ? t.getBoundingClientRect() : null;"
                              " return {bar: !!p.querySelector('.modebar-container .modebar'),"
                              " title: b && [b.left - r.left, b.right - r.left, r.width]}; })")
        page.screenshot(path=str(ARTIFACTS / "roles_phone.png"), full_page=True)
    assert boxes and not any(b["bar"] for b in boxes)
    for box in boxes:
        if box["title"]:
            left, right, width = box["title"]
            assert left >= 0 and right <= width + 1, box  # the whole title inside the chart


def test_one_tap_opens_a_head_on_a_phone(app_url):
    """Issue 42, item 10: a tile of the overview needs two taps on a touch screen (Plotly's first tap only hovers):
    under the tiles, one tap on a head's pill opens it (the Head picker, the address and the outline follow), in
    Chinese too."""
    with chromium_page(width=390, height=2400, phone=True) as page:
        page.goto(f"{app_url}/?lang=zh&model=all-MiniLM-L6-v2&layer=1&head=0")
        wait_idle(page, timeout=120_000)
        pills = page.get_by_role("radiogroup", name="打开第 1 层的一个头")
        assert pills.get_by_role("radio", name="H0", exact=True).get_attribute("aria-checked") == "true"
        pills.get_by_role("radio", name="H2", exact=True).tap()
        wait_idle(page)
        assert page.get_by_role("combobox", name="头").input_value().endswith("2")
        assert "head=2" in page.url
        outline = page.evaluate("() => { const g = document.querySelector('.st-key-overview .js-plotly-plot');"
                                " return g.layout.shapes[0].x0; }")
        assert outline > 0  # the red outline moved off the first tile of the row (head 0)
        shown = page.get_by_role("radiogroup", name="打开第 1 层的一个头").get_by_role("radio", name="H2", exact=True)
        assert shown.get_attribute("aria-checked") == "true"
