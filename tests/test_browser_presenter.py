"""Issue 82 in Chromium: a presenter's clicker moves the lesson (PageDown, Space and → forward; PageUp and ← back)
with the keyboard's focus visible, and projector mode (?view=projector) shows text at 7:1 or more and chart marks at
3:1 or more against their background, measured on the rendered page; its toggle turns it off."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from mha_core.teaching.lesson import STEPS
from tests.accessibility import contrasts
from tests.browser import ARTIFACTS, chromium_page, wait_idle
from tests.test_browser_lesson import room_to_spare

pytestmark = pytest.mark.browser

TEXT_CONTRAST, MARK_CONTRAST = 7.0, 3.0
FOCUSED = """() => { const e = document.activeElement, s = getComputedStyle(e);
                     return [e.tagName, s.outlineStyle, parseFloat(s.outlineWidth)]; }"""


def step_shown(page: object) -> int:
    return int(page.locator("h1").first.inner_text().split(".")[0])


def pressed(page: object, key: str) -> int:
    page.keyboard.press(key)
    wait_idle(page, 240_000)  # a step's first run on a busy server
    return step_shown(page)


def weakest(measured: list[tuple[str, float]]) -> tuple[str, float]:
    return min(measured, key=lambda item: item[1])


def test_a_clicker_walks_the_lesson_and_the_projector_reads_from_the_back(app_url):
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(width=1920, height=1080) as page:
        page.goto(f"{app_url}/lesson?view=projector")
        wait_idle(page, 240_000)
        seen, room = {}, {}
        for key, step in ((None, 1), ("PageDown", 2), ("Space", 3)):
            assert (step_shown(page) if key is None else pressed(page, key)) == step, key
            page.locator("[data-testid='stMain'] .js-plotly-plot .xtick text").first.wait_for(timeout=60_000)
            seen[step] = contrasts(page)
            room[step] = room_to_spare(page)  # projector mode's larger type: the step still needs no scrolling
        page.screenshot(path=str(ARTIFACTS / "lesson_projector_mode.png"))
        walked = [pressed(page, key) for key in ("PageUp", "ArrowLeft", "ArrowRight", "ArrowRight")]
        for _ in range(12):  # the keyboard's own way to a button: its focus ring shows
            page.keyboard.press("Tab")
            if page.evaluate(FOCUSED)[0] == "BUTTON":
                break
        focused = page.evaluate(FOCUSED)
        page.get_by_text("Projector mode").click()
        wait_idle(page, 120_000)
        page.locator("[data-testid='stMain'] .js-plotly-plot .xtick text").first.wait_for(timeout=60_000)
        _, plain_marks = contrasts(page)
        address = parse_qs(urlparse(page.url).query)
        page.goto(f"{app_url}/lesson?view=projector&step=6")  # a caption under its grid (Streamlit draws at 0.6)
        wait_idle(page, 240_000)
        page.locator("[data-testid='stMain'] .js-plotly-plot .xtick text").first.wait_for(timeout=60_000)
        page.locator("[data-testid='stMain'] [data-testid='stCaptionContainer']").first.wait_for(timeout=60_000)
        seen[6] = contrasts(page)
    assert walked == [2, 1, 2, 3]
    assert min(room.values()) > 0, room  # step 3's overview ran 61 px below the screen before its sentence counted
    for step, (texts, marks) in seen.items():
        assert len(texts) > 10 and marks, STEPS[step - 1].key
        assert weakest(texts)[1] >= TEXT_CONTRAST, (step, weakest(texts))
        assert weakest(marks)[1] >= MARK_CONTRAST, (step, weakest(marks))
    assert focused[0] == "BUTTON" and focused[1] == "solid" and focused[2] >= 2, focused
    assert "view" not in address and weakest(plain_marks)[1] < 1.5  # off: the overview's scale has its pale end again
