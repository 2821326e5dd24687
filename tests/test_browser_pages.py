"""Pages reached by their address, and typed input on them; deep links on a fresh server: a shared URL to a sub-page
must go through the app's router."""

from __future__ import annotations

import pytest

from tests.browser import ARTIFACTS, chromium_page, data_point_pixel, open_with_sentence, wait_idle

pytestmark = pytest.mark.browser


def deep_link_to_parameters_calculator(page: object, url: str) -> None:
    """A shared link to a sub-page, the very first request the server at `url` sees (tests/test_browser_lesson.py's
    restarted server, fresh when this runs first on it: a server of its own took 15 s of the tier on 2 cores)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{url}/parameters?ptab=Any+shape")
    page.get_by_text("Calculator for any shape").wait_for(timeout=90_000)
    wait_idle(page)
    page.locator(".js-plotly-plot").nth(2).wait_for(timeout=60_000)  # FLOPs, memory, KV cache drawn
    nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
    page.screenshot(path=str(ARTIFACTS / "parameters_deep_link.png"), full_page=True)
    assert "1,050,624" in page.locator("body").inner_text()
    assert "Heads" in nav and "Parameters" in nav
    assert "state" not in nav.lower()  # no legacy pages/ listing of helper modules


def test_walkthrough_four_steps_in_the_browser(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    steps = ["1. Linear projections", "2. Scaled dot-product attention", "3. Concatenate the heads",
             "4. Output projection W_O", "Parity"]
    with chromium_page(height=4400) as page:  # Streamlit scrolls inside: a tall window
        page.goto(f"{app_url}/walkthrough")
        for step in steps:
            heading = page.get_by_role("heading", name=step)
            heading.wait_for(timeout=90_000)
            heading.scroll_into_view_if_needed()
        wait_idle(page)
        slider = page.get_by_role("slider").first
        slider.focus()
        slider.press("End")  # scale 1.0: softmax without 1/sqrt(d_k)
        wait_idle(page)
        page.get_by_text("at scale 1.000").first.wait_for(timeout=60_000)
        parity = page.get_by_text("Max |ours − model|").inner_text()
        page.screenshot(path=str(ARTIFACTS / "walkthrough_e2e.png"), full_page=True)
    assert "Explicit vs fused" in parity


HOSTILE = ("Mail from a@b.co reached the **bold** page at www.example.org because it was urgent "
           '<img src=x onerror="window.__pwned=1"> ~~gone~~.')


def assert_nothing_live(page: object) -> None:
    """No link, emphasis, strike-through or image was made from what the visitor typed."""
    main = page.locator('[data-testid="stMain"]')
    assert main.locator("a[href*='example.org'], a[href^='mailto:']").count() == 0
    assert main.locator("strong", has_text="bold").count() == 0 and main.locator("del").count() == 0
    assert page.locator("img[src='x']").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_typed_markup_stays_text_on_heads_and_coreference(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        open_with_sentence(page, app_url, HOSTILE)
        page.get_by_role("tab", name="One token").click()
        wait_idle(page)
        assert_nothing_live(page)
        page.get_by_role("link", name="Coreference").click()
        page.get_by_role("heading", name="Minimal pair").wait_for(timeout=90_000)
        wait_idle(page, timeout=90_000)  # its first run: else the wait after Enter could take that run for its own
        pair = page.get_by_label("Second sentence (differs in a few words)")
        pair.fill(HOSTILE.replace("example.org", "example.net"))
        pair.press("Enter")
        wait_idle(page)
        body = page.locator('[data-testid="stMain"]').inner_text()
        page.screenshot(path=str(ARTIFACTS / "hostile_coreference.png"), full_page=True)
        assert_nothing_live(page)
    assert "Where 'it' looks" in body
    assert "prefer 'a@b.co'" in body or "prefer 'Mail'" in body  # the headline names the candidates
    assert "Changed: 'www.example.org' → 'www.example.net'" in body.replace("\u200b", "")  # shown, as text


def test_selecting_a_point_of_the_query_key_view_lists_its_top_keys(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(height=2400) as page:
        page.goto(f"{app_url}/corpus?g_view=Query%E2%80%93key+view+of+one+head&g_layer=1&g_head=3")
        plot = page.locator(".js-plotly-plot").first
        plot.wait_for(timeout=120_000)
        wait_idle(page, 120_000)
        # a query point's own pixel, from Plotly's axes (a guessed spot could miss every point on a slow machine)
        x, y = page.evaluate("() => { const gd = document.querySelector('.js-plotly-plot');"
                             " return [gd.data[0].x[0], gd.data[0].y[0]]; }")
        page.mouse.click(*data_point_pixel(page, x, y, which=0))
        page.wait_for_url("**g_sentence=**", timeout=60_000)  # the selection moved into the address
        # the top-keys table's note ("position" alone also names a colouring option, shown before the table is)
        page.get_by_text("recomputed from the kept query and key vectors", exact=False).first.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "corpus_qk_selection.png"), full_page=True)
        body, address = page.locator("body").inner_text(), page.url
    assert "g_sentence=" in address
    assert "attention" in body and "recomputed from the kept query and key vectors" in body
