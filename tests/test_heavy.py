"""The server-wide queue for heavy analyses: at most `slots` at once across processes, first come first served,
one job per key, and work that nobody waits for is stopped (a thread between chunks, a child process killed)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mha_core.engine.children import ChildPool
from mha_core.serving.heavy import Cancelled, HeavyQueue, HeavyWork, JobState
from mha_core.serving.store import SharedStore
from tests.conftest import wait_for


def hold(queue: HeavyQueue, seconds: float, log: list, name: str, places: list | None = None) -> threading.Thread:
    def body() -> None:
        with queue.admitted(lambda place: places.append((name, place)) if places is not None else None):
            log.append(("start", name, time.monotonic()))
            time.sleep(seconds)
            log.append(("stop", name, time.monotonic()))

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_at_most_slots_run_at_once_and_the_line_is_first_come_first_served(tmp_path):
    queue = HeavyQueue(tmp_path, slots=2, poll_s=0.02)
    log, places, threads = [], [], []

    def in_line() -> int:  # holders waiting for a slot (their tickets) or started
        return len(list(tmp_path.glob("*.ticket"))) + sum(kind == "start" for kind, *_ in log)

    for arrived, name in enumerate("abcde", start=1):
        threads.append(hold(queue, 0.3, log, name, places))
        # this one is in line (or running) before the next arrives, however busy the machine
        wait_for(lambda arrived=arrived: in_line() >= arrived, 10, poll_s=0.005)
    for thread in threads:
        thread.join()
    running, most = 0, 0
    for kind, *_ in sorted(log, key=lambda entry: entry[2]):
        running += 1 if kind == "start" else -1
        most = max(most, running)
    assert most == 2
    assert [name for kind, name, _ in sorted(log, key=lambda e: e[2]) if kind == "start"] == list("abcde")
    assert ("c", 1) in places and ("d", 2) in places and ("e", 3) in places  # each waiter saw its place
    assert not list(tmp_path.glob("*.ticket"))


def test_a_newcomer_does_not_overtake_a_waiter_when_a_slot_frees(tmp_path):
    queue = HeavyQueue(tmp_path, slots=1, poll_s=0.3)  # the waiter sleeps 0.3 s between looks
    order, release = [], threading.Event()

    def visitor(name: str, hold_until: threading.Event | None = None) -> threading.Thread:
        def body() -> None:
            with queue.admitted(lambda place: None):
                order.append(name)
                if hold_until is not None:
                    hold_until.wait()

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    first = visitor("first", release)
    while not order:
        time.sleep(0.01)
    waiter = visitor("waiter")
    time.sleep(0.1)
    release.set()
    first.join()
    newcomer = visitor("newcomer")  # arrives while the waiter sleeps: the slot is free, but the waiter is ahead
    waiter.join()
    newcomer.join()
    assert order == ["first", "waiter", "newcomer"]


def test_processes_sharing_the_folder_share_the_slots(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from mha_core.serving.heavy import HeavyQueue\n"
        f"q = HeavyQueue(Path({str(tmp_path)!r}), 1)\n"
        "with q.admitted(lambda p: None):\n    print('in', flush=True); time.sleep(1.5)\n")],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    assert holder.stdout.readline().strip() == "in"
    queue = HeavyQueue(tmp_path, slots=1, poll_s=0.02)
    assert queue.running() == 1
    places, start = [], time.monotonic()
    with queue.admitted(places.append):
        waited = time.monotonic() - start
    holder.wait()
    assert waited > 0.5 and places and set(places) == {1}


def test_a_dead_process_ticket_does_not_hold_the_line(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f"{0:020d}-{dead.pid}-1.ticket").touch()  # older than any new ticket
    queue = HeavyQueue(tmp_path, slots=1, poll_s=0.02)
    places = []
    with queue.admitted(places.append):
        pass
    assert places == [] and not list(tmp_path.glob("*.ticket"))


def test_many_waiters_share_one_job_and_see_its_progress(tmp_path):
    work, store, calls, seen = HeavyWork(HeavyQueue(tmp_path, 1), poll_s=0.02), SharedStore(8), [], []

    def compute(progress) -> str:
        calls.append(1)
        for i in range(5):
            progress(i + 1, 5)
            time.sleep(0.05)
        return "grid"

    results = []
    threads = [threading.Thread(target=lambda: results.append(work.result(store, "k", compute, seen.append)))
               for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["grid"] * 6 and len(calls) == 1 and "k" in store
    assert any(state.total == 5 and state.done > 0 for state in seen)
    assert work.active() == 0


def test_the_job_error_reaches_the_waiter_and_nothing_is_stored(tmp_path):
    work, store = HeavyWork(HeavyQueue(tmp_path, 1), poll_s=0.02), SharedStore(8)

    def fails(progress) -> None:
        raise ValueError("too long")

    with pytest.raises(ValueError, match="too long"):
        work.result(store, "k", fails, lambda state: None)
    assert "k" not in store


def abandoned_job(tmp_path: Path, grace_s: float, come_back: bool) -> tuple[list[int], SharedStore]:
    """A visitor leaves (their show() raises) while a 40-chunk job runs; optionally another one comes back."""
    work, store, chunks = HeavyWork(HeavyQueue(tmp_path, 1), grace_s=grace_s, poll_s=0.02), SharedStore(8), []

    def compute(progress) -> str:
        for i in range(40):
            progress(i, 40)
            chunks.append(i)
            time.sleep(0.05)
        return "done"

    def leaves(state: JobState) -> None:
        if chunks:
            raise KeyboardInterrupt  # what a stopped Streamlit session's st call does (StopException)

    with pytest.raises(KeyboardInterrupt):
        work.result(store, "k", compute, leaves)
    if come_back:
        assert work.result(store, "k", compute, lambda state: None) == "done"
    else:  # the job ends at its first check after the grace period (or, were nobody's leaving seen, after 40 chunks)
        assert wait_for(lambda: not work.active(), 30, poll_s=0.02)
    return chunks, store


def test_work_nobody_waits_for_stops_after_the_grace_period(tmp_path):
    chunks, store = abandoned_job(tmp_path, grace_s=0.2, come_back=False)
    assert len(chunks) < 20 and "k" not in store  # 40 chunks would take 2 s


def test_a_visitor_back_within_the_grace_period_keeps_the_job(tmp_path):
    chunks, store = abandoned_job(tmp_path, grace_s=5.0, come_back=True)
    assert chunks == list(range(40)) and "k" in store  # one job ran all its chunks


CHILD = """import json, os, sys, time
for line in sys.stdin:
    marker, seconds = json.loads(line)
    open(marker, "w").write(str(os.getpid()))
    time.sleep(max(0.0, float(seconds)))
    print("ok" if float(seconds) >= 0 else "error: cannot wait a negative time", flush=True)
