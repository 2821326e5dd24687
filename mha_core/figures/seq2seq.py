"""An encoder–decoder's figures: one head's map of any of the three kinds (encoder, decoder, cross-attention: target
pieces down, source pieces or seconds across), and a transcript's alignment: the alignment heads' mean
cross-attention over the speech, each word's span marked."""

from __future__ import annotations

import numpy as np

from mha_core.analysis.seq2seq.alignment import HeadScores
from mha_core.analysis.seq2seq.transcribe import Transcript, speech_rows
from mha_core.engine.seq2seq.forward import KIND_NAMES, Seq2SeqResult
from mha_core.engine.seq2seq.frames import POSITION_SECONDS
from mha_core.figures import colours
from mha_core.figures.charts import head_figure, indexed_labels, safe_label
from mha_core.figures.spec import FigureDict, named_colorscale
from mha_core.i18n import tr


def cross_figure(z: np.ndarray, rows: list[str], columns: list, title: str, x_title: str) -> FigureDict:
    """(T,S) a map whose rows (target pieces, top to bottom) and columns (source pieces or positions) differ."""
    trace = {"type": "heatmap", "z": np.asarray(z, dtype=np.float32), "x": columns, "y": indexed_labels(rows),
             "colorscale": named_colorscale(colours.WEIGHTS), "zmin": 0, "zmax": float(max(np.max(z), 1e-9)),
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
    title = title[:1].upper() + title[1:]
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
                                 "y0": w.pieces[0] - 0.5, "y1": w.pieces[-1] + 0.5, "line": {"color": colours.SPAN,
                                                                                             "width": 2}}
                                for w in transcript.words]
    return spec


def spectrogram_cross_figure(transcript: Transcript, layer: int, head: int | None, narrow: bool = False
                             ) -> FigureDict:
    """The clip's log-mel spectrogram (mel bins up, seconds across) above one head's cross-attention (`head` None:
    the layer's heads averaged) from each written piece over the same seconds; each word's span outlined on the
    spectrogram. `narrow` (a phone): the colour bar across the bottom and no side titles, so that the plot keeps the
    screen's width beside the pieces' labels."""
    n = transcript.speech_positions
    mel = transcript.result.encoder.batch.features[0, :, : 2 * n].numpy()  # (C,2n) 10 ms frames
    rows = speech_rows(transcript)[layer]  # (H,T+1,S)
    z = rows.mean(0) if head is None else rows[head]
    p = transcript.prompt_length
    labels = indexed_labels(list(transcript.result.decoder.labels[0][p - 1: p - 1 + z.shape[0]]))
    frames = [round(i * POSITION_SECONDS / 2, 3) for i in range(mel.shape[1])]
    positions = [round((i + 0.5) * POSITION_SECONDS, 3) for i in range(n)]
    which = tr("heads averaged") if head is None else tr("head {head}", head=head)
    spec = {"data": [
        {"type": "heatmap", "z": mel.astype(np.float32), "x": frames, "colorscale": named_colorscale(colours.SPECTRUM),
         "showscale": False, "yaxis": "y", "hovertemplate": tr("{seconds} %{{x:.2f}} s<extra></extra>",
                                                               seconds=tr("seconds"))},
        {"type": "heatmap", "z": z.astype(np.float32), "x": positions, "y": labels, "yaxis": "y2",
         "colorscale": named_colorscale(colours.WEIGHTS), "zmin": 0, "zmax": float(max(z.max(), 1e-9)),
         "colorbar": {"title": {"text": tr("weight")}, "y": 0.28, "len": 0.55},
         "hovertemplate": tr("query %{{y}}<br>%{{x:.2f}} s<br>weight %{{z:.4f}}<extra></extra>")}],
        "layout": {
            "title": {"text": safe_label(tr("Cross-attention, layer {layer}, {which}, under the spectrogram",
                                            layer=layer, which=which))},
            "xaxis": {"title": {"text": tr("seconds")}, "range": [0, n * POSITION_SECONDS], "anchor": "y2"},
            "yaxis": {"domain": [0.62, 1.0], "title": {"text": tr("mel bin")}},
            "yaxis2": {"domain": [0.0, 0.56], "autorange": "reversed", "type": "category",
                       "title": {"text": tr("query")}},
            "height": 420 + 18 * len(labels), "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
            "shapes": [{"type": "rect", "xref": "x", "yref": "y domain", "x0": w.start, "x1": w.end, "y0": 0,
                        "y1": 1, "line": {"color": colours.GRID, "width": 1}} for w in transcript.words]}}
    return narrowed(spec) if narrow else spec


