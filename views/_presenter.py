"""The lesson in front of a class (issue 82): a presenter's clicker moves it (→/←, PageDown/PageUp and Space, what
clickers send), the keyboard's focus is always visible, and projector mode (`?view=projector`, a toggle in the
sidebar) draws larger type, thicker lines and marks and colour scales without a pale end, its text at least 7:1
against the page.

The keys press the lesson's own Back and Next buttons (views/lesson.step_controls), so a key moves the class exactly
as a click does; a key typed into a box, a list, a slider or a tab bar stays theirs."""

from __future__ import annotations

import streamlit as st

from mha_core.i18n import tr
from views._state import project_charts
from views._visit import choose, forget, marked

VIEW, PROJECTOR = "view", "projector"  # ?view=projector
TOGGLE = "_projector_toggle"

KEYS = """<script>(() => {
  if (window.mhaPresenterKeys) return;
  window.mhaPresenterKeys = true;
  const NEXT = ["ArrowRight", "PageDown", " "], BACK = ["ArrowLeft", "PageUp"];
  const THEIRS = "input, textarea, select, [contenteditable=true], [role=slider], [role=combobox], [role=listbox], "
    + "[role=option], [role=tab], [role=radio], [role=menuitem], [data-baseweb=select]";
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const go = NEXT.includes(event.key) ? "next" : BACK.includes(event.key) ? "back" : null;
    const button = go && document.querySelector(`.st-key-lesson_${go} button`);
    const target = event.target instanceof Element ? event.target : document.body;
    if (!button || target.closest(THEIRS) || (event.key === " " && target.closest("button, a, summary"))) return;
    event.preventDefault();  // not the page's own scrolling
    if (!button.disabled) button.click();
  }, true);
})();</script>"""
FOCUS_CSS = ("<style>.stApp :focus-visible{outline:3px solid #1a3d7a!important;outline-offset:2px!important;"
             "box-shadow:0 0 0 5px #ffffff!important}</style>")  # dark on a light ring: seen on any background
PROJECTOR_ROOT_PX = 19  # projector mode's larger type: every size in rems grows with it
PROJECTOR_CSS = (  # text 7:1 or more on white; the primary button dark enough for its white text
    f"<style>html{{font-size:{PROJECTOR_ROOT_PX}px}}"
    "[data-testid='stMain'] :is(p,li,span,label,h1,h2,h3,h4,h5,h6,td,th,small,div)"
    ":not(button *):not([data-testid='stBaseButton-primary'] *):not([data-tag] *){color:#111111!important}"
    "[data-testid='stMain'] [data-testid='stCaptionContainer']{opacity:1!important}"  # Streamlit draws them at 0.6
    "[data-testid='stMain'] [data-tag]{background:#7a1212!important}"  # a list's chosen words: white on it
    "[data-testid='stMain'] [data-tag] *{color:#ffffff!important}"
    "[data-testid='stMain'] a,[data-testid='stMain'] a *{color:#003c77!important}"
    "[data-testid='stMain'] [data-testid='stBaseButton-primary']{background:#7a1212!important;"
    "border-color:#7a1212!important;color:#ffffff!important}"
    "[data-testid='stMain'] [data-testid='stBaseButton-primary'] *{color:#ffffff!important}"
    "[data-testid='stMain'] [data-testid='stBaseButton-secondary'] *{color:#111111!important}"
    "</style>")


def projector_on() -> bool:
    """Whether the lesson is in projector mode (the address's view=projector)."""
    return marked(VIEW, PROJECTOR)


def _toggled() -> None:
    if st.session_state.get(TOGGLE):
        choose(VIEW, PROJECTOR)
    else:
        forget(VIEW)


def presenter() -> str:
    """Projector mode's toggle (in the sidebar: the projected page keeps its height for the step) and its charts;
    returns the page's keys, focus ring and projector styles, for the lesson's one st.html (an element of its own
    would take a row's gap off the step)."""
    on = projector_on()
    st.session_state[TOGGLE] = on
    st.sidebar.toggle(tr("Projector mode"), key=TOGGLE, on_change=_toggled,
                      help=tr("Larger type, thicker lines and marks, and no pale colours: a projector washes them out. "
                              "A presenter's clicker (or →, ←, PageDown, PageUp, Space) moves the lesson."))
    if on:
        project_charts()
    return KEYS + FOCUS_CSS + (PROJECTOR_CSS if on else "")
