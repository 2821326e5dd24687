"""The class watcher of one app process (issues 47, 78, 84): which sessions of this process follow which class, and
the thread that asks each to rerun when its class moves. Pure logic: the pages (views/_class.py) hand it Streamlit's
session manager and how a session reruns; tests hand it stand-ins.

Over SQLite the thread reads each followed class's row every WATCH_S. Over Redis (store.pushes_moves) nothing polls:
a listener thread hears each move the moment it is published and reruns that class's followers at once; the ticks
then only compare what pages registered with what the process last heard (a page that registered an older step
meanwhile is rerun), and count who follows. A class's followers are asked IN_FLIGHT at a time, each rerun that
registers the class's step asking the next (issue 84: a process runs its followers' reruns in turn): the pass that
saw the move queues the rest, and a registration takes the next from that queue, never looking at the whole class.
A store that fails is said on the pages (rerun once) and followed until it is back; a listener that lost Redis marks
every class so, and reads them all again once it is back."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple, Protocol

from mha_core.messages import InputError
from mha_core.serving.classes.stored import FOLLOWING_S, UNAVAILABLE
from mha_core.serving.classroom import Classroom, canonical

WATCH_S = 0.4  # how often the watcher ticks: over SQLite a move reaches the students within about this
UNAVAILABLE_SHOWN = "unavailable"  # what a page shows while the class store fails (the watcher reruns it once back)
ASKED, ASK_AGAIN_S, MAX_ASKS = "asked", 3.0, 2  # a follower asked to rerun; asked again if its rerun has not
# registered what it shows, at most MAX_ASKS times: a page that no longer follows (another page, the class left,
# ended) is forgotten
QUEUED_S = 0.03  # each rerun asked before a follower's in one pass adds this to its wait before it is asked again:
# the process runs them in turn (200 followers on a loaded core took 4-6 s, and a second ask ran each one twice)
IN_FLIGHT = 8  # followers of a class asked to rerun at once: each one that registers asks the next (200 script runs
# started at once on one core fought over it: 12-19 ms of CPU a follower, against 6 with 70)
Shown = tuple | str | None  # what a page shows: (step, text), UNAVAILABLE_SHOWN, the end (None), or (ASKED, now,
# when, asks)
log = logging.getLogger(__name__)


class Follower(NamedTuple):
    shown: Shown
    counted: bool  # a student's (the teacher's count); a teacher's tab follows too, uncounted
    fragment: str = ""  # the page's part that shows the class (a Streamlit fragment's id): rerun alone when only the
    # step moved; "" (or a new sentence) reruns the whole page


class Sessions(Protocol):
    """Streamlit's session manager, as the watcher reads it."""

    def get_active_session_info(self, session: str) -> object | None: ...


