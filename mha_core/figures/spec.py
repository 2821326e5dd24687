"""What every figure builder returns: a plotly figure as a plain dict (`FigureDict`), arrays as plotly.js typed
arrays (base64). A dict is cheap to keep in a shared store, to hand to st.plotly_chart, to export and to test.

Builders on hot paths write the dict directly (no per-property validation: a third of a new sentence's CPU on the
Walkthrough went to it); the others build a go.Figure and end with `finished(fig)`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mha_core.engine.held import kept

if TYPE_CHECKING:
    import plotly.graph_objects as go

FigureDict = dict[str, Any]  # {"data": [trace dicts], "layout": {...}}

TYPED = {"float32": "f4", "float64": "f8", "int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2",
         "int32": "i4", "uint32": "u4"}  # numpy dtype -> plotly.js typed-array dtype


def typed_array(values: np.ndarray) -> dict | np.ndarray:
    """A numpy array as plotly.js's {"dtype", "bdata", "shape"}; int64 narrowed to int32 when it fits, other
    dtypes (strings, objects) left as they are."""
    if values.dtype == np.int64 and values.size and np.abs(values).max() < 2**31:
        values = values.astype(np.int32)
    if values.size == 0 or str(values.dtype) not in TYPED:
        return values
    spec = {"dtype": TYPED[str(values.dtype)], "bdata": base64.b64encode(np.ascontiguousarray(values)).decode()}
    if values.ndim > 1:
        spec["shape"] = ", ".join(str(n) for n in values.shape)
    return spec


def encode_arrays(node: Any) -> Any:
    """Every numpy array inside dicts and lists replaced by its typed array (in place; returns `node`). A list of
    numbers, or of rows of numbers (the overview's 1,152 click targets), holds none: it is not walked."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        if isinstance(value, np.ndarray):
            node[key] = typed_array(value)
        elif isinstance(value, dict) or (isinstance(value, list) and not holds_numbers(value)):
            encode_arrays(value)
    return node


NUMBERS = (int, float, bool)


def holds_numbers(row: tuple | list) -> bool:
    """A row of numbers, or of short rows of numbers (a figure's click targets, a text's character offsets), judged
    by its first and last items: no array is held there, nor anything worth walking item by item."""
    ends = (row[0], row[-1]) if row else ()
    ends = tuple(end[0] if type(end) in (tuple, list) and 0 < len(end) <= 4 else end for end in ends)
    return len(ends) == 2 and all(type(end) in NUMBERS for end in ends)


@kept("colour scales", 32)
def named_colorscale(name: str) -> list[list]:
    """plotly.py's colour scale of that name as [[position, colour], ...] (plotly.js orders some names the other
    way), looked up once: shared by every figure, never mutated."""
    from plotly.colors import get_colorscale

    return get_colorscale(name)


def finished(figure: go.Figure | FigureDict) -> FigureDict:
    """The one kind of thing a builder returns: a figure dict with typed arrays."""
    return encode_arrays(figure) if isinstance(figure, dict) else figure.to_dict()


def array_of(values: dict | Sequence | np.ndarray) -> np.ndarray:
    """A figure dict's array as numpy, whether typed (base64) or a list: what plotly.js reads."""
    if not isinstance(values, dict):
        return np.asarray(values)
    dtype = {short: name for name, short in TYPED.items()}[values["dtype"]]
    flat = np.frombuffer(base64.b64decode(values["bdata"]), dtype=dtype)
    shape = values.get("shape")
    return flat.reshape([int(n) for n in shape.split(",")]) if shape else flat
