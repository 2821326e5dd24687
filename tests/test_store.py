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


def test_a_value_put_again_under_its_key_counts_once_and_is_the_newest():
    store = SharedStore(max_entries=100, max_bytes=10_000)
    store.put("a", np.zeros(1000, dtype=np.float32))
    store.put("b", np.zeros(500, dtype=np.float32))
    store.put("a", np.zeros(250, dtype=np.float32))  # replaced: 1,000 bytes now, not 5,000
    assert store.total_bytes == 3000
    store.put("c", np.zeros(1750, dtype=np.float32))  # 10,000 in all: nothing evicted
    assert len(store) == 3 and store.total_bytes == 10_000
    store.put("d", np.zeros(1, dtype=np.float32))  # over: the least recent (b, since a was put again) goes
    assert "b" not in store and "a" in store and store.total_bytes == 8004


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


def test_a_model_s_own_weights_weigh_nothing_in_a_result_that_keeps_them():
    """A result that keeps a model's language-model head (an explanation's target) holds the model's unembedding,
    not a copy: counted, Gemma 3's 671 MB made a Chinese explanation too large for the "small" store (400 MB), and
    every visitor computed it again."""
    from dataclasses import dataclass

    from mha_core.analysis.explain.targets import Target
    from mha_core.analysis.lm.head import LmHead

    @dataclass(frozen=True)
    class Result:
        scores: np.ndarray
        target: Target

    unembedding = torch.zeros(1000, 16)  # (V,D): 64 KB
    head = LmHead(unembedding, None, None, None, None, False)
    result = Result(np.zeros(8), Target("next piece", 3, "a", "b", 1, 2, (3,), head))
    own = 64 + len("next piece") + 2  # the scores, the kind's and the two pieces' text
    assert nbytes(result) == own
    assert nbytes((unembedding, result)) == 64_000 + own  # the tensor itself, held outside the head, counts


def test_nbytes_reads_rows_of_numbers_whole_and_still_finds_arrays_in_rows_of_rows(monkeypatch):
    """A figure's 1,152 click targets ([layer, head] pairs) or a text's offsets are weighed without a call per
    item (they hold no array); a row of rows that holds arrays is still walked."""
    import mha_core.serving.store as store_module

    calls = []
    isinstance_of = isinstance
    monkeypatch.setattr(store_module, "isinstance", lambda obj, kinds: calls.append(1) or isinstance_of(obj, kinds),
                        raising=False)
    targets = {"customdata": [[layer, head] for layer in range(6) for head in range(192)],
               "offsets": tuple((i, i + 1) for i in range(500)), "z": np.zeros((2, 3), dtype=np.float32)}
    assert nbytes(targets) == 24
    assert len(calls) < 40  # a few per value, not one per pair
    assert nbytes([[np.zeros(5), np.zeros(5)], [np.zeros(2)]]) == 8 * 12
    assert nbytes({"labels": ("[CLS]", "it", "[SEP]"), "none": (), "rows": [[], []]}) == 12


def test_after_a_failed_compute_the_callers_that_waited_and_a_newcomer_compute_one_at_a_time():
    """Issue 34: the first caller's compute raises while a second waits on the key; a third arrives after the
    failure. Before, the failure dropped the key's lock, so the second (holding the old lock) and the third (a new
    one) computed at once."""
    store, running, overlap = SharedStore(max_entries=4), [], []
    first_started, second_waits = threading.Event(), threading.Event()

    def failing() -> str:
        first_started.set()
        second_waits.wait(5)
        time.sleep(0.1)  # the second caller is blocked on the key by now
        raise ValueError("first fails")

    def slow() -> str:
        running.append(1)
        overlap.append(len(running))
        time.sleep(0.3)
        running.pop()
        return "value"

    def first() -> None:
        with pytest.raises(ValueError):
            store.get("k", failing)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    first_started.wait(5)
    threads.append(threading.Thread(target=lambda: store.get("k", slow)))
    threads[1].start()
    second_waits.set()
    time.sleep(0.15)  # the first has failed; the second computes
    threads.append(threading.Thread(target=lambda: store.get("k", slow)))
    threads[2].start()
    for t in threads:
        t.join()
    assert max(overlap) == 1 and store.computed == 1, overlap


def test_a_value_larger_than_the_whole_budget_is_not_kept_and_evicts_nothing():
    """Issue 34: before, one entry over max_bytes emptied the store for every visitor."""
    store = SharedStore(max_entries=8, max_bytes=1000)
    store.get("small", lambda: np.zeros(100, dtype=np.uint8))
    huge = store.get("huge", lambda: np.zeros(5000, dtype=np.uint8))
    assert huge.nbytes == 5000 and "small" in store and "huge" not in store and store.too_large == 1
