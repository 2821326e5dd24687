"""Issue 32 in Chromium: what the state machine (tests/test_visit_machine.py) found, walked as a visitor walks it —
the language kept across pages and tabs, no traceback after choosing a token and changing the sentence, and a shared
link's model kept in the address (after a refresh and a language switch too)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser import ARTIFACTS, choose_option, chromium_page, commit_text, wait_idle

pytestmark = pytest.mark.browser


def address(page: object) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlparse(page.url).query).items()}


def nav(page: object, title: str) -> None:
    """Switch page by the sidebar's navigation, as a visitor does."""
    page.locator('[data-testid="stSidebarNav"] a', has_text=title).click()
    wait_idle(page)


def title(page: object) -> str:
    return page.locator("h1").first.inner_text()


def assert_no_error(page: object) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator("body").inner_text()[:2000]


@pytest.mark.long
def test_chinese_stays_chinese_across_pages_and_tabs(app_url):
    """A Chinese visit on its default model (Gemma 3): every page by the navigation, a tab clicked on each."""
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page() as page:
        page.goto(f"{app_url}/?lang=zh")
        page.get_by_role("heading", name="注意力头").wait_for(timeout=240_000)
        wait_idle(page, timeout=240_000)
        model = page.get_by_role("combobox", name="模型").input_value()
        for nav_title, heading, tab in (("预测", "模型预测什么", "逻辑透镜"),
                                        ("贡献", "各个头的贡献", "注意力展开"),
                                        ("参数", "参数与计算量", "任意形状"),
                                        ("逐步讲解", "多头注意力，一步一步", "练习")):
            nav(page, nav_title)
            page.get_by_role("tab", name=tab).click()
            wait_idle(page, timeout=120_000)
            assert title(page) == heading and address(page).get("lang") == "zh", (nav_title, page.url)
            assert page.get_by_role("combobox", name="模型").input_value() == model == "gemma-3-270m"
            assert_no_error(page)
        page.screenshot(path=str(ARTIFACTS / "visit_chinese_lessons.png"), full_page=True)


def test_choosing_a_token_then_changing_the_sentence_is_no_traceback(app_url):
    with chromium_page() as page:
        page.goto(f"{app_url}/?view=One+token")
        page.get_by_role("combobox", name="Query token").wait_for(timeout=90_000)
        wait_idle(page)
        choose_option(page, "Query token", ": cross")
        wait_idle(page)
        choose_option(page, "Key token", ": street")
        wait_idle(page)
        assert {"query", "key"} <= set(address(page))
        commit_text(page, "Sentence", "Mary gave the book to John because she had already read it.")
        wait_idle(page)  # the run's marker comes after its address (on a loaded machine a check once ran between the
        assert_no_error(page)  # new widgets and the new address)
        query = page.get_by_role("combobox", name="Query token").input_value()
        assert "she" in query, query  # the new sentence's own pronoun, not the old sentence's index
        assert "query" not in address(page) and "key" not in address(page)
        page.screenshot(path=str(ARTIFACTS / "visit_token_then_sentence.png"), full_page=True)


def test_a_shared_link_keeps_its_model_through_a_refresh_and_a_language_switch(app_url):
    with chromium_page() as page:
        page.goto(f"{app_url}/predictions?lang=en&model=SmolLM2-135M-Instruct&p_tab=Logit+lens")
        page.get_by_role("heading", name="What the model predicts").wait_for(timeout=180_000)
        wait_idle(page, timeout=180_000)
        assert address(page)["model"] == "SmolLM2-135M-Instruct" and address(page)["p_tab"] == "Logit lens"
        page.reload()
        page.get_by_role("heading", name="What the model predicts").wait_for(timeout=90_000)
        wait_idle(page, timeout=120_000)
        assert address(page)["model"] == "SmolLM2-135M-Instruct"
        choose_option(page, "Language", "简体中文")
        page.get_by_role("heading", name="模型预测什么").wait_for(timeout=90_000)
        wait_idle(page, timeout=120_000)
        assert address(page) | {"text": ""} == {"lang": "zh", "model": "SmolLM2-135M-Instruct", "p_tab": "Logit lens",
                                                "text": ""}
        assert page.get_by_role("tab", name="逻辑透镜", selected=True).count() == 1
        assert_no_error(page)
        page.screenshot(path=str(ARTIFACTS / "visit_shared_link.png"), full_page=True)
