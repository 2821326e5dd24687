"""A class that follows its teacher through the lesson (issue 47): where the class's step lives, and who may move it.

The state is one SQLite file under the cache folder (engine/loading/bundled.cache_root), which every app process of
one machine reads: make run's one process and make serve's processes behind HAProxy see the same step. A class has
a short code (the student link's ?class=CODE) and a secret only the teacher's address holds: SHA-256 of the secret is
stored, never the secret; moving the class without it is refused. A class ends when the teacher ends it or after
IDLE_LIMIT_S without a move.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mha_core.engine.loading.bundled import cache_root
from mha_core.messages import N_, InputError

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a projector
CODE_LENGTH = 6
IDLE_LIMIT_S = 3 * 3600  # a class nobody moved for three hours has ended
FOLLOWING_S = 10.0  # a student seen this recently follows
SCHEMA = """
create table if not exists classes (code text primary key, secret text not null, step integer not null,
    text text not null, language text not null, model text not null, moved real not null,
    ended integer not null default 0);
create table if not exists students (code text not null, student text not null, seen real not null,
    primary key (code, student));
"""


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
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class Classroom:
    """The classes of one machine, in `path` (default: classes.sqlite under the cache folder); `clock` for tests."""

    def __init__(self, path: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.path = path or cache_root() / "classes.sqlite"
        self.clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.connected() as db:
            db.execute("pragma journal_mode=wal")  # readers never wait for the teacher's write (kept by the file)
            db.executescript(SCHEMA)

    @contextlib.contextmanager
    def connected(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction (committed, or rolled back on an error), closed after it."""
        db = sqlite3.connect(self.path, timeout=10)
        try:
            with db:
                yield db
        finally:
            db.close()

    def start(self, text: str, language: str, model: str = "", step: int = 1) -> tuple[str, str]:
        """A new class on `text` (read by `model`) at `step`: its code (for students) and its secret (for the
        teacher only)."""
        secret = secrets.token_urlsafe(24)
        with self.connected() as db:
            for _ in range(20):
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                try:
                    db.execute("insert into classes values (?, ?, ?, ?, ?, ?, ?, 0)",
                               (code, digest(secret), step, text, language, model, self.clock()))
                    return code, secret
                except sqlite3.IntegrityError:  # a code in use: draw again
                    continue
        raise RuntimeError("no free class code")

    def state(self, code: str) -> ClassState:
        """The class's step and sentence; refused in one sentence when there is no such class or it has ended."""
        with self.connected() as db:
            row = db.execute("select step, text, language, model, moved, ended from classes where code = ?",
                             (str(code).upper()[:CODE_LENGTH],)).fetchone()
        if row is None:
            raise InputError("no_such_class", N_("There is no class {code} on this server: check the link."),
                             code=str(code)[:CODE_LENGTH])
        step, text, language, model, moved, ended = row
        if ended or self.clock() - moved > IDLE_LIMIT_S:
            raise InputError("class_ended", N_("Class {code} has ended."), code=code)
        return ClassState(str(code).upper(), int(step), text, language, model, float(moved))

    def is_teacher(self, code: str, secret: str | None) -> bool:
        try:
            self.check_teacher(code, secret)
        except InputError:
            return False
        return True

    def check_teacher(self, code: str, secret: str | None) -> None:
        with self.connected() as db:
            row = db.execute("select secret from classes where code = ?", (str(code).upper(),)).fetchone()
        if row is None or not secret or not hmac.compare_digest(row[0], digest(secret)):
            raise InputError("not_the_teacher", N_("Only the teacher's own link moves class {code}."),
                             code=str(code)[:CODE_LENGTH])

    def move(self, code: str, secret: str | None, step: int | None = None, text: str | None = None) -> ClassState:
        """The teacher moves the class to `step` (and/or a new sentence); anyone else is refused."""
        self.state(code)
        self.check_teacher(code, secret)
        with self.connected() as db:
            if step is not None:
                db.execute("update classes set step = ?, moved = ? where code = ?", (int(step), self.clock(),
                                                                                     code.upper()))
            if text is not None:
                db.execute("update classes set text = ?, moved = ? where code = ?", (text, self.clock(),
                                                                                     code.upper()))
        return self.state(code)

    def end(self, code: str, secret: str | None) -> None:
        self.check_teacher(code, secret)
        with self.connected() as db:
            db.execute("update classes set ended = 1 where code = ?", (code.upper(),))

    def seen(self, code: str, *students: str) -> None:
        """Students' pages checked in (the teacher's count of who follows), in one write."""
        now = self.clock()
        with self.connected() as db:
            db.executemany("insert or replace into students values (?, ?, ?)",
                           [(code.upper(), student, now) for student in students])

    def following(self, code: str) -> int:
        """Students seen within FOLLOWING_S."""
        with self.connected() as db:
            return int(db.execute("select count(*) from students where code = ? and seen > ?",
                                  (code.upper(), self.clock() - FOLLOWING_S)).fetchone()[0])
