"""An image's attention drawn over the image: a map over the patch grid shown as light on the photo (bright where the
head looks, dim elsewhere), a mosaic of every head's overlay (layers down, heads across), one head large with its
weights per patch, and each head's mean attention distance against depth (Dosovitskiy et al. 2020, Figure 7).

Shapes: S pixels a side, R × C patches, L layers, H heads.
"""

from __future__ import annotations

import io

import numpy as np

from mha_core.figures import colours
from mha_core.figures.charts import safe_label
from mha_core.figures.colours import PHOTO_DIM as DIM
from mha_core.figures.colours import PHOTO_GLOW as GLOW
from mha_core.figures.colours import SHADE
from mha_core.figures.spec import FigureDict
from mha_core.figures.summary import brightest_patch, chosen_patch, with_summary
from mha_core.i18n import tr

GAP = 4  # pixels between the tiles of a mosaic
LABEL = 46  # pixels of margin for the layer and head labels
LABEL_FONT_PX = 22  # the labels' size: legible when a phone shows the mosaic at a third of its width



def lit(patch_map: np.ndarray) -> np.ndarray:
    """(R,C) weights -> (R,C) in 0..1: the square root of each over the largest (weak attention still shows)."""
    return np.sqrt(np.clip(patch_map / (float(patch_map.max()) or 1.0), 0, 1))


