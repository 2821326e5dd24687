"""The Heads page's every-head overview, which the lesson's third step draws too."""

from __future__ import annotations

import numpy as np
import streamlit as st

from mha_core.figures import charts
from mha_core.i18n import tr
from views._state import chart, narrow_screen
from views._visit import choose, head_taps


def pick_head_from_overview() -> None:
    points = st.session_state["overview"].selection.points
    if points:
        layer, head = points[0]["customdata"]
        choose("layer", int(layer))
        choose("head", int(head))


def show_overview(maps: np.ndarray, selected: tuple[int, int], base: tuple, across: bool = False) -> None:
    """Every head's tile, clicking one opens it; a phone sees one layer; `across` (the lesson on a projector): a model
    with more layers than heads draws its layers across the screen, not down a thin strip, under the step's own title
    and words (no heading of its own: the step fits a 1080-pixel projector)."""
    if not across:
        st.subheader(tr("All heads at a glance"))
        st.caption(tr("Each tile is one head's map (query rows, key columns); click a tile to open that head in the "
                      "views above. Longer texts are pooled (keys summed, queries averaged) to at most "
                      "{overview_max_bins}×{overview_max_bins} per tile.", overview_max_bins=charts.OVERVIEW_MAX_BINS))
    if narrow_screen():  # a phone: one layer, three heads to a row, stays legible
        st.caption(tr("On a narrow screen the overview shows layer {selected}: pick another layer above.",
            selected=selected[0]))
        build = lambda: charts.layer_tiles_figure(maps[selected[0]], *selected)  # noqa: E731
    elif across and maps.shape[0] > maps.shape[1]:
        build = lambda: charts.layers_across_figure(maps, selected)  # noqa: E731
    else:
        build = lambda: charts.overview_figure(maps, selected=selected)  # noqa: E731
    chart((*base, "overview", selected, across), build, key="overview", on_select=pick_head_from_overview,
          selection_mode="points")
    if narrow_screen():
        head_taps(maps.shape[1], *selected)
