"""Class mode on the lesson page (issue 47): the teacher starts a class and moves it; students who open its link follow
the teacher's step and sentence. No page polls: one watcher thread per app process reads the class's row every
WATCH_S seconds and, when the teacher has moved, asks each following session of this process to rerun (Streamlit's
own rerun request, as a source-file change makes). The state and the rules are mha_core.serving.classroom's."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import replace
from typing import NamedTuple

import streamlit as st
import streamlit.components.v1 as components
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from mha_core import InputError, i18n
from mha_core.i18n import tr, worded
from mha_core.serving.classroom import FOLLOWING_S, UNAVAILABLE, Classroom, canonical, qr_png
from mha_core.serving.classroom import ClassState as Class
from views._text import literal
from views._visit import choose, chosen, forget, stop

WATCH_S = 0.4  # how often a process reads its classes' rows: a move reaches the students within about this
CLASS, TEACH = "class", "teach"  # the address's class code and the teacher's key
RECONNECTED = "reconnected"  # set in the address by the page that reloaded itself after a server restart
CHECK_SERVER_S = 1  # how often a class's page looks whether its connection is down (no request: it reads the page)
# A restarted server has forgotten every session and no page reruns by itself: the page would go on showing the step
# it had. This script (in a component's frame, same origin) looks every CHECK_SERVER_S seconds for Streamlit's
# connection-status badge, shown only while the page is not connected; once the badge has come and gone, it reloads
# the page with `reconnected=1` (through a timer of the page's own, as a frame may not navigate the page itself), and
# the page reruns on the class's step and says so.
RESTART_SCRIPT = """<script>
let down = false;
const page = window.parent;
setInterval(() => {
  const up = !page.document.querySelector('[data-testid="stConnectionStatus"]');
  if (up && down) {
    const address = new URL(page.location.href);
    address.searchParams.set('RECONNECTED', '1');
    page.setTimeout(new page.Function('location.replace(' + JSON.stringify(address.href) + ')'), 0);
  }
  down = !up;
}, EVERY_MS);
</script>""".replace("RECONNECTED", RECONNECTED).replace("EVERY_MS", str(CHECK_SERVER_S * 1000))
ASKED, ASK_AGAIN_S, MAX_ASKS = "asked", 3.0, 2  # a follower asked to rerun; asked again if its rerun has not
# registered what it shows, at most MAX_ASKS times: a page that no longer follows (another page, the class left,
# ended) is forgotten
REFUSED = "_class_refused"  # a class button's callback refused (too many classes, no store): said on the page
TEACHER_SHOWN = "_class_shown"  # the class's (code, step, text) this teacher's tab last drew: its moves start there
UNAVAILABLE_SHOWN = "unavailable"  # what a page shows while the class store fails (the watcher reruns it once back)
log = logging.getLogger(__name__)


class Follower(NamedTuple):
    shown: tuple | str  # what its page shows: (step, text), UNAVAILABLE_SHOWN, or (ASKED, now, when, asks)
    counted: bool  # a student's (the teacher's count); a teacher's tab follows too, uncounted


class Watcher:
    """The sessions of this process that follow each class (by canonical code: the page follows only a class the
    store knows), and the thread that reruns them when it moves. The thread survives any error: a store that fails is
    said on the pages (rerun once) and followed until it is back."""

    def __init__(self, room: Classroom, thread: bool = True) -> None:
        self.room = room
        self.followers: dict[str, dict[str, Follower]] = {}  # code -> session id -> its page
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.threaded = thread  # False: a test calls tick() itself
        self.alive()

    def alive(self) -> None:
        if self.threaded and (self.thread is None or not self.thread.is_alive()):
            self.thread = threading.Thread(target=self.watch, name="class-watcher", daemon=True)
            self.thread.start()

    def follow(self, code: str, session: str, shown: tuple | str, counted: bool = True) -> None:
        """Session `session` shows `shown` of class `code`; a value that cannot be a class code is not kept."""
        code = canonical(code)
        if code is None:
            return
        self.alive()
        with self.lock:
            self.followers.setdefault(code, {})[session] = Follower(shown, counted)

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

    def tick(self, counting: bool) -> None:
        with self.lock:
            classes = {code: dict(sessions) for code, sessions in self.followers.items()}
        manager = session_manager()
        for code, sessions in classes.items():
            now = self.class_now(code)
            if manager is not None:
                self.rerun_moved(manager, code, sessions, now)
            students = [s for s, follower in sessions.items() if follower.counted]
            if counting and students and isinstance(now, tuple):  # the teacher's count: one write per class
                with contextlib.suppress(InputError):
                    self.room.seen(code, *students)

    def class_now(self, code: str) -> tuple | str | None:
        """What a page of the class shows now: (step, text), UNAVAILABLE_SHOWN, or None (ended or no such class)."""
        try:
            state = self.room.state(code)
        except InputError as err:
            return UNAVAILABLE_SHOWN if err.code == UNAVAILABLE else None
        return state.step, state.text

    def rerun_moved(self, manager: object, code: str, sessions: dict[str, Follower], now: tuple | str | None) -> None:
        for session, follower in sessions.items():
            info = manager.get_active_session_info(session)
            with self.lock:
                if info is None or gave_up(follower.shown, now):
                    self.forget(code, session)  # closed, or no longer registering (another page, the class left)
                    continue
                if follower.shown == now or asked_lately(follower.shown, now):
                    continue
                asks = follower.shown[3] + 1 if asked_for(follower.shown, now) else 1
                self.followers[code][session] = follower._replace(shown=(ASKED, now, time.monotonic(), asks))
            info.session.request_rerun(page_rerun(info.session))  # its rerun registers what it shows

    def forget(self, code: str, session: str) -> None:
        sessions = self.followers.get(code, {})
        sessions.pop(session, None)
        if not sessions:
            self.followers.pop(code, None)


def asked_for(shown: tuple | str, now: tuple | str | None) -> bool:
    return isinstance(shown, tuple) and len(shown) == 4 and shown[0] == ASKED and shown[1] == now


def asked_lately(shown: tuple | str, now: tuple | str | None) -> bool:
    return asked_for(shown, now) and time.monotonic() - shown[2] < ASK_AGAIN_S


def gave_up(shown: tuple | str, now: tuple | str | None) -> bool:
    """Asked MAX_ASKS times for `now` (once for a class that ended or is unknown: its page then says so and follows
    no more) and its page never registered it: it follows no more."""
    asks = 1 if now is None else MAX_ASKS
    return asked_for(shown, now) and shown[3] >= asks and not asked_lately(shown, now)


def session_manager() -> object | None:
    """Streamlit's sessions, to rerun the followers; None without a server (gone, or AppTest's stand-in runtime)."""
    try:
        return Runtime.instance()._session_mgr  # noqa: SLF001
    except (RuntimeError, AttributeError):
        return None


def page_rerun(session: object) -> ClientState:
    """A rerun of the page the session shows, as it last asked for it (its address, its widgets), not a fragment's:
    request_rerun(None) would run the app's default page."""
    state = ClientState()
    state.CopyFrom(session._client_state)  # noqa: SLF001 -- the session's last request (Streamlit 1.67, pinned)
    state.fragment_id, state.is_auto_rerun = "", False
    return state


