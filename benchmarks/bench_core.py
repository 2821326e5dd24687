"""Core engine benchmark: explicit and fused recompute vs transformers' eager model, side by side, for the
bundled models: the encoder all-MiniLM-L6-v2 and the decoders SmolLM2-135M-Instruct and Gemma 3 270M.

Prints median ratios (targets from issues 2 and 11), per model:
  (a) explicit recompute of all heads + hidden states / eager forward with output_attentions: <= 1.2
  (b) fused forward / explicit forward at 512 tokens: <= 0.8
  (c) rebuilding one head's map from the LSE / one fused forward at 512 tokens (reported)
  (d) memory held by a cached 512-token result: fused / explicit <= 0.25
  (e) loading the model (the decoders' later loads; --conversion also times their first, converting load), and
      its check that every weight is finite: one sum per tensor / a mask of every value
  (f) the 512-token forward split into the attention kernel (all the two paths differ in) and the rest:
      the kernels' fused / explicit ratio, and the lowest (b) could be if the fused kernel cost nothing
A decoder is also timed at its longest input (the model's max_length) when that is above 512 tokens.
Run: .venv/bin/python benchmarks/bench_core.py [--model NAME] [--device cuda] [--dtype bfloat16] [--repeats N]
     [--cpu] [--lengths-only]
(the fused path reports the kernel it ran: flash / efficient on CUDA, flash on the CPU)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians, text_of_pieces  # noqa: E402
from mha_core.engine import attention  # noqa: E402
from mha_core.engine.forward import run  # noqa: E402
from mha_core.engine.loading import bundled  # noqa: E402
from mha_core.engine.loading.checks import all_finite  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs, load_model  # noqa: E402
from mha_core.engine.tokens import tokenize  # noqa: E402
from mha_core.serving.store import nbytes  # noqa: E402


def eager_forward(model, text: str):
    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)  # the very pieces run() uses
    with torch.inference_mode():
        out = model.model(input_ids=batch.input_ids.to(model.device),
                          attention_mask=batch.attention_mask.to(model.device), output_attentions=True)
    sync(model.device)
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench_lengths(model, lengths: list[int], repeats: int, clock=time.perf_counter) -> None:
    """(a) and (b) at each length; `clock`: wall time, or this process's CPU time (time.process_time, --cpu)."""
    print(("CPU ms" if clock is time.process_time else "wall ms") + ", medians of interleaved runs")
    print(f"{'tokens':>6} {'eager ms':>9} {'explicit ms':>12} {'fused ms':>9}  explicit/eager  fused/explicit")
    for n in lengths:
        text = text_of_pieces(model.tokenizer, n)
        med = interleaved_medians({
            "eager": lambda text=text: eager_forward(model, text),
            "explicit": lambda text=text: (run(model, text, path="explicit"), sync(model.device)),
            "fused": lambda text=text: (run(model, text, path="fused"), sync(model.device)),
        }, repeats=repeats, clock=clock)
        print(f"{n:>6} {med['eager'] * 1e3:>9.1f} {med['explicit'] * 1e3:>12.1f} {med['fused'] * 1e3:>9.1f}"
              f"  {med['explicit'] / med['eager']:>14.3f}  {med['fused'] / med['explicit']:>14.3f}")


def text_of_run_pieces(model, n_pieces: int) -> str:
    """A text that run() turns into exactly n_pieces pieces (a decoder's [BOS], which run() adds, included)."""
    return text_of_pieces(model.tokenizer, n_pieces - (model.bos_id is not None))


def bench_rebuild(model, repeats: int) -> None:
    text = text_of_run_pieces(model, 512)
    result = run(model, text, path="fused")
    layer, head = model.n_layers // 2, model.n_heads // 2
    med = interleaved_medians({
        "fused forward": lambda: (run(model, text, path="fused"), sync(model.device)),
        "rebuild one head": lambda: (result.head_map(layer, head), sync(model.device)),
    }, repeats=repeats)
    ratio = med["rebuild one head"] / med["fused forward"]
    print(f"(c) rebuild one head's map from LSE at 512 tokens: {med['rebuild one head'] * 1e3:.2f} ms "
          f"= {ratio:.4f} x one fused forward ({med['fused forward'] * 1e3:.1f} ms); backend {result.backend}")
    explicit = run(model, text, path="explicit")
    print(f"(d) a cached 512-token result holds {nbytes(result) / 2**20:.1f} MB on the fused path, "
          f"{nbytes(explicit) / 2**20:.1f} MB on the explicit path: ratio {nbytes(result) / nbytes(explicit):.3f}")


