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
import secrets
import signal
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import websockets

from benchmarks.serving import ServerGroup, app_server, front_proxy, redis_server, school_host
from deploy.st_client import Interaction, Session

IDLE_SECONDS = 20.0
MOVED_KEYS = ("four_steps", "heads", "cost")  # cheap steps: the lag measured is the following's, not a model's work
FLOOR_APP = "benchmarks/follow_floor_app.py"
HOST_WORKERS = 2  # app processes per simulated host (--hosts)
SETTLE_S = 1.0  # after the last page updated: the server's CPU of the move is counted until then


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


@dataclass
class Room:
    """One server under test (`label`), its class, and what was measured of it."""

    label: str
    group: ServerGroup
    code: str
    secret: str
    seen: dict[int, list[float]] = field(default_factory=dict)  # step -> when each page showed it (0: opened)
    idle_cpu: float = 0.0  # CPU seconds per second while its students follow an idle class
    lags: list[float] = field(default_factory=list)
    per_follower: list[float] = field(default_factory=list)  # seconds of CPU per follower, one per move
    step: int = 1  # the step the class is at (the last move's)
    landed: list[bool] = field(default_factory=list)  # each page opened again: whether it showed the class's step


async def student(room: Room, titles: dict[int, str], stop: asyncio.Event, timeout: float, cookie: str = "") -> None:
    """A student's page: opened once, then it only receives the reruns the server pushes when the teacher moves.
    `cookie`: the proxy's sticky-session cookie (which process serves it). A page whose server went away opens the
    class again (reopened())."""
    session = Session(room.group.url, page="lesson", query={"class": room.code}, timeout=timeout, cookie=cookie)
    await session.open()
    room.seen.setdefault(0, []).append(time.monotonic())  # opened
    shown, noticed = Interaction(), set()
    try:
        while not stop.is_set():
            try:  # a run's messages are kept in `shown` across the waits: a long run is read to its end
                await asyncio.wait_for(session.read_until_finished(shown), 1.0)
                finished = True
            except TimeoutError:
                finished = False
            except websockets.ConnectionClosed:  # its server was killed (--kill-host)
                session = await reopened(room, titles, timeout, cookie)
                shown, finished = Interaction(), False
            for step, title in titles.items():
                if step not in noticed and any(text.startswith(title) for text in shown.texts):
                    noticed.add(step)
                    room.seen.setdefault(step, []).append(time.monotonic())
            shown = Interaction() if finished else shown
    finally:
        await session.close()


async def reopened(room: Room, titles: dict[int, str], timeout: float, cookie: str) -> Session:
    """As a browser whose server went away: the class's page opened again through the proxy (with the same cookie:
    the proxy sends it to a process that answers once it has marked the dead ones down), every second until it
    opens; whether it shows the class's step is kept in room.landed."""
    deadline = time.monotonic() + timeout
    while True:
        session = Session(room.group.url, page="lesson", query={"class": room.code}, timeout=timeout, cookie=cookie)
        try:
            opened = await session.open()
            break
        except (OSError, websockets.WebSocketException):
            await session.close()
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)
    room.landed.append(any(text.startswith(titles[room.step]) for text in opened.texts))
    return session


async def idle(rooms: list[Room]) -> None:
    """Each server's CPU while its students follow a class that does not move (all at once)."""
    cpu, wall = [room.group.cpu_seconds() for room in rooms], time.monotonic()
    await asyncio.sleep(IDLE_SECONDS)
    for room, before in zip(rooms, cpu, strict=True):
        room.idle_cpu = (room.group.cpu_seconds() - before) / (time.monotonic() - wall)


async def move(room: Room, classroom: object, step: int, students: int) -> None:
    moved, cpu = time.monotonic(), room.group.cpu_seconds()
    code, secret, room.step = room.code, room.secret, step
    await asyncio.to_thread(lambda: classroom.move(code, secret, classroom.state(code), step=step))
    deadline = moved + 30
    while len(room.seen.get(step, [])) < students and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(SETTLE_S)
    spent = room.group.cpu_seconds() - cpu - room.idle_cpu * (time.monotonic() - moved)  # idle's taken off
    arrived = [t - moved for t in room.seen.get(step, [])[:students]]
    room.lags += arrived
    room.per_follower.append(spent / students)
    print(f"{room.label}: step {step}: {len(arrived)} of {students} students followed: p50 "
          f"{percentile(arrived, 0.5):.2f} s, p95 {percentile(arrived, 0.95):.2f} s; server CPU {spent:.2f} s, "
          f"{spent / students * 1000:.1f} ms per follower", flush=True)


async def run(rooms: list[Room], classroom: object, students: int, timeout: float, cookies: tuple[str, ...] = ("",),
              after_first: Callable[[], Awaitable[None]] | None = None) -> None:
    """N students on each room's server; the class of each moved in turn (rooms alternate: side by side). Student i
    sends cookies[i % len(cookies)]; `after_first`: awaited after the first move (--kill-host)."""
    from mha_core.teaching.lesson import STEPS

    moved_to = [next(n for n, step in enumerate(STEPS, 1) if step.key == key) for key in MOVED_KEYS]
    titles = {n: f"{n}. {STEPS[n - 1].title}" for n in moved_to}
    stop = asyncio.Event()
    tasks = [asyncio.create_task(student(room, titles, stop, timeout, cookies[i % len(cookies)]))
             for room in rooms for i in range(students)]
    while any(len(room.seen.get(0, [])) < students for room in rooms):  # every student in
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)
    await idle(rooms)
    for step in moved_to:
        for room in rooms:
            await move(room, classroom, step, students)
            await asyncio.sleep(2)
        if after_first is not None and step == moved_to[0]:
            await after_first()
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    for room in rooms:
        cost, lags = statistics.median(room.per_follower) * 1000, room.lags
        print(f"{room.label}: {students} students following: move -> page p50 {percentile(lags, 0.5):.2f} s, p95 "
              f"{percentile(lags, 0.95):.2f} s, max {max(lags, default=float('nan')):.2f} s (target p95 <= 2 s); "
              f"server CPU per follower per move {cost:.1f} ms (median of {len(room.per_follower)} moves; target "
              f"<= 5 ms); server CPU while they follow an idle class: {room.idle_cpu:.1%} of a core (target <= 5%)",
              flush=True)