def upsampled(patch_map: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(R,C) weights -> (S_h,S_w) in 0..1 for size (S_h, S_w): each patch a rectangle, lit()."""
    from PIL import Image

    image = Image.fromarray((lit(patch_map) * 255).astype(np.uint8), "L").resize(size[::-1], Image.NEAREST)
    return np.asarray(image, dtype=np.float32) / 255.0


def overlay(photo: np.ndarray, patch_map: np.ndarray) -> np.ndarray:
    """(S_h,S_w,3) uint8 photo, (R,C) weights -> (S_h,S_w,3) uint8: the photo dimmed where a head does not look
    (to DIM of itself) and lit toward white where it looks most (GLOW of the way)."""
    light = upsampled(patch_map, photo.shape[:2])[..., None]  # (S_h,S_w,1)
    shown = photo * (DIM + (1 - DIM) * light) + GLOW * light * (255.0 - photo)
    return np.clip(np.rint(shown), 0, 255).astype(np.uint8)


def thumbnail(photo: np.ndarray, side: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(photo).resize((side, side), Image.BILINEAR))


def mosaic_png(photo: np.ndarray, maps: np.ndarray, tile: int = 96, first_layer: int = 0, wide: bool = False
               ) -> bytes:
    """(S,S,3) photo, (L,H,R,C) maps -> a PNG of every head's overlay, layers down and heads across (`wide`: layers
    across and heads down, for a projector's landscape screen), labelled L0…, H0… (a PNG, not a chart: 72 overlays
    stay a few hundred kB)."""
    from PIL import Image, ImageDraw, ImageFont

    n_layers, n_heads = maps.shape[:2]
    small = thumbnail(photo, tile)
    rows, columns = (n_heads, n_layers) if wide else (n_layers, n_heads)
    canvas = Image.new("RGB", (LABEL + columns * (tile + GAP), LABEL + rows * (tile + GAP)), colours.PAPER)
    draw, font, ink = ImageDraw.Draw(canvas), ImageFont.load_default(size=LABEL_FONT_PX), colours.INK
    layer_names = [f"L{first_layer + layer}" for layer in range(n_layers)]
    head_names = [f"H{head}" for head in range(n_heads)]
    row_names, column_names = (head_names, layer_names) if wide else (layer_names, head_names)
    for column, name in enumerate(column_names):
        draw.text((LABEL + column * (tile + GAP) + tile // 2, LABEL // 2), name, fill=ink, font=font, anchor="mm")
    for row, name in enumerate(row_names):
        draw.text((LABEL // 2, LABEL + row * (tile + GAP) + tile // 2), name, fill=ink, font=font, anchor="mm")
    for layer in range(n_layers):
        for head in range(n_heads):
            row, column = (head, layer) if wide else (layer, head)
            canvas.paste(Image.fromarray(overlay(small, maps[layer, head])),
                         (LABEL + column * (tile + GAP), LABEL + row * (tile + GAP)))
    out = io.BytesIO()
    canvas.save(out, format="PNG", optimize=True)
    return out.getvalue()


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's (width, height) in pixels, from its IHDR chunk."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def no_taller(png: bytes, tallest: int) -> int:
    """The width at which a PNG picture is no taller than `tallest` pixels (nor wider than it is)."""
    width, height = png_size(png)
    return max(1, min(width, width * tallest // height))  # a pixel at least: PIL scales to nothing narrower


def png_at_width(png: bytes, width: int) -> bytes:
    """The PNG scaled down to `width` pixels across (its aspect kept, bilinear as st.image scales one), or the PNG
    itself when it is no wider. Given a picture wider than its width, st.image decodes, scales and encodes it again
    at every draw: 250 ms of a lesson follower's rerun for the image step's mosaic (issue 84)."""
    from PIL import Image

    picture = Image.open(io.BytesIO(png))
    if picture.width <= width:
        return png
    out = io.BytesIO()
    height = max(1, picture.height * width // picture.width)
    picture.resize((width, height), Image.BILINEAR).save(out, format="PNG", optimize=True)
    return out.getvalue()


def head_overlay_figure(photo: np.ndarray, patch_map: np.ndarray, title: str, query: tuple[int, int] | None = None,
                        height: int = 520, first_patch: int | None = None) -> FigureDict:
    """The photo with one head's weights per patch over it (hover: the patch and its weight); `query`, a patch's
    (row, column), is outlined. `first_patch`: the patches' first token position, to make each patch a click target
    whose point carries its token position (a click opens that patch's row)."""
    import base64

    from PIL import Image

    height_px, width_px = photo.shape[:2]  # the region the model saw (square unless its processor keeps the aspect)
    rows, columns = patch_map.shape
    step_x, step_y = width_px / columns, height_px / rows
    buffer = io.BytesIO()
    Image.fromarray(photo).save(buffer, format="JPEG", quality=85)
    source = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()
    centres_x, centres_y = [(i + 0.5) * step_x for i in range(columns)], [(i + 0.5) * step_y for i in range(rows)]
    heat = {"type": "heatmap", "z": lit(patch_map).tolist(), "x": centres_x,
            "y": centres_y, "customdata": patch_map.tolist(), "colorscale": SHADE, "zmin": 0, "zmax": 1,
            "colorbar": {"title": {"text": tr("√ weight / largest")}},
            "hovertemplate": tr("%{x:.0f}, %{y:.0f} px: weight %{customdata:.4f}") + "<extra></extra>"}
    shapes = [] if query is None else [{"type": "rect", "x0": query[1] * step_x, "x1": (query[1] + 1) * step_x,
                                        "y0": query[0] * step_y, "y1": (query[0] + 1) * step_y,
                                        "line": {"color": colours.SELECTED, "width": 3}}]
    layout = {"title": {"text": safe_label(title)}, "height": height, "margin": {"l": 10, "r": 10, "t": 60, "b": 10},
              "xaxis": {"range": [0, width_px], "showgrid": False, "visible": False, "constrain": "domain"},
              "yaxis": {"range": [height_px, 0], "showgrid": False, "visible": False, "scaleanchor": "x"},
              "images": [{"source": source, "xref": "x", "yref": "y", "x": 0, "y": 0, "sizex": width_px,
                          "sizey": height_px,
                          "sizing": "stretch", "layer": "below"}], "shapes": shapes}
    data = [heat]
    if first_patch is not None:
        data.append({"type": "scatter", "mode": "markers", "x": [centres_x[c] for r in range(rows) for c in
                                                                 range(columns)],
                     "y": [centres_y[r] for r in range(rows) for c in range(columns)],
                     "customdata": [[first_patch + r * columns + c, float(patch_map[r, c])] for r in range(rows)
                                    for c in range(columns)],
                     "marker": {"size": max(4, int(min(step_x, step_y))), "opacity": 0.01, "symbol": "square"},
                     "hovertemplate": heat["hovertemplate"].replace("customdata", "customdata[1]"),
                     "showlegend": False})  # on top of the heatmap: it answers the hover and the click (a trace
        heat["hoverinfo"] = "skip"  # whose hoverinfo is "skip" sends Plotly no click, so a patch was never chosen)
        layout.update(clickmode="event+select", dragmode=False, hovermode="closest")
    return with_summary({"data": data, "layout": layout}, brightest_patch(patch_map, title))


def ranked_overlay_figure(photo: np.ndarray, scores: np.ndarray, title: str, top: list[tuple[int, int]],
                          height: int = 520) -> FigureDict:
    """A method's score per patch (R,C) as light on the photo (its positive part, as one head's weights are drawn;
    hover: the score itself), the patches it ranks highest (`top`: (row, column) each) outlined."""
    spec = head_overlay_figure(photo, np.clip(scores, 0, None), title, None, height)
    heat = spec["data"][0]
    heat.update(customdata=scores.tolist(), showscale=False,
                hovertemplate=tr("%{x:.0f}, %{y:.0f} px: score %{customdata:.4f}") + "<extra></extra>")
    (height_px, width_px), (rows, columns) = photo.shape[:2], scores.shape
    step_x, step_y = width_px / columns, height_px / rows
    spec["layout"]["shapes"] = [{"type": "rect", "x0": c * step_x, "x1": (c + 1) * step_x, "y0": r * step_y,
                                 "y1": (r + 1) * step_y, "line": {"color": colours.SPAN, "width": 2}} for r, c in top]
    return spec



def distance_figure(distances: np.ndarray, side_px: int) -> FigureDict:
    """(L,H) mean attention distance in pixels: one point per head against its layer, as the ViT paper draws it; a
    trace (and a legend entry) per head, in solid colours."""
    n_layers, n_heads = distances.shape
    traces = [{"type": "scatter", "mode": "markers", "name": tr("head {head}", head=head),
               "x": list(range(n_layers)), "y": [float(d) for d in distances[:, head]],
               "marker": {"size": 10, "opacity": 1.0, "color": colours.series_colour(head),
                          "symbol": colours.series_style(head)["symbols"][0],
                          "line": {"width": 1, "color": colours.PAPER}},
               "hovertemplate": tr("layer %{x}, head {head}: %{y:.0f} px").replace("{head}", str(head))
               + "<extra></extra>"}
              for head in range(n_heads)]
    layout = {"title": {"text": tr("Mean attention distance of every head, by depth")}, "height": 420,
              "xaxis": {"title": {"text": tr("layer")}, "dtick": 1},
              "yaxis": {"title": {"text": tr("mean attention distance (pixels)")}, "range": [0, side_px]},
              "legend": {"title": {"text": tr("Head")}}, "margin": {"l": 60, "r": 10, "t": 60, "b": 50}}
    return {"data": traces, "layout": layout}


def patch_grid_figure(photo: np.ndarray, grid: tuple[int, int], query: tuple[int, int] | None,
                      height: int = 520) -> FigureDict:
    """The photo as the model cuts it: the patch grid drawn over it, the chosen patch outlined."""
    spec = head_overlay_figure(photo, np.ones(grid), tr("The photo cut into {rows} × {columns} patches",
                                                        rows=grid[0], columns=grid[1]), query, height)
    spec["data"][0].update({"opacity": 0, "showscale": False, "hoverinfo": "skip"})
    (height_px, width_px), rows, columns = photo.shape[:2], *grid
    step_x, step_y = width_px / columns, height_px / rows
    lines = [{"type": "line", "x0": i * step_x, "x1": i * step_x, "y0": 0, "y1": height_px,
              "line": {"color": colours.GRID, "width": 1}} for i in range(1, grid[1])]
    lines += [{"type": "line", "y0": i * step_y, "y1": i * step_y, "x0": 0, "x1": width_px,
               "line": {"color": colours.GRID, "width": 1}} for i in range(1, grid[0])]
    spec["layout"]["shapes"] = lines + spec["layout"]["shapes"]
    return with_summary(spec, chosen_patch(query, spec["layout"]["title"]["text"]))
