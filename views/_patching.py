"""Activation patching as the Predictions and Coreference pages show it: the choice of what to put back, the grid,
the strongest heads and the JSON (computed in mha_core.analysis.lm.patching)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from mha_core import LoadedModel
from mha_core.analysis.coref.sentence import Word
from mha_core.analysis.heads.roles import head_label, ranked_heads
from mha_core.analysis.lm.patching import HEAD, HEADS, RESIDUAL, WHAT, PatchGrid
from mha_core.figures import charts, colours
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import text as computed
from mha_core.serving.export import json_text
from views._state import chart, queued
from views._text import literal
from views._visit import widget

PUT_BACK = {HEADS: N_("one head's output"), RESIDUAL: N_("the stream at one layer and position"),
            HEAD: N_("one head's output at one position")}
CAPTION = N_("Activation patching (Meng et al. 2022; Wang et al. 2022; Heimersheim & Nanda 2024): run the corrupted "
           "text, put back one piece of the clean run — one head's output, the stream entering one layer at one "
           "position, or one head's output at one position — and see how much of the clean behaviour returns. "
           "1 = fully back, 0 = no change. Both texts need the same number of pieces.")  # shown with tr()


def json_button(result: object, model: LoadedModel, label: str, file_name: str, key: str, where: object = st) -> None:
    """Download `result` as the CLI's JSON (its as_json: the same fields on the page and on the command line)."""
    where.download_button(label, lambda: json_text(result.as_json(model.name)), file_name, "application/json",
                          key=key)


def computed_grid(model: LoadedModel, clean: str, corrupted: str, answer: str | None, wrong: str | None,
                  what: str, head: tuple[int, int] | None = None, coref: Sequence[Word] | None = None,
                  kept: bool = False) -> PatchGrid | None:
    return queued(computed.patch_grid_of, model, clean, corrupted, answer, wrong, what, head, coref, kept=kept)


def chosen_head(model: LoadedModel, heads_grid: PatchGrid, prefix: str) -> tuple[int, int]:
    """A head picker listing every head, the one that puts back most of the clean behaviour first."""
    order = ranked_heads(heads_grid.shown, model.n_layers * model.n_heads)
    return widget(st.selectbox, f"{prefix}_head", order[0], tr("Head (the strongest in the grid of heads first)"),
                  context=(str(model.model_dir), heads_grid.clean, heads_grid.corrupted), options=order,
                  format_func=lambda lh: f"{head_label(*lh)}: {heads_grid.shown[lh]:.2f}")


def patching_view(model: LoadedModel, clean: str, corrupted: str, answer: str | None, wrong: str | None,
                  prefix: str, coref: Sequence[Word] | None = None, kept: bool = False) -> None:
    """The radio, the grid of what it chose and the strongest heads; one grid computed per choice, per server
    (`kept`: an offered example's grid of heads, kept on disk for every process: serving.computed.patch_grid_of)."""
    what = widget(st.radio, f"{prefix}_what", WHAT[0], tr("Put back"), options=WHAT, horizontal=True,
                  format_func=lambda what: tr(PUT_BACK[what]))
    heads_grid = computed_grid(model, clean, corrupted, answer, wrong, HEADS, coref=coref, kept=kept)
    if heads_grid is None:
        return
    head = chosen_head(model, heads_grid, prefix) if what == HEAD else None
    grid = heads_grid if what == HEADS else computed_grid(model, clean, corrupted, answer, wrong, what, head, coref)
    if grid is None:
        return
    if grid.left_out:
        st.warning(tr("The texts are longer than the model reads: their first {n:,} pieces after the start are left "
                      "out, and the rest, up to where the answer is read, is read.", n=grid.left_out))
    st.markdown(literal(grid.described(model.n_layers)))
    shown = tr(grid.shown_label)
    title = (
        shown[:1].upper()
        + shown[1:]
        + (tr(": {head} at each position", head=head_label(*head)) if what == HEAD else "")
    )
    values = grid.shown[None] if what == HEAD else grid.shown
    chart(
        (prefix, str(model.model_dir), what, head, clean, corrupted, answer, wrong, coref is not None),
        lambda: charts.layer_head_grid(
            values,
            title,
            shown.split()[0],
            zmid=0,
            colorscale=colours.SIGNED,
            columns=None if what == HEADS else list(grid.tokens),
            rows=[head_label(*head)] if what == HEAD else None,
        ),
        key=f"{prefix}_grid",
    )
    if what == HEADS:
        top = ranked_heads(grid.shown, 5)
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        tr("head"): head_label(*lh),
                        shown: round(float(grid.shown[lh]), 3),
                        tr("patched"): round(float(grid.effects[lh]), 3),
                    }
                    for lh in top
                ]
            ),
            hide_index=True,
            key=f"{prefix}_top",
        )
    json_button(grid, model, tr("JSON: the grid"), "patch.json", f"{prefix}_json")
