"""The compute-once LRU store that every session of a server shares."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from mha_core.serving.store import SharedStore, nbytes


def test_many_threads_asking_for_one_key_compute_it_once():
    store = SharedStore(max_entries=4)
    calls = []

    def slow() -> str:
        calls.append(1)
        time.sleep(0.2)
        return "value"

    results = []
    threads = [threading.Thread(target=lambda: results.append(store.get("k", slow))) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["value"] * 12
    assert len(calls) == 1 and store.computed == 1


def test_different_keys_compute_in_parallel():
    store = SharedStore(max_entries=4)
    all_inside = threading.Barrier(3, timeout=10)  # passes only if the three computations run at the same time
    threads = [threading.Thread(target=store.get, args=(k, all_inside.wait)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.computed == 3 and not all_inside.broken  # one key's lock does not hold up the others


def test_least_recently_used_goes_first():
    store = SharedStore(max_entries=2)
    store.get("a", lambda: 1)
    store.get("b", lambda: 2)
    store.get("a", lambda: 99)  # a is now the most recent (and not recomputed)
    store.get("c", lambda: 3)
    assert "a" in store and "c" in store and "b" not in store
    assert store.get("a", lambda: 99) == 1


def test_bytes_bound_evicts_and_keeps_the_newest():
    store = SharedStore(max_entries=100, max_bytes=10_000)
    for k in range(5):
        store.get(k, lambda: np.zeros(1000, dtype=np.float32))  # 4,000 bytes each
    assert len(store) == 2 and 4 in store and 3 in store
    assert store.total_bytes == 8000
    store.get("big", lambda: np.zeros(10_000, dtype=np.float32))  # alone over the bound: kept, others dropped
    assert len(store) == 1 and "big" in store


def test_a_failed_computation_stores_nothing():
    store = SharedStore(max_entries=2)

    def fail() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        store.get("k", fail)
    assert "k" not in store
    assert store.get("k", lambda: 5) == 5


def test_nbytes_counts_tensors_arrays_and_dataclass_fields():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Holder:
        t: torch.Tensor
        parts: tuple

    shared = torch.zeros(10)
    value = Holder(torch.zeros(4, 4), (np.zeros(3, dtype=np.float64), shared, shared, "abc"))
    assert nbytes(value) == 64 + 24 + 40 + 3  # the shared tensor counts once
