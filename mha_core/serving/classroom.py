"""A class that follows its teacher through the lesson (issue 47): where the class's step lives, and who may move it.

The state lives in a store every app process reads (serving.classes): one SQLite file under the cache folder
(engine/loading/bundled.cache_root) by default, which make run's one process and make serve's processes behind HAProxy
see; Redis where MHA_CLASS_STORE=redis://… says so (issue 84), which every host of a school sees. A class has
a short code (the student link's ?class=CODE) and a secret only the teacher's address holds: SHA-256 of the secret is
stored, never the secret; moving the class without it is refused. A class ends when the teacher ends it or after
IDLE_LIMIT_S without a move; ended and idle classes are deleted with their students (issue 78).

Classroom is the whole interface (state, move, start, end, seen, following, is_teacher) and holds the rules; a store
(classes.stored.ClassStore) only keeps rows. A store that fails raises InputError `class_store_unavailable` saying why
in one sentence, and heals by itself.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mha_core.engine.loading.bundled import cache_root
from mha_core.engine.pieces import whole_text
from mha_core.messages import N_, InputError, shortened
from mha_core.serving.classes.on_redis import RedisStore
from mha_core.serving.classes.on_sqlite import STORE_NAME, SqliteStore
from mha_core.serving.classes.stored import ENDED_KEPT_S as ENDED_KEPT_S  # the rules' times, said where they apply
from mha_core.serving.classes.stored import (
    FOLLOWING_S,
    FULL,
    IDLE_LIMIT_S,
    STARTED,
    UNAVAILABLE,
    VISITOR_FULL,
    ClassStore,
    Limits,
    Row,
)

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a projector
CODE_LENGTH = 6
MAX_CLASSES = 100  # open classes a server holds (3,000 phones: far beyond what one server's CPUs follow)
MAX_CLASSES_PER_VISITOR = 3  # open classes one visitor (a teacher's session) runs at once
BUSY_S = 2.0  # how long a read or write waits for another process's write before the store says it is locked
STORE_ENV = "MHA_CLASS_STORE"  # where a server's classes live: a file (a test's own, a shared disk), or redis://…
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")  # a Redis server's address (redis-py's forms), not a file


def store_location() -> str:
    """Where this process keeps its classes: $MHA_CLASS_STORE (a file, or a Redis address), else STORE_NAME under the
    cache folder."""
    chosen = os.environ.get(STORE_ENV)
    if chosen and chosen.startswith(REDIS_SCHEMES):
        return chosen
    return str(Path(chosen).expanduser() if chosen else cache_root() / STORE_NAME)


def open_store(location: str | Path, busy_s: float) -> ClassStore:
    """The store at `location`: Redis for a redis:// address, else the SQLite file."""
    if isinstance(location, str) and location.startswith(REDIS_SCHEMES):
        return RedisStore(location, busy_s)
    return SqliteStore(Path(location), busy_s)


@dataclass(frozen=True)
class ClassState:
    code: str
    step: int  # 1-based
    text: str  # the class's sentence
    language: str  # the teacher's interface language
    model: str  # the class's text model (a listed model's name)
    moved: float  # when the teacher last moved it (time.time())


def qr_png(link: str, scale: int = 8) -> bytes:
    """The student link as a QR code (segno), a PNG a phone's camera reads off a projector."""
    import io

    import segno

    out = io.BytesIO()
    segno.make(link, error="m").save(out, kind="png", scale=scale, border=2)
    return out.getvalue()


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate: a wrong key


def checked_step(step: object) -> int:
    """teaching.lesson.checked_step, before a step is stored (imported here: reading a class's step needs no torch)."""
    from mha_core.teaching.lesson import checked_step as lesson_step

    return lesson_step(step)


def canonical(code: object) -> str | None:
    """A class code as stored (upper case, no spaces around), or None when it cannot be one (its length, a character
    outside CODE_ALPHABET): such a value is never looked up nor kept."""
    value = str(code).strip()
    value = value.upper() if value.isascii() else ""  # "ß".upper() is "SS": only ASCII is read as a code
    return value if len(value) == CODE_LENGTH and set(value) <= set(CODE_ALPHABET) else None


def checked_code(code: object) -> str:
    value = canonical(code)
    if value is None:
        raise InputError("class_code_invalid", N_("{given!r} is not a class code: a class code is {length} letters "
                                                  "and digits."), given=shortened(str(code), 3 * CODE_LENGTH + 1),
                         length=CODE_LENGTH)
    return value