def narrowed(spec: FigureDict) -> FigureDict:
    """spectrogram_cross_figure on a phone: the colour bar under the plot, the axes untitled (the seconds in the
    ticks, the hover names the rest), the plot's width given to the plot."""
    layout = spec["layout"]
    spec["data"][1]["colorbar"] = {"title": {"text": tr("weight"), "side": "right"}, "orientation": "h", "y": -0.07,
                                   "yanchor": "top", "len": 1, "thickness": 12}
    for axis in ("yaxis", "yaxis2"):
        layout[axis]["title"] = {"text": ""}
    layout["xaxis"].update(title={"text": ""}, ticksuffix=" s")
    layout["height"] += 40  # the colour bar's row
    layout["margin"]["b"] = 60
    return spec


MARK_SIZE, MARK_INK, MARK_BADGE = 15, colours.INK, colours.BADGE  # the found/published marks


def head_scores_figure(scores: HeadScores) -> FigureDict:
    """Every cross-attention head's alignment score (forward share × sharpness), the heads found marked ✓ and the
    published ones ●."""
    from mha_core.figures.charts import head_tick, layer_head_grid, layer_tick

    grid = layer_head_grid(scores.monotonic * scores.sharp, tr("How each head follows the audio"),
                           tr("forward × sharpness"), zrange=(0.0, float(max((scores.monotonic * scores.sharp).max(),
                                                                             1e-9))))
    found, published = set(scores.found), set(scores.published)
    grid["layout"]["annotations"] = [  # a dark mark on a light badge: legible on the darkest and the palest cell
        {"x": head_tick(h), "y": layer_tick(layer), "xref": "x", "yref": "y", "showarrow": False,
         "font": {"size": MARK_SIZE, "color": MARK_INK}, "bgcolor": MARK_BADGE, "bordercolor": MARK_INK,
         "borderwidth": 1, "borderpad": 1,
         "text": ("✓" if (layer, h) in found else "") + ("●" if (layer, h) in published else "")}
        for layer, h in sorted(found | published)]
    return grid


FRAME_CELLS = 300  # an encoder map over frames is pooled to at most this many cells a side


def encoder_frames_figure(transcript: Transcript, layer: int, head: int, height: int = 720) -> FigureDict:
    """One encoder head's self-attention over the clip's positions (the window's silence left out), rebuilt from
    the log-sum-exp and pooled to at most FRAME_CELLS cells a side (each a block's largest weight)."""
    from mha_core.figures.long import downsampled_figure

    n = transcript.speech_positions
    z = transcript.result.encoder.head_map(layer, head)[0, :n, :n].numpy()  # (n,n)
    side = max(1, -(-n // FRAME_CELLS))
    m = -(-n // side)
    padded = np.zeros((m * side, m * side), dtype=np.float32)
    padded[:n, :n] = z
    cells = padded.reshape(m, side, m, side).max(axis=(1, 3))  # (m,m)
    title = tr("Encoder layer {layer}, head {head}: every 20 ms frame over the others", layer=layer, head=head)
    return downsampled_figure(cells, side, n, title, "max", height=height)



def pooled_blocks(n: int, bins: int) -> list[list[int]]:
    edges = np.linspace(0, n, min(n, bins) + 1).round().astype(int)
    return [list(range(edges[i], edges[i + 1])) for i in range(len(edges) - 1)]


def kind_overview_figure(maps: np.ndarray, kind: str, selected: tuple[int, int], bins: int = 24,
                         narrow: bool = False) -> FigureDict:
    """Every head of one kind at a glance, maps (L,H,R,C): a cross-attention map's T × S pooled to at most `bins` a
    side (source blocks summed, target blocks averaged: each row still sums to 1), then squared with empty cells.
    `narrow` (a phone): the selected layer's heads, three to a row."""
    from mha_core.figures.charts import layer_tiles_figure, overview_figure

    square = squared(maps, bins)
    if narrow:
        return layer_tiles_figure(square[selected[0]], *selected, bins=bins)
    return overview_figure(square, bins, selected, tr("Every head: {kind}", kind=tr(KIND_NAMES[kind])))


def squared(maps: np.ndarray, bins: int) -> np.ndarray:
    """(L,H,R,C) -> (L,H,n,n): pooled to at most `bins` a side, then squared with NaN cells."""
    pooled = np.stack([maps[..., c].sum(-1) for c in pooled_blocks(maps.shape[-1], bins)], -1)  # (L,H,R,c)
    pooled = np.stack([pooled[..., r, :].mean(-2) for r in pooled_blocks(maps.shape[-2], bins)], -2)  # (L,H,r,c)
    side = max(pooled.shape[-2:])
    square = np.full((*maps.shape[:2], side, side), np.nan, dtype=np.float32)  # (L,H,side,side)
    square[..., : pooled.shape[-2], : pooled.shape[-1]] = pooled
    return square
