"""CLI runs, each measured alone, forked from one process that has already imported the libraries (a fresh
`python -m mha_core` spends about 5 s importing torch and transformers before any work: the memory tests ran eight).

`peak_rss_mb_each(runs)` starts this file once; it imports the CLI and the model classes the runs need, then forks a
child for each run (its arguments, and its $MHA_COMPUTE_MB) and reads that child's peak resident memory from the
kernel (wait4). A child starts with the parent's pages resident, so each peak includes the same base: tests compare
peaks with each other, never with a number."""

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


def main() -> None:
    runs = json.loads(sys.stdin.read())
    sys.path.insert(0, str(ROOT))
    import transformers.models.bert.modeling_bert  # noqa: F401 - the bundled encoder's and decoder's classes
    import transformers.models.llama.modeling_llama  # noqa: F401

    import mha_core.cli  # noqa: F401

    peaks = [run_forked(args, env) for args, env in runs]
    print(json.dumps(peaks))


if __name__ == "__main__":
    main()
