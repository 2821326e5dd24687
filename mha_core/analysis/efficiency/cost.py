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
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from mha_core.analysis.efficiency.choices import WINDOW
from mha_core.engine.budget import budget_bytes, check_budget
from mha_core.engine.tokens import InputError
from mha_core.i18n import Worded
from mha_core.messages import N_

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
    if len(set(lengths)) < 2:  # one length (or one repeated): no slope (polyfit warned, and fit noise)
        return float("nan")
    return float(np.polyfit(np.log(lengths), np.log(seconds), 1)[0])


MAX_LENGTH = 131_072  # pieces: the longest length the lab reads (what fits is smaller still, see fits)
MAX_HEADS, MAX_HEAD_DIM, MAX_LENGTHS, MAX_REPEATS = 1024, 1024, 32, 100
MAX_KERNEL_FLOPS = 5e11  # one timed run of one kernel at one length (seconds on a laptop; explicit at 8,192 × 12
#                          heads × 64 is 2.1e11): past it a measurement runs for minutes


def need_bytes(kernel: str, n: int, heads: int, head_dim: int, window: int) -> float:
    """What one kernel's run at length n holds at its peak: q, k and v, and its largest intermediate."""
    return 3 * heads * n * head_dim * FLOAT + analytic(kernel, n, heads, head_dim, window)[1]


def fits(kernel: str, n: int, heads: int, head_dim: int, window: int) -> bool:
    """The one rule of what the lab runs: the memory budget and MAX_KERNEL_FLOPS, both analytic."""
    return (need_bytes(kernel, n, heads, head_dim, window) <= budget_bytes()
            and analytic(kernel, n, heads, head_dim, window)[0] <= MAX_KERNEL_FLOPS)


def longest_fitting(kernel: str, heads: int, head_dim: int, window: int) -> int:
    """The longest length `fits` lets `kernel` run (both costs grow with n), 0 when not even 2 pieces do."""
    low, high = 1, MAX_LENGTH + 1  # fits(low) (or low = 1: none), not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(kernel, middle, heads, head_dim, window) else (low, middle)
    return low if low >= 2 else 0


