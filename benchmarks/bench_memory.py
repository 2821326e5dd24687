"""Issue 33: the peak resident memory of every computation a visitor or the CLI can start, against its budget.

Each case runs `python -m mha_core …` in a process of its own; its peak RSS (the kernel's VmHWM of that child)
minus the peak of the same model's smallest run (`attention hi`: the model loaded, every weight touched) is the
computation's growth, printed beside the budget ($MHA_COMPUTE_MB, default 1,536 MB) and the wall time. Target:
growth ≤ budget in every case, or a refusal in one sentence before any work (exit 2, said so).

    python benchmarks/bench_memory.py                # every case (about 20 minutes on 2 cores)
    python benchmarks/bench_memory.py ablate lens    # the cases whose names contain these words
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha_core.engine.budget import BUDGET_ENV, DEFAULT_BUDGET_MB  # noqa: E402

SMOL, GEMMA = "SmolLM2-135M-Instruct", "gemma-3-270m"
PAIR = ("The animal didn't cross the street because it was too tired. The word 'it' refers to the",
        "The animal didn't cross the street because it was too wide. The word 'it' refers to the")


def words(n: int) -> str:
    base = ("Researchers study how attention heads in a transformer distribute weight across tokens and whether "
            "some heads track syntax or simple positions in the sentence").split()
    return " ".join(base[i % len(base)] for i in range(n))


def pair_of(n: int) -> tuple[str, str]:
    """A minimal pair of about n pieces: a long shared start, then the animal pair."""
    start = words(max(0, n - 25)) + ". "
    return start + PAIR[0], start + PAIR[1]


def cases(text_file: Path) -> dict[str, tuple[str, list[str]]]:
    return {
        "ablate 85 words (SmolLM2)": (SMOL, ["ablate", words(85)]),
        "patch residual, the default pair (SmolLM2)": (SMOL, ["patch", *PAIR, "--what", "residual", "--answer",
                                                              " animal", "--wrong", " street"]),
        "patch residual, 128 pieces (SmolLM2)": (SMOL, ["patch", *pair_of(128), "--what", "residual", "--answer",
                                                        " animal", "--wrong", " street"]),
        "patch heads, 256 pieces (SmolLM2)": (SMOL, ["patch", *pair_of(256), "--answer", " animal", "--wrong",
                                                     " street"]),
        "patch heads, 1,024 pieces (SmolLM2)": (SMOL, ["patch", *pair_of(1000), "--answer", " animal", "--wrong",
                                                       " street"]),
        "lens, 1,024 pieces (Gemma 3)": (GEMMA, ["lens", words(1100)]),
        "attention --heads 0:0, 8,192 pieces, every row (SmolLM2)": (SMOL, ["attention", "--text-file",
                                                                           str(text_file), "--heads", "0:0"]),
        "attention --heads × 10,000 (SmolLM2)": (SMOL, ["attention", words(200), "--heads",
                                                        ",".join(["3:1"] * 10_000)]),
    }


def peak_mb(args: list[str], out: Path) -> tuple[float, float, int, str]:
    """(peak RSS in MB, seconds, exit status, last line of stderr) of one CLI run in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mha_core", *args, "--json", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    said = proc.stderr.read().decode().strip().splitlines()
    return usage.ru_maxrss / 1024, time.perf_counter() - start, os.waitstatus_to_exitcode(status), (said or [""])[-1]


def main() -> None:
    budget = int(os.environ.get(BUDGET_ENV) or DEFAULT_BUDGET_MB)
    chosen = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "long.txt"
        text.write_text(words(9000), encoding="utf-8")
        out, loaded = Path(tmp) / "out.json", {}
        print(f"budget {budget:,} MB ({BUDGET_ENV}); growth = peak RSS − the same model's `attention hi` peak")
        for name, (model, args) in cases(text).items():
            if chosen and not any(word in name for word in chosen):
                continue
            if model not in loaded:
                loaded[model] = peak_mb(["attention", "hi", "--model", model], out)[0]
            peak, seconds, code, said = peak_mb([*args, "--model", model], out)
            growth = peak - loaded[model]
            verdict = (f"growth {growth:7,.0f} MB  {'within' if growth <= budget else 'OVER'}" if code == 0
                       else f"refused (exit {code}): {said[:90]}")
            print(f"{name:58s} peak {peak:7,.0f} MB  {verdict}  {seconds:6.1f} s", flush=True)


if __name__ == "__main__":
    main()
