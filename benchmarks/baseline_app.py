"""Baseline for bench_page.py: a text box whose submission draws one plain 20x20 plotly heatmap."""

import numpy as np
import plotly.graph_objects as go
import streamlit as st

text = st.text_area("Sentence", "start")
rng = np.random.default_rng(abs(hash(text)) % 2**32)
fig = go.Figure(go.Heatmap(z=rng.random((20, 20)), x=[f"k{i}" for i in range(20)], y=[f"q{i}" for i in range(20)]))
fig.update_layout(title=text.split()[-1])
st.plotly_chart(fig)
