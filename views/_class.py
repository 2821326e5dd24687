"""Class mode on the lesson page (issue 47): the teacher starts a class and moves it; students who open its link follow
the teacher's step and sentence. No page polls: one watcher per app process (mha_core.serving.classes.watch) notices
the teacher's move (reading the class's row every WATCH_S over SQLite; hearing it over Redis) and asks each following
session of this process to rerun (Streamlit's own rerun request, as a source-file change makes): only the part of the
page that shows the class (a fragment) when only the step moved. The state and the rules are
mha_core.serving.classroom's."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace

import streamlit as st
from streamlit import net_util
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState

from mha_core import InputError, i18n
from mha_core.figures.summary import qr_alt
from mha_core.i18n import tr, worded
from mha_core.serving.classes.watch import UNAVAILABLE_SHOWN, Watcher
from mha_core.serving.classroom import UNAVAILABLE, Classroom, canonical, qr_png, store_location
from mha_core.serving.classroom import ClassState as Class
from mha_core.serving.pages import LESSON
from mha_core.serving.reach import PROXY_ADDRESS_ENV, PUBLIC_URL_ENV, Request, StudentsAddress, students_address
from views._state import cap_chart_heights
from views._text import literal
from views._visit import (
    PageStopped,
    begin_fragment_run,
    choose,
    chosen,
    end_run,
    forget,
    fragment_run,
    page_link,
    stop,
    visit,
)

CLASS, TEACH = "class", "teach"  # the address's class code and the teacher's key
RECONNECTED = "reconnected"  # set in the address by the page that reloaded itself after a server restart
CHECK_SERVER_S = 1  # how often a class's page looks whether its connection is down (no request: it reads the page)
# A restarted server has forgotten every session and no page reruns by itself: the page would go on showing the step
# it had. This script (st.html's, run in the page itself, once per page however often the class's runs draw it)
# looks every CHECK_SERVER_S seconds for Streamlit's connection-status badge, shown only while the page is not
# connected; once the badge has come and gone on a page still showing a class, it reloads the page with
# `reconnected=1`, and the page reruns on the class's step and says so.
HIDDEN = ("<style>[data-testid='stElementContainer']:has(.mha-hidden){display:none}</style>"
          "<span class='mha-hidden'></span>")  # a script's element takes no room (a projector shows the whole step)
RESTART_SCRIPT = HIDDEN + """<span class="mha-class-page"></span><script>
if (!window.mhaWatchesRestarts) {
  window.mhaWatchesRestarts = true;
  let down = false;
  setInterval(() => {
    const up = !document.querySelector('[data-testid="stConnectionStatus"]');
    if (up && down && document.querySelector('.mha-class-page')) {
      const address = new URL(location.href);
      address.searchParams.set('RECONNECTED', '1');
      location.replace(address.href);
    }
    down = !up;
  }, EVERY_MS);
}
</script>""".replace("RECONNECTED", RECONNECTED).replace("EVERY_MS", str(CHECK_SERVER_S * 1000))
KEYS = "_teacher_keys"  # the session's teacher keys by class code: kept out of the address a projector shows
KEY_COOKIE = "mha_teach_{code}"  # the browser keeps the key too: a reload or another tab of it is the teacher's
KEY_COOKIE_S = 4 * 3600  # longer than a class may sit idle (classroom.IDLE_LIMIT_S)
REFUSED = "_class_refused"  # a class button's callback refused (too many classes, no store): said on the page
TEACHER_SHOWN = "_class_shown"  # the class's (code, step, text) this teacher's tab last drew: its moves start there


def session_manager() -> object | None:
    """Streamlit's sessions, to rerun the followers; None without a server (gone, or AppTest's stand-in runtime)."""
    try:
        return Runtime.instance()._session_mgr  # noqa: SLF001
    except (RuntimeError, AttributeError):
        return None


def page_rerun(session: object, fragment: str = "") -> ClientState:
    """A rerun of the page the session shows, as it last asked for it (its address, its widgets), or of its fragment
    `fragment` alone: request_rerun(None) would run the app's default page."""
    state = ClientState()
    state.CopyFrom(session._client_state)  # noqa: SLF001 -- the session's last request (Streamlit 1.67, pinned)
    state.fragment_id, state.is_auto_rerun = fragment, False
    return state


def rerun_page(session: object, fragment: str) -> None:
    """The watcher's request: the fragment alone while the session still holds it, else the whole page."""
    held = bool(fragment) and session.has_fragment(fragment)
    session.request_rerun(page_rerun(session, fragment if held else ""))


