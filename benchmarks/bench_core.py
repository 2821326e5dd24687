"""Core engine benchmark: explicit and fused recompute vs transformers' eager BERT, side by side.

Prints median ratios (targets from issue 2):
  (a) explicit recompute of all heads + hidden states / eager forward with output_attentions: <= 1.2
  (b) fused forward / explicit forward at 512 tokens: <= 0.8
  (c) rebuilding one head's map from the LSE / one fused forward at 512 tokens (reported)
Run: .venv/bin/python benchmarks/bench_core.py [--device cuda] [--dtype float16|bfloat16] [--repeats N]
(the fused path reports the kernel it ran: flash / efficient on CUDA, flash on the CPU)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians, text_of_pieces  # noqa: E402
from mha_core import load_model, run  # noqa: E402


def eager_forward(model, text: str):
    enc = model.tokenizer(text, return_tensors="pt", truncation=True, max_length=model.max_length)
    with torch.inference_mode():
        out = model.model(**{k: v.to(model.device) for k, v in enc.items()}, output_attentions=True)
    sync(model.device)
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench_lengths(model, lengths: list[int], repeats: int) -> None:
    print(f"{'tokens':>6} {'eager ms':>9} {'explicit ms':>12} {'fused ms':>9}  explicit/eager  fused/explicit")
    for n in lengths:
        text = text_of_pieces(model.tokenizer, n)
        med = interleaved_medians({
            "eager": lambda text=text: eager_forward(model, text),
            "explicit": lambda text=text: (run(model, text, path="explicit"), sync(model.device)),
            "fused": lambda text=text: (run(model, text, path="fused"), sync(model.device)),
        }, repeats=repeats)
        print(f"{n:>6} {med['eager'] * 1e3:>9.1f} {med['explicit'] * 1e3:>12.1f} {med['fused'] * 1e3:>9.1f}"
              f"  {med['explicit'] / med['eager']:>14.3f}  {med['fused'] / med['explicit']:>14.3f}")


def bench_rebuild(model, repeats: int) -> None:
    text = text_of_pieces(model.tokenizer, 512)
    result = run(model, text, path="fused")
    med = interleaved_medians({
        "fused forward": lambda: (run(model, text, path="fused"), sync(model.device)),
        "rebuild one head": lambda: (result.head_map(3, 7), sync(model.device)),
    }, repeats=repeats)
    ratio = med["rebuild one head"] / med["fused forward"]
    print(f"(c) rebuild one head's map from LSE at 512 tokens: {med['rebuild one head'] * 1e3:.2f} ms "
          f"= {ratio:.4f} x one fused forward ({med['fused forward'] * 1e3:.1f} ms); backend {result.backend}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    args = parser.parse_args()
    model = load_model(device=args.device, dtype=getattr(torch, args.dtype))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, {args.dtype}")
    bench_lengths(model, [20, 128, 512], args.repeats)
    bench_rebuild(model, args.repeats)


if __name__ == "__main__":
    main()
