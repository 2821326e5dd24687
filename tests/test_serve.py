"""`make serve`: app processes behind HAProxy (deploy/), driven through Streamlit's websocket protocol."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from benchmarks.serving import proxy_group
from deploy.st_client import Session
from tests.event_loop import run_async

pytestmark = pytest.mark.serve

SENTENCES = [f"Student {name} wrote that the river near the {place} floods every spring."
             for name, place in zip(("Ada", "Ben", "Cleo", "Dev", "Eli", "Fay"),
                                    ("village", "school", "castle", "farm", "bridge", "market"), strict=True)]


def reversed_words(text: str) -> str:
    return " ".join(reversed(text.split()))


def pieces(text: str) -> int:
    """The bundled encoder's word pieces of `text` (torch and transformers imported here: the serving tier's test
    processes each collect every test file of the tier, and only this one needs them)."""
    from transformers import AutoTokenizer

    from mha_core.engine.loading.model import bundled_model_dir

    tokenizer = AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True)
    return len(tokenizer(text)["input_ids"])


async def visit(url: str, text: str, cookie: str = "") -> tuple[str, str, str, str]:
    """Open the Heads page with `text` in the URL, then type it again reversed; what came back."""
    session = Session(url, query={"text": text, "layer": "2", "head": "5"}, cookie=cookie, timeout=240)
    opened = await session.open()
    typed = await session.set_text("Sentence", reversed_words(text))
    await session.close()
    assert not opened.exceptions and not typed.exceptions and not opened.errors and not typed.errors
    caption = next(t for t in typed.texts if "word pieces · path" in t)
    return session.served_by, opened.text_values["Sentence"], caption, "\n".join(opened.texts)


async def class_at(url: str) -> list[tuple[str, str, str, str]]:
    return await asyncio.gather(*(visit(url, text) for text in SENTENCES))


async def teacher_opens(worker_url: str) -> None:
    """The first visit of a process loads the model (as a teacher does before the class)."""
    session = Session(worker_url, timeout=240)
    await session.open()
    await session.close()


def resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024


def test_a_class_through_the_proxy():
    """Issue 19: every process loads its model before the proxy lets anyone in (before, the first students waited
    10-16 s). Then sessions through the proxy keep their own sentence and use both processes. One group of two
    processes for both checks, started once."""
    with proxy_group(2) as group:
        sizes = [resident_mb(pid) for pid in group.pids]  # nobody has visited through the proxy yet
        assert all(size > 400 for size in sizes), sizes  # torch, the model and the example's views: in memory
        assert len(group.pids) == 2
        for worker_url in group.worker_urls:
            run_async(teacher_opens(worker_url))
        visits = run_async(class_at(group.url))
        served = {cookie for cookie, *_ in visits}
        assert served == {"MHA_WORKER=app1", "MHA_WORKER=app2"}  # both processes served sessions
        for text, (_, shown, caption, _) in zip(SENTENCES, visits, strict=True):
            assert shown == text  # each student got their own sentence back
            assert re.match(rf"{pieces(reversed_words(text))} word pieces", caption)  # ...and what they typed
        # The same URL on the other process shows the same page: the view lives in the URL.
        for worker in ("app1", "app2"):
            cookie, shown, _, page_texts = run_async(visit(group.url, SENTENCES[0], f"MHA_WORKER={worker}"))
            assert cookie == "" and shown == SENTENCES[0]  # a sticky browser gets no new cookie
            assert "Attention heads" in page_texts
