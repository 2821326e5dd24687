"""CLI runs, each measured alone, forked from one process that has already imported the libraries and loaded the
models (a fresh `python -m mha_core` spends about 5 s importing torch and transformers before any work: the memory
tests ran eight; and each child loaded its model again, 1 to 2 s).

`peak_rss_mb_each(runs)` starts this file once; it imports the CLI, loads each model the runs' commands choose (as the
CLI chooses it), then forks a child for each run (its arguments, and its $MHA_COMPUTE_MB), whose load_model hands it
the model loaded here, and reads that child's peak resident memory from the kernel (wait4). A child starts with the
parent's pages resident, so each peak includes the same base (the libraries and the models): tests compare peaks with
each other, never with a number, and what a peak adds to the base is the run's own computation (a model's loading,
paid in each child before, could hide a smaller computation under its own peak)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Run = tuple[list[str], dict[str, str]]  # the CLI's arguments, environment variables set for it


def peak_rss_mb_each(runs: list[Run]) -> list[float]:
    """Each run's peak resident memory in MB, in order; a run that fails fails the caller with its stderr."""
    done = subprocess.run([sys.executable, __file__], input=json.dumps(runs), cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def run_forked(args: list[str], env: dict[str, str]) -> float:
    def cli() -> int:
        os.environ.update(env)
        from mha_core.cli import main

        return main(args)

    return in_fork(cli, f"{args[:2]}")


def in_fork(work: Callable[[], int], what: str) -> float:
    """Run `work` in a forked child (its return value the child's exit status; out without the parent's exit
    handlers) and return the child's peak resident memory in MB; a child that fails stops this process, naming
    `what`."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = work()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{what} failed with {os.waitstatus_to_exitcode(status)}")
    return usage.ru_maxrss / 1024


def load_models_once(runs: list[Run]) -> None:
    """Load here each model the runs' commands choose, and make load_model hand every later call (the children's) the
    copy loaded here. torch keeps to one thread, as in make test's processes (tests/conftest.py): no OpenMP pool is
    started here that a forked child could not use."""
    import torch

    from mha_core.cli import build_parser
    from mha_core.cli.common import load_chosen_model
    from mha_core.engine.loading import model as loading

    torch.set_num_threads(1)
    loaded: dict[tuple[str, str, object], object] = {}
    load = loading.load_model

    def load_once(model_dir: object = None, device: object = "cpu", dtype: object = None) -> object:
        key = (str(model_dir), str(device), dtype)
        if key not in loaded:
            loaded[key] = load(model_dir, device, dtype)
        return loaded[key]

    loading.load_model = load_once
    for args, _ in runs:
        command = build_parser().parse_args(args)
        if hasattr(command, "model_dir"):  # a command that loads a model
            load_chosen_model(command)


def main() -> None:
    runs = json.loads(sys.stdin.read())
    sys.path.insert(0, str(ROOT))
    load_models_once(runs)
    peaks = [run_forked(args, env) for args, env in runs]
    print(json.dumps(peaks))


if __name__ == "__main__":
    main()