def checked_text(text: str) -> str:
    """The class's sentence within the one text limit pages and commands take (engine.tokens.MAX_INPUT_CHARS),
    refused before it is stored or sent to a student."""
    from mha_core.engine.tokens import MAX_INPUT_CHARS  # imported here: reading a class's step needs no torch

    text = whole_text(text)
    if len(text) > MAX_INPUT_CHARS:
        raise InputError("class_text_too_long", N_("The class's sentence has {chars:,} characters; a class takes at "
                                                   "most {limit:,}."), chars=len(text), limit=MAX_INPUT_CHARS)
    return text


class Classroom:
    """The classes of a server, in the store at `location` (default: store_location()); `clock` for tests."""

    def __init__(self, location: str | Path | None = None, clock: Callable[[], float] = time.time,
                 busy_s: float = BUSY_S) -> None:
        self.store = open_store(location or store_location(), busy_s)
        self.location, self.clock = self.store.location, clock

    def start(self, text: str, language: str, model: str = "", step: int = 1, visitor: str = "") -> tuple[str, str]:
        """A new class on `text` (read by `model`) at `step`: its code (for students) and its secret (for the
        teacher only). Refused past MAX_CLASSES open classes, or MAX_CLASSES_PER_VISITOR of one visitor's."""
        text, secret, now = checked_text(text), secrets.token_urlsafe(24), self.clock()
        row = Row(checked_step(step), text, whole_text(language), whole_text(model), now, 0.0, digest(secret),
                  whole_text(visitor))
        for _ in range(20):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            started = self.store.create(code, row, now, Limits(MAX_CLASSES, MAX_CLASSES_PER_VISITOR))
            if started == STARTED:
                return code, secret
            if started == FULL:
                raise InputError("class_limit_server", N_("This server holds {limit} classes, its most: start yours "
                                                          "when one has ended."), limit=MAX_CLASSES)
            if started == VISITOR_FULL:
                raise InputError("class_limit_visitor", N_("You already run {limit} classes: end one before you "
                                                           "start another."), limit=MAX_CLASSES_PER_VISITOR)
        raise RuntimeError("no free class code")  # 20 codes in use of 31**6

    def state(self, code: str) -> ClassState:
        """The class's step and sentence; refused in one sentence when there is no such class or it has ended."""
        code = checked_code(code)
        row = self.store.read(code)
        if row is None:
            raise InputError("no_such_class", N_("There is no class {code} on this server: check the link."),
                             code=code)
        if row.ended or self.clock() - row.moved > IDLE_LIMIT_S:
            raise InputError("class_ended", N_("Class {code} has ended."), code=code)
        return ClassState(code, row.step, row.text, row.language, row.model, row.moved)

    def is_teacher(self, code: str, secret: str | None) -> bool:
        try:
            self.check_teacher(code, secret)
        except InputError as err:
            if err.code == UNAVAILABLE:
                raise
            return False
        return True

    def check_teacher(self, code: str, secret: str | None) -> None:
        code = checked_code(code)
        row = self.store.read(code)
        if row is None or not secret or not hmac.compare_digest(row.secret, digest(str(secret))):
            raise InputError("not_the_teacher", N_("Only the teacher's own link moves class {code}."), code=code)

    def move(self, code: str, secret: str | None, since: ClassState, step: int | None = None,
             text: str | None = None) -> ClassState:
        """The teacher moves the class from `since` (the step and sentence their page shows) to `step` and/or a new
        sentence; anyone else is refused, and so is a move from a step or sentence the class has left (a page that
        had not yet followed another page's move)."""
        code = self.state(code).code
        self.check_teacher(code, secret)
        text = since.text if text is None else checked_text(text)
        step = since.step if step is None else checked_step(step)
        moved = self.store.update(code, (since.step, since.text), (step, text), self.clock())
        now = self.state(code)
        if not moved:
            raise InputError("class_moved_meanwhile", N_("Class {code} moved to step {step} meanwhile (from another "
                                                         "page): this page now shows it."), code=code, step=now.step)
        return now

    def end(self, code: str, secret: str | None) -> None:
        self.check_teacher(code, secret)
        self.store.end(checked_code(code), self.clock())

    def seen(self, code: str, *students: str) -> None:
        """Students' pages checked in (the teacher's count of who follows), in one write."""
        self.store.seen(checked_code(code), [whole_text(student) for student in students], self.clock())

    def following(self, code: str) -> int:
        """Students seen within FOLLOWING_S."""
        return self.store.following(checked_code(code), self.clock() - FOLLOWING_S)
