"""The order of a tier's tests for work stealing (tests/scheduling.py): each test process's first share starts with
its turn of the long tests, and every test runs once."""

from __future__ import annotations

from tests.scheduling import dealt, share_sizes


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
