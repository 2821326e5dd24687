"""Contributions benchmark, side by side in one run on the CPU (issue 12).

  (a) the whole single-head ablation grid / a naive loop of one full forward per head with that head zeroed:
      target <= 0.3, for the bundled encoder (72 heads, a 20-token sentence) and the bundled decoder
      (270 heads, a 20-token text)
  (b) value-weighted maps for all heads / one explicit forward: target <= 1.5
Run: .venv/bin/python benchmarks/bench_contrib.py [--repeats N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians, text_of_pieces  # noqa: E402
from mha_core import load_model, run  # noqa: E402
from mha_core.analysis.heads.contrib import value_weighted  # noqa: E402
from mha_core.analysis.lm.ablation import ZERO, ablation_grid, grid_plan, prepared, run_variants  # noqa: E402
from mha_core.analysis.lm.measures import Scorer  # noqa: E402
from mha_core.engine.loading import bundled  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs  # noqa: E402


@torch.inference_mode()
def naive_grid(model, text: str) -> None:
    """One full forward per head, that head zeroed, and the same measure (no reuse, no batching)."""
    measure, batch, scored = prepared(model, text, ZERO, None, None, None)
    free_bytes = grid_plan(model, len(batch.input_ids[0])).free_bytes
    scorer = Scorer(model, measure, batch.input_ids[0], scored, None, free_bytes)
    base = scorer.values(*run_variants(model, batch, [torch.zeros(1, model.n_heads, dtype=torch.bool)
                                                      for _ in model.layers], ZERO), None)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            removed = [torch.zeros(1, model.n_heads, dtype=torch.bool) for _ in model.layers]
            removed[layer][0, head] = True
            scorer.values(*run_variants(model, batch, removed, ZERO), base)


def all_value_weighted(model, text: str) -> None:
    result = run(model, text, path="explicit")
    for layer in range(model.n_layers):
        value_weighted(model, result, layer)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name in (bundled.ENCODER_NAME, bundled.DECODER_NAME):
        model = load_model(bundled_dirs()[name])
        text = text_of_pieces(model.tokenizer, 20 - (model.bos_id is not None))
        heads = model.n_layers * model.n_heads
        med = interleaved_medians({
            "grid": lambda model=model, text=text: ablation_grid(model, text),
            "naive": lambda model=model, text=text: naive_grid(model, text),
            "value-weighted": lambda model=model, text=text: all_value_weighted(model, text),
            "forward": lambda model=model, text=text: run(model, text, path="explicit"),
        }, repeats=args.repeats, warmup=1)
        print(f"{name}: {heads} heads, 20 tokens")
        print(f"  (a) ablation grid {med['grid']:.3f} s / naive loop {med['naive']:.3f} s = "
              f"{med['grid'] / med['naive']:.3f} (target <= 0.3)")
        print(f"  (b) value-weighted maps, all heads {med['value-weighted'] * 1e3:.1f} ms / one explicit forward "
              f"{med['forward'] * 1e3:.1f} ms = {med['value-weighted'] / med['forward']:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
