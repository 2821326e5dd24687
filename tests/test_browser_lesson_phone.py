"""Issue 77.9 in Chromium: the Chinese lesson on Gemma 3 on a 390-px phone shows each step's figure in its first
screen, as wide as the screen allows, under a title that fits; Back, the step list and Next share one row; the
translation step draws the links alone (the alignment matrix's rotated labels crowded its title at this width); the
cross-attention step's chart sits above its layer and head pickers with its plot wide, the image step's picture of
every head whole in the first screen; "Is attention the explanation?" draws a row per word."""

from __future__ import annotations

import pytest

from mha_core.teaching.lesson import step_number
from tests.browser import PHONE_AGENT, browser_contexts, wait_idle

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
FIRST_FIGURE = """() => { const figure = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
    if (!figure) return null; const box = figure.getBoundingClientRect();
    return [box.top, box.width]; }"""
ROW = """() => ['上一步', '下一步'].map(name => [...document.querySelectorAll('button')]
    .find(b => b.innerText.trim() === name)).map(b => b && Math.round(b.getBoundingClientRect().top))"""


@pytest.mark.long
def test_on_a_phone_each_step_s_figure_is_in_the_first_screen(app_url):
    with browser_contexts() as new_page:
        phone = new_page(viewport=PHONE, user_agent=PHONE_AGENT, is_mobile=True, has_touch=True)
        for step in (1, 2, 3, 5, step_number("explanation"), step_number("translation")):
            phone.goto(f"{app_url}/lesson?lang=zh&step={step}")
            wait_idle(phone, timeout=240_000)
            phone.locator('[data-testid="stMain"] .js-plotly-plot').first.wait_for(timeout=60_000)
            top, width = phone.evaluate(FIRST_FIGURE)
            assert top < PHONE["height"] - 150, (step, top)  # its top and a good part of it in the first screen
            assert width >= 0.8 * PHONE["width"], (step, width)
            assert phone.locator("h1").first.bounding_box()["height"] <= 80, step  # two lines at most
        assert phone.locator(".js-plotly-plot").count() == 1  # translation: the links, no matrix
        back, forward = phone.evaluate(ROW)
        assert back == forward  # one row
PLOT_AREA = """() => { const figure = document.querySelector('[data-testid="stMain"] .js-plotly-plot');
    const area = figure.querySelector('.nsewdrag').getBoundingClientRect();
    const picker = [...document.querySelectorAll('[data-testid="stSelectbox"]')]
        .find(s => s.innerText.includes('解码器层'));
    return [figure.getBoundingClientRect().top, area.width, picker.getBoundingClientRect().top]; }"""
PICTURE = """() => { const box = document.querySelector('[data-testid="stMain"] [data-testid="stImage"] img')
    .getBoundingClientRect(); return [box.top, box.bottom, box.width]; }"""


@pytest.mark.long
def test_on_a_phone_the_cross_attention_and_image_steps_show_their_figure_first(app_url):
    """Cross-attention (Whisper): the chart above the layer and head pickers, its plot at least half the screen wide
    (the colour bar under it); images (DINOv2): the picture of every head whole in the first screen, above its
    choices."""
    with browser_contexts() as new_page:
        phone = new_page(viewport=PHONE, user_agent=PHONE_AGENT, is_mobile=True, has_touch=True)
        phone.goto(f"{app_url}/lesson?lang=zh&step={step_number('cross')}")
        wait_idle(phone, timeout=240_000)
        phone.locator('[data-testid="stMain"] .js-plotly-plot .nsewdrag').first.wait_for(timeout=60_000)
        top, plot_width, picker = phone.evaluate(PLOT_AREA)
        assert top < PHONE["height"] - 150 and top < picker, (top, picker)
        assert plot_width >= 0.5 * PHONE["width"], plot_width
        phone.goto(f"{app_url}/lesson?lang=zh&step={step_number('images')}")
        wait_idle(phone, timeout=240_000)
        phone.locator('[data-testid="stMain"] [data-testid="stImage"] img').first.wait_for(timeout=60_000)
        top, bottom, width = phone.evaluate(PICTURE)
        assert bottom <= PHONE["height"] and width >= 0.8 * PHONE["width"], (top, bottom, width)
