"""Streamlit's own floor for bench_classroom.py --floor: a rerun that draws what the Heads page draws and computes
nothing. FLOOR_ELEMENTS ("kind=count,…", as deploy/st_client.Interaction.elements counts one run of the Heads page)
says what to draw, the sentence box first; FLOOR_PAGES how many pages the navigation lists. Charts are left out:
building and sending a figure is the page's own work, not the floor. A kind not drawn here is named on the page.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import streamlit as st

DRAW: dict[str, Callable[[int], object]] = {  # element kind -> one element of it, the k-th
    "checkbox": lambda k: st.checkbox(f"option {k}"),
    "selectbox": lambda k: st.selectbox(f"choice {k}", range(12)),
    "markdown": lambda k: st.markdown(f"A line of text, number {k}."),
    "heading": lambda k: st.subheader(f"Heading {k}"),
    "html": lambda k: st.html(f"<span>{k}</span>"),
    "text_area": lambda k: st.text_area(f"Text {k}"),
    "text_input": lambda k: st.text_input(f"Line {k}"),
    "file_uploader": lambda k: st.file_uploader(f"File {k}"),
    "alert": lambda k: st.info(f"Note {k}"),
    "button": lambda k: st.button(f"Button {k}"),
    "radio": lambda k: st.radio(f"Pick {k}", ("a", "b", "c")),
    "slider": lambda k: st.slider(f"Slide {k}", 0, 10),
    "number_input": lambda k: st.number_input(f"Number {k}"),
    "progress": lambda k: st.progress(0.5),
}
LEFT_OUT = {"plotly_chart"}  # the page's own work


def inventory() -> dict[str, int]:
    pairs = (item.split("=") for item in os.environ.get("FLOOR_ELEMENTS", "text_area=1").split(",") if item)
    return {kind: int(count) for kind, count in pairs}


def draw_blocks(counts: dict[str, int]) -> None:
    """Columns in pairs (st.columns(2): a flex container and two columns), the remaining flex containers, tabs in one
    tab bar per tab container."""
    pairs = counts.pop("block:column", 0) // 2
    for _ in range(pairs):
        st.columns(2)
    for _ in range(counts.pop("block:flex_container", 0) - pairs):
        st.container(horizontal=True)
    bars, tabs = counts.pop("block:tab_container", 0), counts.pop("block:tab", 0)
    for bar in range(bars):
        st.tabs([f"Tab {bar}.{k}" for k in range(tabs // bars)])


def floor_page() -> None:
    counts = inventory()
    st.text_area("Sentence", "The cat sat on the mat.")  # the box the benchmark types into
    counts["text_area"] = counts.get("text_area", 1) - 1
    draw_blocks(counts)
    skipped = {kind: n for kind, n in counts.items() if kind not in DRAW and kind not in LEFT_OUT}
    for kind, n in counts.items():
        for k in range(n if kind in DRAW else 0):
            DRAW[kind](k)
    if skipped:
        st.caption(f"Not drawn: {skipped}")


def other_page() -> None:
    st.write("Another page")


pages = [st.Page(floor_page, title="Floor", default=True)]
pages += [st.Page(other_page, title=f"Page {k}", url_path=f"page{k}") for k in range(int(os.environ.get("FLOOR_PAGES",
                                                                                                   "13")) - 1)]
st.navigation(pages, expanded=True).run()
