"""Heads page: tokens and one head's attention map for a typed sentence."""

import plotly.graph_objects as go
import streamlit as st

from mha_core import InputError
from pages._state import DEFAULT_SENTENCE, current_model, run_one

model = current_model()
st.title("Attention heads")
text = st.text_area("Sentence", DEFAULT_SENTENCE, max_chars=None)
layer = st.number_input("Layer", 0, model.n_layers - 1, 0)
head = st.number_input("Head", 0, model.n_heads - 1, 0)
try:
    result = run_one(text)
except InputError as err:
    st.error(str(err))
    st.stop()
tokens = list(result.tokens[0])
st.caption(f"{len(tokens)} word pieces · path {result.path} · backend {result.backend}")
z = result.head_map(int(layer), int(head))[0].numpy()
fig = go.Figure(go.Heatmap(z=z, x=list(range(len(tokens))), y=list(range(len(tokens))), colorscale="Blues"))
fig.update_yaxes(autorange="reversed")
st.plotly_chart(fig)
