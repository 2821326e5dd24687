"""Open the app once, as the teacher would before the class, so that the first students do not wait for the
model to load: `python deploy/warm.py http://127.0.0.1:8601 [more URLs]`. Each URL is one app process; its
default page runs once (loading the default model and building the example sentence's views). Exits 1 with
one line if a process does not answer within --timeout seconds.

Used by deploy/serve.sh (HAProxy starts only after every process is warm) and deploy/run.sh (`make run`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from deploy.st_client import Session  # noqa: E402


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen | None = None, output: Path | None = None) -> None:
    """Until the app at `url` answers its health check; TimeoutError after `timeout` s, RuntimeError (with the end
    of its output, the file `output`) if `proc`, the server's process, exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                return
        if proc is not None and proc.poll() is not None:
            out = output.read_bytes().decode(errors="replace") if output is not None and output.exists() else ""
            raise RuntimeError(f"the server exited: {out[-2000:]}")
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer in {timeout:.0f} s")


async def first_visit(url: str, timeout: float) -> float:
    session = Session(url, timeout=timeout)
    try:
        visit = await session.open()
    finally:
        await session.close()
    if visit.exceptions:
        raise RuntimeError(f"{url}: {visit.exceptions[0]}")
    return visit.seconds


async def first_visits(urls: list[str], timeout: float) -> list[float]:
    """Every process's first visit at once, each loading its model on a core of its own (one after another, two
    processes behind HAProxy took 16.3 s to be ready on 2 cores; at once, 10.6 s: measured)."""
    return list(await asyncio.gather(*(first_visit(url, timeout) for url in urls)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urls", nargs="+")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    try:
        for url in args.urls:
            wait_healthy(url, args.timeout)
        for url, seconds in zip(args.urls, asyncio.run(first_visits(args.urls, args.timeout)), strict=True):
            print(f"warm: {url} loaded its model in {seconds:.1f} s", flush=True)
    except (OSError, TimeoutError, RuntimeError) as err:
        print(f"warm: {err}", file=sys.stderr)
        sys.exit(1)
    print(f"memory: {memory_said(len(args.urls))}", flush=True)


def memory_said(processes: int) -> str:
    """The server's memory plan (mha_core.serving.memory), for each process and all of them."""
    from mha_core.serving.heavy import default_slots
    from mha_core.serving.memory import memory_plan
    from mha_core.serving.menu import listed_model_bytes

    plan = memory_plan(listed_model_bytes(), default_slots())
    each = "each process: " if processes > 1 else ""
    whole = f"; {processes} processes: up to {processes * plan.total / 2**30:.1f} GB" if processes > 1 else ""
    return each + plan.said() + whole


if __name__ == "__main__":
    main()