class Watcher:
    """The sessions of this process that follow each class (by canonical code), and the threads that rerun them.
    `sessions()` gives the live sessions (None without a server); `rerun(session, fragment)` asks one to rerun."""

    def __init__(self, room: Classroom, sessions: Callable[[], Sessions | None], rerun: Callable[[object, str], None],
                 thread: bool = True) -> None:
        self.room, self.sessions, self.rerun = room, sessions, rerun
        self.pushed = bool(room.store.pushes_moves)
        self.followers: dict[str, dict[str, Follower]] = {}  # code -> session id -> its page
        self.heard: dict[str, Shown | None] = {}  # each followed class as last read (pushed: after a message)
        self.queued: dict[str, tuple[Shown | None, deque[str]]] = {}  # code -> (now, followers still to ask for it)
        self.flying: dict[str, set[str]] = {}  # code -> its followers asked to rerun and not registered since
        self.lock = threading.Lock()
        self.threads: dict[str, threading.Thread] = {}
        self.threaded = thread  # False: a test calls tick() / hear() itself

    def alive(self) -> None:
        if not self.threaded:
            return
        wanted = {"class-watcher": self.watch, **({"class-listener": self.listen} if self.pushed else {})}
        for name, target in wanted.items():
            if name not in self.threads or not self.threads[name].is_alive():
                self.threads[name] = threading.Thread(target=target, name=name, daemon=True)
                self.threads[name].start()

    def follow(self, code: str, session: str, shown: Shown, counted: bool = True, fragment: str = "") -> None:
        """Session `session` shows `shown` of class `code`; a value that cannot be a class code is not kept."""
        code = canonical(code)
        if code is None:
            return
        self.alive()
        with self.lock:
            followers = self.followers.setdefault(code, {})
            was = followers.get(session)
            followers[session] = Follower(shown, counted, fragment)
            self.flying.get(code, set()).discard(session)
            now = self.heard.get(code, "")
        if was is not None and asked_for(was.shown, shown) and now == shown:  # its rerun done: ask the next ones
            self.ask_next(code, now)

    def ask_next(self, code: str, now: Shown) -> None:
        """A follower's rerun registered `now`: the next ones queued for it are asked, as many as are free (work of
        IN_FLIGHT followers, however large the class: issue 84, each registration went through all 300 at first)."""
        manager = self.sessions()
        if manager is not None:
            with self.lock:
                picked = self.next_queued(code, now)
            self.rerun_moved(manager, code, picked, now, pruning=False)

    def next_queued(self, code: str, now: Shown) -> dict[str, Follower]:
        """(Under the lock.) The followers of `code` to ask next for `now`: from the queue the last pass over the class
        left, those still not showing it nor asked lately, as many as are free (none while the queue is older than
        `now`: the next pass makes it)."""
        queued_for, queue = self.queued.get(code, (None, deque()))
        if queued_for != now:
            return {}
        followers, flying = self.followers.get(code, {}), self.flying.get(code, set())
        flying.intersection_update(s for s in list(flying) if asked_lately(followers[s].shown, now))
        picked = {}
        while queue and len(picked) < IN_FLIGHT - len(flying):
            session = queue.popleft()
            follower = followers.get(session)
            if follower is not None and follower.shown != now and not asked_lately(follower.shown, now):
                picked[session] = follower
        return picked

    def known(self, code: str) -> Shown | None:
        """What the process knows of the class now (pushed: what it last heard; None: ended or no such class)."""
        with self.lock:
            heard = self.heard.get(code, "")
        return heard if heard not in ("", UNAVAILABLE_SHOWN) else self.read(code)

    def last_heard(self, code: str) -> Shown | None:
        """The class's (step, text) as this process last read or heard it (what its watcher reruns the followers
        for), for a follower's rerun to show without a read of its own; None when it has none: the page reads it."""
        with self.lock:
            heard = self.heard.get(canonical(code) or "")
        return heard if isinstance(heard, tuple) else None

    def watch(self) -> None:
        last_seen = 0.0
        while True:
            time.sleep(WATCH_S)
            try:
                counting = time.monotonic() - last_seen > FOLLOWING_S / 2
                last_seen = time.monotonic() if counting else last_seen
                self.tick(counting)
            except Exception:  # noqa: BLE001 -- the watcher outlives anything a tick meets; the next tick tries again
                log.exception("class watcher")

    def listen(self) -> None:
        while True:
            try:
                self.room.store.listen(self.hear, self.lost)
            except Exception:  # noqa: BLE001 -- the listener outlives anything; it subscribes again
                log.exception("class listener")
                time.sleep(WATCH_S)

    def hear(self, code: str | None) -> None:
        """A message: class `code` moved or ended (read it, rerun its followers now); None: subscribed again after a
        loss (every class is read again at the next tick)."""
        if code is None:
            with self.lock:
                self.heard.clear()
            return
        with self.lock:
            followed = code in self.followers
        if followed:
            self.read(code)
            self.tick_class(code, counting=False)

    def lost(self, err: InputError) -> None:
        """The subscription failed: every class's pages say the store is unavailable until it is back."""
        with self.lock:
            self.heard = dict.fromkeys(self.followers, UNAVAILABLE_SHOWN)
        self.tick(counting=False)

    def read(self, code: str) -> Shown | None:
        """The class's row now: (step, text), UNAVAILABLE_SHOWN, or None (ended or no such class); kept (pushed)."""
        try:
            state = self.room.state(code)
            now: Shown | None = (state.step, state.text)
        except InputError as err:
            now = UNAVAILABLE_SHOWN if err.code == UNAVAILABLE else None
        with self.lock:
            if code in self.followers:
                self.heard[code] = now
        return now

    def tick(self, counting: bool) -> None:
        with self.lock:
            codes = list(self.followers)
        for code in codes:
            self.tick_class(code, counting)

    def tick_class(self, code: str, counting: bool) -> None:
        with self.lock:
            sessions = dict(self.followers.get(code, {}))
        now = self.known(code) if self.pushed else self.read(code)
        manager = self.sessions()
        if manager is not None:
            self.rerun_moved(manager, code, sessions, now)
        students = [s for s, follower in sessions.items() if follower.counted]
        if counting and students and isinstance(now, tuple):  # the teacher's count: one write per class
            with contextlib.suppress(InputError):
                self.room.seen(code, *students)

    def rerun_moved(self, manager: Sessions, code: str, sessions: dict[str, Follower], now: Shown | None,
                    pruning: bool = True) -> None:
        """Ask the followers that do not show `now` to rerun, as many as are free; `pruning` (the ticks): forget
        those closed or no longer following too (a rerun that registered only asks the next: issue 84, 0.25 ms of
        a follower's CPU went to looking up every follower's session at each registration)."""
        queued, waiting, asked = 0, deque(), []  # reruns asked in this pass (a later one waits for those before it);
        # the rest, queued
        free = IN_FLIGHT - sum(asked_lately(follower.shown, now) for follower in sessions.values())
        for session, follower in sessions.items():
            if not pruning:  # a rerun's registration: the next few not showing `now`, no session looked up else
                if free <= 0:
                    break
                if follower.shown == now:
                    continue
            info = manager.get_active_session_info(session)
            with self.lock:
                if info is None or gave_up(follower.shown, now):
                    self.forget(code, session)  # closed, or no longer registering (another page, the class left)
                    continue
                current = self.followers.get(code, {}).get(session, follower)  # another thread may have asked it
                if current.shown == now or asked_lately(current.shown, now):
                    continue
                if free <= 0:
                    waiting.append(session)
                    continue
                follower, free = current, free - 1
                asks = follower.shown[3] + 1 if asked_for(follower.shown, now) else 1
                when = time.monotonic() + queued * QUEUED_S  # asked again ASK_AGAIN_S after its turn
                self.followers[code][session] = follower._replace(shown=(ASKED, now, when, asks))
                self.flying.setdefault(code, set()).add(session)
                queued += 1
            asked.append((info.session, follower.fragment if same_sentence(follower.shown, now) else ""))
        with self.lock:
            if pruning and code in self.followers:
                self.queued[code] = (now, waiting)
        for page, fragment in asked:  # once the queue is there: a rerun that registers at once takes the next from it
            self.rerun(page, fragment)

    def forget(self, code: str, session: str) -> None:
        sessions = self.followers.get(code, {})
        sessions.pop(session, None)
        self.flying.get(code, set()).discard(session)
        if not sessions:
            for kept in (self.followers, self.heard, self.queued, self.flying):
                kept.pop(code, None)


def same_sentence(shown: Shown, now: Shown | None) -> bool:
    """Only the step moved (the page's fragment reruns alone): the page showed the class on the same sentence."""
    return isinstance(shown, tuple) and len(shown) == 2 and isinstance(now, tuple) and shown[1] == now[1]


def asked_for(shown: Shown, now: Shown | None) -> bool:
    return isinstance(shown, tuple) and len(shown) == 4 and shown[0] == ASKED and shown[1] == now


def asked_lately(shown: Shown, now: Shown | None) -> bool:
    return asked_for(shown, now) and time.monotonic() - shown[2] < ASK_AGAIN_S


def gave_up(shown: Shown, now: Shown | None) -> bool:
    """Asked MAX_ASKS times for `now` (once for a class that ended or is unknown: its page then says so and follows
    no more) and its page never registered it: it follows no more."""
    asks = 1 if now is None else MAX_ASKS
    return asked_for(shown, now) and shown[3] >= asks and not asked_lately(shown, now)
