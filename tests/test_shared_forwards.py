"""Sentences asked for at the same moment share a forward (mha_core.serving.forwards, issue 44)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from mha_core import run
from mha_core.engine.each import run_each
from mha_core.engine.tokens import InputError
from mha_core.serving.computed import text as computed
from mha_core.serving.forwards import MAX_TEXTS, SharedForwards
from mha_core.serving.server import Server
from tests.conftest import wait_for

SENTENCES = [f"The {noun} near the river was {adjective} because it rained." for noun, adjective in
             zip(("bridge", "village", "museum", "garden", "station", "castle", "market", "school", "forest",
                  "library"), ("old", "new", "closed", "quiet", "busy", "empty", "full", "wet", "dark", "open"),
                 strict=True)]


def read_at_once(forwards: SharedForwards, model, texts: list[str]) -> list:
    """Every text asked for from its own thread while the slots are busy (as when a class clicks at once): all
    are waiting before the first slot frees. Each thread's result, or the exception it raised."""
    results: list = [None] * len(texts)

    def ask(i: int) -> None:
        try:
            results[i] = forwards.read(model, texts[i], "auto")
        except Exception as err:  # noqa: BLE001 - a refused text's error is its result here
            results[i] = err

    for _ in range(2):
        forwards.slots.acquire()
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: sum(len(waiting) for waiting in forwards._waiting.values()) >= len(texts), 30,
                    poll_s=0.005), "the threads never asked"
    for _ in range(2):
        forwards.slots.release()
    for thread in threads:
        thread.join(60)
    return results


def test_a_class_asking_at_once_shares_forwards_and_each_gets_its_own_sentence(bundled):
    batches: list[int] = []

    def counted(model, texts, path):
        batches.append(len(texts))
        return run_each(model, texts, path)

    forwards = SharedForwards(threading.BoundedSemaphore(2), counted)
    results = read_at_once(forwards, bundled, SENTENCES)
    assert sorted(batches, reverse=True) == [MAX_TEXTS, len(SENTENCES) - MAX_TEXTS]  # two forwards, not ten
    for result, text in zip(results, SENTENCES, strict=True):
        alone = run(bundled, [text])
        assert result.batch.texts == (text,) and result.lengths == alone.lengths
        np.testing.assert_allclose(result.attention().numpy(), alone.attention().numpy(), atol=1e-5)
    assert not forwards._waiting  # nobody left behind


def test_a_sentence_on_a_quiet_server_is_read_alone_at_once(bundled):
    batches: list[int] = []
    forwards = SharedForwards(threading.BoundedSemaphore(2),
                              lambda model, texts, path: batches.append(len(texts)) or run_each(model, texts, path))
    result = forwards.read(bundled, SENTENCES[0], "auto")
    assert batches == [1] and result.batch.texts == (SENTENCES[0],)


def test_a_refused_sentence_raises_its_own_message_and_a_failed_forward_raises_for_each(bundled):
    forwards = SharedForwards(threading.BoundedSemaphore(2))
    results = read_at_once(forwards, bundled, [SENTENCES[0], "   ", SENTENCES[1]])
    assert isinstance(results[1], InputError) and results[1].code == "text_empty"
    assert results[0].batch.texts == (SENTENCES[0],) and results[2].batch.texts == (SENTENCES[1],)

    def broken(model, texts, path):
        raise RuntimeError("the kernel failed")

    forwards = SharedForwards(threading.BoundedSemaphore(2), broken)
    results = read_at_once(forwards, bundled, SENTENCES[:3])
    assert all(isinstance(r, RuntimeError) for r in results)  # nobody waits forever for a result never set
    assert not forwards._waiting


def test_the_pages_results_come_through_the_shared_forwards_but_pairs_long_texts_and_fused(bundled):
    server = Server()
    result = computed.result_of(server, bundled, (SENTENCES[0],))
    assert server.forwards.forwards == 1 and result.batch.texts == (SENTENCES[0],)
    computed.result_of(server, bundled, (SENTENCES[1],), pairs=(SENTENCES[2],))
    computed.result_of(server, bundled, (SENTENCES[1],), "fused")
    computed.result_of(server, bundled, (" ".join(["word"] * 200),))  # over 512 bytes: alone
    computed.result_of(server, bundled, SENTENCES[:2])
    assert server.forwards.forwards == 1


@pytest.mark.parametrize("path", ["auto", "explicit"])
def test_a_shared_result_is_kept_once_per_sentence(bundled, path):
    server = Server()
    first = computed.result_of(server, bundled, (SENTENCES[3],), path)
    assert computed.result_of(server, bundled, (SENTENCES[3],), path) is first and server.forwards.forwards == 1
