"""Sentences asked for at the same moment share a forward and a spaCy pipe (mha_core.serving.forwards, issue 44)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from mha_core import run
from mha_core.analysis.coref.sentence import sentence_words, tagged_sentence
from mha_core.engine.each import run_each
from mha_core.engine.tokens import InputError
from mha_core.serving.computed import text as computed
from mha_core.serving.forwards import (
    MAX_BYTES,
    MAX_TEXTS,
    TAGS,
    SharedBatches,
    SharedForwards,
    SharedTags,
    group_of,
)
from mha_core.serving.server import Server
from tests.conftest import wait_for

SENTENCES = [f"The {noun} near the river was {adjective} because it rained." for noun, adjective in
             zip(("bridge", "village", "museum", "garden", "station", "castle", "market", "school", "forest",
                  "library"), ("old", "new", "closed", "quiet", "busy", "empty", "full", "wet", "dark", "open"),
                 strict=True)]


def read_at_once(forwards: SharedForwards, model, texts: list[str]) -> list:
    """Every text asked for from its own thread while a forward runs (as when a class clicks at once): all are
    waiting before the first turn comes. Each thread's result, or the exception it raised."""
    return asked_at_once(forwards, group_of(model, "auto"), lambda text: forwards.read(model, text, "auto"), texts)


def asked_at_once(batches: SharedBatches, group, ask, texts: list[str]) -> list:
    """ask(text) for every text from its own thread while the group's lane is busy: each result or error."""
    results: list = [None] * len(texts)

    def one(i: int) -> None:
        try:
            results[i] = ask(texts[i])
        except Exception as err:  # noqa: BLE001 - a refused text's error is its result here
            results[i] = err

    with batches.lane(group):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
        for thread in threads:
            thread.start()
        assert wait_for(lambda: sum(len(waiting) for waiting in batches._waiting.values()) >= len(texts), 30,
                        poll_s=0.005), "the threads never asked"
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


def test_a_slot_takes_the_waiting_sentences_nearest_its_own_length(bundled):
    """A padded forward costs every sentence the longest one's length: short and long sentences asked for in turn
    are read as a forward of the short ones and a forward of the long ones, not two mixed ones."""
    short = [f"The {noun} was {adjective}." for noun, adjective in zip(
        ("bridge", "garden", "castle", "market", "school", "forest", "museum", "street"),
        ("old", "new", "big", "wet", "dry", "far", "hot", "low"), strict=True)]
    long = [sentence.replace(" because", ", and everyone in the village talked about it all week, because")
            for sentence in SENTENCES[:MAX_TEXTS]]
    batches: list[list[str]] = []

    def counted(model, texts, path):
        batches.append(sorted(texts))
        return run_each(model, texts, path)

    forwards = SharedForwards(threading.BoundedSemaphore(2), counted)
    asked = [text for pair in zip(short, long, strict=True) for text in pair]  # short, long, short, ...
    results = read_at_once(forwards, bundled, asked)
    assert sorted(batches) == sorted([sorted(short), sorted(long)])
    assert [result.batch.texts for result in results] == [(text,) for text in asked]


def test_one_forward_runs_at_a_time_in_a_compute_slot_while_the_next_sentences_gather(bundled):
    """Two batches' worth of sentences asked for at once, with both compute slots free: the forwards run one after
    the other (the second gathers while the first runs), each holding a slot."""
    slots = threading.BoundedSemaphore(2)
    running, most, slots_held = [], [], []

    def counted(model, texts, path):
        running.append(1)
        most.append(len(running))
        time.sleep(0.2)  # long enough for a second forward to start beside it, if one could
        slots_held.append(slots._value)  # free slots while this forward runs, the others waiting
        running.pop()
        return run_each(model, texts, path)

    forwards = SharedForwards(slots, counted)
    texts = SENTENCES + [text.replace("rained", "snowed") for text in SENTENCES[:2 * MAX_TEXTS - len(SENTENCES)]]
    threads = [threading.Thread(target=forwards.read, args=(bundled, text, "auto")) for text in texts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert max(most) == 1 and forwards.batches >= 2 and set(slots_held) == {1}


def test_two_groups_batches_run_side_by_side():
    """Two models' sentences (two groups) do not wait for each other's forwards: a batch of group b starts while
    group a's runs (each group's own batches run one at a time: the test above)."""
    batches, a_running, b_started, seen = SharedBatches(), threading.Event(), threading.Event(), []

    def run_a(texts):
        a_running.set()
        seen.append(b_started.wait(20))  # group b's batch starts meanwhile
        return texts

    def run_b(texts):
        b_started.set()
        return texts

    a = threading.Thread(target=batches.together, args=("a", "first", run_a))
    a.start()
    assert a_running.wait(20)
    assert batches.together("b", "second", run_b) == "second"
    a.join(30)
    assert seen == [True] and batches.batches == 2


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
    assert server.forwards.batches == 1 and result.batch.texts == (SENTENCES[0],)
    computed.result_of(server, bundled, (SENTENCES[1],), pairs=(SENTENCES[2],))
    computed.result_of(server, bundled, (SENTENCES[1],), "fused")
    computed.result_of(server, bundled, (" ".join(["word"] * 200),))  # over 512 bytes: alone
    computed.result_of(server, bundled, SENTENCES[:2])
    assert server.forwards.batches == 1


@pytest.mark.parametrize("path", ["auto", "explicit"])
def test_a_shared_result_is_kept_once_per_sentence(bundled, path):
    server = Server()
    first = computed.result_of(server, bundled, (SENTENCES[3],), path)
    assert computed.result_of(server, bundled, (SENTENCES[3],), path) is first and server.forwards.batches == 1


def test_a_class_s_sentences_asked_at_once_are_tagged_in_one_pipe_each_with_its_own_words():
    tags = SharedTags()
    tagged_sentence.cache_clear()
    words = asked_at_once(tags, TAGS, tags.words, SENTENCES[:MAX_TEXTS])
    assert tags.batches == 1  # one pipe for the eight
    tagged_sentence.cache_clear()
    assert words == [sentence_words(text) for text in SENTENCES[:MAX_TEXTS]]  # each tagged alone
    long = " ".join(SENTENCES) * 2
    assert len(long.encode()) > MAX_BYTES and tags.words(long) == sentence_words(long) and tags.batches == 1  # alone


def test_the_pages_words_come_through_the_shared_tags_and_focus_reads_them(monkeypatch):
    from mha_core.analysis.coref import sentence

    server = Server()
    tagged_sentence.cache_clear()
    monkeypatch.setattr(sentence, "tagged_words", lambda text: pytest.fail(f"{text!r} was tagged alone"))
    assert computed.focus_of(server, SENTENCES[4]) == ("it", "station")  # focus read the shared pipe's words
    monkeypatch.undo()
    assert server.tags.batches == 1 and computed.words_of(server, SENTENCES[4]) == sentence_words(SENTENCES[4])
