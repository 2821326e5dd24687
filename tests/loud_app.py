"""A page that writes 256 KB to its server's output at every run, for tests/test_server_output.py."""

import sys

import streamlit as st

sys.stdout.write("x" * 262_144 + "\n")
sys.stdout.flush()
st.markdown("written")
