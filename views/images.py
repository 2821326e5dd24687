"""Images: a Vision Transformer cuts a photo into patches that become tokens ("an image is worth 16×16 words"), puts
[CLS] before them, and its heads attend between patches as a text's heads attend between words. Every head's
attention over the photo, one head large, attention rollout, attention distance by depth, and the heads' roles."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.vision import (
    HIGH_NORM,
    LOCAL_PIXELS,
    MASK_AREA,
    MASK_MASS,
    OBJECT_SHARE,
    SINK_SHARE,
    ImageHeads,
)
from mha_core.figures import charts
from mha_core.figures import vision as figures
from mha_core.i18n import N_, tr
from mha_core.serving import computed_vision as computed
from views._inputs import model_card
from views._state import answered, chart, current_model, model_choices, narrow_screen
from views._uploads import media_bytes
from views._visit import choose, stop, tabs, widget

SOURCES = (N_("Sample photo"), N_("Upload"), N_("Camera"))
TABS = (N_("Every head"), N_("One head"), N_("Step by step"), N_("Rollout"), N_("Distance by depth"), N_("Roles"))


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


def every_head_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    query = query_picker(heads, "img_query")
    with st.spinner(tr("Drawing every head…")):
        png = answered(computed.mosaic_of, model, data, side, query)
    if png is not None:
        st.image(png, width="stretch" if not narrow_screen() else "content")
    st.caption(tr("Every head of every layer (L, down) and head (H, across): the photo lit where {query} looks and "
                  "dimmed where it does not, each tile scaled to its own largest weight.",
                  query=token_name(heads, query)))


def query_picker(heads: ImageHeads, key: str) -> int:
    """[CLS] (0), another prefix token, or a patch, as a token position."""
    rows, columns = heads.grid
    options = list(range(len(heads.prefix) + rows * columns))
    return widget(st.selectbox, key, 0, tr("Whose attention"), options=options,
                  format_func=lambda i: token_name(heads, i), context=(heads.grid,))


def pick_patch() -> None:
    """A patch clicked on the map: follow its row."""
    points = st.session_state["img_head_map"].selection.points
    if points:
        choose("img_query", int(points[0]["customdata"][0]))


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


def one_head_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    layer, head, query = head_and_query(model, heads)
    maps = answered(computed.query_maps_of, model, data, side, query)
    seen = answered(computed.result_of, model, data, side)
    if maps is None or seen is None:
        return
    prefix = len(heads.prefix)
    outlined = None if query < prefix else divmod(query - prefix, heads.grid[1])
    who = token_name(heads, query)
    title = tr("Layer {layer}, head {head}: where {query} looks", layer=layer, head=head, query=who)
    chart(("img_head", str(model.model_dir), computed.digest(data), side, layer, head, query),
          lambda: figures.head_overlay_figure(seen[1], maps[layer, head], title, outlined,
                                              380 if narrow_screen() else 560, prefix), width="stretch",
          key="img_head_map", on_select=pick_patch, selection_mode="points")
    st.caption(tr("Each patch's colour is the weight {query} gives it in this head (hover for the number; click a "
                  "patch to follow its row); its row also gives {share:.0%} to the tokens before the patches.",
                  query=token_name(heads, query),
                  share=1 - float(maps[layer, head].sum())))


def rollout_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    seen = answered(computed.result_of, model, data, side)
    if seen is None:
        return
    chart(("img_rollout", str(model.model_dir), computed.digest(data), side),
          lambda: figures.head_overlay_figure(seen[1], heads.rollout_map, tr("Attention rollout: [CLS] after the last "
                                                                              "layer"), None,
                                              380 if narrow_screen() else 560), width="stretch")
    st.caption(tr("Abnar & Zuidema's rollout: each layer's heads averaged, half of each row kept for the residual "
                  "stream (0.5·A + 0.5·I), the layers multiplied in order; the row of [CLS] over the patches."))


def distance_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    chart(("img_distance", str(model.model_dir), computed.digest(data), side),
          lambda: figures.distance_figure(heads.distances, heads.side_px), width="stretch")
    early = heads.distances[: max(1, model.n_layers // 3)]
    late = heads.distances[-max(1, model.n_layers // 3):]
    st.caption(tr("Each point is one head: over every patch query, the distance in pixels between patch centres, "
                  "averaged with the head's weights (its row renormalised over the patches), as Dosovitskiy et al. "
                  "(2020) draw it in Figure 7. In the first third of the layers the heads span {early_min:.0f}–"
                  "{early_max:.0f} px (local and global heads side by side); in the last third {late_min:.0f}–"
                  "{late_max:.0f} px.", early_min=early.min(), early_max=early.max(), late_min=late.min(),
                  late_max=late.max()))


def roles_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    key = ("img_roles", str(model.model_dir), computed.digest(data), side)
    chart((*key, "objects"), lambda: charts.layer_head_grid(heads.object_share, tr("Share of [CLS]'s attention on "
                                                                                   "the object"), zrange=(0.0, 1.0)))
    found = ", ".join(f"L{layer}H{head}" for layer, head in heads.object_heads) or tr("none")
    st.markdown(tr("**Object heads** (at least {share:.0%} of [CLS]'s attention inside the foreground): {found}.",
                   share=OBJECT_SHARE, found=found))
    st.caption(tr("The foreground is made from the maps themselves, as DINO's figures make it: the patches that hold "
                  "{mass:.0%} of the last layer's mean [CLS] attention ({area:.0%} of this photo's patches; over "
                  "{limit:.0%} it separates nothing and no head is named).", mass=MASK_MASS,
                  area=float(heads.mask.mean()), limit=MASK_AREA))
    chart((*key, "prefix"), lambda: charts.layer_head_grid(heads.prefix_share, tr("Share of attention on {tokens}",
                                                                                  tokens=", ".join(heads.prefix)),
                                                           zrange=(0.0, 1.0)))
    sinks = ", ".join(f"L{layer}H{head}" for layer, head in heads.sink_heads) or tr("none")
    st.markdown(tr("**Sink heads** (at least {share:.0%} of every row's weight, on average, on {tokens}): {sinks}.",
                   share=SINK_SHARE, tokens=", ".join(heads.prefix), sinks=sinks))
    local = ", ".join(f"L{layer}H{head}" for layer, head in heads.local_heads) or tr("none")
    st.markdown(tr("**Local heads** (mean attention distance under {share:.0%} of the image's side): {local}.",
                   share=LOCAL_PIXELS, local=local))
    high = ", ".join(token_name(heads, i) for i in heads.high_norm) or tr("none")
    st.markdown(tr("**High-norm tokens** (an output at least {factor:g}× the patches' median norm, Darcet et al. "
                   "2023): {high}.", factor=HIGH_NORM, high=high))
    by_layer = [{tr("layer"): layer, tr("mean distance (px)"): round(float(heads.distances[layer].mean())),
                 tr("on the prefix tokens"): round(float(heads.prefix_share[layer].mean()), 3)}
                for layer in range(model.n_layers)]
    st.dataframe(pd.DataFrame(by_layer), hide_index=True)


def steps_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
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


TAB_VIEWS = dict(zip(TABS, (every_head_tab, one_head_tab, steps_tab, rollout_tab, distance_tab, roles_tab),
                     strict=True))


def not_an_image_model(model: LoadedModel) -> None:
    st.info(tr("{name} reads text. This page reads Vision Transformers: the bundled DINOv2, or a ViT, DeiT, DINOv2 "
               "or CLIP model from the server's folder or Hugging Face cache.", name=model.name))
    if computed.VISION_NAME in model_choices():
        st.button(tr("Open DINOv2"), on_click=choose, args=("model", computed.VISION_NAME))
    stop()


def main() -> None:
    st.title(tr("Images: attention over patches"))
    st.caption(tr("A Vision Transformer cuts the photo into square patches; each patch becomes a token, [CLS] is put "
                  "before them, and every head attends between them as a text's heads attend between words."))
    model = current_model()
    model_card()
    if not model.arch.image:
        not_an_image_model(model)
    data = picture_bytes()
    sizes = computed.sides(model)
    side = widget(st.select_slider, "img_side", sizes[0], tr("Pixels a side"), options=sizes,
                  help=tr("At {side} px the photo is {n} × {n} patches of {patch} px.", side=sizes[0],
                          n=sizes[0] // model.arch.patch_size, patch=model.arch.patch_size))
    if data is None or answered(computed.image_of, data) is None:
        stop()
    heads = answered(computed.heads_of, model, data, side)
    if heads is None:
        stop()
    rows, columns = heads.grid
    st.caption(tr("{rows} × {columns} patches of {patch} px, after {prefix}: {n} tokens.", rows=rows, columns=columns,
                  patch=heads.patch_px, prefix=", ".join(heads.prefix), n=len(heads.prefix) + rows * columns))
    for tab, tab_id in zip(tabs("img_tab", TABS), TABS, strict=True):
        if tab.open:
            with tab:
                TAB_VIEWS[tab_id](model, data, side, heads)


main()
