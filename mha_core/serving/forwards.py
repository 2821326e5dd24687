"""Forwards of single sentences that many visitors ask for at the same moment, read together (issue 44): a class
typing at once waits for the compute slots anyway, so whoever gets a slot reads every sentence waiting with its
own in one padded forward (engine.each.run_each: each result as the sentence alone gives it), and the others
take theirs. Nobody waits for a batch to fill: a sentence alone on a quiet server is read at once, alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from mha_core.engine.each import run_each, shares_a_forward
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError

MAX_TEXTS = 8  # sentences in one forward
MAX_BYTES = 512  # a sentence of more UTF-8 bytes is read alone (a shared forward's maps grow with its longest)
MAX_BATCH_BYTES = 2048  # sentences in one forward, together (engine.each also refuses a batch over the budget)
SHARED_PATHS = ("auto", "explicit")  # the paths a shared forward reads a sentence on (fused: a long text's own)
RunEach = Callable[[LoadedModel, list[str], str], list[AttentionResult | InputError]]


@dataclass
class Asked:
    text: str
    done: threading.Event = field(default_factory=threading.Event)
    taken: bool = False  # in a forward (someone's slot reads it)
    result: AttentionResult | BaseException | None = None


def shareable(model: LoadedModel, text: str, path: str) -> bool:
    """A sentence that may share a forward: a text model's (engine.each.shares_a_forward), short, on a path of
    SHARED_PATHS."""
    return path in SHARED_PATHS and shares_a_forward(model) and len(text.encode()) <= MAX_BYTES


class SharedForwards:
    """read(model, text, path): the result of run(model, [text], path), read together with the sentences asked for
    meanwhile; at most `slots`' count of forwards at once."""

    def __init__(self, slots: threading.Semaphore, run_together: RunEach = run_each) -> None:
        self.slots, self.run_together = slots, run_together
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, list[Asked]] = {}  # (model, path) -> sentences not yet taken, oldest first
        self.forwards = 0  # how many forwards ran (for tests and the benchmark)

    def read(self, model: LoadedModel, text: str, path: str) -> AttentionResult:
        asked, group = Asked(text), (str(model.model_dir), path)
        with self._lock:
            self._waiting.setdefault(group, []).append(asked)
        with self.slots:
            with self._lock:
                batch = [] if asked.taken else self._take(group, asked)
            if batch:
                self._run(model, path, batch)
        asked.done.wait()  # taken by another slot's forward: it sets every result it reads
        if isinstance(asked.result, BaseException):  # refused (its own message), or the forward failed
            raise asked.result
        return asked.result

    def _take(self, group: Hashable, asked: Asked) -> list[Asked]:
        """`asked` and the oldest others waiting, up to MAX_TEXTS and MAX_BATCH_BYTES (under the lock)."""
        batch, size = [asked], len(asked.text.encode())
        for other in self._waiting[group]:
            grown = size + len(other.text.encode())
            if other is not asked and len(batch) < MAX_TEXTS and grown <= MAX_BATCH_BYTES:
                batch.append(other)
                size = grown
        for one in batch:
            one.taken = True
        rest = [other for other in self._waiting[group] if not other.taken]
        if rest:
            self._waiting[group] = rest
        else:
            del self._waiting[group]
        return batch

    def _run(self, model: LoadedModel, path: str, batch: list[Asked]) -> None:
        try:
            results = self.run_together(model, [one.text for one in batch], path)
            with self._lock:
                self.forwards += 1
        except BaseException as err:  # noqa: BLE001 - every sentence of the forward gets its failure, then it rises
            results = [err] * len(batch)
            raise
        finally:
            for one, result in zip(batch, results, strict=True):
                one.result = result
                one.done.set()
