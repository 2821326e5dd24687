"""What every class store holds and says (issue 84): a class's row, the outcome of a start, and the one error a store
that fails raises. serving.classroom keeps the rules (who may move a class, when it has ended); a store keeps rows
and answers in one step what must not race (a start within the limits, a move from the step its page showed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from mha_core.messages import N_, InputError, Worded

IDLE_LIMIT_S = 3 * 3600  # a class nobody moved for three hours has ended
ENDED_KEPT_S = 600  # an ended class's row is kept this long (its students read "has ended"), then deleted
FOLLOWING_S = 10.0  # a student seen this recently follows
UNAVAILABLE = "class_store_unavailable"  # the code of the error a failing store raises (unavailable())
FAILED = N_("its store failed")


@dataclass(frozen=True)
class Row:
    """A class as a store keeps it (the secret only as its SHA-256)."""

    step: int
    text: str
    language: str
    model: str
    moved: float  # when the teacher last moved it (the room's clock)
    ended: float  # when the teacher ended it; 0: open
    secret: str  # hex SHA-256 of the teacher's key
    visitor: str = ""  # the session that started it (its classes count towards MAX_CLASSES_PER_VISITOR)


@dataclass(frozen=True)
class Limits:
    """What a start must fit in, read when it is asked (tests lower serving.classroom's limits)."""

    classes: int  # open classes in the store
    per_visitor: int  # open classes of one visitor


STARTED, TAKEN, FULL, VISITOR_FULL = "started", "taken", "full", "visitor_full"  # what a start came to


def unavailable(reason: str) -> InputError:
    return InputError("class_store_unavailable", N_("Class mode is unavailable just now: {reason}; pages follow again "
                                                    "once it is back."), reason=Worded(reason))


class ClassStore(Protocol):
    """Where classes live. Every method raises unavailable(reason) when the store fails, and heals by itself."""

    location: str  # what MHA_CLASS_STORE says (a file, or a redis:// address)
    pushes_moves: bool  # True: listen() hears every move (no polling); False: a watcher reads the rows it follows

    def create(self, code: str, row: Row, now: float, limits: Limits) -> str:
        """Deletes finished classes, then adds `row` as class `code` within `limits`: STARTED, TAKEN (the code is in
        use), FULL or VISITOR_FULL."""

    def read(self, code: str) -> Row | None: ...

    def update(self, code: str, since: tuple[int, str], to: tuple[int, str], now: float) -> bool:
        """Moves an open class from (step, text) `since` to `to`; False when it no longer shows `since`."""

    def end(self, code: str, now: float) -> None: ...

    def seen(self, code: str, students: list[str], now: float) -> None: ...

    def following(self, code: str, since: float) -> int: ...

    def listen(self, heard: Callable[[str | None], None], lost: Callable[[InputError], None]) -> None:
        """(pushes_moves only) Calls heard(code) for each class moved or ended, until the process ends; lost(error)
        when the store cannot be reached, then heard(None) once it is back (any class may have moved meanwhile)."""
