"""Hostile sweep after issue 77, over the wire: a teacher's page served by a real `streamlit run` on loopback, reached
through a proxy that forwards a hostile X-Forwarded-Host. Before: a port byte 0xB2 (Latin-1 '²', as Tornado decodes
headers) raised ValueError on the teacher's page; a 5,000-character host raised segno's DataOverflowError (no QR code
holds it); markup, a user and a port past 65535 became the students' link. Now each gives this machine's network
address and the page draws."""

from __future__ import annotations

import asyncio

import pytest

from deploy.st_client import Session
from mha_core.serving.classroom import STORE_ENV, Classroom
from tests.browser import streamlit_server

pytestmark = [pytest.mark.slow, pytest.mark.long]

HOSTILE = {"port ²": "localhost:\xb2", "5,000 characters": "a" * 5000, "markdown": "evil](javascript:alert(1))",
           "port 99999": "example.org:99999", "userinfo": "user:pw@example.org"}


async def teacher_pages(url: str, code: str, key: str) -> dict[str, tuple[list[str], list[str]]]:
    """Each forwarded host -> (the page's exceptions, its code blocks: the students' and the teacher's links)."""
    pages = {}
    for label, host in {**HOSTILE, "a real name": "school.example:8080"}.items():
        session = Session(url, page="lesson", query={"class": code, "teach": key}, timeout=60,
                          headers={"X-Forwarded-Host": host})
        try:
            page = await asyncio.wait_for(session.open(), 90)
        finally:
            await session.close()
        pages[label] = (page.exceptions, page.codes)
    return pages


def test_a_hostile_forwarded_host_leaves_the_teacher_s_page_whole(tmp_path, monkeypatch):
    monkeypatch.setenv(STORE_ENV, str(tmp_path / "classes.sqlite"))  # the server's store: this test's own
    code, key = Classroom().start("The animal crossed.", "en", "", 1, visitor="teacher")
    with streamlit_server() as url:
        pages = asyncio.run(teacher_pages(url, code, key))
    assert pages["a real name"] == ([], [f"http://school.example:8080/lesson?class={code}&lang=en",
                                        f"http://school.example:8080/lesson?class={code}&lang=en&teach={key}"])
    port = url.rsplit(":", 1)[1]
    for label, (exceptions, links) in pages.items():
        if label != "a real name":
            assert exceptions == [] and len(links) == 2, (label, exceptions)
            assert all(link.startswith("http://") and f":{port}/lesson?class={code}&lang=en" in link for link in links)
            assert not any(part in links[0] for part in ("@", "](", "99999", "aaaa")), (label, links)
