"""Class mode on the lesson page (issue 47): the teacher starts a class and moves it; students who open its link follow
the teacher's step and sentence. No page polls: one watcher thread per app process reads the class's row every
WATCH_S seconds and, when the teacher has moved, asks each following session of this process to rerun (Streamlit's
own rerun request, as a source-file change makes). The state and the rules are mha_core.serving.classroom's."""

from __future__ import annotations

import threading
import time

import streamlit as st
import streamlit.components.v1 as components
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from mha_core import InputError, i18n
from mha_core.i18n import tr, worded
from mha_core.serving.classroom import FOLLOWING_S, Classroom, qr_png
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
ASKED, ASK_AGAIN_S = "asked", 3.0  # a follower asked to rerun; asked again if its rerun has not shown the move


class Watcher:
    """The sessions of this process that follow each class, and the thread that reruns them when it moves."""

    def __init__(self, room: Classroom) -> None:
        self.room = room
        self.followers: dict[str, dict[str, tuple]] = {}  # code -> session id -> what its page shows
        self.lock = threading.Lock()
        threading.Thread(target=self.watch, name="class-watcher", daemon=True).start()

    def follow(self, code: str, session: str, shown: tuple) -> None:
        with self.lock:
            self.followers.setdefault(code, {})[session] = shown

    def watch(self) -> None:
        last_seen = 0.0
        while True:
            time.sleep(WATCH_S)
            with self.lock:
                classes = {code: dict(sessions) for code, sessions in self.followers.items()}
            for code, sessions in classes.items():
                self.rerun_moved(code, sessions)
            if time.monotonic() - last_seen > FOLLOWING_S / 2:  # the teacher's count: one write per class
                last_seen = time.monotonic()
                for code, sessions in classes.items():
                    if sessions:
                        self.room.seen(code, *sessions)

    def rerun_moved(self, code: str, sessions: dict[str, tuple]) -> None:
        try:
            state = self.room.state(code)
            now = (state.step, state.text)
        except InputError:
            now = None  # ended: each page says so on its rerun
        manager = session_manager()
        if manager is None:
            return
        for session, shown in sessions.items():
            info = manager.get_active_session_info(session)
            with self.lock:
                if info is None:  # the student left
                    self.followers.get(code, {}).pop(session, None)
                    continue
                asked = shown[0] == ASKED and shown[1] == now and time.monotonic() - shown[2] < ASK_AGAIN_S
                if shown == now or asked:
                    continue
                self.followers[code][session] = (ASKED, now, time.monotonic())  # its rerun registers what it shows
            info.session.request_rerun(page_rerun(info.session))


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
    code = chosen(CLASS, None, like="")
    return str(code).strip().upper() or None if code else None


def is_teaching(code: str) -> bool:
    return classroom().is_teacher(code, chosen(TEACH, None, like=""))


def start_class(text: str, step: int, model: str) -> None:
    code, secret = classroom().start(text, i18n.current(), model, step)
    choose(CLASS, code)
    choose(TEACH, secret)


def end_class(code: str) -> None:
    classroom().end(code, chosen(TEACH, None, like=""))
    choose(CLASS, "")
    choose(TEACH, "")


def class_state(code: str) -> Class:
    """The class, or one sentence and a way out when it has ended or never was."""
    try:
        return classroom().state(code)
    except InputError as err:
        st.error(literal(worded(err)))
        st.button(tr("Continue on my own"), on_click=lambda: (choose(CLASS, ""), choose(TEACH, "")))
        stop()


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
    st.caption(tr("{n} students follow.", n=classroom().following(code)))


def follow(code: str, shown: Class, exploring: bool = False) -> None:
    """A student's page: registered with this process's watcher, which reruns it when the teacher moves (a student
    exploring on their own is rerun too: their page says where the teacher is)."""
    ctx = get_script_run_ctx()
    if ctx is not None and Runtime.exists():  # (an AppTest has no server: its next run reads the class as a page does)
        watcher().follow(code, ctx.session_id, (shown.step, shown.text))
    if exploring:
        st.caption(tr("Class {code}: you explore on your own; the teacher is on step {step}.", code=code,
                      step=shown.step))
    else:
        st.caption(tr("You follow class {code}: the teacher moves the steps.", code=code))
