"""What one server process shares among its visitors (issue 34): every store (bounded as serving.memory.STORES
says), the compute slots, and its side of the heavy-work queue. serving.computed names each computation a page may
ask for; this module only says how a value is kept and when its work may run.

No Streamlit: views/_state.py keeps one Server per process and hands it, with how the page shows a wait, to the
functions of serving.computed.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import TypeVar

from mha_core.engine.batching import Progress
from mha_core.serving.forwards import SharedForwards, SharedTags
from mha_core.serving.heavy import HeavyQueue, HeavyWork, JobState
from mha_core.serving.memory import COMPUTE_SLOTS, MB, STORES
from mha_core.serving.store import SharedStore

T = TypeVar("T")
Wait = Callable[[str, JobState], None]  # (the work's label, marked for translation; its state): a page's waiting line


def no_wait(label: str, state: JobState) -> None:
    """A wait nobody watches (the CLI, a notebook, a test)."""


class Server:
    """The shared side of one process: stores by name, COMPUTE_SLOTS slots for forwards and light analyses, and the
    heavy-work queue (shared with the other processes of the server through its folder)."""

    alive: weakref.WeakSet[Server] = weakref.WeakSet()  # every Server of this process (serving.caches lists them)

    def __init__(self, queue: HeavyQueue | None = None) -> None:
        Server.alive.add(self)
        self.stores = {name: SharedStore(entries, megabytes * MB) for name, (entries, megabytes) in STORES.items()}
        self.slots = threading.BoundedSemaphore(COMPUTE_SLOTS)
        self.forwards = SharedForwards(self.slots)  # sentences asked for at once share a forward (one at a time)
        self.tags = SharedTags()  # and a spaCy pipe (one at a time, outside the slots)
        self.heavy = HeavyWork(queue or HeavyQueue.from_env())

    def kept(self, store: str, key: Hashable, compute: Callable[[], T]) -> T:
        """compute() once per key for the whole server (the others asking meanwhile wait for it), outside the slots:
        for cheap values, and for values made of other kept values."""
        return self.stores[store].get(key, compute)

    def in_slot(self, store: str, key: Hashable, compute: Callable[[], T]) -> T:
        """kept(), the computation in one of the compute slots: at most COMPUTE_SLOTS at once however many click."""
        def slotted() -> T:
            with self.slots:
                return compute()

        return self.stores[store].get(key, slotted)

    def queued(self, store: str, key: Hashable, label: str, compute: Callable[[Progress], T], wait: Wait) -> T:
        """compute(progress) once per key through the heavy-work queue, in the background at low priority; wait(label,
        state) while it is queued or running (it may raise: the visitor left, and the work stops once nobody waits)."""
        return self.heavy.result(self.stores[store], key, compute, lambda state: wait(label, state))
