"""The classroom store (issue 47, class mode's state): a class's code and secret, only the secret moves it, every
process reads the same step, students counted while they check in, a class ends when ended or idle for 3 hours. Each
rule holds for both stores (issue 84: `class_store` is a SQLite file, then a real redis-server)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from dataclasses import replace

import pytest

from mha_core.messages import InputError
from mha_core.serving import classroom
from mha_core.serving.classroom import (
    CODE_ALPHABET,
    CODE_LENGTH,
    ENDED_KEPT_S,
    FOLLOWING_S,
    IDLE_LIMIT_S,
    MAX_CLASSES_PER_VISITOR,
    Classroom,
    canonical,
    digest,
)
from tests.class_stores import held, held_bytes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


READ_STEP = """import sys
from mha_core.serving.classroom import Classroom
print(Classroom(sys.argv[1]).state(sys.argv[2]).step, "torch" in sys.modules)"""


def test_only_the_teacher_s_secret_moves_the_class(class_store):
    room = Classroom(class_store)
    code, secret = room.start("那只动物没有过马路，因为它太累了。", "zh")
    assert len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET) and len(secret) >= 32
    assert room.state(code).step == 1 and room.state(code.lower()).text.startswith("那只")
    assert room.move(code, secret, room.state(code), step=3).step == 3
    one_off = secret[:-1] + ("y" if secret.endswith("x") else "x")  # its last character changed (1 secret in 64
    for wrong in (None, "", one_off, code):  # ends in "x": "+ x" had left it the secret itself)
        with pytest.raises(InputError, match="Only the teacher's own link"):
            room.move(code, wrong, room.state(code), step=4)
    assert room.state(code).step == 3
    stored = held_bytes(class_store)  # SQLite: the file and its log
    assert secret.encode() not in stored and digest(secret).encode() in stored  # its hash is kept, not the secret
    other, other_secret = room.start("Another class.", "en")
    with pytest.raises(InputError, match="Only the teacher"):
        room.move(code, other_secret, room.state(code), step=5)  # another class's secret moves nothing here
    assert other != code and room.state(other).step == 1


def test_every_process_reads_the_teacher_s_step(class_store):
    """Another process (as another server process behind the proxy, or another host) reads the step the teacher set.
    A Python of its own, not multiprocessing's spawn: after an AppTest, this process's __main__ is app.py, which a
    spawned child runs again (10 s measured)."""
    room = Classroom(class_store)
    code, secret = room.start("The animal didn't cross the street because it was too tired.", "en")
    room.move(code, secret, room.state(code), step=7)
    read = subprocess.run([sys.executable, "-c", READ_STEP, class_store, code], capture_output=True, text=True,
                          timeout=60)
    assert read.returncode == 0 and read.stdout.split() == ["7", "False"], read.stderr


def test_a_class_ends_when_ended_or_idle_and_says_so(class_store):
    clock = Clock()
    room = Classroom(class_store, clock)
    code, secret = room.start("text", "en")
    clock.now += IDLE_LIMIT_S - 1
    assert room.state(code).step == 1
    clock.now += 2
    with pytest.raises(InputError, match=f"Class {code} has ended"):
        room.state(code)
    code, secret = room.start("text", "en")
    with pytest.raises(InputError, match="Only the teacher"):
        room.end(code, "guess")
    room.end(code, secret)
    with pytest.raises(InputError, match="has ended"):
        room.state(code)
    with pytest.raises(InputError, match="no class ZZZZZZ"):
        room.state("ZZZZZZ")


def test_the_teacher_sees_how_many_students_follow(class_store):
    clock = Clock()
    room = Classroom(class_store, clock)
    code, _ = room.start("text", "en")
    for student in ("a", "b", "c"):
        room.seen(code, student)
    room.seen(code, "a")  # a student checking in again is still one
    assert room.following(code) == 3
    clock.now += FOLLOWING_S / 2
    room.seen(code, "b")
    clock.now += FOLLOWING_S / 2 + 0.1
    assert room.following(code) == 1  # a and c stopped checking in


def test_a_move_from_a_step_or_sentence_the_class_has_left_is_refused(class_store):
    """Issues 77.3 / 78.10: tab B's Next took the class 9 -> 10; tab A, still showing 9, pressed Back and the class
    went to 8 (or merely reran and put it back to 9). A move carries what its page showed; a stale one is refused."""
    room = Classroom(class_store)
    code, secret = room.start("The animal was tired.", "en", step=9)
    tab_a = room.state(code)
    room.move(code, secret, room.state(code), step=10)  # tab B
    for stale in ({"step": 8}, {"step": 9}, {"text": "Another sentence."}, {"step": 10, "text": "Another."}):
        with pytest.raises(InputError, match=f"Class {code} moved to step 10 meanwhile") as refused:
            room.move(code, secret, tab_a, **stale)
        assert refused.value.code == "class_moved_meanwhile"
    assert (room.state(code).step, room.state(code).text) == (10, "The animal was tired.")
    tab_b = room.move(code, secret, room.state(code), text="The trophy was too big.")
    with pytest.raises(InputError, match="meanwhile"):  # the sentence changed under tab A's step: stale too
        room.move(code, secret, replace(tab_b, text="The animal was tired."), step=3)
    assert room.move(code, secret, room.state(code), step=8).step == 8  # from what the class shows: moves


BOGUS_CODES = ["{code}[CLICK TO SIGN IN](HTTPS://EVIL.EXAMPLE/LOGIN)", "{code}-1", "{code}A", "{short}", "",
               "ABCDE0", "ABCDEI", "ＡＢＣＤＥＦ", "{code}' or '1'='1", "x" * 100_000, "{code}\n",
               "ABCDß"]  # upper case: ABCDSS


@pytest.mark.parametrize("given", BOGUS_CODES)
def test_a_value_that_cannot_be_a_class_code_is_refused_as_such(class_store, given):
    """Issue 78.3/78.4: state() read the first 6 characters, so `CODE-i` and `CODE[link](…)` were the class (each kept
    by the watcher, the link shown on the page). A code is its alphabet and length, or it is refused in one sentence
    quoting at most 18 characters of what was given."""
    room = Classroom(class_store)
    code, _ = room.start("text", "en")
    value = given.format(code=code, short=code[:5])
    if value.strip().upper() == code:  # a newline around the code is the code (a copied link)
        assert room.state(value).code == code
        return
    with pytest.raises(InputError) as refused:
        room.state(value)
    assert refused.value.code == "class_code_invalid" and len(str(refused.value)) < 120
    assert canonical(value) is None


def test_classes_are_bounded_per_visitor_and_per_server(class_store, monkeypatch):
    """Issue 78.5: 10,000 starts were all kept. A visitor runs at most MAX_CLASSES_PER_VISITOR open classes, a server
    MAX_CLASSES; ending one makes room."""
    monkeypatch.setattr(classroom, "MAX_CLASSES", MAX_CLASSES_PER_VISITOR + 2)
    room = Classroom(class_store)
    mine = [room.start("text", "en", visitor="teacher-a") for _ in range(MAX_CLASSES_PER_VISITOR)]
    with pytest.raises(InputError, match=f"You already run {MAX_CLASSES_PER_VISITOR} classes"):
        room.start("text", "en", visitor="teacher-a")
    room.start("text", "en", visitor="teacher-b")
    room.start("text", "en", visitor="teacher-b")
    with pytest.raises(InputError, match=f"holds {MAX_CLASSES_PER_VISITOR + 2} classes, its most") as refused:
        room.start("text", "en", visitor="teacher-c")
    assert refused.value.code == "class_limit_server"
    room.end(*mine[0])
    room.start("text", "en", visitor="teacher-a")  # an ended class makes room
    assert sum(not ended for _, ended in held(class_store)[0]) == MAX_CLASSES_PER_VISITOR + 2


def test_a_class_sentence_past_the_text_limit_is_refused_before_it_is_stored(class_store):
    """Issue 78.5: a teacher's 1,008,000-character sentence was told "paste at most 200,000" but already stored and
    sent to students. The class takes what a page takes (engine.tokens.MAX_INPUT_CHARS), checked before storing."""
    from mha_core.engine.tokens import MAX_INPUT_CHARS

    room = Classroom(class_store)
    code, secret = room.start("x" * MAX_INPUT_CHARS, "en")  # the limit itself fits
    for start_or_move in (lambda text: room.start(text, "en"),
                          lambda text: room.move(code, secret, room.state(code), text=text)):
        with pytest.raises(InputError, match=f"{MAX_INPUT_CHARS + 1:,} characters; a class takes at most"):
            start_or_move("y" * (MAX_INPUT_CHARS + 1))
    assert [len(text) for text, _ in held(class_store)[0]] == [MAX_INPUT_CHARS]


def test_ended_and_idle_classes_are_deleted_with_their_students(class_store):
    """Issue 78.5: ended classes were never deleted. An ended class still says "has ended" for ENDED_KEPT_S; then it
    goes, as does a class idle past IDLE_LIMIT_S, each with its students' rows (at the next start)."""
    clock = Clock()
    room = Classroom(class_store, clock)
    ended, secret = room.start("ended", "en")
    room.seen(ended, "s1", "s2")
    room.end(ended, secret)
    idle, _ = room.start("idle", "en")
    room.seen(idle, "s3")
    clock.now += ENDED_KEPT_S + 1
    with pytest.raises(InputError, match="has ended"):
        room.state(ended)
    room.seen(idle, "s3")
    live, _ = room.start("live", "en")
    assert [text for text, _ in held(class_store)[0]] == ["idle", "live"]
    assert held(class_store)[1] == ["s3"]
    clock.now += IDLE_LIMIT_S - ENDED_KEPT_S
    room.seen(idle, "s3")  # a page still checking in: its row goes with its class
    room.start("new", "en")
    assert held(class_store) == ([("live", 0.0), ("new", 0.0)], [])
    with pytest.raises(InputError, match="no class"):
        room.state(idle)


