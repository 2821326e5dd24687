"""The class tests run against both stores (issue 84): `class_store` is a SQLite file of the test's own, or the test
process's redis-server (started at the first Redis case, emptied before each), set as MHA_CLASS_STORE. What a store
holds is read here with a client of the test's own (held, held_bytes), never through the code under test."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

STORES = ["sqlite", "redis"]


@pytest.fixture(scope="session")
def redis_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of this test process's own (Debian's, on a free port), for the whole run."""
    from benchmarks.serving import redis_server

    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=STORES)
def class_store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where this test's classes live (MHA_CLASS_STORE): a SQLite file, or an emptied Redis."""
    if request.param == "sqlite":
        location = str(tmp_path / "classes.sqlite")
    else:
        import redis

        location = request.getfixturevalue("redis_address")
        redis.Redis.from_url(location).flushdb()
    monkeypatch.setenv("MHA_CLASS_STORE", location)
    return location


def is_redis(location: str) -> bool:
    return location.startswith("redis://")


def held(location: str) -> tuple[list[tuple[str, float]], list[str]]:
    """What the store keeps: every class's (text, ended) sorted by text, and every student row's name, sorted."""
    if is_redis(location):
        import redis

        from mha_core.serving.classes.on_redis import PREFIX

        client = redis.Redis.from_url(location, decode_responses=True)
        codes = client.smembers(f"{PREFIX}codes")
        classes = [(client.hget(f"{PREFIX}class:{c}", "text"), float(client.hget(f"{PREFIX}class:{c}", "ended")))
                   for c in codes if client.exists(f"{PREFIX}class:{c}")]
        students = [s for key in client.scan_iter(f"{PREFIX}students:*") for s in client.zrange(key, 0, -1)]
        return sorted(classes), sorted(students)
    db = sqlite3.connect(location)
    try:
        classes = [(text, float(ended)) for text, ended in db.execute("select text, ended from classes")]
        students = [student for (student,) in db.execute("select student from students")]
    finally:
        db.close()
    return sorted(classes), sorted(students)


def held_bytes(location: str) -> bytes:
    """Every byte the store keeps (SQLite: the file and its log; Redis: every key's values)."""
    if is_redis(location):
        import redis

        client = redis.Redis.from_url(location)
        out = b""
        for key in client.scan_iter("*"):
            kind = client.type(key)
            out += b"".join(client.hvals(key)) if kind == b"hash" else client.dump(key) or b""
        return out
    path = Path(location)
    return b"".join(file.read_bytes() for file in path.parent.glob(path.name + "*"))
