"""Issue 82 in Chromium: axe-core on every page of the app (mha_core/serving/pages.py's PAGES), in English (the
default model) and in Chinese (Gemma 3), on a 1400-px screen and a 390-px phone: no "serious" or "critical"
violation of the WCAG 2.1 A/AA rules, every chart named for a screen reader (its sentence) and every picture with alt
text.

One test per language and width walks every page in one session (the browser's back-and-forward navigation: no
page reloads the app's scripts), axe-core injected once; the violations per page are kept in test-artifacts/ for the
record (before → after: docs/developers/accessibility.md)."""

from __future__ import annotations

import json
import re

import pytest

from tests.accessibility import axe_violations, said
from tests.browser import ARTIFACTS, PHONE_AGENT, ROOT, browser_contexts, wait_idle

pytestmark = pytest.mark.browser

LOCALES = {"en": "en-US", "zh": "zh-CN"}
PHONE_WIDTH = 390
# the pages as the router lists them (read from the file: importing mha_core would import torch into the tier's process)
PAGES = re.findall(r'= Page\("(\w+)", N_', (ROOT / "mha_core" / "serving" / "pages.py").read_text(encoding="utf-8"))
GO = """(path) => { history.pushState({}, "", path);
                   window.dispatchEvent(new PopStateEvent("popstate", {state: {}})); }"""
UNNAMED = """() => [
  ...[...document.querySelectorAll("[data-testid='stPlotlyChart']")].filter(c => !(c.getAttribute("aria-label") || "")
     .trim()).map(() => "a chart without an accessible name"),
  ...[...document.querySelectorAll("[data-testid='stMain'] img")].filter(i => !i.hasAttribute("alt"))
     .map(i => "an image without alt text: " + i.src.slice(0, 60))]"""


def path_of(page: str, language: str) -> str:
    return f"/{'' if page == PAGES[0] else page}?lang={language}"


@pytest.mark.long
@pytest.mark.parametrize("width", [1400, PHONE_WIDTH])
@pytest.mark.parametrize("language", ["en", "zh"])
def test_no_page_has_a_serious_accessibility_violation(app_url, language, width):
    phone = {"user_agent": PHONE_AGENT, "is_mobile": True, "has_touch": True} if width == PHONE_WIDTH else {}
    found, counts = {}, {}
    with browser_contexts() as new_page:
        page = new_page(viewport={"width": width, "height": 900}, locale=LOCALES[language], **phone)
        page.goto(app_url + path_of(PAGES[0], language))
        for name in PAGES:
            if name != PAGES[0]:
                page.evaluate(GO, path_of(name, language))
            wait_idle(page, 240_000)
            violations = axe_violations(page)
            found[name] = (violations, page.evaluate(UNNAMED))
            counts[name] = sum(len(v["nodes"]) for v in violations)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"axe_{language}_{width}.json").write_text(json.dumps({"counts": counts, "violations": {
        name: violations for name, (violations, _) in found.items()}}, ensure_ascii=False, indent=1))
    assert len(counts) == len(PAGES) >= 14
    for name, (violations, unnamed) in found.items():
        assert not violations and not unnamed, f"{name} ({language}, {width} px):\n{said(violations)}\n{unnamed}"
