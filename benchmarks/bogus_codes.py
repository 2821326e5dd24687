"""bench_classroom.py --bogus N (issue 78.3): N websocket sessions open /lesson?class=CODE-i (a real class's code with
a suffix: each a value no class has) and go; then the server is left idle. Measured over IDLE_SECONDS: the server's
CPU (target < 2 % of a core) and its disk writes (/proc/PID/io write_bytes). Before issue 78 the watcher kept every
value (state() read 6 characters of it), read the store once per value every 0.4 s with a connection of its own
(recreating the -wal/-shm files): 28-35 % of a core and 42 MB/s at N = 1,000."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from benchmarks.serving import app_server
from deploy.st_client import Session

IDLE_SECONDS = 20.0
AT_ONCE = 8  # sessions opening together
CLASS_STEP = 10  # the class's step (the cost curves: cheap, built once per server): the bogus pages' own work


async def open_and_go(url: str, value: str, timeout: float) -> None:
    session = Session(url, page="lesson", query={"class": value}, timeout=timeout)
    try:
        await session.open()
    finally:
        await session.close()


async def open_all(url: str, code: str, n: int, timeout: float) -> int:
    """Each of the N values opened and gone, AT_ONCE at a time; how many opened without an error."""
    failed = 0
    for first in range(0, n, AT_ONCE):
        done = await asyncio.gather(*(open_and_go(url, f"{code}-{i}", timeout)
                                      for i in range(first, min(n, first + AT_ONCE))), return_exceptions=True)
        failed += sum(isinstance(result, Exception) for result in done)
    return n - failed


def written_bytes(pids: tuple[int, ...]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                total += int(line.split()[1])
    return total


def bogus_codes(n: int, timeout: float) -> None:
    from mha_core.serving.classroom import Classroom

    cache = tempfile.mkdtemp(prefix="mha-bogus-")  # the server's classes and the benchmark's: one store
    with app_server(env={"MHA_CACHE_DIR": cache, "HOME": os.environ.get("HOME", "")}) as group:
        os.environ["MHA_CACHE_DIR"] = cache
        code, _ = Classroom().start("The animal didn't cross the street because it was too tired.", "en",
                                    "all-MiniLM-L6-v2", step=CLASS_STEP)
        started = time.monotonic()
        opened = asyncio.run(open_all(group.url, code, n, timeout))
        print(f"{opened} of {n} bogus class values opened and gone in {time.monotonic() - started:.0f} s",
              flush=True)
        time.sleep(3)
        cpu, wrote, wall = group.cpu_seconds(), written_bytes(group.pids), time.monotonic()
        time.sleep(IDLE_SECONDS)
        seconds = time.monotonic() - wall
        print(f"idle server after {n} bogus class values: CPU {(group.cpu_seconds() - cpu) / seconds:.1%} of a core "
              f"(target < 2%), disk writes {(written_bytes(group.pids) - wrote) / seconds / 1e6:.2f} MB/s",
              flush=True)
