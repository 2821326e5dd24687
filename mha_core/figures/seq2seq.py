"""An encoder–decoder's figures: one head's map of any of the three kinds (encoder, decoder, cross-attention: target
pieces down, source pieces or seconds across), and a transcript's alignment: the alignment heads' mean
cross-attention over the speech, each word's span marked."""

from __future__ import annotations

import numpy as np
from plotly.colors import get_colorscale

from mha_core.analysis.transcribe import Transcript, speech_rows
from mha_core.engine.frames import POSITION_SECONDS
from mha_core.engine.seq2seq import KIND_NAMES, Seq2SeqResult
from mha_core.figures.charts import COLORSCALE, head_figure, indexed_labels, safe_label
from mha_core.figures.spec import FigureDict
from mha_core.i18n import tr


def cross_figure(z: np.ndarray, rows: list[str], columns: list, title: str, x_title: str) -> FigureDict:
    """(T,S) a map whose rows (target pieces, top to bottom) and columns (source pieces or positions) differ."""
    trace = {"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": columns, "y": indexed_labels(rows),
             "colorscale": get_colorscale(COLORSCALE), "zmin": 0, "zmax": float(max(np.max(z), 1e-9)),
             "hovertemplate": tr("query %{{y}}<br>key %{{x}}<br>{value} %{{z:.4f}}<extra></extra>",
                                 value=tr("weight")), "colorbar": {"title": {"text": tr("weight")}}}
    return {"data": [trace], "layout": {
        "yaxis": {"autorange": "reversed", "title": {"text": tr("query")}, "type": "category"},
        "xaxis": {"title": {"text": x_title}}, "title": {"text": safe_label(title)},
        "height": min(900, 260 + 22 * len(rows)), "margin": {"l": 10, "r": 10, "t": 80, "b": 10}}}


def seq2seq_figure(result: Seq2SeqResult, kind: str = "cross", layer: int | None = None, head: int = 0,
                   text: int = 0) -> FigureDict:
    """One head's map of one kind (default: the last decoder layer's cross-attention, head 0)."""
    maps = result.text_maps(kind, text)  # (L,H,rows,columns)
    layer = maps.shape[0] - 1 if layer is None else layer
    z = maps[layer, head].numpy()
    title = tr("{kind}: layer {layer}, head {head}", kind=tr(KIND_NAMES[kind]), layer=layer, head=head)
    source = list(result.encoder.labels[text][: z.shape[-1]])
    if kind == "encoder":
        return head_figure(z, source, title)
    target = list(result.decoder.labels[text][: z.shape[0]])
    if kind == "decoder":
        return head_figure(z, target, title)
    return cross_figure(z, target, indexed_labels(source), title, tr("source"))


def transcript_figure(transcript: Transcript) -> FigureDict:
    """The found alignment heads' mean cross-attention over the speech (rows: the pieces written; seconds across),
    each word's span boxed on its pieces' rows."""
    rows = speech_rows(transcript)  # (L,H,T+1,S)
    heads = transcript.heads.found or transcript.heads.published
    z = np.mean([rows[layer, head] for layer, head in heads], axis=0) if heads else rows[-1].mean(0)
    seconds = [round(i * POSITION_SECONDS, 2) for i in range(z.shape[-1])]
    labels = list(transcript.result.decoder.labels[0][transcript.prompt_length - 1: transcript.prompt_length - 1
                                                       + z.shape[0]])
    spec = cross_figure(z, labels, seconds, tr("The alignment heads' cross-attention over time"), tr("seconds"))
    half = POSITION_SECONDS / 2  # row i reads piece i - 1 and writes piece i: a word's box is on its pieces' rows
    spec["layout"]["shapes"] = [{"type": "rect", "xref": "x", "yref": "y", "x0": w.start - half, "x1": w.end - half,
                                 "y0": w.pieces[0] - 0.5, "y1": w.pieces[-1] + 0.5, "line": {"color": "orange",
                                                                                             "width": 2}}
                                for w in transcript.words]
    return spec
