"""Issue 84: class mode over Redis, beyond the rules every store keeps (tests/test_classroom.py runs those on both):
a move is heard, not polled, and reaches a process's followers at once (only their fragment when only the step
moved); Redis unreachable at start is said in one sentence; Redis lost mid-class pauses every page of the class, and
once it is back (restarted from its own log) the teacher's next move reaches every student again, with the same
watcher and store (no restart of the app)."""

from __future__ import annotations

import time

import pytest

from benchmarks.serving import free_port, redis_server
from mha_core.messages import InputError
from mha_core.serving.classes import watch
from mha_core.serving.classes.watch import UNAVAILABLE_SHOWN, Watcher
from mha_core.serving.classroom import UNAVAILABLE, Classroom
from tests.test_class_watcher import Page, Sessions, rerun

TEXT = "The animal was tired."


def until(done: callable, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return done()


class CountedReads(Classroom):
    """A room that counts the reads of the class's row."""

    reads = 0

    def state(self, code: str) -> object:
        self.reads += 1
        return super().state(code)


def following(room: Classroom, sessions: Sessions, students: int) -> tuple[Watcher, str, str]:
    """A class, and a watcher (its threads running) that `students` pages of this process follow on step 1."""
    code, secret = room.start(TEXT, "en")
    watcher = Watcher(room, lambda: sessions, rerun)
    for k in range(students):
        sessions.open[f"s{k}"] = Page()
        watcher.follow(code, f"s{k}", (1, TEXT), fragment=f"f{k}")
    assert until(lambda: "class-listener" in watcher.threads and code in watcher.heard)
    return watcher, code, secret


def registered(watcher: Watcher, code: str, room: Classroom) -> None:
    """Each asked page reruns: it reads the class and registers what it shows."""
    for session, follower in list(watcher.followers.get(code, {}).items()):
        if follower.shown[0] == watch.ASKED:
            try:
                state = room.state(code)
                shown = (state.step, state.text)
            except InputError as err:
                assert err.code == UNAVAILABLE
                shown = UNAVAILABLE_SHOWN
            watcher.follow(code, session, shown, fragment=follower.fragment)


def test_a_move_is_heard_at_once_and_nothing_polls(redis_address):
    """Before: every process read every followed class's row every 0.4 s. Over Redis an idle class costs the watcher
    no read, and a move costs it one (on hearing it) and reruns the followers' fragments (the step moved, the
    sentence did not)."""
    sessions = Sessions()
    room = CountedReads(redis_address)  # the watcher's: the teacher moves the class through a store of their own
    watcher, code, secret = following(room, sessions, students=3)
    teacher = Classroom(redis_address)
    time.sleep(2 * watch.WATCH_S)
    reads = room.reads
    time.sleep(5 * watch.WATCH_S)
    assert room.reads == reads  # idle: the ticks compare with what was heard, they read nothing
    teacher.move(code, secret, teacher.state(code), step=4)
    assert until(lambda: all(page.reruns for page in sessions.open.values()))
    time.sleep(3 * watch.WATCH_S)
    assert room.reads == reads + 1  # heard: one read, whichever tick came meanwhile
    assert [page.fragments for page in sessions.open.values()] == [["f0"], ["f1"], ["f2"]]
    registered(watcher, code, room)
    teacher.move(code, secret, teacher.state(code), text="Another sentence.")  # a new sentence: the whole page reruns
    assert until(lambda: all(page.reruns == 2 for page in sessions.open.values()))
    assert [page.fragments[-1] for page in sessions.open.values()] == ["", "", ""]


def test_redis_unreachable_at_start_is_said_in_one_sentence():
    room = Classroom(f"redis://127.0.0.1:{free_port()}/0", busy_s=0.5)
    started = time.monotonic()
    for ask in (lambda: room.start(TEXT, "en"), lambda: room.state("ABCDEF"), lambda: room.following("ABCDEF")):
        with pytest.raises(InputError, match="Class mode is unavailable just now: its store cannot be reached; pages "
                                             "follow again once it is back.") as refused:
            ask()
        assert refused.value.code == UNAVAILABLE
    assert time.monotonic() - started < 5


def test_redis_lost_mid_class_pauses_the_pages_and_the_class_resumes_once_it_is_back(tmp_path, monkeypatch):
    monkeypatch.setattr("mha_core.serving.classes.on_redis.RECONNECT_S", 0.2)
    port, sessions = free_port(), Sessions()
    with redis_server(tmp_path, port=port, kept=True) as url:
        room = Classroom(url, busy_s=0.5)
        watcher, code, secret = following(room, sessions, students=3)
    # Redis is gone: every page is rerun once and says the class is paused (the store is unavailable)
    assert until(lambda: all(page.reruns == 1 for page in sessions.open.values()))
    registered(watcher, code, room)
    assert {f.shown for f in watcher.followers[code].values()} == {UNAVAILABLE_SHOWN}
    with pytest.raises(InputError, match="its store cannot be reached"):
        room.move(code, secret, room.state(code), step=2)
    with redis_server(tmp_path, port=port, kept=True):  # back, from its own log: the class is still there
        assert until(lambda: all(page.reruns == 2 for page in sessions.open.values()))  # back on the class's step
        registered(watcher, code, room)
        assert {f.shown for f in watcher.followers[code].values()} == {(1, TEXT)}
        room.move(code, secret, room.state(code), step=5)  # the same store and watcher: no restart
        assert until(lambda: all(page.reruns == 3 for page in sessions.open.values()))
        registered(watcher, code, room)
        assert {f.shown for f in watcher.followers[code].values()} == {(5, TEXT)}
