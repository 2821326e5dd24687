"""Helpers for browser tests: a real `streamlit run` on a free port, Debian's Chromium via Playwright."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.serving import app_server

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Debian's chromium-headless-shell (`make chromium` installs it): Chromium's own headless build, the same Blink and V8
# without the full browser's layers, drives every page but the camera's (it has no media devices: getUserMedia says
# "Not supported"). The browser tier on 2 cores took 92 s and 165 busy core-seconds with it, 105 s and 191 with the
# full browser for every page (one run after the other). The full browser stands in where it is missing.
HEADLESS_SHELL = shutil.which("chromium-headless-shell") or CHROMIUM
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]


@contextlib.contextmanager
def streamlit_server(script: str = "app.py", timeout: float = 90, address: str = "127.0.0.1") -> Iterator[str]:
    """Start `streamlit run` listening on `address` (loopback unless given); yield its base URL (loopback's); stop it
    afterwards."""
    with app_server(script, timeout, address=address) as group:
        yield group.url


# The run's server listens on every interface, as a classroom's does: the test of the class's QR code opens it at
# this machine's network address too (it started a server of its own for that: 27 s of the tier's 195 on 2 cores).
# Only this machine's own addresses are ever opened.
RUN_SERVER_ADDRESS = "0.0.0.0"


SERVER_FILE = "app-server.url"  # the run's server's address, while it serves
USERS = "app-server-users"  # one empty file per test process using it, named by its process id
LAST_USER_WAIT_S = 900  # at most, for the other test processes to finish (the tier's own limit ends a hung one)


@contextlib.contextmanager
def server_for_the_run(shared: Path | None) -> Iterator[str]:
    """The browser tier's one `streamlit run` (issue 44), shared by its test processes: `shared` is a folder every
    process of the run sees (pytest-xdist's base temporary folder); None: a server of this process's own. The first
    process to ask starts it; the others read its address. Each registers while it tests; the one that started it
    stops it once every other user has left or its process has gone. (A server each loaded the models and computed
    the first pages twice: the tier kept 2 cores busy for 204 core-seconds then, 183-194 with one: measured.)"""
    if shared is None:
        with streamlit_server(address=RUN_SERVER_ADDRESS) as url:
            yield url
        return
    users = shared / USERS
    users.mkdir(exist_ok=True)
    me = users / str(os.getpid())
    with run_lock(shared):
        known = shared / SERVER_FILE
        started = None if known.is_file() else contextlib.ExitStack()
        if started is not None:
            known.write_text(started.enter_context(streamlit_server(address=RUN_SERVER_ADDRESS)))
        url = known.read_text()
        me.touch()
    try:
        yield url
    finally:
        me.unlink(missing_ok=True)
        if started is not None:
            wait_for_last_user(shared)
            started.close()


def wait_for_last_user(shared: Path) -> None:
    """Until no other test process uses the server (its file gone, or its process), then the server's file goes
    under the lock: a process that asks after that starts a server of its own."""
    deadline = time.monotonic() + LAST_USER_WAIT_S
    while True:
        with run_lock(shared):
            if not any(alive(int(f.name)) for f in (shared / USERS).iterdir()) or time.monotonic() > deadline:
                (shared / SERVER_FILE).unlink(missing_ok=True)
                return
        time.sleep(0.5)


def alive(pid: int) -> bool:
    """Whether process `pid` runs: a process that has ended but that its parent has not yet waited for (a zombie:
    pytest-xdist's workers are waited for at the end of the run) has gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@contextlib.contextmanager
def run_lock(shared: Path) -> Iterator[None]:
    with (shared / "app-server.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


PHONE_AGENT = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
               "Version/17.0 Mobile/15E148 Safari/604.1")


# Chromium's fake camera (a moving test pattern) for every page: only a page that asks for the camera sees it.
FAKE_CAMERA = ["--use-fake-device-for-media-stream"]
# One renderer process for a site's pages within a context: a page opened where a page of the app is open already
# finds the app's scripts compiled (a new renderer compiles Streamlit's and Plotly's anew: 1-3 s of CPU a page).
ONE_PROCESS_A_SITE = ["--process-per-site"]
_DRIVER: dict[str, object] = {}  # "playwright": this test process's one Playwright driver
_BROWSERS: dict[str, object] = {}  # executable path -> this test process's browser of that kind
_IDLE: dict[str, list[tuple[object, object]]] = {}  # context options -> (context, a page of it kept on the app)


def shared_browser(camera: bool = False) -> object:
    """This test process's one headless Chromium (issue 44: one browser a worker, a context per visitor; `camera`:
    the full Chromium, whose fake camera plays), started at the first call and again if it has gone;
    close_shared_browser ends them at the end of the session (tests/conftest.py)."""
    executable = CHROMIUM if camera else HEADLESS_SHELL
    browser = _BROWSERS.get(executable)
    if browser is None or not browser.is_connected():
        if "playwright" not in _DRIVER:
            from playwright.sync_api import sync_playwright

            _DRIVER["playwright"] = sync_playwright().start()
        browser = _DRIVER["playwright"].chromium.launch(executable_path=executable,
                                                        args=CHROMIUM_ARGS + FAKE_CAMERA + ONE_PROCESS_A_SITE)
        _BROWSERS[executable] = browser
    return browser


def close_shared_browser() -> None:
    _IDLE.clear()
    for browser in _BROWSERS.values():
        if browser.is_connected():
            browser.close()
    _BROWSERS.clear()
    driver = _DRIVER.pop("playwright", None)
    if driver is not None:
        driver.stop()


def visitor_page(browser: object, key: str, options: dict) -> tuple[object, object, object | None]:
    """(context, a new page, the page kept open since the context's last visitor or None): a context with these
    options (`key`) that an earlier test left (no cookies, no storage, its renderer warm), else a new one."""
    idle = _IDLE.get(key, [])
    while idle:
        context, kept = idle.pop()
        with contextlib.suppress(Exception):  # a context that broke since is not reused
            return context, context.new_page(), kept
    context = browser.new_context(**options)
    return context, context.new_page(), None


def left_clean(context: object, page: object) -> bool:
    """Clear what a visitor leaves in a context (cookies, its origin's storage, its session: the page goes to the
    server's health check, on the same site, so the renderer stays) for the next visitor with the same options."""
    try:
        if len(context.pages) != 1 or not page.url.startswith("http"):
            return False
        origin = "/".join(page.url.split("/")[:3])
        page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
        page.goto(f"{origin}/_stcore/health", timeout=10_000)
        context.clear_cookies()
        return True
    except Exception:  # noqa: BLE001 - a page that crashed or hangs: its context is closed, not reused
        return False


@contextlib.contextmanager
def browser_contexts() -> Iterator[object]:
    """new_page(**context options): a page of the shared Chromium in a context of its own (its viewport, locale,
    user agent, touch, permissions: a visitor of their own, with their own cookies and session). Afterwards each
    context, cleared, waits for the next visitor with the same options, one page of it left open on the app's site so
    that the next page finds the app's scripts compiled; a context that cannot be cleared is closed."""
    made = []

    def new_page(viewport: dict | None = None, **options: object) -> object:
        """The viewport is the page's own (Playwright sizes the screen with it, as the context's option does), so
        visitors of one kind share contexts whatever their window."""
        key = json.dumps(options, sort_keys=True, default=str)  # a camera's options: the full Chromium's contexts
        browser = shared_browser(camera="camera" in options.get("permissions", ()))
        context, page, kept = visitor_page(browser, key, options)
        if viewport is not None:
            page.set_viewport_size(viewport)
        made.append((key, context, page, kept))
        return page

    try:
        yield new_page
    finally:
        for key, context, page, kept in made:
            with contextlib.suppress(Exception):
                if kept is not None:
                    kept.close()
            if left_clean(context, page):
                _IDLE.setdefault(key, []).append((context, page))
            else:
                with contextlib.suppress(Exception):  # a context of a browser that crashed is gone already
                    context.close()


@contextlib.contextmanager
def chromium_pages(count: int = 1, width: int = 1400, height: int = 1800, phone: bool = False,
                   camera: bool = False) -> Iterator[list]:
    """`count` pages of the shared headless Debian Chromium, each its own visitor; `phone`: a phone's user agent
    and touch; `camera`: the camera allowed without asking (Chromium's fake one)."""
    extra = {"user_agent": PHONE_AGENT, "is_mobile": True, "has_touch": True} if phone else {}
    if camera:
        extra["permissions"] = ["camera"]
    with browser_contexts() as new_page:
        yield [new_page(viewport={"width": width, "height": height}, **extra) for _ in range(count)]


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 1800, phone: bool = False, camera: bool = False
                  ) -> Iterator[object]:
    with chromium_pages(1, width, height, phone, camera) as pages:
        yield pages[0]


def commit_text(page: object, label: str, text: str) -> None:
    """Type into a Streamlit text area and submit it (Ctrl+Enter), as a user would."""
    box = page.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Control+Enter")


def open_with_sentence(page: object, url: str, text: str) -> None:
    """Open the app's first page, type `text` into the sentence box and wait for the run."""
    page.goto(url)
    wait_idle(page, 90_000)  # the first run over: the next wait is for the sentence's
    commit_text(page, "Sentence", text)
    wait_idle(page)


RUN_FINISHED = """([session, run]) => { const marker = document.querySelector('.mha-run');
    return marker && (marker.dataset.session !== session || +marker.dataset.run > run)
        && !document.querySelector('[data-testid="stStatusWidget"]'); }"""
RUN_MARKER = "() => { const m = document.querySelector('.mha-run'); return [m.dataset.session, +m.dataset.run]; }"


def save_picture(page: object, path: Path) -> int:
    """The page's screen as a PNG of at most 256 colours (a screenshot's millions of colours took ten times the bytes
    for the same look): a picture the docs and the README show. Its size in bytes."""
    from PIL import Image

    screen = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    screen.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)
    return path.stat().st_size


def wait_idle(page: object, timeout: float = 60_000) -> None:
    """Wait until the run the last step started has finished: the app's last element (views/_visit.run_marker)
    names a new session (a page opened or reloaded) or a higher count of finished runs than the last wait saw, and
    Streamlit shows no running status. Every step before a wait must start a run (else the wait times out)."""
    seen = getattr(page, "_mha_seen_run", ["", 0])
    page.wait_for_function(RUN_FINISHED, arg=seen, timeout=timeout)
    page._mha_seen_run = page.evaluate(RUN_MARKER)


def choose_option(page: object, label: str, option_text: str) -> None:
    """Open a Streamlit selectbox by its label and click the option containing `option_text`."""
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option").filter(has_text=option_text).first.click()


PLOT_POINT = """([which, x, y]) => { const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const gd = which < 0 ? plots[plots.length + which] : plots[which];
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
    return [r.left + xa._offset + xa.l2p(x), r.top + ya._offset + ya.l2p(y)]; }"""


def data_point_pixel(page: object, x: float, y: float, which: int = -1) -> tuple[float, float]:
    """The page pixel of data point (x, y) on plot `which` (0: the first, -1: the last), from Plotly's own axes:
    a click lands on a point, never a guessed spot."""
    left, top = page.evaluate(PLOT_POINT, [which, x, y])
    return left, top
