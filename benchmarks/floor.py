"""bench_classroom.py --floor (issue 44): what one click on the Heads page cannot cost less than, measured side by side
in one run, against the 0.03 s of server CPU per interaction the issue asks for.

- Streamlit alone: benchmarks/floor_app.py draws the elements one Heads run draws (counted by the client), under a
  navigation of as many pages, and computes nothing;
- the Heads page: CPU per interaction for a sentence the server has seen (everything kept) and for a new one;
- in this process, for the same new sentences: the forward alone (mha_core.run on the page's model, one torch
  thread) and spaCy's tags alone (the page opens on the head that links the sentence's pronoun to its noun).

A new sentence costs at least Streamlit's floor + the forward + the tags; the at-once class's interactions are an
opening (a sentence seen) and three new sentences.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

import torch

from benchmarks.serving import ServerGroup, app_server
from deploy.st_client import Session

TARGET = 0.03  # s of server CPU per interaction (issue 44)


async def clicks(url: str, texts: list[str]) -> list[object]:
    """One session: open the default page, then type each text into its sentence box; what each run drew."""
    session = Session(url)
    await session.open()
    drawn = [await session.set_texts({"Sentence": text}) for text in texts]
    await session.close()
    return drawn


def cpu_per_click(group: ServerGroup, texts: list[str], page: str = "",
                  typed: Callable[[str], dict[str, str]] = lambda text: {"Sentence": text}) -> float:
    """Server CPU seconds per text typed into one session of `page` (typed(text): the boxes it fills): the page
    opened and the first text typed before the clock starts, so only the typed texts' runs are counted."""
    async def session_clicks() -> float:
        session = Session(group.url, page=page)
        await session.open()
        await session.set_texts(typed(texts[0]))  # the first click also builds what every click shares
        before = group.cpu_seconds()
        for text in texts[1:]:
            await session.set_texts(typed(text))
        cpu = group.cpu_seconds() - before  # in clock ticks (10 ms): a total over many clicks, then the mean
        await session.close()
        return cpu / (len(texts) - 1)

    return asyncio.run(session_clicks())


def inventory(group: ServerGroup, text: str) -> str:
    """The elements one Heads run draws for a new sentence, as floor_app.py reads them."""
    (drawn,) = asyncio.run(clicks(group.url, [text]))
    return ",".join(f"{kind}={n}" for kind, n in sorted(drawn.elements.items()))


class InProcess:
    """The forward alone and spaCy's tags alone, on the Heads page's English model in this process (one torch
    thread, as each session's forward on the server)."""

    def __init__(self) -> None:
        from mha_core import load_model
        from mha_core.serving.menu import available_models, default_choice

        torch.set_num_threads(1)
        self.model = load_model(default_choice(available_models(), "en").path)

    def seconds(self, texts: list[str]) -> tuple[float, float]:
        """Median seconds per sentence: the forward, the tags."""
        from mha_core import run
        from mha_core.analysis.coref.sentence import tagged_words

        run(self.model, texts[:1])
        tagged_words(texts[0])
        forward, tags = [], []
        for text in texts:
            start = time.perf_counter()
            run(self.model, [text])
            forward.append(time.perf_counter() - start)
            start = time.perf_counter()
            tagged_words(text)
            tags.append(time.perf_counter() - start)
        return statistics.median(forward), statistics.median(tags)


def floor_of_a_click(texts: list[str], rounds: int) -> None:
    """Print the floor and the Heads page's cost, measured in turn `rounds` times (each round types every text, new
    to the server, then again)."""
    here = InProcess()
    floor, new, seen, forward, tags = [], [], [], [], []
    with app_server() as heads:
        asyncio.run(clicks(heads.url, []))  # the model loads
        elements = inventory(heads, texts[0])
        print(f"one Heads run draws: {elements}", flush=True)
        with app_server("benchmarks/floor_app.py", env={"FLOOR_ELEMENTS": elements}) as stub:
            for r in range(rounds):
                fresh = [f"{text} ({r})" for text in texts]
                floor.append(cpu_per_click(stub, fresh))
                new.append(cpu_per_click(heads, fresh))
                seen.append(cpu_per_click(heads, fresh))  # the same sentences again: everything kept
                for values, value in zip((forward, tags), here.seconds(fresh), strict=True):
                    values.append(value)
    floor, new, seen, forward, tags = (statistics.median(v) for v in (floor, new, seen, forward, tags))
    least = floor + forward + tags
    print(f"Streamlit alone, the same elements, nothing computed: {floor * 1e3:.1f} ms per rerun")
    print(f"Heads page: a sentence seen before {seen * 1e3:.1f} ms, a new sentence {new * 1e3:.1f} ms")
    print(f"in this process, per new sentence: the forward {forward * 1e3:.1f} ms, spaCy's tags {tags * 1e3:.1f} ms")
    print(f"a new sentence's floor (Streamlit + forward + tags): {least * 1e3:.1f} ms; the page's own work above it "
          f"(figures, views, widgets' Python): {(new - least) * 1e3:.1f} ms")
    print(f"the at-once class (an opening seen, three new sentences) at its floor: {(seen + 3 * least) / 4 * 1e3:.1f} "
          f"ms per interaction, today {(seen + 3 * new) / 4 * 1e3:.1f} ms (target {TARGET * 1e3:.0f} ms)")
