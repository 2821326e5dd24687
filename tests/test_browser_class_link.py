"""Issue 77 in Chromium: a class's phones can reach its link. The app listens on every interface, as a classroom's
server does (the browser tier's one server does: tests/browser.RUN_SERVER_ADDRESS); a teacher reaches it at 127.0.0.1
(their own laptop) and at this machine's network address, starts a class, and the QR code on the projector decodes
(zxing-cpp) to this machine's network address, the server's port and the class's code, an address a second machine
could open (and a phone opening it follows the class). The teacher's key is never in the address bar a projector
shows: the session and a cookie hold it, and a reload is still the teacher's. Only this machine's own addresses are
ever opened."""

from __future__ import annotations

import io
from urllib.parse import parse_qs, urlparse

import pytest

from mha_core.serving.reach import is_loopback
from tests.browser import ARTIFACTS, PHONE_AGENT, browser_contexts, wait_idle

pytestmark = pytest.mark.browser


def query(url: str) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlparse(url).query).items()}


UNCOVERED = """picture => new Promise((done, fail) => {
    const spots = [[0.5, 0.5], [0.02, 0.02], [0.02, 0.98], [0.5, 0.98], [0.98, 0.98]];  // top right: its toolbar
    const covered = () => { const r = picture.getBoundingClientRect();
        return r.width < 50 || spots.some(([x, y]) =>
            document.elementFromPoint(r.left + x * r.width, r.top + y * r.height) !== picture); };
    let clear = 0, frames = 0;
    const look = () => { clear = covered() ? 0 : clear + 1; frames += 1;
        if (clear >= 10) done(); else if (frames > 600) fail(new Error("the QR code stays covered"));
        else requestAnimationFrame(look); };
    requestAnimationFrame(look); })"""


def decoded_qr(page: object) -> str:
    """The text of the QR code the teacher's panel shows, read off the page's pixels as a phone's camera would."""
    import zxingcpp
    from PIL import Image

    picture = page.locator("[data-testid='stExpanderDetails'] img").first
    picture.wait_for(timeout=30_000)
    picture.evaluate("picture => picture.decode()")  # its pixels loaded (a screenshot before had caught none)
    picture.scroll_into_view_if_needed()
    # The expander still opening laid the text under it over the picture's lower part (a shot in three had no code
    # to read): wait until the picture is what the screen shows at its centre and near three corners (the fourth
    # holds its toolbar), ten frames running.
    page.mouse.move(0, 0)  # no hover toolbar over the code
    picture.evaluate(UNCOVERED)
    shot = picture.screenshot(animations="disabled")
    found = zxingcpp.read_barcodes(Image.open(io.BytesIO(shot)))
    if len(found) != 1:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "class-qr.png").write_bytes(shot)
    assert len(found) == 1, (found, ARTIFACTS / "class-qr.png")
    return found[0].text


@pytest.mark.long
def test_the_qr_code_opens_the_class_from_another_machine_whichever_address_the_teacher_used(app_url):
    from streamlit import net_util

    network_ip = net_util.get_internal_ip()  # as Streamlit's "Network URL" is found
    assert network_ip and not is_loopback(network_ip), network_ip
    with browser_contexts() as new_page:
        port = urlparse(app_url).port
        for teacher_at, again in ((f"http://127.0.0.1:{port}", True), (f"http://{network_ip}:{port}", False)):
            teacher = new_page(viewport={"width": 1920, "height": 1080})  # a projector: a context of its own
            code, link = start_and_scan(teacher, teacher_at, again)
            students_link = urlparse(link)
            assert (students_link.hostname, students_link.port) == (network_ip, port), link  # not loopback
            assert students_link.path == "/lesson" and query(link) == {"class": code, "lang": "en"}, link
            phone = new_page(viewport={"width": 390, "height": 844}, user_agent=PHONE_AGENT, is_mobile=True,
                             has_touch=True)  # the second machine: it opens what the QR code says
            phone.goto(link)
            wait_idle(phone, timeout=240_000)
            phone.get_by_text(f"You follow class {code}").wait_for(timeout=30_000)
            assert "End the class" not in phone.locator("body").inner_text()


def start_and_scan(teacher: object, url: str, reload: bool) -> tuple[str, str]:
    """Starts a class on the teacher's page at `url`: its code and the students' link its QR code gives; checks that
    the key stays out of the address and off the projected page, and (`reload`: the first address only, as it does
    not depend on the address) that a reload is still the teacher's page."""
    teacher.goto(f"{url}/lesson")
    wait_idle(teacher, timeout=240_000)
    teacher.get_by_role("button", name="Start a class").click()
    wait_idle(teacher, timeout=120_000)
    code = query(teacher.url)["class"]
    assert "teach" not in query(teacher.url), teacher.url  # the projector's address bar
    teacher.get_by_text(f"Class {code}: the students' link").click()
    link = decoded_qr(teacher)
    assert link in teacher.locator("body").inner_text()  # the link under it says the same
    assert "teach=" not in teacher.locator("body").inner_text()  # the teacher's own link stays folded
    assert "server listens only on this computer" not in teacher.locator("body").inner_text()  # 0.0.0.0: no warning
    cookies = {cookie["name"]: cookie["value"] for cookie in teacher.context.cookies()}
    assert f"mha_teach_{code}" in cookies and len(cookies[f"mha_teach_{code}"]) >= 32
    if not reload:
        return code, link
    teacher.reload()  # a new session: the browser's cookie keeps the teacher's page
    wait_idle(teacher, timeout=120_000)
    teacher.get_by_role("button", name="Next").click()
    wait_idle(teacher, timeout=120_000)
    teacher.get_by_role("button", name="End the class").wait_for(timeout=30_000)  # still the class's teacher
    assert "teach" not in query(teacher.url) and query(teacher.url)["class"] == code
    return code, link