@st.cache_resource(show_spinner=False)
def classroom() -> Classroom:
    return Classroom()


@st.cache_resource(show_spinner=False)
def watcher() -> Watcher:
    return Watcher(classroom())


def reload_after_restart() -> None:
    """On a class's page: reload it when the server comes back after a restart, and say so on the reloaded page."""
    components.html(RESTART_SCRIPT, height=0)
    if chosen(RECONNECTED, None, like="") == "1":
        forget(RECONNECTED)
        st.toast(tr("The server restarted: this page reloaded on the class's current step."), icon=":material/sync:")


def class_code() -> str | None:
    """The address's class code as given (the store checks it: a value that cannot be a code is said, never kept)."""
    code = chosen(CLASS, None, like="")
    return str(code).strip() or None if code else None


def teacher_key() -> str | None:
    return chosen(TEACH, None, like="") or None


def is_teaching(code: str) -> bool:
    try:
        return classroom().is_teacher(code, teacher_key())
    except InputError as err:
        store_failed(code, err)


def start_class(text: str, step: int, model: str) -> None:
    """"Start a class" (a callback): refused in one sentence (too many classes, too long a sentence, no store)."""
    ctx = get_script_run_ctx()
    try:
        code, secret = classroom().start(text, i18n.current(), model, step, visitor=ctx.session_id if ctx else "")
    except InputError as err:
        st.session_state[REFUSED] = err
        return
    choose(CLASS, code)
    choose(TEACH, secret)


def end_class(code: str) -> None:
    try:
        classroom().end(code, teacher_key())
    except InputError as err:
        st.session_state[REFUSED] = err
        return
    choose(CLASS, "")
    choose(TEACH, "")


