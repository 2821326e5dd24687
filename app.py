"""Attention explorer: routes to the pages in views/ (each declared once: mha_core/serving/pages.py), with a class's
way back to the lesson above every other page (views/_class.way_back). Nothing else lives here.

The pages live in views/, not pages/: Streamlit treats a pages/ folder beside the entry script as a
legacy multipage app, and a fresh server's first request for a sub-page URL would bypass this router.
Every run starts by reading the visit's choices (views/_visit.py: the language first, so the navigation's titles
are in it) and ends by writing the address from them (a page that stops early raises PageStopped, not st.stop(),
after which no message would reach the browser).
"""

import contextlib

import streamlit as st

from mha_core.i18n import tr
from views._class import way_back
from views._state import PAGE
from views._visit import PageStopped, begin_run, end_run, navigation_pages

begin_run()
st.set_page_config(page_title=tr("Attention explorer"), page_icon="🔎", layout="wide")
page = st.navigation(navigation_pages(), expanded=True)  # thirteen pages: none hidden behind "View more"
st.session_state[PAGE] = page.url_path  # which models this page reads (views/_state.current_model)
way_back(page.url_path)  # a class's student or teacher on another page: the way back to the lesson, above the page
with contextlib.suppress(PageStopped):  # the page said why it stops
    page.run()
end_run()
