"""Streamlit's own floor of a follower's rerun, for bench_classroom.py --follow --floor (issue 84): the lesson's
address (/lesson?class=CODE) under a navigation of as many pages as the app's, whose class part is a fragment that the
app's own watcher reruns when the teacher moves (views/_class.register, IN_FLIGHT pacing included) and that draws
FOLLOW_ELEMENTS elements (the step's title, then lines of markdown), computing nothing: what a follower's rerun
cannot cost less than on this server.
"""

from __future__ import annotations

import os

import streamlit as st

from mha_core.teaching.lesson import STEPS
from views._class import classroom, register, watcher

ELEMENTS = int(os.environ.get("FOLLOW_ELEMENTS", "1"))
PAGES = 13  # as app.py's navigation


@st.fragment
def class_part(code: str) -> None:
    heard = watcher().last_heard(code)
    step, text = heard if heard else (lambda state: (state.step, state.text))(classroom().state(code))
    register(code, (step, text))
    st.title(f"{step}. {STEPS[step - 1].title}")
    for k in range(ELEMENTS - 1):
        st.markdown(f"A line of the step's text, number {k}.")


def lesson() -> None:
    class_part(st.query_params.get("class", ""))


def other_page() -> None:
    st.write("Another page")


pages = [st.Page(other_page, title="Heads", default=True), st.Page(lesson, title="Lesson", url_path="lesson")]
pages += [st.Page(other_page, title=f"Page {k}", url_path=f"page{k}") for k in range(PAGES - 2)]
st.navigation(pages, expanded=True).run()
