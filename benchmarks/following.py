"""bench_classroom.py --follow (issue 47): a class of N students following the teacher on the lesson page.

Each student is a websocket session on /lesson?class=CODE, opened once, which then receives what the server pushes
(views/_class.py's watcher reruns the following sessions when the class moves). The teacher's click is the move
written to the classes' store (as the teacher's page writes it). Measured: from the move to each
student's page showing the new step's title (p50 / p95 / max; target p95 <= 2 s), and the server's CPU while the N
students follow an idle class (target <= 5 % of a core)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.serving import app_server, redis_server
from deploy.st_client import Interaction, Session

IDLE_SECONDS = 20.0
MOVED_KEYS = ("four_steps", "heads", "cost")  # cheap steps: the lag measured is the following's, not a model's work
SETTLE_S = 1.0  # after the last page updated: the server's CPU of the move is counted until then


async def student(url: str, code: str, titles: dict[int, str], seen: dict[int, list[float]], stop: asyncio.Event,
                  timeout: float) -> None:
    """A student's page: opened once, then it only receives the reruns the server pushes when the teacher moves."""
    session = Session(url, page="lesson", query={"class": code}, timeout=timeout)
    await session.open()
    seen.setdefault(0, []).append(time.monotonic())  # opened
    shown, noticed = Interaction(), set()
    try:
        while not stop.is_set():
            try:  # a run's messages are kept in `shown` across the waits: a long run is read to its end
                await asyncio.wait_for(session.read_until_finished(shown), 1.0)
                finished = True
            except TimeoutError:
                finished = False
            for step, title in titles.items():
                if step not in noticed and any(text.startswith(title) for text in shown.texts):
                    noticed.add(step)
                    seen.setdefault(step, []).append(time.monotonic())
            shown = Interaction() if finished else shown
    finally:
        await session.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


async def run(url: str, classroom: object, code: str, secret: str, students: int, group: object,
              timeout: float) -> None:
    from mha_core.teaching.lesson import STEPS

    moved_to = [next(n for n, step in enumerate(STEPS, 1) if step.key == key) for key in MOVED_KEYS]
    titles = {n: f"{n}. {STEPS[n - 1].title}" for n in moved_to}
    seen: dict[int, list[float]] = {}
    stop = asyncio.Event()
    tasks = [asyncio.create_task(student(url, code, titles, seen, stop, timeout)) for _ in range(students)]
    while len(seen.get(0, [])) < students:  # every student in
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)
    cpu, wall = group.cpu_seconds(), time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    idle_cpu = (group.cpu_seconds() - cpu) / (time.monotonic() - wall)
    lags, per_follower = [], []
    for step in moved_to:
        moved, cpu = time.monotonic(), group.cpu_seconds()
        await asyncio.to_thread(lambda to=step: classroom.move(code, secret, classroom.state(code), step=to))
        deadline = moved + 30
        while len(seen.get(step, [])) < students and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(SETTLE_S)
        spent = group.cpu_seconds() - cpu - idle_cpu * (time.monotonic() - moved)  # the move's, idle's taken off
        arrived = [t - moved for t in seen.get(step, [])[:students]]
        lags += arrived
        per_follower.append(spent / students)
        print(f"step {step}: {len(arrived)} of {students} students followed: p50 {percentile(arrived, 0.5):.2f} s, "
              f"p95 {percentile(arrived, 0.95):.2f} s; server CPU {spent:.2f} s, {spent / students * 1000:.1f} ms "
              "per follower", flush=True)
        await asyncio.sleep(2)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    cost = statistics.median(per_follower) * 1000
    print(f"{students} students following: move -> page p50 {percentile(lags, 0.5):.2f} s, p95 "
          f"{percentile(lags, 0.95):.2f} s, max {max(lags, default=float('nan')):.2f} s (target p95 <= 2 s); "
          f"server CPU per follower per move {cost:.1f} ms (median of {len(per_follower)} moves; target <= 5 ms); "
          f"server CPU while they follow an idle class: {idle_cpu:.1%} of a core (target <= 5%)", flush=True)


def follow_class(students: int, timeout: float, redis: bool = False) -> None:
    """`redis`: the class in a redis-server of its own (issue 84: the move heard, not polled), else in SQLite."""
    from mha_core.serving.classroom import STORE_ENV, Classroom

    cache = tempfile.mkdtemp(prefix="mha-follow-")  # the server's classes and the teacher's: one store
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(redis_server(Path(cache))) if redis else str(Path(cache) / "classes.sqlite")
        os.environ[STORE_ENV] = store
        group = stack.enter_context(app_server(env={"MHA_CACHE_DIR": cache, "HOME": os.environ.get("HOME", "")}))
        print(f"class store: {store}", flush=True)
        classroom = Classroom()
        code, secret = classroom.start("The animal didn't cross the street because it was too tired.", "en",
                                       "all-MiniLM-L6-v2", step=1)
        asyncio.run(run(group.url, classroom, code, secret, students, group, timeout))
