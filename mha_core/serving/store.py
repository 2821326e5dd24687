"""A compute-once, least-recently-used store shared by every session of a server (thread-safe).

Many students asking for the same thing at once (the teacher's example sentence, the bundled corpus)
get one computation: the first caller computes while the others wait on that key's lock, then all
read the stored value. Entries are evicted least recently used first, by count and by estimated bytes,
so a class pasting long texts cannot grow the server's memory without bound.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from mha_core.figures.spec import holds_numbers


def nbytes(value: Any) -> int:
    """Estimated memory held by tensors and arrays reachable through tuples, lists, dicts and dataclass fields; a
    model's own weights (what a class that `holds_model_weights` keeps: the model, its language-model head) are the
    model's, not the value's. (A Chinese explanation on Gemma 3 kept its target's head: the 671 MB unembedding
    counted against the "small" store's 400 MB, so it was never kept and each visitor computed it again, 10 s.)"""
    seen: set[int] = set()
    torch = sys.modules.get("torch")  # a tensor exists only where torch is loaded (the queue's tests run without)

    def walk(obj: Any, depth: int) -> int:
        if id(obj) in seen or depth > 6:
            return 0
        seen.add(id(obj))
        if getattr(type(obj), "holds_model_weights", False):
            return 0
        if torch is not None and isinstance(obj, torch.Tensor):
            return obj.untyped_storage().nbytes()
        if isinstance(obj, np.ndarray):
            return obj.nbytes
        if isinstance(obj, (str, bytes)):
            return len(obj)
        if isinstance(obj, dict):
            return sum(walk(v, depth + 1) for v in obj.values())
        if isinstance(obj, (tuple, list)):
            if holds_numbers(obj):
                return 0  # a figure's row of numbers holds no array: not walked number by number (8 ms a click)
            if obj and type(obj[0]) is str and type(obj[-1]) is str:
                return sum(map(len, obj))  # a text's pieces, a figure's labels
            return sum(walk(v, depth + 1) for v in obj)
        fields = getattr(obj, "__dataclass_fields__", None)
        if fields:
            return sum(walk(getattr(obj, name), depth + 1) for name in fields)
        return 0

    return walk(value, 0)


class SharedStore:
    """key -> value computed once; LRU eviction beyond `max_entries` entries or `max_bytes` (estimated)."""

    def __init__(self, max_entries: int, max_bytes: int | None = None,
                 weigh: Callable[[Any], int] = nbytes) -> None:
        self.max_entries, self.max_bytes, self._weigh = max_entries, max_bytes, weigh
        self._lock = threading.Lock()
        self._values: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()  # key -> (value, bytes)
        self._bytes = 0  # the values' bytes together
        self._computing: dict[Hashable, tuple[threading.Lock, int]] = {}  # key -> (its lock, callers)
        self.computed = 0  # how many computations ran (for tests and the benchmark)
        self.too_large = 0  # values not kept: each alone over max_bytes

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._values

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def values(self) -> list[Any]:
        """The values kept now (least recently used first)."""
        with self._lock:
            return [value for value, _ in self._values.values()]

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def lookup(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return True, self._values[key][0]
            return False, None

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The stored value, or compute() once (other callers of the same key wait for it). A compute that
        raises stores nothing; the next caller tries again, one at a time (the key's lock lives while anyone holds
        or waits for it)."""
        found, value = self.lookup(key)
        if found:
            return value
        with self._lock:
            key_lock, users = self._computing.get(key, (threading.Lock(), 0))
            self._computing[key] = (key_lock, users + 1)
        try:
            with key_lock:
                found, value = self.lookup(key)
                if not found:
                    value = compute()
                    self.put(key, value)
        finally:
            with self._lock:
                key_lock, users = self._computing[key]
                if users == 1:
                    del self._computing[key]
                else:
                    self._computing[key] = (key_lock, users - 1)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        """Keep value under key, dropping the least recently used entries beyond the limits. A value larger than the
        whole byte budget is not kept (it would push out every other visitor's entries); its caller still has it."""
        size = self._weigh(value) if self.max_bytes is not None else 0
        with self._lock:
            self.computed += 1
            if self.max_bytes is not None and size > self.max_bytes:
                self.too_large += 1
                return
            _, replaced = self._values.pop(key, (None, 0))
            self._values[key] = (value, size)
            self._bytes += size - replaced
            while len(self._values) > self.max_entries or (self.max_bytes is not None and self._bytes > self.max_bytes):
                _, (_, dropped) = self._values.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._bytes = 0
