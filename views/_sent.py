"""A shared figure on the page as st.plotly_chart draws it, from the JSON the server made once (issue 84:
mha_core.serving.sent). st.plotly_chart validates, serialises and hashes the figure at every draw; a chart that every
follower of a class's step shows is sent here as the same PlotlyChart element with the kept JSON, named by its
digest. A chart the visitor selects in (on_select: a callable) is registered as the same widget st.plotly_chart makes
of it, its selection read as st.plotly_chart reads it (Streamlit 1.67, pinned)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.elements.lib.form_utils import current_form_id
from streamlit.elements.lib.layout_utils import LayoutConfig, validate_height, validate_width
from streamlit.elements.lib.policies import check_widget_policies
from streamlit.elements.lib.utils import compute_and_register_element_id, normalize_alt
from streamlit.elements.plotly_chart import (
    PlotlyChartSelectionSerde,
    _resolve_content_height,
    _resolve_content_width,
    parse_selection_mode,
)
from streamlit.proto.PlotlyChart_pb2 import PlotlyChart as PlotlyChartProto
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.runtime.state import register_widget

from mha_core.serving.export import json_text
from mha_core.serving.sent import SentFigure

CONFIG_TEXTS: dict[str, str] = {}  # a chart config's repr -> its JSON (the app's few configs, made once each: issue 84,
MAX_CONFIGS = 64                   # 2 % of a follower's rerun went to writing the same small JSON again)


def config_text(config: dict) -> str:
    """json_text(config), the same string for the same config."""
    key = repr(config)
    text = CONFIG_TEXTS.get(key)
    if text is None:
        text = json_text(config)
        if len(CONFIG_TEXTS) < MAX_CONFIGS:
            CONFIG_TEXTS[key] = text
    return text


def send_chart(sent: SentFigure, alt: str, key: str | None = None, config: dict | None = None,
               width: str | int = "stretch", height: str | int = "content", theme: str | None = "streamlit",
               on_select: Callable[[], None] | None = None, selection_mode: str | tuple = ("points", "box", "lasso"),
               ) -> object:
    """The chart st.plotly_chart(sent.figure, alt=alt, key=key, config=config, width=width, height=height,
    on_select=on_select, selection_mode=selection_mode) draws (its selection, with on_select), its JSON not made
    again."""
    validate_width(width, allow_content=True)
    validate_height(height, allow_content=True)
    if on_select is not None:
        check_widget_policies(st._main, key, on_change=on_select, default_value=None, writes_allowed=False)  # noqa: SLF001
    proto = PlotlyChartProto()
    proto.theme, proto.form_id = theme or "", current_form_id(st._main)  # noqa: SLF001 -- the page's main area
    proto.spec, proto.config = sent.spec, config_text(config or {})
    alt = normalize_alt(alt)
    if alt is not None:
        proto.alt = alt
    proto.id = compute_and_register_element_id(
        "plotly_chart", user_key=key, key_as_main_identity=False, dg=st._main,  # noqa: SLF001
        plotly_spec=sent.digest, plotly_config=proto.config, selection_mode=selection_mode if on_select else None,
        is_selection_activated=on_select is not None, theme=theme, width=width, height=height, alt=alt)
    layout = LayoutConfig(width=_resolve_content_width(width, sent.figure),
                          height=_resolve_content_height(height, sent.figure))
    if on_select is None:
        return st._main._enqueue("plotly_chart", proto, layout_config=layout)  # noqa: SLF001
    proto.selection_mode.extend(parse_selection_mode(selection_mode))
    serde = PlotlyChartSelectionSerde()
    selection = register_widget(proto.id, on_change_handler=on_select, deserializer=serde.deserialize,
                                serializer=serde.serialize, ctx=get_script_run_ctx(), value_type="string_value")
    st._main._enqueue("plotly_chart", proto, layout_config=layout)  # noqa: SLF001
    return selection.value