def whole_in(name: str, value: object, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not least <= value <= most:
        raise InputError("cost_number_out_of_range",
                         N_("{name} must be a whole number from {least:,} to {most:,}, not {value}."), name=name,
                         least=least, most=most, value=str(value)[:40])
    return int(value)


def checked_device(device: object) -> str:
    """'cpu', or a CUDA device this machine has ('cuda', 'cuda:0'); None: CUDA when there is one."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    text = str(device)
    if text == "cpu":
        return text
    index = text.removeprefix("cuda").removeprefix(":")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if text.startswith("cuda") and (index == "" or index.isascii() and index.isdecimal()) and int(index or 0) < count:
        return text
    raise InputError("cost_device_unknown", N_("The device '{device}' is not on this machine: use cpu{cuda}."),
                     device=text[:40], cuda=f" or cuda:0–cuda:{count - 1}" if count else "")


def check_cost_inputs(lengths: Sequence[int], kernels: Sequence[str], heads: int, head_dim: int, window: int,
                      repeats: int = 1) -> None:
    """Every argument of the lab checked before any work: one sentence for the first that is wrong, and each length
    held to `fits`, the refusal naming the longest that fits."""
    whole_in(Worded(N_("The number of heads")), heads, 1, MAX_HEADS)
    whole_in(Worded(N_("The head width")), head_dim, 1, MAX_HEAD_DIM)
    whole_in(Worded(N_("The window W")), window, 1, MAX_LENGTH)
    whole_in(Worded(N_("The number of repeats")), repeats, 1, MAX_REPEATS)
    if isinstance(lengths, str) or not lengths or len(lengths) > MAX_LENGTHS:
        raise InputError("cost_lengths_missing", N_("Give from 1 to {most} lengths to measure."), most=MAX_LENGTHS)
    for n in lengths:
        whole_in(Worded(N_("A length")), n, 2, MAX_LENGTH)
    wrong = [str(kernel)[:20] for kernel in kernels if kernel not in KERNEL_OF]
    if isinstance(kernels, str) or not kernels or wrong:
        raise InputError("cost_kernel_unknown", N_("'{kernel}' is not a kernel here: choose among {kernels}."),
                         kernel=wrong[0] if wrong else "", kernels=", ".join(KERNELS))
    for kernel in dict.fromkeys(kernels):
        n = max(lengths)
        if not fits(kernel, n, heads, head_dim, window):
            refuse_length(kernel, n, heads, head_dim, window)


def refuse_length(kernel: str, n: int, heads: int, head_dim: int, window: int) -> None:
    """The sentence for a length `fits` refuses: its memory (the budget's sentence) or its work, and the longest."""
    longest = longest_fitting(kernel, heads, head_dim, window)
    advice = (Worded(N_("the longest that fits is {longest:,} pieces, or leave the {kernel} kernel out"),
                     longest=longest, kernel=kernel) if longest else
              Worded(N_("no length fits this shape: use fewer heads, a narrower head or a smaller window")))
    what = Worded(N_("The {kernel} kernel at {n:,} pieces"), kernel=kernel, n=n)
    check_budget(int(need_bytes(kernel, n, heads, head_dim, window)), what, advice)
    raise InputError("cost_too_much_work", N_("{what} would take about {flops:.1e} operations per run, over this "
                                              "lab's limit of {limit:.0e}; {advice}."), what=what,
                     flops=analytic(kernel, n, heads, head_dim, window)[0], limit=MAX_KERNEL_FLOPS, advice=advice)


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
              "for measured in peaks_in_forks(*json.loads(sys.argv[1])):\n"
              "    print(json.dumps(measured), flush=True)")  # what peak_megabytes' process runs: a line a kernel
PEAK_TIMEOUT_S = 600  # the explicit kernel at the page's longest length takes seconds; a stuck child is stopped


def peak_megabytes(kernels: Sequence[str], lengths: Sequence[int], heads: int, head_dim: int, window: int,
                   measured: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Per kernel, at each length: the peak resident memory of a process that ran it, less that process's peak
    before the first length (torch loaded, a small run done). A process of its own imports torch once and forks a
    child per kernel (peaks_in_forks): each child starts from the same memory, and its VmHWM is its own (getrusage's
    ru_maxrss would carry this server's peak into a child). measured(kernel) as each kernel's line arrives."""
    asked = json.dumps([list(kernels), sorted(lengths), heads, head_dim, window])
    with tempfile.TemporaryFile("w+") as errors:  # a file, not a pipe: a child that writes much to it never blocks
        child = subprocess.Popen([sys.executable, "-c", PEAK_CHILD, asked], stdout=subprocess.PIPE, stderr=errors,
                                 text=True, cwd=Path(__file__).parents[3])
        stopper = threading.Timer(PEAK_TIMEOUT_S, child.kill)
        stopper.start()
        by_length = {}
        try:
            for line in child.stdout:
                kernel, peaks = json.loads(line)
                by_length[kernel] = dict(zip(sorted(lengths), peaks, strict=True))
                if measured is not None:
                    measured(kernel)
            failed = child.wait() != 0
        finally:
            stopper.cancel()
        if failed or set(by_length) != set(kernels):
            errors.seek(0)
            raise RuntimeError(f"the peak-memory process failed: {errors.read()[-2000:]}")
    return {kernel: [round(by_length[kernel][n], 1) for n in lengths] for kernel in kernels}


def peaks_in_forks(kernels: Sequence[str], lengths: Sequence[int], heads: int, head_dim: int,
                   window: int) -> Iterator[tuple[str, list[float]]]:
    """(peak_megabytes' process) Each kernel's peaks at `lengths` (increasing), each measured in a fork of this
    process, yielded as each fork ends. Until the forks, torch runs on one thread: OpenMP's worker threads do not
    survive a fork, and a child that used a pool its parent had started would wait for them for ever; each child
    gets the thread count back."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for kernel in kernels:  # code each kernel loads on first use is loaded once, before the forks share it
        KERNEL_OF[kernel](*inputs(64, heads, head_dim, "cpu"), window)
    for kernel in kernels:
        yield kernel, in_fork(lambda k=kernel: kernel_peaks(k, lengths, heads, head_dim, window, threads))


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
    each kernel at each length (the device: CUDA when there is one); `memory`: also each kernel's peak memory (CPU).
    progress(done, steps): a step per length timed, then (`memory`) a step per kernel's peak measured. Every argument
    is checked before any work (check_cost_inputs)."""
    check_cost_inputs(lengths, kernels, heads, head_dim, window, repeats)
    device = checked_device(device)
    lengths, kernels = list(dict.fromkeys(int(n) for n in lengths)), list(dict.fromkeys(kernels))  # each once
    seconds: dict[str, list[float]] = {}
    steps, done = len(kernels) * len(lengths) + (len(kernels) if memory else 0), 0

    def step(*_: object) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, steps)

    for kernel in kernels:
        seconds[kernel] = []
        for n in lengths:
            seconds[kernel].append(best_seconds(kernel, n, heads, head_dim, window, device, repeats))
            step()
    peaks = peak_megabytes(kernels, lengths, heads, head_dim, window, step) if memory else {}
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
