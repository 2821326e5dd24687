"""Attention explorer: routes to the pages in views/. Nothing else lives here.

The pages live in views/, not pages/: Streamlit treats a pages/ folder beside the entry script as a
legacy multipage app, and a fresh server's first request for a sub-page URL would bypass this router.
"""

import streamlit as st

from views._state import sanitize_url

st.set_page_config(page_title="Attention explorer", page_icon="🔎", layout="wide")
sanitize_url()  # every URL value is parsed before a widget reads it
pages = [
    st.Page("views/heads.py", title="Heads", icon=":material/grid_view:", default=True),
    st.Page("views/roles.py", title="Roles", icon=":material/label:"),
    st.Page("views/coreference.py", title="Coreference", icon=":material/link:"),
    st.Page("views/contributions.py", title="Contributions", icon=":material/bolt:"),
    st.Page("views/predictions.py", title="Predictions", icon=":material/trending_up:"),
    st.Page("views/corpus.py", title="Across a corpus", icon=":material/scatter_plot:"),
    st.Page("views/parameters.py", title="Parameters", icon=":material/calculate:"),
    st.Page("views/walkthrough.py", title="Walkthrough", icon=":material/school:"),
]
st.navigation(pages).run()