def servers(floor: bool, against: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    """The servers measured side by side: label -> (script, environment). This tree's app; `against`: the app of
    another tree (e.g. `git archive` of the commit before a change, run on its own code); `floor`: Streamlit's own
    floor of a follower's rerun (benchmarks/follow_floor_app.py, with 1 element, and with 20)."""
    chosen = {"this tree": ("app.py", {})}
    if against:
        chosen["against " + against] = (str(Path(against) / "app.py"), {"PYTHONPATH": str(Path(against).resolve())})
    if floor:
        for elements in (1, 20):
            chosen[f"floor, {elements} element(s)"] = (FLOOR_APP, {"FOLLOW_ELEMENTS": str(elements)})
    return chosen


def follow_class(students: int, timeout: float, redis: bool = False, floor: bool = False,
                 against: str | None = None) -> None:
    """`redis`: the class in a redis-server of its own (issue 84: the move heard, not polled), else in SQLite;
    `floor`, `against`: other servers measured side by side with this tree's (servers())."""
    from mha_core.serving.classroom import STORE_ENV, Classroom

    cache = tempfile.mkdtemp(prefix="mha-follow-")  # the servers' classes and the teacher's: one store
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(redis_server(Path(cache))) if redis else str(Path(cache) / "classes.sqlite")
        os.environ[STORE_ENV] = store
        print(f"class store: {store}", flush=True)
        classroom, rooms = Classroom(), []
        for label, (script, env) in servers(floor, against).items():
            group = stack.enter_context(app_server(script, env={"MHA_CACHE_DIR": cache,
                                                                "HOME": os.environ.get("HOME", ""), **env}))
            code, secret = classroom.start("The animal didn't cross the street because it was too tired.", "en",
                                           "all-MiniLM-L6-v2", step=1)
            rooms.append(Room(label, group, code, secret))
        asyncio.run(run(rooms, classroom, students, timeout))


def follow_hall(students: int, timeout: float, hosts: int = 2, kill_host: bool = False) -> None:
    """Issue 84's lecture hall: `hosts` simulated hosts (deploy/host.sh, HOST_WORKERS processes each, a cache folder
    each) behind one HAProxy (deploy/hosts.py's config) and one Redis; the students spread over every process by the
    proxy's cookie; the teacher's move written to Redis as the teacher's page writes it. CPU: all the hosts'
    processes. `kill_host`: after the first move the last host's processes are killed (its process group) and its
    students open the class again through the proxy."""
    from mha_core.serving.classroom import STORE_ENV, Classroom

    cache, secret = Path(tempfile.mkdtemp(prefix="mha-hall-")), secrets.token_hex(16)
    with contextlib.ExitStack() as stack:
        store = os.environ[STORE_ENV] = stack.enter_context(redis_server(cache))
        groups = [stack.enter_context(school_host(HOST_WORKERS, store, cache / f"host-{i}", secret))
                  for i in range(hosts)]
        url = stack.enter_context(front_proxy(groups))
        everyone = ServerGroup(url, tuple(pid for group in groups for pid in group.pids),
                               tuple(worker for group in groups for worker in group.worker_urls))
        classroom = Classroom()
        code, teacher = classroom.start("The animal didn't cross the street because it was too tired.", "en",
                                        "all-MiniLM-L6-v2", step=1)
        room = Room(f"{hosts} host(s) x {HOST_WORKERS} processes", everyone, code, teacher)
        cookies = tuple(f"MHA_WORKER=app{k}" for k in range(1, len(everyone.pids) + 1))
        on_killed = sum(1 for i in range(students) if i % len(cookies) >= len(cookies) - HOST_WORKERS)
        killed = (lambda: killed_host(room, groups, on_killed, timeout)) if kill_host else None
        asyncio.run(run([room], classroom, students, timeout, cookies, killed))


async def killed_host(room: Room, groups: list[ServerGroup], on_it: int, timeout: float) -> None:
    """The last host's processes killed mid-lesson; back when its `on_it` students have opened the class again."""
    os.killpg(os.getpgid(groups[-1].pids[0]), signal.SIGKILL)
    killed = time.monotonic()
    alive = tuple(pid for group in groups[:-1] for pid in group.pids)
    room.idle_cpu *= len(alive) / len(room.group.pids)  # the idle processes left (each idles alike)
    room.group = replace(room.group, pids=alive)
    while len(room.landed) < on_it and time.monotonic() < killed + timeout:
        await asyncio.sleep(0.2)
    print(f"{room.label}: last host killed: {len(room.landed)} of its {on_it} students opened the class again in "
          f"{time.monotonic() - killed:.1f} s, {sum(room.landed)} on the class's step {room.step}", flush=True)
    await asyncio.sleep(3)  # their pages' first runs over before the next move's CPU is counted