def say_refused() -> None:
    """What a class button's callback was refused, in one sentence, once."""
    refused = st.session_state.pop(REFUSED, None)
    if refused is not None:
        st.warning(literal(worded(refused)), icon=":material/block:")


def class_state(code: str) -> Class:
    """The class, or one sentence and a way out when it has ended or never was; while the store fails, the sentence
    that says so (the page follows the class until it is back)."""
    try:
        return classroom().state(code)
    except InputError as err:
        if err.code == UNAVAILABLE:
            store_failed(code, err)
        st.error(literal(worded(err)))
        st.button(tr("Continue on my own"), on_click=lambda: (choose(CLASS, ""), choose(TEACH, "")))
        stop()


def store_failed(code: str, err: InputError) -> None:
    """The class store fails: the page says so in one sentence and is rerun by the watcher once it is back."""
    if err.code != UNAVAILABLE:
        raise err
    register(code, UNAVAILABLE_SHOWN, counted=False)
    st.warning(literal(worded(err)), icon=":material/cloud_off:")
    stop()


def register(code: str, shown: tuple | str, counted: bool = True) -> None:
    """This session follows class `code` (canonical) with `shown` on its page: the watcher reruns it when that
    changes. (An AppTest has no server: its next run reads the class as a page does.)"""
    ctx = get_script_run_ctx()
    value = canonical(code)
    if ctx is not None and value is not None and Runtime.exists():
        watcher().follow(value, ctx.session_id, shown, counted)


def teacher_follows(code: str, state: Class, steps: list[int]) -> Class:
    """A teacher's tab shows the class's step and sentence and follows them as a student's page does (another tab's
    move reruns it); its own controls move the class from what it showed. A move from a step or sentence the class
    has left (this tab had not yet followed another's move) is refused, and the tab shows where the class is."""
    shown = st.session_state.get(TEACHER_SHOWN)
    asked = (chosen("step", state.step, options=steps), str(chosen("text", state.text)))
    if shown is not None and shown[0] == state.code and asked != shown[1:]:
        try:
            state = classroom().move(code, teacher_key(), replace(state, step=shown[1], text=shown[2]),
                                     step=asked[0] if asked[0] != shown[1] else None,
                                     text=asked[1] if asked[1] != shown[2] else None)
        except InputError as err:  # moved meanwhile, too long a sentence, a store that cannot be written
            st.warning(literal(worded(err)))
            state = class_state(code)  # the class as it is (a store that cannot be read says so and stops)
    choose("step", state.step)
    choose("text", state.text)
    st.session_state[TEACHER_SHOWN] = (state.code, state.step, state.text)
    register(state.code, (state.step, state.text), counted=False)
    return state


def student_link(code: str) -> str:
    """This page's address with the class's code (and the teacher's language), never the teacher's key."""
    base = (st.context.url or "").split("?")[0] or "/lesson"  # no address known (a test): the page's path
    return f"{base}?{CLASS}={code}&lang={i18n.current()}"


def teacher_panel(code: str) -> None:
    """The teacher's: the student link and its QR code, how many follow, and the end of the class."""
    link = student_link(code)
    with st.expander(tr("Class {code}: the students' link", code=code), expanded=False):
        left, right = st.columns([1, 2])
        left.image(qr_png(link), output_format="PNG")  # as drawn: a JPEG copy would blur its modules
        right.markdown(tr("Students open this link (or scan the code): their pages follow your steps."))
        right.code(link, language=None)  # one line, copied with its button (a markdown link ran into the words)
        right.caption(tr("Your own address holds the key that moves the class: do not share it; share this link."))
        right.button(tr("End the class"), on_click=end_class, args=(code,))
    following_count(code)


@st.fragment(run_every=5)
def following_count(code: str) -> None:
    try:
        st.caption(tr("{n} students follow.", n=classroom().following(code)))
    except InputError as err:
        st.caption(literal(worded(err)))


def follow(code: str, shown: Class, exploring: bool = False) -> None:
    """A student's page: registered with this process's watcher, which reruns it when the teacher moves (a student
    exploring on their own is rerun too: their page says where the teacher is)."""
    register(shown.code, (shown.step, shown.text))
    if exploring:
        st.caption(tr("Class {code}: you explore on your own; the teacher is on step {step}.",
                      code=literal(shown.code), step=shown.step))
    else:
        st.caption(tr("You follow class {code}: the teacher moves the steps.", code=literal(shown.code)))
