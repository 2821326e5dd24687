"""The order of a tier's tests for work stealing (tests/scheduling.py): each test process's first share starts with
its turn of the long tests, and every test runs once."""

from __future__ import annotations

import os
from pathlib import Path

from tests.scheduling import TIER_FILES, dealt, misplaced, share_sizes


def test_work_stealing_s_first_shares_are_as_xdist_sends_them():
    assert share_sizes(11, 2) == [5, 6] and share_sizes(10, 3) == [3, 3, 4] and share_sizes(4, 1) == [4]


def test_each_process_s_share_starts_with_its_turn_of_the_long_tests():
    names = [f"t{i}" for i in range(10)]
    long = [name in ("t3", "t6", "t9") for name in names]  # long tests late in the collection, as file order put them
    order = dealt(names, long, 2)
    assert sorted(order) == sorted(names)  # each test once
    first, second = order[:5], order[5:]  # the shares work stealing sends to the two processes
    assert first[:2] == ["t3", "t9"] and second[0] == "t6"
    assert [t for t in order if t not in ("t3", "t6", "t9")] == ["t0", "t1", "t2", "t4", "t5", "t7", "t8"]
    assert dealt(names, long, 1)[:3] == ["t3", "t6", "t9"]  # one process: the long ones first


class Marked:
    """Stands for a collected test: its file and its markers."""

    def __init__(self, path: str, *markers: str) -> None:
        self.path, self.nodeid, self.markers = Path(path), f"{path}::t", markers

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def test_a_tier_s_test_outside_its_files_stops_the_collection():
    fine = [Marked("tests/test_browser_x.py", "browser"), Marked("tests/test_heavy_serve.py", "serve"),
            Marked("tests/test_serve.py", "serve", "browser"), Marked("tests/test_server_output.py"),
            Marked("tests/test_x.py", "slow")]
    assert misplaced(fine) == []
    wrong = misplaced([Marked("tests/test_app_x.py", "browser"), Marked("tests/test_server_output.py", "serve"),
                       Marked("tests/test_browser_x.py", "serve", "browser")])
    assert [line.split(" is marked ")[1].split(":")[0] for line in wrong] == ["browser", "serve", "serve"]
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert all(f"tests/{pattern}" in makefile for pattern in TIER_FILES.values())  # what make collects


def test_a_test_process_computes_on_one_thread():
    """pytest -n N (every tier but the serial one): torch and BLAS on one thread each, in this process and its
    children, though set_up_test_process no longer imports them."""
    import torch
    from threadpoolctl import threadpool_info

    if os.environ.get("PYTEST_XDIST_WORKER"):
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        assert all(pool["num_threads"] == 1 for pool in threadpool_info()), threadpool_info()


def test_the_browser_tier_s_processes_share_one_server_stopped_after_its_last_user(tmp_path, monkeypatch):
    """tests/browser.server_for_the_run with a stand-in server: the first process starts it, a later one reads its
    address; the starter stops it only once another user's process has gone; a process that asks after that starts
    a new one."""
    import contextlib
    import subprocess
    import sys
    import time

    from tests import browser

    events = []

    @contextlib.contextmanager
    def stand_in(address: str) -> object:
        events.append("started")
        yield f"http://127.0.0.1:{len(events)}"
        events.append("stopped")

    monkeypatch.setattr(browser, "streamlit_server", stand_in)
    monkeypatch.setattr(browser, "LAST_USER_WAIT_S", 8)  # a starter that never sees the other go fails, not hangs
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])  # another test process
    started = time.monotonic()
    with browser.server_for_the_run(tmp_path) as url:
        (tmp_path / browser.USERS / str(other.pid)).touch()  # ...using the server
        with browser.server_for_the_run(tmp_path) as again:
            assert again == url and events == ["started"]
    other.wait()
    assert events == ["started", "stopped"] and 1.4 <= time.monotonic() - started < 8  # once the other had gone
    assert not (tmp_path / browser.SERVER_FILE).exists()
    with browser.server_for_the_run(tmp_path) as later:
        assert later != url and events == ["started", "stopped", "started"]
