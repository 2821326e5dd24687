"""The corpus search in a real browser (issue 37): opened from the Heads page's tab bar as a visitor does, on a desktop
in English (the table and the summary) and on a phone in Chinese (the matches as a list). Screenshots go to
test-artifacts/."""

from __future__ import annotations

import pytest

from tests.browser import ARTIFACTS, chromium_page, wait_idle

pytestmark = pytest.mark.browser


def test_search_on_a_desktop_and_on_a_phone_in_chinese(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(app_url)
        page.get_by_role("tab", name="Search a corpus").click(timeout=120_000)
        page.get_by_text("The 50 pieces nearest to", exact=False).wait_for(timeout=180_000)
        wait_idle(page, timeout=120_000)
        page.locator(".st-key-search_summary .js-plotly-plot").wait_for(timeout=60_000)
        page.locator('[data-testid="stDataFrame"]').first.wait_for(timeout=60_000)
        assert "view=Search" in page.url
        page.screenshot(path=str(ARTIFACTS / "search_desktop.png"), full_page=True)
    with chromium_page(width=390, height=2400, phone=True) as page:
        page.goto(f"{app_url}/?lang=zh")
        page.get_by_role("tab", name="语料搜索").click(timeout=120_000)
        page.get_by_text("最接近的 50 个词元", exact=False).first.wait_for(timeout=180_000)
        wait_idle(page, timeout=120_000)
        items = page.locator('[data-testid="stMarkdown"] ol li')
        items.first.wait_for(timeout=60_000)
        assert items.count() == 50 and "【" in items.first.inner_text()
        assert page.locator('[data-testid="stDataFrame"]').count() == 0
        page.screenshot(path=str(ARTIFACTS / "search_phone_zh.png"), full_page=True)