def classroom() -> Classroom:
    """This server's class store (one per location: $MHA_CLASS_STORE, a file or Redis, or the cache folder's)."""
    return classroom_at(store_location())


@st.cache_resource(show_spinner=False)
def classroom_at(location: str) -> Classroom:
    return Classroom(location)


WATCHERS: dict[str, Watcher] = {}  # this process's watcher of each store: a dict, not st.cache_resource, which
WATCHERS_LOCK = threading.Lock()  # reads the function's signature at every call (6 % of a follower's rerun measured)


def watcher() -> Watcher:
    """This process's watcher of its class store (made once)."""
    location = store_location()
    found = WATCHERS.get(location)
    if found is None:
        with WATCHERS_LOCK:
            found = WATCHERS.get(location) or WATCHERS.setdefault(
                location, Watcher(classroom_at(location), session_manager, rerun_page))
    return found


def reload_after_restart() -> None:
    """On a class's page: reload it when the server comes back after a restart, and say so on the reloaded page."""
    st.html(RESTART_SCRIPT, unsafe_allow_javascript=True, width="content")
    if chosen(RECONNECTED, None, like="") == "1":
        forget(RECONNECTED)
        st.toast(tr("The server restarted: this page reloaded on the class's current step."), icon=":material/sync:")


def class_code() -> str | None:
    """The address's class code as given (the store checks it: a value that cannot be a code is said, never kept; an
    empty one is dropped; one typed in lower case or with spaces is written as the projector shows it)."""
    code = chosen(CLASS, None, like="")
    known = canonical(code)
    if code is not None and not str(code).strip():
        forget(CLASS)  # an empty one names no class: the address drops it
    elif known not in (None, code):
        choose(CLASS, known)
    return str(code).strip() or None if code else None


def way_back(page_path: str) -> None:
    """Above every page but the lesson, for a visitor of a running class (a student who followed "Explore this on its
    page" or the sidebar, a teacher showing another page): the way back to it, in view on a phone, whose sidebar is
    folded. The page's address keeps the class (a phone that reloads a tab left in the background keeps the way
    back); a code of no class, or of one that has ended, is dropped."""
    if page_path == LESSON.name or CLASS not in visit().chosen:  # read only where held: else the address names it
        return
    code = canonical(chosen(CLASS, "", like=""))
    if code is None or not running(code):
        forget(CLASS)
        return
    page_link(LESSON.path, label=tr("Back to class {code}", code=code), icon=":material/groups:")


def running(code: str) -> bool:
    """Whether class `code` goes on (while the store fails, it may: the lesson says why it cannot show it)."""
    try:
        classroom().state(code)
    except InputError as err:
        return err.code == UNAVAILABLE
    return True


def key_cookie(code: str) -> str | None:
    """The teacher's key to class `code` the browser sent (a string: AppTest's stand-in cookies are not)."""
    cookie = st.context.cookies.get(KEY_COOKIE.format(code=code))
    return cookie if isinstance(cookie, str) else None


def held_key(code: str) -> str | None:
    """The teacher's key to class `code` this session or this browser holds (None: a student's)."""
    return st.session_state.get(KEYS, {}).get(code) or key_cookie(code)


def teacher_key(code: str) -> str | None:
    """held_key; a teacher's link brings the key in its address once: the session keeps it, the address drops it
    (the address bar is on the projector)."""
    given = chosen(TEACH, None, like="")
    if given:
        forget(TEACH)
        st.session_state.setdefault(KEYS, {})[code] = str(given)
    return held_key(code)


def is_teaching(code: str) -> bool:
    key = teacher_key(code)
    try:
        teaching = classroom().is_teacher(code, key)
    except InputError as err:
        store_failed(code, err)
    if teaching and key_cookie(code) != key:  # a reload keeps the teacher's
        cookie = f"{KEY_COOKIE.format(code=code)}={key}; path=/; max-age={KEY_COOKIE_S}; SameSite=Strict"
        st.html(f"{HIDDEN}<script>document.cookie = '{cookie}' + (location.protocol === 'https:' ? '; Secure' : '');"
                "</script>", unsafe_allow_javascript=True, width="content")
    return teaching


def start_class(text: str, step: int, model: str) -> None:
    """"Start a class" (a callback): refused in one sentence (too many classes, too long a sentence, no store)."""
    ctx = get_script_run_ctx()
    try:
        code, secret = classroom().start(text, i18n.current(), model, step, visitor=ctx.session_id if ctx else "")
    except InputError as err:
        st.session_state[REFUSED] = err
        return
    choose(CLASS, code)
    st.session_state.setdefault(KEYS, {})[code] = secret


