"""The cost of one layer's attention measured on this machine, kernel by kernel, at growing lengths:

- `explicit`: softmax(q kᵀ·scale) v with the (T,T) weights written out, one head at a time;
- `fused`: torch's scaled_dot_product_attention (on a CPU its memory-efficient kernel, on CUDA Flash where it
  applies): the weights never stored whole;
- `window`: a band of width W computed in blocks of W queries, each against its 3W neighbouring keys: O(T·W);
- `linear`: φ(q) (φ(k)ᵀ v) with φ = elu + 1 (Katharopoulos et al.): O(T·Dh²), the (T,T) map never formed.

Time: the best of a few runs in this process. Memory: the peak resident memory of a process of its own that runs
one kernel over the lengths in increasing order, less what it held before the first (the brief's "peak RSS of a
process"; each kernel's process a fork of one that imported torch once). The analytic FLOPs and bytes stand beside
each. Shapes: H heads, T pieces, Dh head width, W window."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.analysis.efficiency.choices import WINDOW
from mha_core.engine.budget import budget_bytes, check_budget
from mha_core.i18n import N_, Worded

KERNELS = ("explicit", "fused", "window", "linear")
FLOAT = 4  # bytes of a float32
MIN_TIMED_S = 0.3  # a kernel is timed until its runs add up to this


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """(H,T,Dh) each -> (H,T,Dh), one head's (T,T) weights at a time."""
    scale = q.shape[-1] ** -0.5
    return torch.stack([torch.softmax(q[h] @ k[h].T * scale, dim=-1) @ v[h] for h in range(q.shape[0])])


def fused_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    return F.scaled_dot_product_attention(q[None], k[None], v[None])[0]  # (H,T,Dh)


def window_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """Query i sees keys |i - j| <= W: blocks of W queries against keys [start - W, end + W), the band masked."""
    n, scale, out = q.shape[1], q.shape[-1] ** -0.5, torch.empty_like(q)
    for start in range(0, n, window):
        end, lo = min(start + window, n), max(0, start - window)
        hi = min(n, end + window)
        scores = q[:, start:end] @ k[:, lo:hi].transpose(1, 2) * scale  # (H,W,≤3W)
        distance = torch.arange(start, end)[:, None] - torch.arange(lo, hi)[None, :]
        scores = scores.masked_fill(distance.abs() > window, float("-inf"))
        out[:, start:end] = torch.softmax(scores, dim=-1) @ v[:, lo:hi]
    return out


def linear_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """φ(q) (φ(k)ᵀ v) / φ(q)·Σφ(k): the (Dh,Dh) summary of keys and values, never the (T,T) map."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1  # (H,T,Dh)
    summary = fk.transpose(1, 2) @ v  # (H,Dh,Dh)
    return (fq @ summary) / (fq @ fk.sum(1, keepdim=True).transpose(1, 2))  # (H,T,Dh)


KERNEL_OF: dict[str, Callable[[Tensor, Tensor, Tensor, int], Tensor]] = {
    "explicit": explicit_attention, "fused": fused_attention, "window": window_attention, "linear": linear_attention}


def analytic(kernel: str, n: int, heads: int, head_dim: int, window: int) -> tuple[float, float]:
    """(FLOPs, bytes of the largest intermediate) of one layer's attention by `kernel` at length n."""
    width = heads * head_dim
    if kernel == "explicit":
        return 4.0 * n * n * width, 2.0 * n * n * FLOAT  # scores and weights of one head
    if kernel == "fused":
        return 4.0 * n * n * width, float(heads * n * FLOAT)  # the log-sum-exp; blocks of the map come and go
    if kernel == "window":
        return 4.0 * n * (2 * window + 1) * width, 2.0 * heads * window * 3 * window * FLOAT
    return 4.0 * n * head_dim * width, float(heads * head_dim * head_dim * FLOAT)


