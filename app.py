"""Attention explorer: routes to the pages in views/. Nothing else lives here.

The pages live in views/, not pages/: Streamlit treats a pages/ folder beside the entry script as a
legacy multipage app, and a fresh server's first request for a sub-page URL would bypass this router.
Every run starts by reading the visit's choices (views/_visit.py: the language first, so the navigation's titles
are in it) and ends by writing the address from them (a page that stops early raises PageStopped, not st.stop(),
after which no message would reach the browser).
"""

import contextlib

import streamlit as st

from mha_core.i18n import tr
from views._state import PAGE
from views._visit import PageStopped, begin_run, end_run

begin_run()
st.set_page_config(page_title=tr("Attention explorer"), page_icon="🔎", layout="wide")
pages = [
    st.Page("views/heads.py", title=tr("Heads"), icon=":material/grid_view:", default=True),
    st.Page("views/lesson.py", title=tr("Lesson"), icon=":material/co_present:"),
    st.Page("views/roles.py", title=tr("Roles"), icon=":material/label:"),
    st.Page("views/coreference.py", title=tr("Coreference"), icon=":material/link:"),
    st.Page("views/contributions.py", title=tr("Contributions"), icon=":material/bolt:"),
    st.Page("views/predictions.py", title=tr("Predictions"), icon=":material/trending_up:"),
    st.Page("views/corpus.py", title=tr("Across a corpus"), icon=":material/scatter_plot:"),
    st.Page("views/parameters.py", title=tr("Parameters"), icon=":material/calculate:"),
    st.Page("views/efficiency.py", title=tr("Efficiency"), icon=":material/speed:"),
    st.Page("views/walkthrough.py", title=tr("Walkthrough"), icon=":material/school:"),
    st.Page("views/seq2seq.py", title=tr("Encoder–decoder"), icon=":material/translate:"),
    st.Page("views/translation.py", title=tr("Translation"), icon=":material/g_translate:"),
    st.Page("views/images.py", title=tr("Images"), icon=":material/image:"),
]
page = st.navigation(pages, expanded=True)  # thirteen pages: none hidden behind "View more"
st.session_state[PAGE] = page.url_path  # which models this page reads (views/_state.current_model)
with contextlib.suppress(PageStopped):  # the page said why it stops
    page.run()
end_run()
