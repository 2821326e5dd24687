"""Attention explorer: routes to the pages in views/. Nothing else lives here.

The pages live in views/, not pages/: Streamlit treats a pages/ folder beside the entry script as a
legacy multipage app, and a fresh server's first request for a sub-page URL would bypass this router.
"""

import streamlit as st

from mha_core.i18n import tr
from views._state import page_language, sanitize_url

sanitize_url()  # every URL value is parsed before a widget reads it
page_language()  # the navigation's titles below are in the page's language
st.set_page_config(page_title=tr("Attention explorer"), page_icon="🔎", layout="wide")
pages = [
    st.Page("views/heads.py", title=tr("Heads"), icon=":material/grid_view:", default=True),
    st.Page("views/roles.py", title=tr("Roles"), icon=":material/label:"),
    st.Page("views/coreference.py", title=tr("Coreference"), icon=":material/link:"),
    st.Page("views/contributions.py", title=tr("Contributions"), icon=":material/bolt:"),
    st.Page("views/predictions.py", title=tr("Predictions"), icon=":material/trending_up:"),
    st.Page("views/corpus.py", title=tr("Across a corpus"), icon=":material/scatter_plot:"),
    st.Page("views/parameters.py", title=tr("Parameters"), icon=":material/calculate:"),
    st.Page("views/walkthrough.py", title=tr("Walkthrough"), icon=":material/school:"),
]
st.navigation(pages).run()
