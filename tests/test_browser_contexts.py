"""The browser tests' visitors (tests/browser.py): a context a later test gets back is the earlier visitor's, cleared
of what that visitor left (cookies, storage), and each page has the viewport it asked for."""

from __future__ import annotations

import pytest

from tests.browser import browser_contexts

pytestmark = pytest.mark.browser

LEAVE = "() => { document.cookie = 'who=first; path=/'; localStorage.setItem('who', 'first'); }"
LEFT = "() => [document.cookie, localStorage.getItem('who'), innerWidth, innerHeight, screen.width]"


def test_a_reused_context_keeps_nothing_of_its_last_visitor(app_url):
    with browser_contexts() as new_page:
        first = new_page(locale="en-GB", viewport={"width": 1000, "height": 700})
        first.goto(f"{app_url}/_stcore/health")
        first.evaluate(LEAVE)
        cookies, stored, *_ = first.evaluate(LEFT)
        assert "who=first" in cookies and stored == "first"
    with browser_contexts() as new_page:
        second = new_page(locale="en-GB", viewport={"width": 390, "height": 800})
        assert second.context is first.context  # the same visitor's context, given back
        second.goto(f"{app_url}/_stcore/health")
        cookies, *left = second.evaluate(LEFT)
        assert "who=" not in cookies and left == [None, 390, 800, 390]
