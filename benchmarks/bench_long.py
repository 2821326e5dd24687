"""Long texts, side by side in one run on the CPU (issue 24), the bundled decoder SmolLM2 at 2,048, 4,096 and
8,192 pieces:

  (a) our fused forward, keeping each layer's q, k and log-sum-exp, plus every head's summaries (entropy, sink,
      previous, local, distance profile) / transformers' own forward (its default SDPA, no attentions): target <= 2.0
  (b) one head's map downsampled to at most 1,000 cells a side, after that: target <= 0.5 s
  (c) an exact 256 x 256 block of one head: target <= 0.1 s
  (d) what the result keeps (q, k, log-sum-exp, hidden states), in MB: target <= 1,024 at 8,192 pieces
  (e) the process's peak RSS after our forward at that length (the model included): target <= 3 GB

The app still cuts texts at 1,024 pieces (arch.MAX_PIECES); this script lifts the cap on its own copy of the model.
Run: .venv/bin/python benchmarks/bench_long.py [LENGTH ...]
"""

from __future__ import annotations

import os
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core import bundled_dirs, load_model, run  # noqa: E402
from mha_core.analysis.long_text import downsampled_map, head_summaries, map_block  # noqa: E402
from mha_core.engine import bundled  # noqa: E402

PARAGRAPH = ("The committee met on a grey morning to read the long report on the river, its bridges and the towns "
             "along its banks, and each member wrote down what the report said about the floods of the last ten "
             "years, the money spent on the banks, and the work that still waits to be done before the winter. ")


def seconds(work) -> tuple[float, object]:
    start = time.perf_counter()
    value = work()
    return time.perf_counter() - start, value


def kept_mb(result) -> float:
    tensors = [*result.layer_q, *result.layer_k, *(result.layer_lse or ()), *result.hidden_states]
    return sum(t.numel() * t.element_size() for t in tensors) / 2**20


def main(lengths: list[int]) -> None:
    os.environ.setdefault("MHA_COMPUTE_MB", "16384")  # the per-computation limit, lifted (its estimate: 11 GB at 8,192)
    model = load_model(bundled_dirs()[bundled.DECODER_NAME])
    reference = model.model.__class__.from_pretrained(model.model_dir, attn_implementation="sdpa",
                                                      local_files_only=True).eval()  # transformers' default
    for n in lengths:
        long_model = replace(model, arch=replace(model.arch, max_length=n))
        text = PARAGRAPH * (n // 40 + 1)
        with torch.inference_mode():
            ours_s, result = seconds(lambda: run(long_model, text, path="fused"))  # noqa: B023
            summary_s, _ = seconds(lambda: head_summaries(result))  # noqa: B023
            peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            ids = result.batch.input_ids[:, :result.lengths[0]]
            theirs_s, _ = seconds(lambda: reference(input_ids=ids))  # noqa: B023
            pooled_s, _ = seconds(lambda: downsampled_map(result, 0, 15, 4, "max"))  # noqa: B023
            last = range(result.lengths[0] - 256, result.lengths[0])  # the last rows, the first keys
            block_s, _ = seconds(lambda: map_block(result, 0, 15, slice(4, 5), last, range(256)))  # noqa: B023
        print(f"{result.lengths[0]:,} pieces: (a) ours {ours_s:.1f} s + summaries {summary_s:.1f} s / transformers "
              f"{theirs_s:.1f} s = {(ours_s + summary_s) / theirs_s:.2f} (target <= 2.0); (b) downsampled map "
              f"{pooled_s:.2f} s (<= 0.5); (c) 256 x 256 block {block_s * 1e3:.1f} ms (<= 100); (d) kept "
              f"{kept_mb(result):,.0f} MB (<= 1,024); (e) peak RSS {peak_gb:.2f} GB (<= 3)", flush=True)
        result = None  # let the next length reuse the memory


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2048, 4096, 8192])