@dataclass(frozen=True)
class AttentionCost:
    """Per kernel, at each length: seconds (best of `repeats`), peak_mb (a process's peak resident memory over what
    it held before), flops and bytes (analytic); slopes: the log–log slope of seconds against length."""

    lengths: tuple[int, ...]
    heads: int
    head_dim: int
    window: int
    device: str
    seconds: dict[str, list[float]]
    peak_mb: dict[str, list[float | None]]
    flops: dict[str, list[float]]
    bytes: dict[str, list[float]]

    @property
    def slopes(self) -> dict[str, float]:
        return {kernel: slope(self.lengths, times) for kernel, times in self.seconds.items()}

    def crossing(self, first: str, second: str) -> float | None:
        """The length where `second` becomes faster than `first` (log–log interpolation), None if they do not cross
        within the lengths measured."""
        ratio = np.log(np.array(self.seconds[first]) / np.array(self.seconds[second]))
        logs = np.log(np.array(self.lengths, dtype=float))
        for i in range(1, len(ratio)):
            if ratio[i - 1] < 0 <= ratio[i]:
                return float(np.exp(logs[i - 1] + (logs[i] - logs[i - 1]) * -ratio[i - 1] / (ratio[i] - ratio[i - 1])))
        return None

    def as_json(self) -> dict:
        return {"lengths": list(self.lengths), "heads": self.heads, "head_dim": self.head_dim, "window": self.window,
                "device": self.device,
                "kernels": {k: {"seconds": self.seconds[k], "peak_mb": self.peak_mb.get(k), "flops": self.flops[k],
                                "bytes": self.bytes[k]} for k in self.seconds},
                "slopes": self.slopes}


def slope(lengths: Sequence[int], seconds: Sequence[float]) -> float:
    """The least-squares slope of log(seconds) against log(length): 2 for O(n²), 1 for O(n)."""
    if len(lengths) < 2:
        return float("nan")
    return float(np.polyfit(np.log(lengths), np.log(seconds), 1)[0])


def check_lengths(lengths: Sequence[int], kernels: Sequence[str], heads: int, head_dim: int, window: int) -> None:
    """Refuse, before any work, lengths whose largest intermediate is over the memory budget, naming the longest
    that fits."""
    wrong = [kernel for kernel in kernels if kernel not in KERNEL_OF]
    if wrong or not lengths or min(lengths) < 2:
        raise ValueError(f"kernels are {', '.join(KERNELS)} and lengths at least 2 (got {wrong or list(lengths)})")

    def need(kernel: str, n: int) -> float:  # q, k and v, and the kernel's largest intermediate
        return 3 * heads * n * head_dim * FLOAT + analytic(kernel, n, heads, head_dim, window)[1]

    for kernel in kernels:
        if need(kernel, max(lengths)) > budget_bytes():
            longest = max(n for n in (2 ** e for e in range(1, 20)) if need(kernel, n) <= budget_bytes())
            check_budget(int(need(kernel, max(lengths))),
                         Worded(N_("The {kernel} kernel at {n:,} pieces"), kernel=kernel, n=max(lengths)),
                         Worded(N_("the longest that fits is {longest:,} pieces, or leave the {kernel} kernel out"),
                                longest=longest, kernel=kernel))


def inputs(n: int, heads: int, head_dim: int, device: str) -> tuple[Tensor, Tensor, Tensor]:
    generator = torch.Generator(device="cpu").manual_seed(n)
    return tuple(torch.randn(heads, n, head_dim, generator=generator).to(device) for _ in range(3))


def best_seconds(kernel: str, n: int, heads: int, head_dim: int, window: int, device: str, repeats: int) -> float:
    """The best of at least `repeats` runs after a warm-up, and of as many more as fit in MIN_TIMED_S (a kernel of
    a few milliseconds is timed many times: one run on a shared machine says little)."""
    q, k, v = inputs(n, heads, head_dim, device)
    times: list[float] = []
    KERNEL_OF[kernel](q, k, v, window)  # warm-up
    while len(times) < repeats or sum(times) < MIN_TIMED_S:
        started = time.perf_counter()
        KERNEL_OF[kernel](q, k, v, window)
        if device != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return min(times)


PEAK_CHILD = ("import json, sys\nfrom mha_core.analysis.efficiency.cost import peaks_in_forks\n"
              "print(json.dumps(peaks_in_forks(*json.loads(sys.argv[1]))))")  # what peak_megabytes' process runs
PEAK_TIMEOUT_S = 600  # the explicit kernel at the page's longest length takes seconds; a stuck child is stopped


