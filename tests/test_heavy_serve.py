"""A running server: a second heavy analysis waits in the queue and says its place; a visitor who leaves stops the
work (the t-SNE child process is killed, the server's CPU goes quiet)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from benchmarks.serving import app_server
from deploy.st_client import Interaction, Session
from tests.conftest import wait_for
from tests.event_loop import loop_thread

pytestmark = pytest.mark.serve

QK_TSNE = {"g_view": "Query–key view of one head", "g_projection": "t-SNE", "g_layer": "0"}


def projection_children(pid: int) -> list[int]:
    """Processes under `pid` running mha_core/analysis/heads/projection.py."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if parent == pid and b"projection.py" in cmdline:
            found.append(int(proc.name))
    return found


async def second_visitor_sees(url: str, said: str, seconds: float = 120) -> list[str]:
    """Another head's t-SNE while the first one runs: what its page shows until it says `said` (a place in the
    queue), however long a loaded machine takes to say it; then it leaves."""
    session = Session(url, page="corpus", query={**QK_TSNE, "g_head": "1"}, timeout=seconds)
    await session.connect_and_start()
    seen = Interaction()
    reading = asyncio.ensure_future(session.read_until_finished(seen))
    deadline = time.monotonic() + seconds
    while not reading.done() and time.monotonic() < deadline and not any(said in t for t in seen.texts):
        await asyncio.sleep(0.1)
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await reading
    await session.close()
    return seen.texts


def test_queued_visitors_see_their_place_and_leaving_stops_the_work(tmp_path):
    env = {"MHA_HEAVY_SLOTS": "1", "MHA_QUEUE_DIR": str(tmp_path / "queue")}
    with app_server(env=env, timeout=180) as group:
        pid = group.pids[0]
        first = Session(group.url, page="corpus", query={**QK_TSNE, "g_head": "0"}, timeout=180)

        async def first_starts() -> None:
            await first.connect_and_start()

        with loop_thread() as loop:  # the first visitor's session lives across the three coroutines
            loop.run(first_starts())
            assert wait_for(lambda: projection_children(pid), 180), "the first t-SNE never started"
            texts = loop.run(second_visitor_sees(group.url, "number 1 in the queue"))
            assert any("number 1 in the queue" in t for t in texts), texts
            assert projection_children(pid), "the first visitor's t-SNE should still run"
            loop.run(first.close())
        assert wait_for(lambda: not projection_children(pid), 20), "t-SNE kept running after its visitor left"
        assert wait_for(lambda: quiet(group, 1.5), 20), "the server kept computing"  # less than a fifth of a core


def quiet(group: object, seconds: float) -> bool:
    """Whether the server used less than a fifth of a core over the next `seconds` (nothing left computing)."""
    before = group.cpu_seconds()
    time.sleep(seconds)
    return group.cpu_seconds() - before < 0.2 * seconds
