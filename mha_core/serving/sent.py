"""What a server sends of a figure every visitor shares (issue 84): the figure dict, and its JSON (what Plotly in the
browser reads) with the JSON's digest, made once per server when the figure is kept. A page sends the JSON as it is:
thirty or three hundred students following a class's step are not each given the figure serialised again."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import plotly.io

from mha_core.figures.spec import FigureDict


@dataclass(frozen=True)
class SentFigure:
    figure: FigureDict  # the dict (the shared store weighs it; a page that needs the figure itself reads it)
    spec: str  # its JSON, as the browser's Plotly reads it
    digest: str  # the JSON's digest: names the chart on the page without hashing the JSON at every draw

    @classmethod
    def of(cls, figure: FigureDict) -> SentFigure:
        spec = plotly.io.to_json(figure, validate=False)
        return cls(figure, spec, hashlib.md5(spec.encode(), usedforsecurity=False).hexdigest())
