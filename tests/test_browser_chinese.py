"""Issue 23 in a real browser: the Heads page in Chinese on Gemma 3, as a Chinese browser opens it."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest

from mha_core.engine.loading.bundled import GEMMA_NAME
from tests.browser import ARTIFACTS, browser_contexts, wait_idle
from tests.conftest import converted

pytestmark = pytest.mark.browser
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.long
def test_a_chinese_browser_opens_the_heads_page_in_chinese_on_gemma(app_url):
    """No lang= in the address: the browser's zh-CN locale picks Chinese, which opens on Gemma with a Chinese
    sentence; the token labels on the head map are Chinese characters and the page text is Chinese."""
    config = json.loads((converted(GEMMA_NAME) / "config.json").read_text())
    ARTIFACTS.mkdir(exist_ok=True)
    with browser_contexts() as new_page:
        page = new_page(locale="zh-CN", viewport={"width": 1400, "height": 1800})
        page.goto(app_url)
        page.get_by_text("注意力头").first.wait_for(timeout=120_000)
        head_map = page.locator(".st-key-head_map .js-plotly-plot")
        head_map.wait_for(timeout=120_000)
        wait_idle(page)
        ticks = [t for t in head_map.locator("g.ytick text").all_text_contents() if t.strip()]
        page.screenshot(path=str(ARTIFACTS / "heads_zh_gemma.png"), full_page=True)
        body = page.locator("[data-testid='stMain']").inner_text()
        page.get_by_role("tab", name="单个标记").click()  # the first click: the address now says lang=zh
        wait_idle(page)
        sidebar = page.locator("[data-testid='stSidebar']").inner_text()
        state = parse_qs(urlparse(page.url).query)
    assert sum(bool(HAN.search(t)) for t in ticks) >= len(ticks) // 2, ticks  # 玛丽, 约翰, 她 …
    assert "单个头" in body and "所有头一览" in body  # the tabs and the overview, in Chinese
    shape = f"{config['num_hidden_layers']} 层 × {config['num_attention_heads']} 个头"  # Gemma's, in Chinese
    assert shape in sidebar and "语言" in sidebar
    assert state.get("lang") == ["zh"]


def test_the_uploader_speaks_chinese_on_a_phone_and_a_projector(app_url):
    """Issue 77.8: Streamlit's uploader drew "Upload" and "20MB per file • TXT" on every Chinese page with a sentence
    box. Its English texts are drawn at size 0 and the Chinese ones after them, at 390 px and at 1400 px."""
    ARTIFACTS.mkdir(exist_ok=True)
    read = """() => { const zone = document.querySelector(".st-key-text_file [data-testid=stFileUploaderDropzone]");
        const texts = [zone.querySelector("button [data-testid=stMarkdownContainer] p"),
                       zone.querySelector("[data-testid=stFileUploaderDropzoneInstructions] span")];
        return texts.map(e => [getComputedStyle(e).fontSize, getComputedStyle(e, "::after").content]); }"""
    with browser_contexts() as new_page:
        for width in (390, 1400):
            page = new_page(viewport={"width": width, "height": 1400})
            page.goto(f"{app_url}/?lang=zh")
            uploader = page.locator(".st-key-text_file [data-testid=stFileUploaderDropzone]")
            uploader.wait_for(timeout=120_000)
            wait_idle(page)
            uploader.scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"uploader_zh_{width}.png"))
            (button, button_after), (limit, limit_after) = page.evaluate(read)
            assert button == limit == "0px", (button, limit)  # the English, drawn at size 0
            assert (button_after, limit_after) == ('"上传"', '"每个文件不超过 20MB • TXT"')
