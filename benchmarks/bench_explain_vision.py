"""A photo's [CLS] explained on the bundled DINOv2-small (the Images page's Explanations tab): occlusion at each block
the page offers (copies, seconds), and Integrated Gradients at the page's steps side by side with Captum's
IntegratedGradients on transformers' Dinov2Model (the same zero baseline and Gauss–Legendre points): seconds of each,
their ratio (target <= 1), the largest relative difference, and the convergence delta against the change it should
add up to (the steps the page defaults to are those where it falls within a tenth).
Run with 2 threads: .venv/bin/python benchmarks/bench_explain_vision.py [--steps 16,32,64,128]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core import load_model  # noqa: E402
from mha_core.analysis.explain.vision import (  # noqa: E402
    block_choices,
    copies_of,
    explain_image,
    image_pixels,
    per_patch,
)
from mha_core.engine.loading.bundled import VISION_NAME  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs  # noqa: E402
from mha_core.teaching.vision_photos import PHOTOS, photo_file  # noqa: E402


def captum_seconds(folder: Path, pixels: torch.Tensor, steps: int, patch: int) -> tuple[float, np.ndarray]:
    from captum.attr import IntegratedGradients
    from transformers import AutoModel

    ref = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        own = ref(pixel_values=pixels).last_hidden_state[0, 0].double()

    def cosine(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cosine_similarity(ref(pixel_values=x).last_hidden_state[:, 0].double(), own[None])

    started = time.perf_counter()
    attributions = IntegratedGradients(cosine).attribute(pixels, baselines=torch.zeros_like(pixels), n_steps=steps,
                                                         method="gausslegendre", internal_batch_size=steps)
    grid = (pixels.shape[-2] // patch, pixels.shape[-1] // patch)
    return time.perf_counter() - started, per_patch(attributions[0].detach(), grid, patch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default="16,32,64,128")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(bundled_dirs()[VISION_NAME])
    pixels = image_pixels(model, str(photo_file(PHOTOS[0])))
    explain_image(model, pixels, ["attention"])  # one-off costs
    grid = (pixels.shape[-2] // model.arch.patch_size, pixels.shape[-1] // model.arch.patch_size)
    for block in block_choices(grid):
        found = explain_image(model, pixels, ["occlusion"], block=block)
        print(f"occlusion, blocks of {block}: {copies_of(grid, block)} copies, "
              f"{found.methods['occlusion'].seconds:.2f} s")
    for steps in (int(s) for s in args.steps.split(",")):
        found = explain_image(model, pixels, ["ig"], steps=steps)
        theirs, expected = captum_seconds(model.model_dir, pixels, steps, model.arch.patch_size)
        ours = found.methods["ig"]
        difference = np.abs(ours.scores - expected).max() / np.abs(expected).max()
        print(f"IG {steps:3} steps: ours {ours.seconds:6.2f} s, Captum {theirs:6.2f} s, ratio "
              f"{ours.seconds / theirs:.2f}, relative difference {difference:.1e}, delta {found.ig.delta:+.3f} of "
              f"{found.ig.change:.3f} ({'converged' if found.ig.converged else 'too few steps'})")


if __name__ == "__main__":
    main()
