"""A shared figure on the page as st.plotly_chart draws it, from the JSON the server made once (issue 84:
mha_core.serving.sent). st.plotly_chart validates, serialises and hashes the figure at every draw; a chart that every
follower of a class's step shows is sent here as the same PlotlyChart element with the kept JSON, named by its
digest. A chart the visitor selects in (on_select) is a widget: st.plotly_chart draws it (Streamlit 1.67, pinned)."""

from __future__ import annotations

import streamlit as st
from streamlit.elements.lib.form_utils import current_form_id
from streamlit.elements.lib.layout_utils import LayoutConfig, validate_height, validate_width
from streamlit.elements.lib.utils import compute_and_register_element_id, normalize_alt
from streamlit.elements.plotly_chart import _resolve_content_height, _resolve_content_width
from streamlit.proto.PlotlyChart_pb2 import PlotlyChart as PlotlyChartProto

from mha_core.serving.export import json_text
from mha_core.serving.sent import SentFigure


def send_chart(sent: SentFigure, alt: str, key: str | None = None, config: dict | None = None,
               width: str | int = "stretch", height: str | int = "content", theme: str | None = "streamlit") -> object:
    """The chart st.plotly_chart(sent.figure, alt=alt, key=key, config=config, width=width, height=height) draws, its
    JSON not made again."""
    validate_width(width, allow_content=True)
    validate_height(height, allow_content=True)
    proto = PlotlyChartProto()
    proto.theme, proto.form_id = theme or "", current_form_id(st._main)  # noqa: SLF001 -- the page's main area
    proto.spec, proto.config = sent.spec, json_text(config or {})
    alt = normalize_alt(alt)
    if alt is not None:
        proto.alt = alt
    proto.id = compute_and_register_element_id(
        "plotly_chart", user_key=key, key_as_main_identity=False, dg=st._main,  # noqa: SLF001
        plotly_spec=sent.digest, plotly_config=proto.config, selection_mode=None, is_selection_activated=False,
        theme=theme, width=width, height=height, alt=alt)
    layout = LayoutConfig(width=_resolve_content_width(width, sent.figure),
                          height=_resolve_content_height(height, sent.figure))
    return st._main._enqueue("plotly_chart", proto, layout_config=layout)  # noqa: SLF001
