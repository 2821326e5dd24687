"""Coroutines of the websocket tests, run on an event loop of their own in a thread of their own.

Playwright's sync driver keeps an event loop running in the test process's main thread from the first browser test
until the session ends: `asyncio.run` (and `loop.run_until_complete`) there then refuses ("cannot be called from a
running event loop"), so a test that drives the app over websockets failed whenever a browser test had run before it
in the same process (a plain `pytest tests/` sorts the browser tests first). The loop here never shares a thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """One event loop running on a daemon thread; `run(coro)` waits for that coroutine's result (or its error)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="websocket-tests", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        """As asyncio.run ends: tasks still pending are cancelled and awaited, async generators closed."""
        self.run(self._finish_tasks())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()

    async def _finish_tasks(self) -> None:
        pending = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.loop.shutdown_asyncgens()


@contextmanager
def loop_thread() -> Iterator[LoopThread]:
    """A LoopThread for several coroutines that share objects (a session opened by one and closed by another)."""
    runner = LoopThread()
    try:
        yield runner
    finally:
        runner.close()


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, on a thread of its own: it works whatever runs in the calling thread."""
    with ThreadPoolExecutor(1, thread_name_prefix="websocket-tests") as pool:
        return pool.submit(asyncio.run, coro).result()