def peak_megabytes(kernels: Sequence[str], lengths: Sequence[int], heads: int, head_dim: int,
                   window: int) -> dict[str, list[float]]:
    """Per kernel, at each length: the peak resident memory of a process that ran it, less that process's peak
    before the first length (torch loaded, a small run done). A process of its own imports torch once and forks a
    child per kernel (peaks_in_forks): each child starts from the same memory, and its VmHWM is its own (getrusage's
    ru_maxrss would carry this server's peak into a child)."""
    asked = json.dumps([list(kernels), sorted(lengths), heads, head_dim, window])
    done = subprocess.run([sys.executable, "-c", PEAK_CHILD, asked], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).parents[3], timeout=PEAK_TIMEOUT_S)
    measured = json.loads(done.stdout.splitlines()[-1])
    by_length = {kernel: dict(zip(sorted(lengths), measured[kernel], strict=True)) for kernel in kernels}
    return {kernel: [round(by_length[kernel][n], 1) for n in lengths] for kernel in kernels}


def peaks_in_forks(kernels: Sequence[str], lengths: Sequence[int], heads: int, head_dim: int,
                   window: int) -> dict[str, list[float]]:
    """(peak_megabytes' process) Each kernel's peaks at `lengths` (increasing), each measured in a fork of this
    process. Until the forks, torch runs on one thread: OpenMP's worker threads do not survive a fork, and a child
    that used a pool its parent had started would wait for them for ever; each child gets the thread count back."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for kernel in kernels:  # code each kernel loads on first use is loaded once, before the forks share it
        KERNEL_OF[kernel](*inputs(64, heads, head_dim, "cpu"), window)
    return {kernel: in_fork(lambda k=kernel: kernel_peaks(k, lengths, heads, head_dim, window, threads))
            for kernel in kernels}


def kernel_peaks(kernel: str, lengths: Sequence[int], heads: int, head_dim: int, window: int,
                 threads: int) -> list[float]:
    """(a fork: its peak starts from the memory it was forked with) The kernel's peak resident memory after each
    length, in MB over its peak after a small run."""
    torch.set_num_threads(threads)
    KERNEL_OF[kernel](*inputs(64, heads, head_dim, "cpu"), window)
    base, seen = peak_rss_mb(), []
    for n in lengths:
        KERNEL_OF[kernel](*inputs(n, heads, head_dim, "cpu"), window)
        seen.append(peak_rss_mb() - base)
    return seen


def peak_rss_mb() -> float:
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024


def in_fork(work: Callable[[], list[float]]) -> list[float]:
    """`work()` run in a fork of this process, its result read back through a pipe; a child that fails raises."""
    read, write = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the child: out without this process's exit handlers
        code = 1
        try:
            os.close(read)
            with os.fdopen(write, "w") as out:
                json.dump(work(), out)
            code = 0
        except Exception:  # noqa: BLE001 -- shown on the process's stderr, which the caller reports
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status != 0:
        raise RuntimeError(f"the kernel's child process failed with status {status}")
    return json.loads(text)


def attention_cost(lengths: Sequence[int], heads: int = 12, head_dim: int = 64, kernels: Sequence[str] = KERNELS,
                   window: int = WINDOW, device: str | None = None, repeats: int = 2, memory: bool = True,
                   progress: Callable[[int, int], None] | None = None) -> AttentionCost:
    """One layer's attention of `heads` heads of `head_dim` (a model's: model.n_heads, model.arch.head_dim) timed by
    each kernel at each length (the device: CUDA when there is one); `memory`: also each kernel's peak memory (CPU)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    check_lengths(lengths, kernels, heads, head_dim, window)
    seconds: dict[str, list[float]] = {}
    steps, done = len(kernels) * len(lengths), 0
    for kernel in kernels:
        seconds[kernel] = []
        for n in lengths:
            seconds[kernel].append(best_seconds(kernel, n, heads, head_dim, window, device, repeats))
            done += 1
            if progress is not None:
                progress(done, steps)
    peaks = peak_megabytes(kernels, lengths, heads, head_dim, window) if memory else {}
    figures = {kernel: [analytic(kernel, n, heads, head_dim, window) for n in lengths] for kernel in kernels}
    return AttentionCost(tuple(lengths), heads, head_dim, window, device, seconds, peaks,
                         {k: [f for f, _ in v] for k, v in figures.items()}, {k: [b for _, b in v] for k, v in
                                                                              figures.items()})


def model_shape(model: object) -> tuple[int, int]:
    """(heads, head width) of a loaded model's attention layers."""
    return model.n_heads, model.head_dim


def growth(cost: AttentionCost, kernel: str) -> float:
    """How many times longer the longest length took than the shortest."""
    times = cost.seconds[kernel]
    return times[-1] / times[0] if times[0] > 0 else math.inf
