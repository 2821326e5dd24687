"""Long texts, side by side in one run on the CPU (issue 24), the bundled decoder SmolLM2 at 2,048, 4,096 and
8,192 pieces:

  (a) our fused forward, keeping each layer's q, k and log-sum-exp, plus every head's summaries (entropy, sink,
      previous, local, distance profile) / transformers' own forward (its default SDPA, no attentions): target <= 2.0
  (b) one head's map downsampled to at most 1,000 cells a side, after that: target <= 0.5 s
  (c) an exact 256 x 256 block of one head: target <= 0.1 s
  (d) what the result keeps (q, k, log-sum-exp, the last hidden states), in MB: target <= 1,024 at 8,192 pieces
  (e) the peak RSS of the whole forward, the model included, in a process of its own (VmHWM; the reference
      model is not in it): target <= 3 GB; beside it the memory estimate the budget check uses (forward_bytes)

Long texts are read with long_text.run_long (the model's own limit, at most arch.LONG_MAX_PIECES pieces).
Run: .venv/bin/python benchmarks/bench_long.py [LENGTH ...]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core import bundled_dirs, load_model  # noqa: E402
from mha_core.analysis.long.text import (  # noqa: E402
    downsampled_map,
    head_summaries,
    kept_bytes,
    map_block,
    run_long,
)
from mha_core.engine.budget import forward_bytes  # noqa: E402
from mha_core.engine.loading import bundled  # noqa: E402
from mha_core.engine.loading.model import for_long_texts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys
from mha_core import bundled_dirs, load_model
from mha_core.analysis.long.text import run_long
from mha_core.engine.loading import bundled
result = run_long(load_model(bundled_dirs()[bundled.DECODER_NAME]), sys.argv[1], max_pieces=int(sys.argv[2]))
print(result.lengths[0], next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
"""

PARAGRAPH = ("The committee met on a grey morning to read the long report on the river, its bridges and the towns "
             "along its banks, and each member wrote down what the report said about the floods of the last ten "
             "years, the money spent on the banks, and the work that still waits to be done before the winter. ")


def seconds(work) -> tuple[float, object]:
    start = time.perf_counter()
    value = work()
    return time.perf_counter() - start, value


def own_peak_mb(text: str, n: int) -> float:
    """Peak resident memory (MB) of run_long on `text` (n pieces) in a fresh process (VmHWM counts only it)."""
    done = subprocess.run([sys.executable, "-c", CHILD, text, str(n)], capture_output=True, text=True, cwd=ROOT,
                          check=True)
    return int(done.stdout.split()[-1]) / 1024


def main(lengths: list[int]) -> None:
    model = load_model(bundled_dirs()[bundled.DECODER_NAME])
    reference = model.model.__class__.from_pretrained(model.model_dir, attn_implementation="sdpa",
                                                      local_files_only=True).eval()  # transformers' default
    for n in lengths:
        text = PARAGRAPH * (n // 40 + 1)
        long_model = for_long_texts(model)
        with torch.inference_mode():
            ours_s, result = seconds(lambda: run_long(model, text, max_pieces=n))  # noqa: B023
            summary_s, _ = seconds(lambda: head_summaries(result))  # noqa: B023
            t = result.lengths[0]
            ids = result.batch.input_ids[:, :t]
            theirs_s, _ = seconds(lambda: reference(input_ids=ids))  # noqa: B023
            pooled_s, _ = seconds(lambda: downsampled_map(result, 0, 15, 4, "max"))  # noqa: B023
            last = range(t - 256, t)  # the last rows, the first keys
            block_s, _ = seconds(lambda: map_block(result, 0, 15, slice(4, 5), last, range(256)))  # noqa: B023
        estimate = forward_bytes(long_model, 1, t, keeps_maps=False, keep_hidden=False, bias=False) / 2**20
        print(f"{t:,} pieces: (a) ours {ours_s:.1f} s + summaries {summary_s:.1f} s / transformers "
              f"{theirs_s:.1f} s = {(ours_s + summary_s) / theirs_s:.2f} (target <= 2.0; forward alone "
              f"{ours_s / theirs_s:.2f}); (b) downsampled map {pooled_s:.2f} s (<= 0.5); (c) 256 x 256 block "
              f"{block_s * 1e3:.1f} ms (<= 100); (d) kept {kept_bytes(result) / 2**20:,.0f} MB (<= 1,024); (e) peak "
              f"RSS {own_peak_mb(text, n) / 1024:.2f} GB in its own process (<= 3; estimate of the forward's growth "
              f"{estimate:,.0f} MB)", flush=True)
        result = None  # let the next length reuse the memory


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2048, 4096, 8192])
