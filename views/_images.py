"""What the Images page and the Walkthrough share for a Vision Transformer: the photo (a sample, an upload or the
camera) at a size, every head summarised, whose row to follow, and the steps from pixels to one head's row."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.vision.heads import ImageHeads
from mha_core.figures import vision as figures
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import vision as computed
from views._state import answered, chart, narrow_screen
from views._uploads import media_bytes
from views._visit import choose, stop, widget

SOURCES = (N_("Sample photo"), N_("Upload"), N_("Camera"))


def picture_bytes() -> bytes | None:
    """The photo the visitor chose: a sample (with its licence), an upload or the camera."""
    source = widget(st.radio, "img_from", SOURCES[0], tr("Photo"), options=list(SOURCES), format_func=tr,
                    horizontal=True)
    if source == SOURCES[0]:
        photos = {p.key: p for p in computed.available_photos()}
        if not photos:
            st.info(tr("The sample photos come with scikit-image (make installs it); upload a photo instead."))
            return None
        key = widget(st.selectbox, "img_photo", next(iter(photos)), tr("Sample photo"), options=list(photos),
                     format_func=lambda k: tr(photos[k].title))
        st.caption(tr("From scikit-image's sample data: {licence}, {author}.", licence=tr(photos[key].licence),
                      author=photos[key].author))
        return computed.photo_bytes(key)
    if source == SOURCES[1]:
        return media_bytes((tr("PNG, JPEG or WebP (up to 50 MB)"), ["png", "jpg", "jpeg", "webp"], "img_upload"), None)
    return media_bytes(None, (st.camera_input, tr("Take a photo (your browser asks to use the camera)"), "img_camera",
                              tr("No photo yet. If the browser was refused the camera, allow it in the address bar, "
                                 "or choose a sample photo or an upload instead.")))


def query_picker(heads: ImageHeads, key: str) -> int:
    """[CLS] (0), another prefix token, or a patch, as a token position."""
    rows, columns = heads.grid
    options = list(range(len(heads.prefix) + rows * columns))
    return widget(st.selectbox, key, 0, tr("Whose attention"), options=options,
                  format_func=lambda i: token_name(heads, i), context=(heads.grid,))


def pick_patch(grid: tuple[int, int]) -> None:
    """A patch clicked on the map: follow its row (chosen in the query picker's own context, the grid: a choice
    made in another context is dropped for the default, which is how a click was lost)."""
    points = st.session_state["img_head_map"].selection.points
    if points:
        choose("img_query", int(points[0]["customdata"][0]), (grid,))


def token_name(heads: ImageHeads, position: int) -> str:
    prefix = len(heads.prefix)
    if position < prefix:
        return heads.prefix[position]
    row, column = divmod(position - prefix, heads.grid[1])
    return tr("patch {row},{column}", row=row, column=column)


def head_and_query(model: LoadedModel, heads: ImageHeads) -> tuple[int, int, int]:
    """A layer (the last by default), one of its heads, and whose row: [CLS] or any other token."""
    left, middle = st.columns(2)
    layer = widget(left.selectbox, "img_layer", model.n_layers - 1, tr("Layer"), options=list(range(model.n_layers)))
    head = widget(middle.selectbox, "img_head", 0, tr("Head"), options=list(range(model.n_heads)),
                  format_func=lambda h: tr("head {head}", head=h))
    return layer, head, query_picker(heads, "img_query")


def show_steps(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    """The photo cut into patches, then one token's row in one head, step by step from the pixels."""
    layer, head, query = head_and_query(model, heads)
    seen = answered(computed.result_of, model, data, side)
    steps = answered(computed.steps_of, model, data, side, layer, head, query)
    if seen is None or steps is None:
        return
    prefix = len(heads.prefix)
    outlined = None if query < prefix else divmod(query - prefix, heads.grid[1])
    chart(("img_grid", str(model.model_dir), computed.digest(data), side, query),
          lambda: figures.patch_grid_figure(seen[1], heads.grid, outlined, 380 if narrow_screen() else 520),
          width="stretch")
    st.dataframe(pd.DataFrame([{tr("step"): tr(step), tr("formula"): formula, tr("shape"): shape}
                               for step, formula, shape in steps.rows()]), hide_index=True)
    st.caption(tr("Like 16×16 words: each patch's pixels become one token, [CLS] is put before them, and from then on "
                  "a head treats them as a text's heads treat words. Recomputed here from the weights, the row of "
                  "{query} differs from the map the run kept by at most {difference:.1e}.",
                  query=token_name(heads, query), difference=steps.kept_difference))


def chosen_image(model: LoadedModel) -> tuple[bytes, int, ImageHeads]:
    """The photo, the size it is read at and every head summarised (the page stops with one sentence on a bad
    file, or while no photo is chosen)."""
    data = picture_bytes()
    sizes = computed.sides(model)
    side = widget(st.select_slider, "img_side", computed.OWN, tr("Pixels a side"), options=sizes,
                  format_func=lambda s: tr("as the model prepares it") if s == computed.OWN else f"{s} px",
                  help=tr("By default the photo is prepared exactly as {name}'s image processor prepares it (resized "
                          "and cropped as in training); a size squares it to that many pixels a side, which departs "
                          "from the model's preparation. Patches are {patch} px.", name=model.name,
                          patch=model.arch.patch_size))
    if data is None or answered(computed.image_of, data) is None:
        stop()
    heads = answered(computed.heads_of, model, data, side)
    if heads is None:
        stop()
    rows, columns = heads.grid
    st.caption(tr("{rows} × {columns} patches of {patch} px, after {prefix}: {n} tokens.", rows=rows, columns=columns,
                  patch=heads.patch_px, prefix=", ".join(heads.prefix), n=len(heads.prefix) + rows * columns))
    if side != computed.OWN:
        st.caption(tr("Squared to {side} × {side} px: this departs from how {name} prepares a photo, so its heads may "
                      "differ from what the model does with it.", side=side, name=model.name))
    return data, side, heads
