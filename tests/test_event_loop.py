"""tests/event_loop.py: the websocket tests' coroutines run even where an event loop already runs in the thread (as
Playwright's sync driver leaves one after a browser test in the same process)."""

from __future__ import annotations

import asyncio

import pytest

from tests.event_loop import loop_thread, run_async


async def answer(value: int) -> int:
    await asyncio.sleep(0)
    return value


def test_a_coroutine_runs_while_a_loop_runs_in_the_calling_thread():
    async def driver_running() -> int:  # what a browser test leaves behind: a running loop in this thread
        refused = answer(0)
        with pytest.raises(RuntimeError, match="running event loop"):
            asyncio.run(refused)  # the call the websocket tests used to make
        refused.close()
        return run_async(answer(42))

    assert run_async(driver_running()) == 42  # the driver's loop runs on a thread of its own, whatever ran here


def test_one_loop_carries_state_between_coroutines_and_cancels_what_is_left():
    started: list[asyncio.Task] = []

    async def start() -> None:
        started.append(asyncio.ensure_future(asyncio.sleep(3600)))

    async def driver_running() -> None:
        with loop_thread() as loop:
            loop.run(start())  # a task the next coroutine finds still running
            assert loop.run(answer(7)) == 7 and not started[0].done()
        assert started[0].cancelled()  # closing the loop cancelled it, as asyncio.run would

    run_async(driver_running())


def test_an_error_reaches_the_caller():
    async def fails() -> None:
        raise ValueError("from the coroutine")

    with pytest.raises(ValueError, match="from the coroutine"):
        run_async(fails())
