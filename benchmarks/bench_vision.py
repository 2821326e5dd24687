"""The bundled DINOv2-small on a sample photo, side by side in one run on the CPU (issue 36):

  (a) every head's map at 224 px (257 tokens) and at 518 px (1,370 tokens), our recompute (explicit, and fused with
      the maps rebuilt from the log-sum-exp) / transformers' eager forward with output_attentions: target <= 1.0
  (b) the overlays of every head of every layer drawn after the forward (the Images page's mosaic, [CLS]'s maps):
      target <= 0.3 s (one layer's: a twelfth of it)
  and the curve the page draws: each layer's mean attention distance (pixels, min / mean / max over its heads)
  at 224 px, with the object heads found on each sample photo.

Run: .venv/bin/python benchmarks/bench_vision.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians  # noqa: E402
from mha_core import load_model  # noqa: E402
from mha_core.analysis.vision.heads import image_heads, query_maps  # noqa: E402
from mha_core.engine.loading import bundled  # noqa: E402
from mha_core.engine.vision.images import prepare_images, read_image, run_images  # noqa: E402
from mha_core.figures.vision import mosaic_png  # noqa: E402
from mha_core.teaching.vision_photos import PHOTOS, photo_file  # noqa: E402


def every_map(model: object, pixels: torch.Tensor, path: str) -> list[torch.Tensor]:
    """Every layer's (B,H,N,N) maps, as transformers returns them."""
    result = run_images(model, pixels, path=path)
    return [result.layer_maps(layer) for layer in range(model.n_layers)]


def reference(model: object, pixels: torch.Tensor) -> tuple:
    with torch.inference_mode():
        return model.model(pixel_values=pixels, output_attentions=True).attentions


def main() -> None:
    torch.set_num_threads(1)
    model = load_model(bundled.ensure(bundled.DINOV2))
    photo = read_image(photo_file(PHOTOS[0]))
    for side in (224, 518):
        pixels = prepare_images(model, [photo], side)
        times = interleaved_medians({
            "ours explicit": lambda pixels=pixels: every_map(model, pixels, "explicit"),
            "ours fused": lambda pixels=pixels: every_map(model, pixels, "fused"),
            "transformers eager": lambda pixels=pixels: reference(model, pixels),
        }, repeats=9, warmup=2)
        ref = times["transformers eager"]
        for name in ("ours explicit", "ours fused"):
            print(f"(a) {side} px, every map, {name}: {times[name] * 1e3:.0f} ms / eager {ref * 1e3:.0f} ms = "
                  f"{times[name] / ref:.2f} (<= 1.0)")
    pixels = prepare_images(model, [photo], 224)
    result = run_images(model, pixels)
    seen = __import__("numpy").asarray(photo.resize((224, 224), 3))
    start = time.perf_counter()
    mosaic_png(seen, query_maps(result, 0))
    every = time.perf_counter() - start
    print(f"(b) the overlays of all {model.n_layers} layers × {model.n_heads} heads after the forward: {every:.3f} s "
          f"(one layer's: {every / model.n_layers:.3f} s; target <= 0.3 s)")
    heads = image_heads(result, model.arch.patch_size)
    print("mean attention distance by layer at 224 px (min / mean / max over heads, pixels):")
    for layer, row in enumerate(heads.distances):
        print(f"  layer {layer:2d}: {row.min():5.0f} {row.mean():5.0f} {row.max():5.0f}")
    for sample in PHOTOS:
        found = image_heads(run_images(model, prepare_images(model, [read_image(photo_file(sample))], 224)),
                            model.arch.patch_size)
        print(f"object heads on {sample.key}: {', '.join(f'L{la}H{h}' for la, h in found.object_heads) or 'none'} "
              f"(foreground {found.mask.mean():.0%} of the patches)")


if __name__ == "__main__":
    main()
