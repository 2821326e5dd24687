"""Work on single sentences that many visitors ask for at the same moment, done together (issue 44): a class typing
at once waits anyway, so whoever gets a turn does every sentence waiting with its own in one go, and the others take
theirs. Nobody waits for a batch to fill: a sentence alone on a quiet server is read at once, alone.

- Forwards (SharedForwards): one padded forward (engine.each.run_each: each result as the sentence alone gives it),
  one forward of a model at a time in a lane of its own, in one of the compute slots. While it runs, the next
  sentences gather for the next one: two at once read smaller batches and streamed the model's weights twice through
  a cache that holds one copy (a class of 30 at once: about 10 % more CPU an interaction, the same p95). A padded
  forward costs every sentence the longest one's length, so a turn takes the waiting sentences nearest its own in
  length (oldest first among equals): 79 % of the pieces read were real instead of 73 %. Nobody is passed over for
  good: each sentence's own thread takes it with its neighbours when its turn comes.
- Parts of speech (SharedTags): one spaCy pipe (analysis.coref.sentence.tag_together), one pipe at a time in a lane
  of its own. Tagging a class's new sentences one by one took 3.7 ms of CPU an interaction, together 2.6 ms, and
  the whole interaction about 10 % less (fewer threads running numpy at once); two lanes read smaller batches and
  saved nothing (benchmarks/bench_classroom.py --at-once).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mha_core.analysis.coref.sentence import Word, sentence_words, tag_together
from mha_core.engine.each import run_each, shares_a_forward
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError

MAX_TEXTS = 8  # sentences in one go
MAX_BYTES = 512  # a sentence of more UTF-8 bytes is read alone (a shared forward's maps grow with its longest)
MAX_BATCH_BYTES = 2048  # sentences in one go, together (engine.each also refuses a batch over the budget)
SHARED_PATHS = ("auto", "explicit")  # the paths a shared forward reads a sentence on (fused: a long text's own)
RunEach = Callable[[LoadedModel, list[str], str], list[AttentionResult | InputError]]
TAGS = "tags"  # SharedTags' one group: every sentence shares the spaCy pipeline
RunTogether = Callable[[list[str]], Sequence[Any]]  # texts -> each one's result (or the exception it raised)


@dataclass
class Asked:
    text: str
    size: int  # the text's UTF-8 bytes (its length, as a forward's padding sees it)
    done: threading.Event = field(default_factory=threading.Event)
    taken: bool = False  # in a batch (someone's turn does it)
    result: Any = None  # what run_together gave this text, or the exception it raised


def shareable(model: LoadedModel, text: str, path: str) -> bool:
    """A sentence that may share a forward: a text model's (engine.each.shares_a_forward), short, on a path of
    SHARED_PATHS."""
    return path in SHARED_PATHS and shares_a_forward(model) and len(text.encode()) <= MAX_BYTES


def group_of(model: LoadedModel, path: str) -> tuple[str, str]:
    """The sentences that may share a forward: one model's, on one path."""
    return str(model.model_dir), path


class SharedBatches:
    """together(group, text, run_together): run_together(texts)[i] for this text, done with the texts of the same
    group asked for meanwhile; one batch of a group at a time (the group's lane: two models' forwards may run side
    by side), each also in one of `slots` where given."""

    def __init__(self, slots: threading.Semaphore | None = None) -> None:
        self.slots = slots or contextlib.nullcontext()
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, list[Asked]] = {}  # group -> texts not yet taken, oldest first
        self._lanes: dict[Hashable, threading.Semaphore] = {}  # group -> its lane
        self.batches = 0  # how many batches ran (for tests and the benchmark)

    def lane(self, group: Hashable) -> threading.Semaphore:
        with self._lock:
            return self._lanes.setdefault(group, threading.BoundedSemaphore(1))

    def together(self, group: Hashable, text: str, run_together: RunTogether) -> Any:
        asked = Asked(text, len(text.encode()))
        with self._lock:
            self._waiting.setdefault(group, []).append(asked)
        with self.lane(group), self.slots:  # the lane first: nobody holds a compute slot while waiting for it
            with self._lock:
                batch = [] if asked.taken else self._take(group, asked)
            if batch:
                self._run(run_together, batch)
        asked.done.wait()  # taken by another turn: it sets every result it reads
        if isinstance(asked.result, BaseException):  # refused (its own message), or the batch failed
            raise asked.result
        return asked.result

    def _take(self, group: Hashable, asked: Asked) -> list[Asked]:
        """`asked` and the others waiting nearest to it in length (the oldest first among equals), up to MAX_TEXTS
        and MAX_BATCH_BYTES (under the lock)."""
        batch, size = [asked], asked.size
        others = sorted((o for o in self._waiting[group] if o is not asked), key=lambda o: abs(o.size - asked.size))
        for other in others:
            if len(batch) < MAX_TEXTS and size + other.size <= MAX_BATCH_BYTES:
                batch.append(other)
                size += other.size
        for one in batch:
            one.taken = True
        rest = [other for other in self._waiting[group] if not other.taken]
        if rest:
            self._waiting[group] = rest
        else:
            del self._waiting[group]
        return batch

    def _run(self, run_together: RunTogether, batch: list[Asked]) -> None:
        try:
            results = run_together([one.text for one in batch])
            with self._lock:
                self.batches += 1
        except BaseException as err:  # noqa: BLE001 - every text of the batch gets its failure, then it rises
            results = [err] * len(batch)
            raise
        finally:
            for one, result in zip(batch, results, strict=True):
                one.result = result
                one.done.set()


class SharedForwards(SharedBatches):
    """read(model, text, path): the result of run(model, [text], path), read together with the sentences asked for
    meanwhile; one forward of a model at a time, in one of the compute `slots`."""

    def __init__(self, slots: threading.Semaphore, run_together: RunEach = run_each) -> None:
        super().__init__(slots)
        self.run_each = run_together

    def read(self, model: LoadedModel, text: str, path: str) -> AttentionResult:
        return self.together(group_of(model, path), text, lambda texts: self.run_each(model, texts, path))


class SharedTags(SharedBatches):
    """words(text): sentence_words(text), the short sentences asked for meanwhile tagged in the same pipe."""

    def words(self, text: str) -> list[Word]:
        if len(text.encode()) > MAX_BYTES:
            return sentence_words(text)  # alone: nobody waits behind a long text
        return self.together(TAGS, text, tag_together)
