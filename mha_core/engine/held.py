"""What a process keeps between requests outside serving's stores: every such cache, on any floor, is made here
(`kept`, a least-recently-used cache of a function's values) or registers how to weigh it (`register`), so that
mha_core.serving.caches.held() lists them all with their bytes. The floors below serving cannot import serving:
this registry is the engine's, and serving reads it.

Bytes are measured where the values are tensors and arrays (a tensor: its storage's bytes, each storage counted
once), and estimated for other Python objects (value_bytes: sys.getsizeof through containers and dataclasses);
a cache whose values cannot be walked (a spaCy pipeline, an opened index) states its estimate where it registers.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

MISSING = object()  # no value kept for these arguments
WALK_DEPTH = 8  # value_bytes walks no deeper (a cached value is a result, not a graph)


@dataclass(frozen=True)
class Held:
    """One cache a process keeps: its name, its entries now and their bytes (measured, or a stated estimate)."""

    name: str
    entries: int
    bytes: int
    measured: bool  # tensors and arrays counted; False where the bytes are a stated estimate


_weighers: dict[str, Callable[[], Held]] = {}
_weighers_lock = threading.Lock()


def register(name: str, weigh: Callable[[], Held]) -> None:
    """`weigh()` says what the cache `name` holds now; a name registered again is replaced (a module reloaded)."""
    with _weighers_lock:
        _weighers[name] = weigh


def registered() -> tuple[Held, ...]:
    """Every registered cache as it is now, by name."""
    with _weighers_lock:
        weighers = sorted(_weighers.items())
    return tuple(weigh() for _, weigh in weighers)


def tensor_bytes(tensors: Iterable[Any], seen: set[int] | None = None) -> int:
    """The bytes of the storages under `tensors`, each storage once (a view shares its base's)."""
    seen = set() if seen is None else seen
    total = 0
    for tensor in tensors:
        storage = tensor.untyped_storage()
        key = storage.data_ptr() or id(storage)
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total


def value_bytes(value: Any, seen: set[int] | None = None, depth: int = 0) -> int:
    """What `value` holds: tensors' storages (once each), arrays' bytes, strings, and sys.getsizeof of the containers,
    dataclasses and other objects on the way (an estimate for plain Python objects)."""
    seen = set() if seen is None else seen
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return tensor_bytes([value], seen)
    if id(value) in seen or depth > WALK_DEPTH:
        return 0
    seen.add(id(value))
    own = sys.getsizeof(value, 0)
    if hasattr(value, "nbytes") and hasattr(value, "dtype"):  # a NumPy array (getsizeof counts a view's header only)
        return max(own, int(value.nbytes))
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return own
    if isinstance(value, dict):
        items: Iterable[Any] = (part for pair in value.items() for part in pair)
    elif isinstance(value, (tuple, list, set, frozenset)):
        items = value
    elif hasattr(value, "__dataclass_fields__"):
        items = (getattr(value, name) for name in value.__dataclass_fields__)
    else:
        return own
    return own + sum(value_bytes(item, seen, depth + 1) for item in items)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int | None
    currsize: int


class Kept:
    """A function's values kept by its arguments, least recently used first out beyond `maxsize` (None: all), thread
    safe (two callers of a new key may both compute it: the same value), and registered under `name`. As
    functools.lru_cache: cache_info(), cache_clear()."""

    def __init__(self, function: Callable, name: str, maxsize: int | None,
                 weigh: Callable[[Iterable[Any]], int] | None, measured: bool) -> None:
        self.function, self.name, self.maxsize, self.measured = function, name, maxsize, measured
        self.weigh = weigh or (lambda values: value_bytes(list(values)))
        self.values: OrderedDict[Hashable, Any] = OrderedDict()
        self.lock, self.hits, self.misses = threading.Lock(), 0, 0
        self.__doc__, self.__wrapped__ = function.__doc__, function
        register(name, self.held)

    def __call__(self, *args: Hashable) -> Any:
        value = self.values.get(args, MISSING)  # a hit takes no lock (each OrderedDict call is atomic): tr() calls
        if value is not MISSING:  #                the catalogues' cache hundreds of times a page
            self.hits += 1
            if self.maxsize is not None:
                with contextlib.suppress(KeyError):  # dropped meanwhile by another caller's new value
                    self.values.move_to_end(args)
            return value
        self.misses += 1
        value = self.function(*args)
        with self.lock:
            self.values[args] = value
            while self.maxsize is not None and len(self.values) > self.maxsize:
                self.values.popitem(last=False)
        return value

    def held(self) -> Held:
        with self.lock:
            values = list(self.values.values())
        return Held(self.name, len(values), self.weigh(values), self.measured)

    def cache_info(self) -> CacheInfo:
        with self.lock:
            return CacheInfo(self.hits, self.misses, self.maxsize, len(self.values))

    def cache_clear(self) -> None:
        with self.lock:
            self.values.clear()
            self.hits = self.misses = 0


def kept(name: str, maxsize: int | None = None, weigh: Callable[[Iterable[Any]], int] | None = None,
         measured: bool = True) -> Callable[[Callable], Kept]:
    """A decorator: the function's values kept (Kept) under `name`; `weigh(values)` their bytes (default
    value_bytes), `measured=False` where that is a stated estimate."""
    return lambda function: Kept(function, name, maxsize, weigh, measured)


def estimate(each: int) -> Callable[[Iterable[Any]], int]:
    """A weigh for `kept` whose values cannot be walked: `each` bytes a value (a stated estimate)."""
    return lambda values: each * sum(1 for _ in values)


def register_lru(name: str, function: Any, each: int) -> Any:
    """A functools.lru_cache (or cache) registered under `name`, `each` bytes an entry (a stated estimate): for the
    hot path's caches of stateless values (an activation module), where Kept's lock would cost every call."""
    register(name, lambda: Held(name, function.cache_info().currsize, each * function.cache_info().currsize, False))
    return function
