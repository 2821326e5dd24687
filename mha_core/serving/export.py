"""Export what a page shows: CSV / JSON of attention, PNG / SVG of figures (kaleido + system Chromium)."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import plotly.graph_objects as go

from mha_core.analysis.heads.display import AttentionView
from mha_core.analysis.heads.roles import head_label
from mha_core.engine.result import json_floats
from mha_core.figures.spec import FigureDict
from mha_core.i18n import tr

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def attention_csv(view: AttentionView, layers: Sequence[int], heads: Sequence[int]) -> str:
    """Long format: one row per (layer, head, query, key) weight."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["layer", "head", "query_index", "query", "key_index", "key", "weight"])
    for layer in layers:
        for head in heads:
            m = view.maps[layer, head]
            for q, q_label in enumerate(view.labels):
                for k, k_label in enumerate(view.labels):
                    writer.writerow([layer, head, q, q_label, k, k_label, f"{m[q, k]:.6g}"])
    return out.getvalue()


def matrix_csv(matrix: np.ndarray, labels: Sequence[str]) -> str:
    """A (T,T) map as CSV: query rows, key columns, both named "index token"."""
    return named_matrix_csv(matrix, [f"{i} {label}" for i, label in enumerate(labels)], "query \\ key")


def named_matrix_csv(matrix: np.ndarray, names: Sequence[str], corner: str) -> str:
    """A square matrix with its rows and columns named alike; `corner` heads the name column."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([corner, *names])
    for name, row in zip(names, matrix, strict=True):
        writer.writerow([name, *(f"{v:.6g}" for v in row)])
    return out.getvalue()


def token_pair_csv(view: AttentionView, query: int, key: int) -> str:
    """The token view: the weight from unit `query` to unit `key` in every layer and head, one row each."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["layer", "head", "query_index", "query", "key_index", "key", "weight"])
    n_layers, n_heads = view.maps.shape[:2]
    for layer in range(n_layers):
        for head in range(n_heads):
            writer.writerow([layer, head, query, view.labels[query], key, view.labels[key],
                             f"{view.maps[layer, head, query, key]:.6g}"])
    return out.getvalue()


def token_pair_json(view: AttentionView, query: int, key: int, meta: dict) -> str:
    """{"query_index", "query", "key_index", "key", "weights": [L][H], "tokens", ...meta}, JSON_DIGITS digits."""
    return json_text({"query_index": query, "query": view.labels[query], "key_index": key, "key": view.labels[key],
                      "weights": view.maps[:, :, query, key], "tokens": list(view.labels),
                      "hidden_special": view.hidden_special, "merged_words": view.merged_words, **meta})


def attention_json(view: AttentionView, heads: Sequence[tuple[int, int]] | None, meta: dict) -> str:
    """What `python -m mha_core attention` writes, for the page's view (its tokens are the view's units): every head
    as "attention": [L][H][N][N] when `heads` is None, else "heads": [[layer, head], …] and "attention": one (N,N)
    map per head, as --heads writes them; the same digits (JSON_DIGITS)."""
    chosen = {} if heads is None else {"heads": [list(h) for h in heads]}
    maps = view.maps if heads is None else (view.maps[layer, head] for layer, head in heads)
    return json_text({"tokens": list(view.labels), **chosen, "attention": maps, "hidden_special": view.hidden_special,
                      "merged_words": view.merged_words, **meta})


JSON_DIGITS = 7  # digits of every weight the CLI writes (float32 holds about seven)


def stream_json(value: object, write: Callable[[str], object], digits: int = JSON_DIGITS) -> None:
    """Write `value` as JSON piece by piece, so that an output of gigabytes never exists in memory: a dict, list or
    tuple as usual, a generator as a list of what it yields (made one item at a time), a numpy array or tensor as
    nested lists of floats rounded to `digits`, anything else as json.dumps writes it."""
    if isinstance(value, dict):
        write("{")
        for i, (key, item) in enumerate(value.items()):
            write(("," if i else "") + json.dumps(str(key), ensure_ascii=False) + ":")
            stream_json(item, write, digits)
        write("}")
    elif isinstance(value, list | tuple | Iterator):
        write("[")
        for i, item in enumerate(value):
            if i:
                write(",")
            stream_json(item, write, digits)
        write("]")
    elif hasattr(value, "shape"):  # numpy or torch: a row at a time
        array = np.asarray(value.cpu() if hasattr(value, "cpu") else value)
        if array.ndim > 1:
            stream_json(iter(array), write, digits)
        else:
            write(json.dumps(json_floats(array, digits)))
    else:
        write(json.dumps(value, ensure_ascii=False))


def json_text(value: object) -> str:
    """stream_json into one string (a page's download: the same fields and digits as the CLI writes)."""
    out = io.StringIO()
    stream_json(value, out.write)
    return out.getvalue()


def image_export_status() -> tuple[bool, str]:
    """(available, reason): kaleido renders static images through a local Chromium."""
    try:
        import kaleido  # noqa: F401
    except ImportError:
        return False, tr("Static image export needs the kaleido package (pip install kaleido).")
    if not any(shutil.which(name) for name in CHROMIUM_NAMES):
        return False, tr("Static image export needs Chromium (Debian: apt-get install chromium); the camera icon on "
                         "each chart still downloads a PNG.")
    return True, tr("kaleido with the system Chromium")


def figure_image(spec: FigureDict, fmt: str, width: int = 1100) -> bytes:
    """PNG or SVG bytes of a figure or a figure dict (raises RuntimeError with a readable reason)."""
    ok, reason = image_export_status()
    if not ok:
        raise RuntimeError(reason)
    fig = go.Figure(spec)
    height = fig.layout.height or 600
    return fig.to_image(format=fmt, width=width, height=int(height), scale=2 if fmt == "png" else 1)


def distance_csv(distance: np.ndarray, heads: Sequence[tuple[int, int]]) -> str:
    """The (N,N) head-distance matrix, rows and columns named "L<layer> H<head>" (0-based, layer-major)."""
    return named_matrix_csv(distance, [head_label(*h) for h in heads], "head")


def qk_points_csv(xy: np.ndarray, labels: Sequence[str], sentence: np.ndarray, position: np.ndarray,
                  pos: Sequence[str] | None = None) -> str:
    """One row per point of the query-key view: kind, x, y, sentence, position, token (and part of speech).
    xy (2M,2) holds the M queries, then the M keys; labels, sentence, position, pos are per token (M)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["kind", "x", "y", "sentence", "position", "token"] + (["pos"] if pos is not None else []))
    m = len(labels)
    for i, (x, y) in enumerate(xy.tolist()):
        t = i % m
        writer.writerow(["query" if i < m else "key", f"{x:.6g}", f"{y:.6g}", int(sentence[t]), int(position[t]),
                         labels[t]] + ([pos[t]] if pos is not None else []))
    return out.getvalue()
