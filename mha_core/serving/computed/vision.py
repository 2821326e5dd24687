"""What the Images page asks for, each by name (as serving.computed): a picture read once, a Vision Transformer's
run on it at a size, every head summarised (analysis.vision), and the drawings of its overlays.
Stores (serving.memory.STORES): "results" runs, "small" pictures, summaries and mosaics."""

from __future__ import annotations

import numpy as np

from mha_core.analysis.explain.vision import ImageExplanation, explain_image
from mha_core.analysis.vision.heads import ImageHeads, image_heads, query_maps
from mha_core.engine.arch import MAX_SIDE
from mha_core.engine.batching import Progress
from mha_core.engine.loading.bundled import VISION_NAME
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.vision.images import prepare_images, read_image, run_images, seen_pictures
from mha_core.figures.vision import mosaic_png, no_taller, png_at_width
from mha_core.messages import N_
from mha_core.serving.computed.text import digest, of
from mha_core.serving.server import Server, Wait
from mha_core.teaching.vision_photos import PHOTOS, available_photos, photo_file
from mha_core.teaching.vision_steps import ImageSteps, image_steps

__all__ = ["MAX_SIDE", "OWN", "PHOTOS", "VISION_NAME", "available_photos", "digest", "explanation_of", "heads_of",
           "image_of", "mosaic_of",
           "photo_bytes", "query_maps_of", "result_of", "sides", "steps_of"]

SIDES = (224, 336, 448, 518)  # sizes offered beside the model's own (DINOv2's 14-pixel patches divide each)
OWN = 0  # a side of 0: the picture prepared exactly as the model folder's image processor prepares it


def photo_bytes(key: str) -> bytes:
    """A sample photo's file, by its key."""
    return photo_file(next(p for p in PHOTOS if p.key == key)).read_bytes()


def sides(model: LoadedModel) -> list[int]:
    """The sizes offered: OWN first (the default: as the model prepares images), then those of SIDES its patch
    divides (each picture squared to side × side, departing from the model's preparation)."""
    patch = model.arch.patch_size
    return [OWN, *(s for s in SIDES if s % patch == 0)]


def image_of(server: Server, data: bytes) -> object:
    """The picture in a file, read once per server (bad files raise InputError: one sentence)."""
    return server.kept("small", ("picture", digest(data)), lambda: read_image(data))


def result_of(server: Server, model: LoadedModel, data: bytes, side: int) -> tuple[AttentionResult, np.ndarray]:
    """Every layer and head on the picture prepared as the model prepares it (side OWN) or squared to `side`
    pixels, and the region the model saw (S_h,S_w,3) uint8 (after its resize and crop)."""
    def compute() -> tuple[AttentionResult, np.ndarray]:
        picture, chosen = image_of(server, data), side or None
        seen = seen_pictures(model, [picture], chosen)[0]
        return run_images(model, prepare_images(model, [picture], chosen)), seen

    return server.in_slot("results", ("image", of(model), digest(data), side), compute)


def heads_of(server: Server, model: LoadedModel, data: bytes, side: int) -> ImageHeads:
    def compute() -> ImageHeads:
        return image_heads(result_of(server, model, data, side)[0], model.arch.patch_size)

    return server.kept("small", ("image heads", of(model), digest(data), side), compute)


def query_maps_of(server: Server, model: LoadedModel, data: bytes, side: int, query: int) -> np.ndarray:
    """(L,H,R,C) one token's attention over the patches."""
    return server.kept("small", ("image query", of(model), digest(data), side, query),
                       lambda: query_maps(result_of(server, model, data, side)[0], query))


def mosaic_of(server: Server, model: LoadedModel, data: bytes, side: int, query: int, wide: bool = False,
              tallest: int | None = None) -> bytes:
    """Every head's overlay for one query (PNG; `wide`: layers across, for a projector), scaled down to be no taller
    than `tallest` pixels (the lesson's screen): drawn as it is, never scaled again at each visitor's draw."""
    def compute() -> bytes:
        seen = result_of(server, model, data, side)[1]
        return mosaic_png(seen, query_maps_of(server, model, data, side, query), wide=wide)

    key = ("image mosaic", of(model), digest(data), side, query, wide)
    full = server.kept("small", key, compute)
    if tallest is None:
        return full
    width = no_taller(full, tallest)
    return server.kept("small", (*key, width), lambda: png_at_width(full, width))


def steps_of(server: Server, model: LoadedModel, data: bytes, side: int, layer: int, head: int, query: int
             ) -> ImageSteps:
    """One token's row in one head, step by step from the pixels (teaching.image_steps)."""
    key = ("image steps", of(model), digest(data), side, layer, head, query)
    return server.kept("small", key, lambda: image_steps(model, result_of(server, model, data, side)[0], layer, head,
                                                         query))


def explanation_of(server: Server, model: LoadedModel, data: bytes, side: int, method: str, steps: int,
                   block: int | None, wait: Wait) -> ImageExplanation:
    """The photo's [CLS] explained patch by patch by `method` (occlusion with blocks of `block` patches, or
    Integrated Gradients in `steps` steps), beside attention and rollout (analysis.explain.vision), through the
    heavy-work queue once per server and choice."""
    def compute(progress: Progress) -> ImageExplanation:
        pixels = prepare_images(model, [image_of(server, data)], side or None)
        return explain_image(model, pixels, ("attention", "rollout", method), steps, block, progress=progress)

    key = ("image explanation", of(model), digest(data), side, method, steps if method == "ig" else None, block)
    return server.queued("small", key, N_("Explaining the photo's [CLS], patch by patch"), compute, wait)