def test_one_connection_serves_every_read_and_write_of_a_process(tmp_path, monkeypatch):
    """Issue 78.3: each read opened a connection and recreated the -wal/-shm files (42 MB/s of disk writes under 1,000
    followed codes). One connection per process, kept."""
    opened = []
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *args, **kwargs: opened.append(args) or connect(*args, **kwargs))
    room = Classroom(tmp_path / "c.sqlite")
    code, secret = room.start("text", "en")
    for step in range(2, 50):
        room.state(code)
        room.seen(code, "s1")
        room.following(code)
        room.move(code, secret, room.state(code), step=1 + step % 10)  # the lesson's steps only
    assert len(opened) == 1


def test_the_store_lives_where_mha_class_store_says(tmp_path, monkeypatch, redis_address):
    """A server's classes in $MHA_CLASS_STORE (each test's own: tests/conftest.own_class_store): a file, or a Redis
    address; else the cache folder's file."""
    from mha_core.engine.loading.bundled import cache_root
    from mha_core.serving.classes.on_redis import RedisStore
    from mha_core.serving.classroom import STORE_NAME, store_location

    monkeypatch.setenv("MHA_CLASS_STORE", str(tmp_path / "elsewhere.sqlite"))
    room = Classroom()
    code, _ = room.start("The animal was tired.", "en")
    assert room.location == str(tmp_path / "elsewhere.sqlite") and room.state(code).step == 1
    monkeypatch.setenv("MHA_CLASS_STORE", redis_address)
    assert isinstance(Classroom().store, RedisStore) and Classroom().state(Classroom().start("Hi.", "en")[0]).step == 1
    monkeypatch.delenv("MHA_CLASS_STORE")
    assert store_location() == str(cache_root() / STORE_NAME)


@pytest.mark.parametrize("given", ["A" * 6000, "!!<script>", "\u202e"])
def test_a_value_that_is_no_class_code_is_quoted_whole_or_cut_with_an_ellipsis(given):
    """`?class=` of 6,000 letters was quoted as its first 18, reading as if that were the whole value."""
    with pytest.raises(InputError) as refused:
        classroom.checked_code(given)
    quoted = refused.value.values["given"]
    at_most = 3 * classroom.CODE_LENGTH
    assert quoted == given if len(given) <= at_most else quoted == given[:at_most] + "…"
