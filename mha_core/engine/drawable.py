"""Results that draw themselves in a notebook (issue 34): `result.figure(...)` is the app's own plotly figure for that
result, which Jupyter shows inline; `_repr_html_` shows a result's table where one fits.

The figures live two floors up (mha_core.figures.notebook), and the engine never imports them (issue 45: no circle,
no arrow up): that module registers its two drawers here when it loads, and the package's public names
(`mha_core.run`, `mha_core.load_model`, …) load it on first use. Code that imports engine or analysis modules
directly and wants figures imports mha_core.figures.notebook itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mha_core.messages import N_, Explained

Drawer = Callable[..., Any]
DRAWERS: dict[str, Drawer] = {}  # "figure": (result, **options) -> go.Figure; "table": result -> HTML or None


class NoDrawings(Explained):
    """result.figure() before any module registered the figures."""


def register_drawers(figure: Drawer, table: Drawer) -> None:
    """What mha_core.figures.notebook calls as it loads: the figure and the table of every result type."""
    DRAWERS.update(figure=figure, table=table)


class Drawable:
    """A mixin for result dataclasses: figure() and, where the figures module gives the type a table, _repr_html_."""

    def figure(self, **options: Any) -> Any:
        """The app's figure of this result (a plotly Figure); the options are those of the page's chart (say
        `layer=2, head=5` for an AttentionResult). A notebook cell ending with it draws it."""
        if "figure" not in DRAWERS:
            raise NoDrawings("no_figures_loaded", N_("No figures are loaded: import mha_core.figures.notebook (the "
                                                     "package's own names, mha_core.run and the others, load it)."))
        return DRAWERS["figure"](self, **options)

    def _repr_html_(self) -> str | None:
        return DRAWERS["table"](self) if "table" in DRAWERS else None
