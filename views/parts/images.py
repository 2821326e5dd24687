"""The Images page's every-head view of a photo, which the lesson's image step draws too."""

from __future__ import annotations

import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.vision.heads import ImageHeads
from mha_core.figures.summary import mosaic_alt
from mha_core.figures.vision import png_size
from mha_core.i18n import tr
from mha_core.serving.computed import vision as computed
from views._images import query_picker, token_name
from views._state import answered, narrow_screen


def every_head_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads, wide: bool = False,
                   where: tuple | None = None, tallest: int | None = None) -> None:
    """Every head's overlay for the chosen query, layers down (`wide`: layers across, as a projector needs); the
    query's picker in where[0], the picture in where[1] (by default one under the other), no taller than `tallest`
    pixels (the lesson's screen)."""
    where = where or (st.container(), st.container())
    with where[0]:
        query = query_picker(heads, "img_query")
    with where[1], st.spinner(tr("Drawing every head…")):
        png = answered(computed.mosaic_of, model, data, side, query, wide, tallest=tallest)
    if png is not None:
        width = "stretch" if not narrow_screen() and not wide else "content"
        where[1].image(png, width=width if tallest is None else png_size(png)[0],  # its own width: sent as made
                       output_format="PNG", alt=mosaic_alt(model.n_layers, model.n_heads, wide))
    laid_out = (tr("Every head of every layer (L, across) and head (H, down)") if wide else
                tr("Every head of every layer (L, down) and head (H, across)"))
    where[1].caption(tr("{where}: the photo lit where {query} looks and dimmed where it does not, each tile scaled to "
                        "its own largest weight.", where=laid_out, query=token_name(heads, query)))