def leave_class() -> None:
    """The page goes on alone: no class in its address (not even an empty one)."""
    forget(CLASS)
    forget(TEACH)


def end_class(code: str) -> None:
    try:
        classroom().end(code, held_key(code))
    except InputError as err:
        st.session_state[REFUSED] = err
        return
    st.session_state.get(KEYS, {}).pop(code, None)
    leave_class()


def say_refused() -> None:
    """What a class button's callback was refused, in one sentence, once."""
    refused = st.session_state.pop(REFUSED, None)
    if refused is not None:
        st.warning(literal(worded(refused)), icon=":material/block:")


def class_state(code: str) -> Class:
    """The class, or one sentence and the way on when it has ended (no error: a class ends) or never was; while the
    store fails, the sentence that says so (the page follows the class until it is back)."""
    try:
        return classroom().state(code)
    except InputError as err:
        if err.code == UNAVAILABLE:
            store_failed(code, err)
        if err.code == "class_ended":  # registered as showing the end: its rerun asks the next followers, and
            register(code, None)  # an ending reaches every page at once (not IN_FLIGHT pages every ASK_AGAIN_S)
            st.info(literal(tr("{ended} The lesson stays open: go on through its steps on your own.",
                               ended=worded(err))), icon=":material/waving_hand:")
        else:
            st.warning(literal(worded(err)), icon=":material/link_off:")
        st.button(tr("Continue on my own"), on_click=leave_class, type="primary")
        stop()


def reachable() -> StudentsAddress:
    """Where the class's phones open the lesson (mha_core.serving.reach): from this request, this server's options,
    the setting MHA_PUBLIC_URL and this machine's network address."""
    headers = {name: value for name, value in (st.context.headers or {}).items()}
    request = Request(headers, st.context.url, st.get_option("server.address"), int(st.get_option("server.port")),
                      os.environ.get(PUBLIC_URL_ENV), os.environ.get(PROXY_ADDRESS_ENV))
    return students_address(request, net_util.get_internal_ip())


def store_failed(code: str, err: InputError) -> None:
    """The class store fails: the page says so in one sentence and is rerun by the watcher once it is back."""
    if err.code != UNAVAILABLE:
        raise err
    register(code, UNAVAILABLE_SHOWN, counted=False)
    st.warning(literal(worded(err)), icon=":material/cloud_off:")
    stop()


def register(code: str, shown: tuple | str | None, counted: bool = True) -> None:
    """This session follows class `code` (canonical) with `shown` on its page: the watcher reruns it when that
    changes (the fragment this runs in alone, if any, when only the step moved). (An AppTest has no server: its next
    run reads the class as a page does.)"""
    ctx = get_script_run_ctx()
    value = canonical(code)
    if ctx is not None and value is not None and Runtime.exists():
        fragment = ThreadState.get().fragment_id or ""  # the fragment this runs in (Streamlit 1.67, pinned)
        watcher().follow(value, ctx.session_id, shown, counted, fragment)


