"""Predictions benchmark, side by side in one run on the CPU (issue 21), on the bundled decoder:

  (a) the head-patching grid (270 heads, a 20-piece pair) / a naive loop of one patched forward per head:
      target <= 0.3
  (b) the logit lens (every layer through the final norm and the unembedding) / one forward: target <= 1.5;
      (c) says why it cannot be met exactly: the lens's own matrix products alone (every layer's states times
      the 49,152 x 576 unembedding, 21% of the model's weights, once per layer) / one forward
  (d) 32 generated pieces with the key/value cache / recomputing the whole text at each step: target <= 0.3;
      (e) the same after a 200-piece text: a one-piece step reads all the weights (0.43 GB) for little arithmetic,
      so on a CPU the cache pays off more the longer the text
Run: .venv/bin/python benchmarks/bench_predict.py [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians  # noqa: E402
from mha_core import bundled_dirs, load_model, run  # noqa: E402
from mha_core.analysis.lm.generate import generate  # noqa: E402
from mha_core.analysis.lm.head import lm_head  # noqa: E402
from mha_core.analysis.lm.patching import head_edit, logit_diff_metric, pair_streams, patch_grid  # noqa: E402
from mha_core.analysis.lm.predict import logit_lens  # noqa: E402
from mha_core.engine.forward import layer_outputs, prepare  # noqa: E402
from mha_core.engine.hooks import hooks_of  # noqa: E402
from mha_core.engine.loading import bundled  # noqa: E402

CLEAN = "The small animal didn't cross the busy street because it was far too tired. It is the"  # 20 pieces
LONG = " ".join([CLEAN] * 10)
CORRUPTED = "The small animal didn't cross the busy street because it was far too wide. It is the"


@torch.inference_mode()
def naive_patching(model, answer: str, wrong: str) -> None:
    """One full forward of the corrupted text per head, that head's clean output put back (no reuse, no batching)."""
    clean, corrupted = pair_streams(model, CLEAN, CORRUPTED)
    metric = logit_diff_metric(model, clean, answer, wrong)
    x, bias, rope = prepare(model, corrupted.batch)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            edit = head_edit(clean, layer, torch.tensor([0]), torch.tensor([head]))
            hooks = hooks_of([(f"blocks.{layer}.attn.hook_z", lambda z, _, edit=edit: edit(z))])
            *_, (out, attn) = layer_outputs(model, x, bias, rope, hooks=hooks)
            metric.read(out.float(), attn.probs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    model = load_model(bundled_dirs()[bundled.DECODER_NAME])
    pieces = len(run(model, CLEAN).tokens[0])
    w_u, states = lm_head(model).w_u, torch.randn(model.n_layers, pieces, model.d_model)
    med = interleaved_medians({
        "grid": lambda: patch_grid(model, CLEAN, CORRUPTED, " tired", " wide"),
        "naive": lambda: naive_patching(model, " tired", " wide"),
        "lens": lambda: logit_lens(model, CLEAN),
        "forward": lambda: run(model, CLEAN, path="explicit"),
        "unembed": lambda: states @ w_u.T,  # every layer at once, as the lens does
        "cached": lambda: generate(model, CLEAN, 32),
        "uncached": lambda: generate(model, CLEAN, 32, use_cache=False),
        "cached_long": lambda: generate(model, LONG, 32),
        "uncached_long": lambda: generate(model, LONG, 32, use_cache=False),
    }, repeats=args.repeats, warmup=1)
    print(f"{bundled.DECODER_NAME}: {model.n_layers * model.n_heads} heads, a pair of {pieces} pieces")
    print(f"  (a) head-patching grid {med['grid']:.3f} s / naive loop {med['naive']:.3f} s = "
          f"{med['grid'] / med['naive']:.3f} (target <= 0.3)")
    print(f"  (b) logit lens {med['lens'] * 1e3:.1f} ms / one explicit forward {med['forward'] * 1e3:.1f} ms = "
          f"{med['lens'] / med['forward']:.2f} (target <= 1.5)")
    print(f"  (c) the lens's {model.n_layers} unembeddings alone {med['unembed'] * 1e3:.1f} ms / one forward = "
          f"{med['unembed'] / med['forward']:.2f}: the floor of (b) without the forward it also needs")
    print(f"  (d) 32 pieces with the cache {med['cached']:.3f} s / recomputing the text {med['uncached']:.3f} s = "
          f"{med['cached'] / med['uncached']:.3f} (target <= 0.3)")
    print(f"  (e) after {len(run(model, LONG).tokens[0])} pieces: {med['cached_long']:.3f} s / "
          f"{med['uncached_long']:.3f} s = {med['cached_long'] / med['uncached_long']:.3f}")


if __name__ == "__main__":
    main()