def free_kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias, scale: float, causal: bool = False):
    """A stand-in for the attention kernel that costs nothing: zero context (B,H,T,Dh), zero LSE (B,H,T)."""
    return torch.zeros_like(q), q.new_zeros(q.shape[:3]), "free"


def bench_kernels(model, repeats: int, n_tokens: int = 512) -> None:
    """(f) The forward split into the attention kernel, which is all the two paths differ in, and the rest
    (projections, norms, RoPE, MLP), timed in the model by running it once with a kernel that costs nothing."""
    text = text_of_run_pieces(model, n_tokens)

    def rest() -> None:
        with mock.patch.object(attention, "fused_kernel", free_kernel):
            run(model, text, path="fused")
        sync(model.device)

    med = interleaved_medians({
        "explicit": lambda: (run(model, text, path="explicit"), sync(model.device)),
        "fused": lambda: (run(model, text, path="fused"), sync(model.device)),
        "rest": rest,
    }, repeats=repeats)
    explicit_core, fused_core = med["explicit"] - med["rest"], med["fused"] - med["rest"]
    needed = (0.8 * med["explicit"] - med["rest"]) / explicit_core  # the kernel ratio at which (b) would be 0.8
    print(f"(f) at {n_tokens} tokens the attention kernels take {explicit_core * 1e3:.0f} ms (explicit) and "
          f"{fused_core * 1e3:.0f} ms (fused) of the forward: ratio {fused_core / explicit_core:.3f}; the rest, "
          f"the same on both paths, takes {med['rest'] * 1e3:.0f} ms\n"
          f"    so (b) >= {med['rest'] / med['explicit']:.3f} even with a kernel that cost nothing, and (b) <= 0.8 "
          + (f"needs a fused kernel ratio <= {needed:.3f}" if needed > 0 else "is out of reach at this length"))


def timed_load(name: str, device: str, dtype: torch.dtype) -> object:
    start = time.perf_counter()
    model = load_model(bundled_dirs()[name], device=device, dtype=dtype)
    print(f"(e) {name}: loaded in {time.perf_counter() - start:.1f} s")
    return model


def bench_finite_check(model, repeats: int) -> None:
    """(e) the load's check that every weight is finite: one sum per tensor (checks.all_finite) against a mask of
    every value (torch.isfinite(t).all(), what it replaced)."""
    weights = [t for t in model.model.state_dict().values() if t.is_floating_point()]
    med = interleaved_medians({"mask": lambda: all(bool(torch.isfinite(t).all()) for t in weights),
                               "sum": lambda: all(all_finite(t) for t in weights)}, max(3, repeats // 5))
    print(f"(e) finite check of {sum(t.numel() for t in weights) / 1e6:.0f} M weights: mask {med['mask']:.3f} s, "
          f"sum {med['sum']:.3f} s, ratio {med['sum'] / med['mask']:.3f}")


def time_conversion() -> None:
    """Each GGUF decoder's first use: (chunks joined and checked,) GGUF -> safetensors in an empty cache folder."""
    for bundle in bundled.BUNDLES:
        with tempfile.TemporaryDirectory() as cache:
            os.environ[bundled.CACHE_ENV] = cache
            start = time.perf_counter()
            bundled.ensure(bundle, say=lambda message: None)
            print(f"(e) {bundle.name}: first load converts GGUF to safetensors in "
                  f"{time.perf_counter() - start:.1f} s")
            del os.environ[bundled.CACHE_ENV]


def main() -> None:
    parser = argparse.ArgumentParser()
    names = [bundled.ENCODER_NAME, *(bundle.name for bundle in bundled.BUNDLES)]
    parser.add_argument("--model", choices=names, action="append", help="a bundled model (repeatable; default: all)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    parser.add_argument("--cpu", action="store_true", help="time (a) and (b) in this process's CPU time, not wall "
                        "time: on a shared machine the others' load then counts less")
    parser.add_argument("--lengths-only", action="store_true", help="only (a) and (b), the lengths' table")
    parser.add_argument("--conversion", action="store_true", help="also time the decoder's first (converting) load")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, {args.dtype}")
    if args.conversion:
        time_conversion()
    for name in args.model or names:
        print(f"== {name}")
        model = timed_load(name, args.device, getattr(torch, args.dtype))
        bench_finite_check(model, args.repeats)
        longest = [model.max_length] if model.arch.causal and model.max_length > 512 else []
        clock = time.process_time if args.cpu else time.perf_counter
        bench_lengths(model, [20, 128, 512, *longest], args.repeats, clock)
        if not args.lengths_only:
            bench_rebuild(model, args.repeats)
            bench_kernels(model, args.repeats)


if __name__ == "__main__":
    main()