def teacher_follows(code: str, state: Class, steps: list[int]) -> Class:
    """A teacher's tab shows the class's step and sentence and follows them as a student's page does (another tab's
    move reruns it); its own controls move the class from what it showed. A move from a step or sentence the class
    has left (this tab had not yet followed another's move) is refused, and the tab shows where the class is."""
    shown = st.session_state.get(TEACHER_SHOWN)
    asked = (chosen("step", state.step, options=steps), str(chosen("text", state.text)))
    if shown is not None and shown[0] == state.code and asked != shown[1:]:
        try:
            state = classroom().move(code, teacher_key(code), replace(state, step=shown[1], text=shown[2]),
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


def teacher_panel(code: str, step: int) -> None:
    """The teacher's: the student link and its QR code, how many follow, the teacher's own link (folded: the
    projector shows this panel). Opened to show the QR code, it folds again at the next
    step (a panel of its own at each step): each step fits the screen with the panel folded."""
    where = reachable()
    link = where.link(code, i18n.current())
    with st.expander(tr("Class {code}: the students' link", code=code), expanded=False, key=f"class_link_{step}",
                     icon=":material/wifi_off:" if where.warning else ":material/qr_code_2:"):
        if where.warning:  # where the teacher looks for the link (on the projector's page it took the step's room)
            st.warning(tr(where.warning, address=st.get_option("server.address")), icon=":material/wifi_off:")
        left, right = st.columns([1, 2])
        left.image(qr_png(link), output_format="PNG", alt=qr_alt(link))  # as drawn: a JPEG copy would blur its modules
        right.markdown(tr("Students open this link (or scan the code): their pages follow your steps."))
        right.code(link, language=None, wrap_lines=True)  # copied with its button (a markdown link ran into words)
        with right.popover(tr("Your teacher's link"), icon=":material/key:"):
            st.caption(tr("It moves the class from another screen (a tablet, another browser): keep it to yourself."))
            st.code(f"{link}&{TEACH}={held_key(code)}", language=None, wrap_lines=True)
    following_count(code)


def end_button(code: str, where: object) -> None:
    """The teacher's end of the class, in the lesson's row of buttons where "Start a class" was (in the folded panel
    a new teacher did not find it): asked once more, since it ends every student's class and sits beside Next."""
    with where.popover(tr("End the class"), icon=":material/stop_circle:", width="stretch"):
        st.caption(tr("Every student's page then says the class has ended; the lesson stays open on it."))
        st.button(tr("End it for every student"), on_click=end_class, args=(code,), type="primary")


@st.fragment(run_every=5)
def following_count(code: str) -> None:
    """The teacher's count of followers, read again every 5 s (its own run: in the page's language too)."""
    if fragment_run():
        begin_fragment_run()
    try:
        count = classroom().following(code)
    except InputError as err:
        st.caption(literal(worded(err)))
        return
    if count == 0:
        st.caption(tr("No student follows yet."))
    else:
        st.caption(tr("{n} student follows.", n=count) if count == 1 else tr("{n} students follow.", n=count))


def language_switch() -> None:
    """A student's language, in view on a phone (the sidebar is folded there): the link carries the teacher's; the
    page changes language and stays in the class."""
    key = "_class_language"
    st.session_state[key] = i18n.current()

    def switched() -> None:
        if st.session_state[key] in i18n.LANGUAGES:
            choose("lang", st.session_state[key])

    st.segmented_control(tr("Language"), list(i18n.LANGUAGES), format_func=i18n.LANGUAGES.get, key=key,
                         on_change=switched, label_visibility="collapsed")


def follow(code: str, shown: Class, exploring: bool = False) -> None:
    """A student's page: registered with this process's watcher, which reruns it when the teacher moves (a student
    exploring on their own is rerun too: their page says where the teacher is)."""
    register(shown.code, (shown.step, shown.text))
    if exploring:
        st.caption(tr("Class {code}: you explore on your own; the teacher is on step {step}.",
                      code=literal(shown.code), step=shown.step))


def follow_caption(code: str) -> None:
    """A following student's line about the class (drawn by the page's whole run: a move of the teacher's does not
    change it)."""
    st.caption(tr("You follow class {code}: your page shows the teacher's step. Back and Next take only your page "
                  "elsewhere; “Follow the teacher” brings it back.", code=literal(code)))


def class_step(code: str) -> int | None:
    """The class's step now (from a callback: a student's click), read from the store: what this process's watcher
    last read or heard can be a tick behind a move (a Next clicked just after the teacher's went one step from the
    step before); None while the store fails or once the class has ended (the page's run then says so)."""
    try:
        return classroom().state(code).step
    except InputError:
        return None


def class_part(draw: Callable[[Class], None], mode: Callable[[], object] = lambda: None
               ) -> Callable[[Class, int, object], None]:
    """draw(state) as the part of a follower's page that the watcher reruns alone when only the class's step moved (a
    Streamlit fragment: the sidebar, the model, the sentence and what else the page's whole run drew are not drawn
    again for every follower; issue 84). Its own run reads the class again (a fragment's arguments are the last
    whole run's: it takes what the watcher last read or heard of it), sets up what app.py's run would (the language,
    the run's memo, the charts' height cap `cap`) and ends as a run does (the address, the run's marker); a class
    whose sentence or model changed meanwhile, or a page whose `mode()` is no longer the one its whole run drew
    (`drawn`: a student who went back to following), reruns the whole page."""

    @st.fragment
    def part(state: Class, cap: int, drawn: object = None) -> None:
        if not fragment_run():
            draw(state)
            return
        begin_fragment_run()
        cap_chart_heights(cap)
        try:
            heard = watcher().last_heard(state.code)  # what the watcher reran it for: no read per follower
            now = replace(state, step=heard[0], text=heard[1]) if heard else class_state(state.code)
            if (now.text, now.model, mode()) != (state.text, state.model, drawn):
                st.rerun(scope="app")
            draw(now)
        except PageStopped:  # the page said why it stops (app.py catches it in a whole run)
            pass
        end_run()

    return part
