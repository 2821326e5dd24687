"""Results that draw themselves in a notebook (issue 34): `result.figure(...)` is the app's own plotly figure for that
result, which Jupyter shows inline; `_repr_html_` shows a result's table where one fits. The figures live two
layers up (mha_core.figures.notebook); they are found at the first call, so that the engine stays below them."""

from __future__ import annotations

import importlib
from typing import Any


class Drawable:
    """A mixin for result dataclasses: figure() and, where the figures module gives the type a table, _repr_html_."""

    def figure(self, **options: Any) -> Any:
        """The app's figure of this result (a plotly Figure); the options are those of the page's chart (say
        `layer=2, head=5` for an AttentionResult). A notebook cell ending with it draws it."""
        return importlib.import_module("mha_core.figures.notebook").figure_of(self, **options)

    def _repr_html_(self) -> str | None:
        return importlib.import_module("mha_core.figures.notebook").table_html(self)
