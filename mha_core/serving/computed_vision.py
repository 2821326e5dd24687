"""What the Images page asks for, each by name (as serving.computed): a picture read once, a Vision Transformer's
run on it at a size, every head summarised (analysis.vision), and the drawings of its overlays.
Stores (serving.memory.STORES): "results" runs, "small" pictures, summaries and mosaics."""

from __future__ import annotations

import hashlib

import numpy as np

from mha_core.analysis.vision import ImageHeads, image_heads, query_maps
from mha_core.engine.bundled import VISION_NAME
from mha_core.engine.images import prepare_images, read_image, run_images
from mha_core.engine.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.vision import MAX_SIDE
from mha_core.figures.vision import mosaic_png
from mha_core.serving.computed import of
from mha_core.serving.server import Server
from mha_core.teaching.image_steps import ImageSteps, image_steps
from mha_core.teaching.photos import PHOTOS, available_photos, photo_file

__all__ = ["MAX_SIDE", "PHOTOS", "VISION_NAME", "available_photos", "digest", "heads_of", "image_of", "mosaic_of",
           "photo_bytes", "query_maps_of", "result_of", "sides", "steps_of"]

SIDES = (224, 336, 448, 518)  # offered sizes (DINOv2's 14-pixel patches divide each)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def photo_bytes(key: str) -> bytes:
    """A sample photo's file, by its key."""
    return photo_file(next(p for p in PHOTOS if p.key == key)).read_bytes()


def sides(model: LoadedModel) -> list[int]:
    """The sizes a model reads images at: those of SIDES its patch divides (224 first: the default), else its own."""
    patch = model.arch.patch_size
    fits = [s for s in SIDES if s % patch == 0]
    return fits if fits else [model.arch.image_size]


def image_of(server: Server, data: bytes) -> object:
    """The picture in a file, read once per server (bad files raise InputError: one sentence)."""
    return server.kept("small", ("picture", digest(data)), lambda: read_image(data))


def result_of(server: Server, model: LoadedModel, data: bytes, side: int) -> tuple[AttentionResult, np.ndarray]:
    """Every layer and head on the picture at `side` pixels, and the picture as the model saw it (S,S,3) uint8."""
    def compute() -> tuple[AttentionResult, np.ndarray]:
        picture = image_of(server, data)
        seen = np.asarray(picture.convert("RGB").resize((side, side), 3))
        return run_images(model, prepare_images(model, [picture], side)), seen

    return server.in_slot("results", ("image", of(model), digest(data), side), compute)


def heads_of(server: Server, model: LoadedModel, data: bytes, side: int) -> ImageHeads:
    def compute() -> ImageHeads:
        return image_heads(result_of(server, model, data, side)[0], model.arch.patch_size)

    return server.kept("small", ("image heads", of(model), digest(data), side), compute)


def query_maps_of(server: Server, model: LoadedModel, data: bytes, side: int, query: int) -> np.ndarray:
    """(L,H,R,C) one token's attention over the patches."""
    return server.kept("small", ("image query", of(model), digest(data), side, query),
                       lambda: query_maps(result_of(server, model, data, side)[0], query))


def mosaic_of(server: Server, model: LoadedModel, data: bytes, side: int, query: int) -> bytes:
    """Every head's overlay for one query (PNG)."""
    def compute() -> bytes:
        seen = result_of(server, model, data, side)[1]
        return mosaic_png(seen, query_maps_of(server, model, data, side, query))

    return server.kept("small", ("image mosaic", of(model), digest(data), side, query), compute)


def steps_of(server: Server, model: LoadedModel, data: bytes, side: int, layer: int, head: int, query: int
             ) -> ImageSteps:
    """One token's row in one head, step by step from the pixels (teaching.image_steps)."""
    key = ("image steps", of(model), digest(data), side, layer, head, query)
    return server.kept("small", key, lambda: image_steps(model, result_of(server, model, data, side)[0], layer, head,
                                                         query))
