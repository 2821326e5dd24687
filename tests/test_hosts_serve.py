"""Issue 84: a school on several hosts. Two "hosts" simulated on this machine (deploy/host.sh twice: an app process
each, each with a cache folder of its own) behind one HAProxy (deploy/hosts.py's config) and one Redis: a class
started by a teacher whose page is served by host A is followed by a student whose page host B serves, and the
student's page moves when the teacher presses Next (host B hears the move over Redis: nothing polls), and only the
part of the page that shows the class is sent again (its fragment: not the language switch above it)."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from benchmarks.serving import front_proxy, redis_server, school_host
from deploy.st_client import Interaction, Session
from tests.event_loop import run_async

pytestmark = pytest.mark.serve


async def titled(session: Session, title: str, timeout: float) -> Interaction:
    """The runs the server pushes to `session` until one shows `title`."""
    async def read() -> Interaction:
        while True:
            shown = await session.read_until_finished()
            if any(text.startswith(title) for text in shown.texts):
                return shown

    return await asyncio.wait_for(read(), timeout)


async def a_class_across_hosts(url: str) -> tuple[str, list[str], str, tuple[int, int]]:
    from mha_core.teaching.lesson import STEPS  # torch with it: imported by the test process that runs this test only

    teacher = Session(url, page="lesson", cookie="MHA_WORKER=app1", timeout=240)  # host A's process
    await teacher.open()
    started = await teacher.click("Start a class")
    code = teacher.query["class"]
    student = Session(url, page="lesson", query={"class": code}, cookie="MHA_WORKER=app2", timeout=240)  # host B's
    opened = await student.open()
    moved = await teacher.click("Next")
    followed = await titled(student, f"2. {STEPS[1].title}", timeout=30)
    await teacher.close()
    await student.close()
    assert not (started.exceptions or opened.exceptions or moved.exceptions or followed.exceptions)
    switches = (opened.elements["button_group"], followed.elements["button_group"])  # the student's language switch
    return code, [t for t in opened.texts if t.startswith("1. ")], next(t for t in moved.texts if t[:3] == "2. "), \
        switches


def test_a_class_started_on_host_a_is_followed_by_a_student_on_host_b(tmp_path):
    from mha_core.teaching.lesson import STEPS

    secret = secrets.token_hex(16)  # one for every host: a browser's XSRF cookie is valid on each
    with redis_server(tmp_path) as store, \
            school_host(1, store, tmp_path / "cache-a", secret) as host_a, \
            school_host(1, store, tmp_path / "cache-b", secret) as host_b, \
            front_proxy([host_a, host_b]) as url:
        code, first, teacher_title, switches = run_async(a_class_across_hosts(url))
    assert first == [f"1. {STEPS[0].title}"] and teacher_title == f"2. {STEPS[1].title}"
    assert len(code) == 6 and switches == (1, 0)  # the move reran the student's class part alone
