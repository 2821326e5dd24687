"""Heavy analyses (ablation grids, corpus passes, GAP scoring, projections, value-weighted maps, rollout) go
through one queue for the whole server. They run in a background thread at a lower CPU priority, so students'
clicks elsewhere stay quick. A job that no visitor waits for any more is cancelled.

- HeavyQueue: first come, first served, with at most `slots` jobs running at once. Every process of a
  server shares it through one folder. A slot is a file locked with flock(), and the kernel releases the
  lock if its process dies. A place in line is a ticket file named by its arrival time.
  $MHA_HEAVY_SLOTS (default: the machine's cores) and $MHA_QUEUE_DIR (default: a folder per process) are
  set once per server; `make serve` gives all its workers one folder.
- HeavyWork: one job per key, however many visitors ask for it. Each waiter polls the job's state (its place
  in line, then its progress) and shows it. Once the last waiter has been gone for GRACE_S seconds, the job
  stops at its next progress report (Cancelled), or its child process is killed (see ChildPool).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mha_core.i18n import tr, worded
from mha_core.serving.store import SharedStore

if TYPE_CHECKING:
    from mha_core.engine.batching import Progress

SLOTS_ENV, QUEUE_DIR_ENV = "MHA_HEAVY_SLOTS", "MHA_QUEUE_DIR"
GRACE_S = 3.0  # a rerun leaves and rejoins its job within this; a closed tab does not
POLL_S = 0.2  # how often a waiter redraws its progress and a queued job looks for a free slot
NICE = 10  # heavy work runs this much below the server's other threads


class Cancelled(Exception):
    """No visitor waits for this computation any more."""


def default_slots() -> int:
    raw = os.environ.get(SLOTS_ENV, "").strip()
    return max(1, int(raw)) if raw.isdigit() else max(1, os.cpu_count() or 1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class HeavyQueue:
    """FIFO admission, at most `slots` at once, shared by the processes that use the same folder."""

    folder: Path
    slots: int
    poll_s: float = POLL_S

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls) -> HeavyQueue:
        folder = os.environ.get(QUEUE_DIR_ENV) or Path(tempfile.gettempdir()) / f"mha-queue-{os.getpid()}"
        return cls(Path(folder), default_slots())

    def _ahead(self, ticket: Path) -> int:
        """Tickets older than `ticket` whose process is alive (a dead process's ticket is removed)."""
        ahead = 0
        for other in sorted(self.folder.glob("*.ticket")):
            if other.name >= ticket.name:
                break
            if _alive(int(other.name.split("-")[1])):
                ahead += 1
            else:
                other.unlink(missing_ok=True)
        return ahead

    def _take_slot(self) -> int | None:
        """A locked slot file's descriptor, or None when all are taken."""
        for i in range(self.slots):
            fd = os.open(self.folder / f"slot-{i}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                os.close(fd)
        return None

    @contextmanager
    def admitted(self, waiting: Callable[[int], None]) -> Iterator[None]:
        """Hold a slot for the body; until one is free, waiting(place in line, from 1) is called every poll_s
        (it may raise, which leaves the line)."""
        ticket = self.folder / f"{time.time_ns():020d}-{os.getpid()}-{threading.get_native_id()}.ticket"
        ticket.touch()
        slot = None
        try:
            while slot is None:
                ahead = self._ahead(ticket)
                slot = self._take_slot() if ahead == 0 else None  # strictly in order: only the first in line
                if slot is None:
                    waiting(ahead + 1)
                    time.sleep(self.poll_s)
        finally:
            ticket.unlink(missing_ok=True)
        try:
            yield
        finally:
            os.close(slot)  # closing the descriptor releases its lock

    def running(self) -> int:
        """How many slots are taken now (by any process)."""
        taken = []
        while (fd := self._take_slot()) is not None:
            taken.append(fd)
        for fd in taken:
            os.close(fd)
        return self.slots - len(taken)


@dataclass(frozen=True)
class JobState:
    """What a waiter shows: its place in line while queued (None once running), then progress."""

    place: int | None = None
    done: int = 0
    total: int = 0
    slots: int = 1
    started: float | None = None  # time.monotonic() when it left the queue

    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0

    def describe(self, label: str) -> str:
        """The progress bar's text, in the page's language (`label`, marked or Worded, is worded here too)."""
        label = worded(label)
        if self.place is not None:
            return tr("{label}: waiting, number {place} in the queue (this server runs {slots} heavy analyses at "
                      "once)", label=label, place=self.place, slots=self.slots)
        if self.total:
            return f"{label}: {self.done:,}/{self.total:,}"
        if self.started is None:
            return label
        return tr("{label}: running for {seconds:.0f} s", label=label, seconds=time.monotonic() - self.started)


class Job:
    """One heavy computation and the visitors waiting for it (each page run that asked joins, and leaves when its
    wait ends); the computation checks, between steps, whether anyone still waits."""

    def __init__(self, slots: int, grace_s: float) -> None:
        self.state = JobState(slots=slots)
        self.finished = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancelled = False
        self._waiters, self._left_at, self._grace_s = 0, time.monotonic(), grace_s
        self._lock = threading.Lock()  # waiters and left_at change in the visitors' threads, are read in the job's

    def join(self) -> None:
        with self._lock:
            self._waiters += 1

    def leave(self) -> None:
        with self._lock:
            self._waiters -= 1
            self._left_at = time.monotonic()

    def check(self) -> None:
        """Raise Cancelled once nobody has waited for this job for the grace period."""
        with self._lock:
            if self._waiters == 0 and time.monotonic() - self._left_at > self._grace_s:
                self.cancelled = True
            if self.cancelled:
                raise Cancelled

    def queued(self, place: int) -> None:
        self.check()
        self.state = JobState(place, slots=self.state.slots)

    def progress(self, done: int, total: int) -> None:
        self.check()
        self.state = JobState(None, done, total, self.state.slots, self.state.started)


def lower_priority() -> None:
    """This thread only (Linux threads have their own nice value); nothing happens where that is not allowed."""
    with suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)


class HeavyWork:
    """key -> one job (queued, run in the background at low priority, stored in `store` when done)."""

    def __init__(self, queue: HeavyQueue, grace_s: float = GRACE_S, poll_s: float = POLL_S) -> None:
        self.queue, self.grace_s, self.poll_s = queue, grace_s, poll_s
        self._jobs: dict[Hashable, Job] = {}
        self._lock = threading.Lock()

    def result(self, store: SharedStore, key: Hashable, compute: Callable[[Progress], Any],
               show: Callable[[JobState], None]) -> Any:
        """The stored value for key, or wait (show(state) every poll_s; it may raise, which leaves) for the job
        that computes it. The job's own error is raised here."""
        found, value, job = self._join(store, key, compute)
        if found:
            return value
        try:
            while not job.finished.wait(self.poll_s):
                show(job.state)
        finally:
            job.leave()
        if job.error is not None:
            raise job.error
        return job.result

    def _join(self, store: SharedStore, key: Hashable,
              compute: Callable[[Progress], Any]) -> tuple[bool, Any, Job | None]:
        """(True, the stored value, None), or (False, None, the job to wait for): the value is read under the same
        lock that decides, so an eviction in between cannot hand a waiter nothing."""
        with self._lock:
            found, value = store.lookup(key)
            if found:
                return True, value, None
            job = self._jobs.get(key)
            started = job is not None and not job.cancelled
            if not started:
                job = self._jobs[key] = Job(self.queue.slots, self.grace_s)
            job.join()  # before the job's first check
            if not started:
                threading.Thread(target=self._work, args=(job, store, key, compute), daemon=True,
                                 name=f"heavy {key!r}"[:60]).start()
            return False, None, job

    def _work(self, job: Job, store: SharedStore, key: Hashable, compute: Callable[[Progress], Any]) -> None:
        lower_priority()
        try:
            with self.queue.admitted(job.queued):
                job.state = JobState(slots=job.state.slots, started=time.monotonic())
                job.result = compute(job.progress)
            store.put(key, job.result)
        except BaseException as err:  # noqa: BLE001 - handed to every waiter
            job.error = err
        finally:
            with self._lock:
                if self._jobs.get(key) is job:
                    del self._jobs[key]
            job.finished.set()

    def active(self) -> int:
        with self._lock:
            return len(self._jobs)