"""


def test_a_child_is_kept_between_requests_and_killed_when_its_check_raises(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    pool, marker = ChildPool(script, poll_s=0.02), tmp_path / "pid"
    pool.request([str(marker), "0"], lambda: None)
    first = int(marker.read_text())
    pool.request([str(marker), "0"], lambda: None)
    assert int(marker.read_text()) == first and pool.pids() == [first]  # the same process served both
    marker.unlink()

    def check() -> None:
        if marker.exists():
            raise Cancelled

    start = time.monotonic()
    with pytest.raises(Cancelled):
        pool.request([str(marker), "60"], check)
    assert time.monotonic() - start < 20 and pool.pids() == []
    with pytest.raises(OSError):
        os.kill(first, 0)  # killed, not left computing
    pool.request([str(marker), "0"], lambda: None)  # a fresh child takes the next request
    assert int(marker.read_text()) != first


def test_a_failing_request_names_its_error(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with pytest.raises(RuntimeError, match="cannot wait a negative time"):
        ChildPool(script, poll_s=0.02).request([str(tmp_path / "pid"), "-1"], lambda: None)


def test_tsne_in_a_child_equals_tsne_in_process_and_stops_when_cancelled():
    from mha_core.analysis.heads.projection import TSNE
    from mha_core.analysis.heads.qk_view import project

    points = np.random.default_rng(0).normal(size=(60, 8))
    inside, _ = project(points, TSNE)
    outside, _ = project(points, TSNE, check=lambda: None)
    assert np.allclose(inside, outside, atol=1e-4)
    start = time.monotonic()

    def cancel_soon() -> None:
        if time.monotonic() - start > 0.3:
            raise Cancelled

    with pytest.raises(Cancelled):
        project(np.random.default_rng(1).normal(size=(4000, 16)), TSNE, check=cancel_soon)
    assert time.monotonic() - start < 10


def test_a_running_job_without_steps_says_how_long_it_has_run():  # issue 19: long waits say how long
    from mha_core.analysis.heads.projection import TSNE, UMAP, duration_note

    state = JobState(started=time.monotonic() - 12)
    assert state.describe("Projecting") == "Projecting: running for 12 s"
    assert JobState(place=2, slots=2).describe("Projecting").startswith("Projecting: waiting, number 2 in the queue")
    assert duration_note(TSNE, 8000) == "about 44 s on one free core"
    assert "compiles" in duration_note(UMAP, 8000)


def test_a_value_evicted_while_a_visitor_joins_is_never_none(tmp_path, monkeypatch):
    """Issue 34: heavy work checked `key in store`, then read the value: an eviction in between gave None (a blank
    tab). Here another job's value lands just after the visitor's first look, and is evicted right after `in` says it
    is there."""
    work, store = HeavyWork(HeavyQueue(tmp_path, 1), poll_s=0.02), SharedStore(8)
    real_lookup, real_contains, looks = SharedStore.lookup, SharedStore.__contains__, []

    def lookup(self, key):
        looks.append(key)
        if len(looks) == 1:  # the first look misses; then the other job's value lands
            self.put(key, "grid")
            return False, None
        return real_lookup(self, key)

    def contains_then_evicted(self, key) -> bool:
        found = real_contains(self, key)
        self.clear()
        return found

    monkeypatch.setattr(SharedStore, "lookup", lookup)
    monkeypatch.setattr(SharedStore, "__contains__", contains_then_evicted)
    assert work.result(store, "k", lambda progress: "grid", lambda state: None) == "grid"


def test_a_job_counts_its_waiters_under_its_lock(tmp_path):
    """Issue 34: Job.check read `waiters` and `left_at` without the lock that guards their changes: many visitors
    joining and leaving at once, with the job checking meanwhile, never cancel a job someone waits for."""
    from mha_core.serving.heavy import Job

    job, barrier, cancelled = Job(1, grace_s=0.0), threading.Barrier(9), []
    job.join()  # one visitor stays throughout

    def visitor() -> None:
        barrier.wait()
        for _ in range(2000):
            job.join()
            job.leave()

    def checker() -> None:
        barrier.wait()
        for _ in range(4000):
            try:
                job.check()
            except Cancelled:
                cancelled.append(1)
                return

    threads = [threading.Thread(target=visitor) for _ in range(8)] + [threading.Thread(target=checker)]
    barrier = threading.Barrier(len(threads))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not cancelled
