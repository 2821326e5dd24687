"""Attention explorer: routes to the pages. Nothing else lives here."""

import streamlit as st

st.set_page_config(page_title="Attention explorer", page_icon="🔎", layout="wide")
pages = [
    st.Page("pages/heads.py", title="Heads", icon="🔥", default=True),
]
st.navigation(pages).run()
