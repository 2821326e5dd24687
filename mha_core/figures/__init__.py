"""Plotly figure builders: data in, one kind of figure out. Imports analysis and the engine."""
