"""The order of a tier's tests for pytest-xdist's work stealing (a pytest plugin, loaded by tests/conftest.py).

Work stealing gives the first test process the first share of the collection and the next process the next share;
a process that runs out takes the last tests of another's queue. Tests marked `long` (about 10 s or more, measured)
are dealt in turn to the front of each share: every process starts on its part of the long tests, and the tests
taken from each other at the end are short. Sorted to the front of one share instead, they all stayed with one process
while the other took its short ones, and that process ended on a 20 s test with the other core idle (measured)."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch
from typing import TypeVar

import pytest

Item = TypeVar("Item")

# Where the browser and serving tiers' tests live: make test-browser and make test-serve collect only these files
# (importing every test module, and torch with them, took about 5 s of each test process's start). A test marked for
# one of them in another file would run in no tier: every collection that sees one stops, naming it.
TIER_FILES = {"serve": "test_*serve.py", "browser": "test_browser_*.py"}


@pytest.hookimpl(trylast=True)  # after -m has deselected: the order of the tests that run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = dealt(items, [item.get_closest_marker("long") is not None for item in items], workers)


def share_sizes(n: int, workers: int) -> list[int]:
    """How many of `n` tests work stealing first sends to each of `workers` processes (xdist's check_schedule)."""
    sizes = []
    for i in range(workers):
        sizes.append((n - sum(sizes)) // (workers - i))
    return sizes


def dealt(items: Sequence[Item], long: Sequence[bool], workers: int) -> list[Item]:
    """`items` reordered so that each process's first share starts with every `workers`-th long test; the short
    tests keep their order after them."""
    workers = max(1, workers)
    longs = [item for item, is_long in zip(items, long, strict=True) if is_long]
    shorts = [item for item, is_long in zip(items, long, strict=True) if not is_long]
    ordered: list[Item] = []
    for worker, size in enumerate(share_sizes(len(items), workers)):
        share = longs[worker::workers]
        take = max(0, size - len(share))
        ordered += share + shorts[:take]
        shorts = shorts[take:]
    return ordered + shorts


def misplaced(items: Sequence[pytest.Item]) -> list[str]:
    """Tests marked serve or browser (serve first: its tier takes a test marked both) outside their tier's files."""
    found = []
    for item in items:
        tier = next((t for t in TIER_FILES if item.get_closest_marker(t) is not None), None)
        if tier is not None and not fnmatch(item.path.name, TIER_FILES[tier]):
            found.append(f"{item.nodeid} is marked {tier}: make test-{tier} collects only tests/{TIER_FILES[tier]}")
    return found
