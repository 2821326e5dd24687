"""Images: a Vision Transformer cuts a photo into patches that become tokens ("an image is worth 16×16 words"), puts
[CLS] before them, and its heads attend between patches as a text's heads attend between words. Every head's
attention over the photo, one head large, attention rollout, attention distance by depth, and the heads' roles."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.explain.choices import DEFAULT_STEPS, METHOD_NAMES
from mha_core.analysis.explain.vision import ImageExplanation, block_choices, copies_of, occlusion_block
from mha_core.analysis.vision.heads import (
    HIGH_NORM,
    LOCAL_PIXELS,
    MASK_AREA,
    MASK_MASS,
    OBJECT_SHARE,
    POSITIONAL_SHARE,
    POSITIONAL_WEIGHT,
    SINK_SHARE,
    ImageHeads,
)
from mha_core.figures import charts
from mha_core.figures import vision as figures
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import vision as computed
from views._images import chosen_image, head_and_query, pick_patch, show_steps, token_name
from views._inputs import model_card, open_bundled
from views._state import answered, chart, current_model, narrow_screen, queued
from views._visit import stop, tabs, widget
from views.parts.images import every_head_tab

TABS = (N_("Every head"), N_("One head"), N_("Step by step"), N_("Rollout"), N_("Explanations"),
        N_("Distance by depth"), N_("Roles"))
EXPLAINED_BY = ("occlusion", "ig")  # the methods a photo's patches are ranked by (input × gradient is 0 at the photo)
IG_STEPS = (16, 32, 64, 128)  # DINOv2-small's pixels need about 128 (bench_explain_vision.py): the default


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
          key="img_head_map", on_select=functools.partial(pick_patch, heads.grid), selection_mode="points")
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


def explanation_choices(grid: tuple[int, int]) -> tuple[str, int, int | None]:
    """The method, Integrated Gradients' steps and occlusion's block the visitor chose."""
    left, right = st.columns(2)
    method = widget(left.radio, "img_method", EXPLAINED_BY[0], tr("Method"), options=list(EXPLAINED_BY),
                    format_func=lambda name: tr(METHOD_NAMES[name]), horizontal=True)
    if method == "ig":
        return method, widget(right.select_slider, "img_steps", IG_STEPS[-1], tr("Steps"), options=list(IG_STEPS)), None
    blocks = block_choices(grid)
    block = widget(right.select_slider, "img_block", occlusion_block(grid, None), tr("Block (patches a side)"),
                   options=blocks, context=(grid,))
    return method, 0, block


def explanation_tab(model: LoadedModel, data: bytes, side: int, heads: ImageHeads) -> None:
    """The patches ranked by occlusion or Integrated Gradients beside attention and rollout, each map's top patches
    outlined, and how far the rankings agree."""
    method, steps, block = explanation_choices(heads.grid)
    found = queued(computed.explanation_of, model, data, side, method, steps or DEFAULT_STEPS, block)
    seen = answered(computed.result_of, model, data, side)
    if found is None or seen is None:
        return
    narrow = narrow_screen()  # a phone: one map under the other
    places = [st.container() for _ in range(3)] if narrow else st.columns(3)
    key = ("img_explain", str(model.model_dir), computed.digest(data), side, method, steps, block)
    for place, name in zip(places, (method, "attention", "rollout"), strict=True):
        title = tr(METHOD_NAMES[name]) if name != "attention" else tr("Attention ([CLS], last layer, mean of heads)")
        top = found.ranked(name)[:found.top_count]
        with place:
            chart((*key, name), lambda name=name, title=title, top=top: figures.ranked_overlay_figure(
                seen[1], found.methods[name].scores, title, top, 380 if narrow else 320), width="stretch",
                  key=f"img_explain_{name}")
    explanation_words(found, method)


def explanation_words(found: ImageExplanation, method: str) -> None:
    """What the maps explain, how the method scored the patches, and how far its ranking agrees with attention's
    and rollout's."""
    st.markdown(tr("Explained: the cosine of [CLS]'s final output to its own on this photo, {score:.3f}. A patch "
                   "scores high when editing it moves [CLS] away; the {k} highest of each map are outlined.",
                   score=found.score, k=found.top_count))
    if method == "ig":
        ig = found.ig
        st.caption(tr("Integrated Gradients: {steps} steps from a plain image of the mean colour (cosine "
                      "{base:.3f}); the patches' scores add up to {total:.3f} for a change of {change:.3f} "
                      "(convergence delta {delta:.3f}).", steps=ig.steps, base=ig.baseline_score,
                      total=ig.change + ig.delta, change=ig.change, delta=ig.delta))
        if not ig.converged:
            st.warning(tr("Too few steps for this photo: the scores miss the change by more than a tenth of it. "
                          "Choose more steps."))
    else:
        st.caption(tr("Occlusion: each block of {block} × {block} patches set to the mean colour, {copies} copies of "
                      "the photo run; a patch's score is 1 − the cosine without its block.", block=found.block,
                      copies=copies_of(found.grid, found.block)))
    rho = {name: found.correlation(method, name) for name in ("attention", "rollout")}
    st.markdown(tr("Of the {k} patches {method} ranks highest, {on_attention} are among attention's {k} and "
                   "{on_rollout} among rollout's.", k=found.top_count, method=tr(METHOD_NAMES[method]),
                   on_attention=found.overlap(method, "attention"), on_rollout=found.overlap(method, "rollout")))
    if not any(np.isnan(list(rho.values()))):
        st.markdown(tr("Rank correlation over all {n} patches: {attention:.2f} with attention, {rollout:.2f} with "
                       "rollout (1: the same order; 0: unrelated).", n=found.grid[0] * found.grid[1],
                       attention=rho["attention"], rollout=rho["rollout"]))


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
    positional = ", ".join(f"L{layer}H{head} ({rows:+d}, {columns:+d})" for (layer, head), (rows, columns)
                           in heads.offsets.items()) or tr("none")
    st.markdown(tr("**Positional heads** (for at least {share:.0%} of the patches the strongest key is the same "
                   "offset, rows and columns, with a weight of at least {weight:.1f} there): {heads}.",
                   share=POSITIONAL_SHARE, weight=POSITIONAL_WEIGHT, heads=positional))
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


TAB_VIEWS = dict(zip(TABS, (every_head_tab, one_head_tab, show_steps, rollout_tab, explanation_tab, distance_tab,
                            roles_tab),
                     strict=True))


def not_an_image_model(model: LoadedModel) -> None:
    st.info(tr("{name} reads text. This page reads Vision Transformers: the bundled {bundled}, or a ViT, DeiT, "
               "DINOv2 or CLIP model from the server's folder or Hugging Face cache.", name=model.name,
               bundled=computed.VISION_NAME))
    open_bundled(computed.VISION_NAME)
    stop()


def main() -> None:
    st.title(tr("Images: attention over patches"))
    st.caption(tr("A Vision Transformer cuts the photo into square patches; each patch becomes a token, [CLS] is put "
                  "before them, and every head attends between them as a text's heads attend between words."))
    model = current_model()
    model_card()
    if not model.arch.image:
        not_an_image_model(model)
    data, side, heads = chosen_image(model)
    for tab, tab_id in zip(tabs("img_tab", TABS), TABS, strict=True):
        if tab.open:
            with tab:
                TAB_VIEWS[tab_id](model, data, side, heads)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
