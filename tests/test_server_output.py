"""A server the tests and benchmarks start (benchmarks/serving.py) writes its output to a file: nobody reads it once
the server is up, and a pipe holding 64 KB would block the server at its next write (its sessions then stall)."""

from __future__ import annotations

import pytest

from benchmarks.serving import app_server
from deploy.st_client import Session
from tests.event_loop import run_async


async def visit(url: str) -> list[str]:
    session = Session(url, timeout=30)
    try:
        return (await session.open()).texts
    finally:
        await session.close()


def test_a_server_that_writes_much_keeps_serving():
    """Each run of the page writes 256 KB: through a pipe nobody reads, the first run would never finish."""
    with app_server("tests/loud_app.py", timeout=60) as group:
        for _ in range(3):
            assert "written" in run_async(visit(group.url))


def test_a_server_that_exits_at_once_says_why():
    """Its last output is the error's message (read from the file)."""
    with pytest.raises(RuntimeError, match="does not exist"), app_server("tests/no_such_page.py", timeout=60):
        pass
