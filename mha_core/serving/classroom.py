"""A class that follows its teacher through the lesson (issue 47): where the class's step lives, and who may move it.

The state is one SQLite file under the cache folder (engine/loading/bundled.cache_root), which every app process of
one machine reads: make run's one process and make serve's processes behind HAProxy see the same step. A class has
a short code (the student link's ?class=CODE) and a secret only the teacher's address holds: SHA-256 of the secret is
stored, never the secret; moving the class without it is refused. A class ends when the teacher ends it or after
IDLE_LIMIT_S without a move; ended and idle classes are deleted with their students (issue 78).

Classroom is the whole interface (state, move, start, end, seen, following, is_teacher): a store across hosts
(Redis, issue 84) implements the same. Nothing of SQLite leaves this module: a store that fails raises InputError
`class_store_unavailable` saying why in one sentence, and heals by itself (one connection per process, reopened after
an error or when the file was replaced; a deleted or damaged file is recreated by the next class started).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mha_core.engine.loading.bundled import cache_root
from mha_core.engine.pieces import whole_text
from mha_core.messages import N_, InputError, Worded

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read off a projector
CODE_LENGTH = 6
IDLE_LIMIT_S = 3 * 3600  # a class nobody moved for three hours has ended
ENDED_KEPT_S = 600  # an ended class's row is kept this long (its students read "has ended"), then deleted
FOLLOWING_S = 10.0  # a student seen this recently follows
MAX_CLASSES = 100  # open classes a server holds (3,000 phones: far beyond what one server's CPUs follow)
MAX_CLASSES_PER_VISITOR = 3  # open classes one visitor (a teacher's session) runs at once
BUSY_S = 2.0  # how long a read or write waits for another process's write before the store says it is locked
SCHEMA_VERSION = 2  # 2: classes.visitor (issue 78); an older file's classes are dropped
STORE_NAME = f"classes-v{SCHEMA_VERSION}.sqlite"  # a file per schema: processes of an older version keep theirs
STORE_ENV = "MHA_CLASS_STORE"  # the store's file, where a server's classes live elsewhere (a test's own, a shared disk)

SCHEMA = """
create table if not exists classes (code text primary key, secret text not null, step integer not null,
    text text not null, language text not null, model text not null, moved real not null,
    ended integer not null default 0, visitor text not null default '');
create table if not exists students (code text not null, student text not null, seen real not null,
    primary key (code, student));
"""
UNAVAILABLE = "class_store_unavailable"  # the code of the error a failing store raises (unavailable())
REASONS = {  # SQLite's error names -> why, in one phrase a page words in its language
    "SQLITE_CORRUPT": N_("its store is damaged"), "SQLITE_NOTADB": N_("its store is damaged"),
    "SQLITE_READONLY": N_("its store cannot be written"), "SQLITE_BUSY": N_("its store is locked by another program"),
    "SQLITE_LOCKED": N_("its store is locked by another program"), "SQLITE_CANTOPEN": N_("its store cannot be opened"),
    "SQLITE_FULL": N_("the disk under its store is full")}
MISSING = N_("its store was deleted")
FAILED = N_("its store failed")


def store_path() -> Path:
    """Where this process keeps its classes: $MHA_CLASS_STORE, else STORE_NAME under the cache folder."""
    chosen = os.environ.get(STORE_ENV)
    return Path(chosen).expanduser() if chosen else cache_root() / STORE_NAME


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
    value = str(code).strip().upper()
    return value if len(value) == CODE_LENGTH and set(value) <= set(CODE_ALPHABET) else None


def checked_code(code: object) -> str:
    value = canonical(code)
    if value is None:
        raise InputError("class_code_invalid", N_("{given!r} is not a class code: a class code is {length} letters "
                                                  "and digits."), given=str(code)[:3 * CODE_LENGTH],
                         length=CODE_LENGTH)
    return value


def unavailable(reason: str) -> InputError:
    return InputError("class_store_unavailable", N_("Class mode is unavailable just now: {reason}; pages follow again "
                                                    "once it is back."), reason=Worded(reason))


def checked_text(text: str) -> str:
    """The class's sentence within the one text limit pages and commands take (engine.tokens.MAX_INPUT_CHARS),
    refused before it is stored or sent to a student."""
    from mha_core.engine.tokens import MAX_INPUT_CHARS  # imported here: reading a class's step needs no torch

    text = whole_text(text)
    if len(text) > MAX_INPUT_CHARS:
        raise InputError("class_text_too_long", N_("The class's sentence has {chars:,} characters; a class takes at "
                                                   "most {limit:,}."), chars=len(text), limit=MAX_INPUT_CHARS)
    return text


class Store:
    """One SQLite connection per process, guarded by a lock; reopened after an error or when the file was replaced
    or deleted (a deleted file is created again only by a write that asks for it: a new class)."""

    def __init__(self, path: Path, busy_s: float) -> None:
        self.path, self.busy_s = path, busy_s
        self.lock = threading.Lock()
        self.db: sqlite3.Connection | None = None
        self.inode: int | None = None  # the file the connection has open
        self.last_inode: int | None = None  # the file last opened (or tried): another one there was put in its place
        self.opened_once = False  # a file this process opened and that is gone now was deleted: said, not remade

    @contextlib.contextmanager
    def transaction(self, create: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, in one transaction (committed, or rolled back on an error). Any failure of the store
        closes the connection (the next transaction reopens it) and raises `class_store_unavailable`."""
        with self.lock:
            try:
                db = self.connection(create)
                with db:
                    yield db
            except sqlite3.Error as err:
                self.close()
                raise unavailable(REASONS.get(getattr(err, "sqlite_errorname", ""), FAILED)) from err
            except OSError as err:
                self.close()
                raise unavailable(N_("its store cannot be opened")) from err

    def connection(self, create: bool) -> sqlite3.Connection:
        inode = self.current_inode()
        if self.db is not None and inode == self.inode:
            return self.db
        self.close()  # replaced or deleted: closing checkpoints the old file's log and removes it
        if inode is None and self.opened_once and not create:
            raise unavailable(MISSING)
        if inode is not None and self.last_inode not in (None, inode):
            self.drop_stale_logs()
        self.last_inode = inode
        if create:
            self.set_aside_if_damaged()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(f"file:{self.path}?mode={'rwc' if create or not self.opened_once else 'rw'}", uri=True,
                             timeout=self.busy_s, check_same_thread=False)  # used under self.lock only
        try:
            prepare(db)
        except BaseException:
            db.close()
            raise
        self.db, self.inode, self.opened_once = db, self.current_inode(), True
        self.last_inode = self.inode
        return db

    def current_inode(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except FileNotFoundError:
            return None

    def drop_stale_logs(self) -> None:
        """The file was replaced (a backup restored): the write-ahead log beside it from before is the old file's,
        and SQLite would read its pages over the new file's (it keeps a moved file's log). A log written since
        (another process opened the new file) is kept."""
        placed = os.stat(self.path).st_ctime_ns
        for log in ("-wal", "-shm"):
            stale = self.path.with_name(self.path.name + log)
            with contextlib.suppress(FileNotFoundError):
                if os.stat(stale).st_mtime_ns < placed:
                    stale.unlink()

    def set_aside_if_damaged(self) -> None:
        """Before a new class: a file SQLite cannot read is moved aside (…sqlite.damaged), so a fresh one is made."""
        if not self.path.exists():
            return
        try:
            probe = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=self.busy_s)
            try:
                probe.execute("select count(*) from sqlite_master").fetchone()
            finally:
                probe.close()
        except sqlite3.DatabaseError as err:
            if getattr(err, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
                os.replace(self.path, self.path.with_name(self.path.name + ".damaged"))
                for log in ("-wal", "-shm"):
                    self.path.with_name(self.path.name + log).unlink(missing_ok=True)

    def close(self) -> None:
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.close()
        self.db, self.inode = None, None


def prepare(db: sqlite3.Connection) -> None:
    """The schema, in write-ahead-log mode (readers never wait for the teacher's write); an older schema's classes
    dropped."""
    if db.execute("pragma journal_mode").fetchone()[0] != "wal":
        db.execute("pragma journal_mode=wal")
    version = db.execute("pragma user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        db.executescript(f"drop table if exists classes; drop table if exists students; {SCHEMA} "
                         f"pragma user_version = {SCHEMA_VERSION};")


class Classroom:
    """The classes of one machine, in `path` (default: store_path()); `clock` for tests."""

    def __init__(self, path: Path | None = None, clock: Callable[[], float] = time.time,
                 busy_s: float = BUSY_S) -> None:
        self.path = path or store_path()
        self.clock = clock
        self.store = Store(self.path, busy_s)

    def start(self, text: str, language: str, model: str = "", step: int = 1, visitor: str = "") -> tuple[str, str]:
        """A new class on `text` (read by `model`) at `step`: its code (for students) and its secret (for the
        teacher only). Refused past MAX_CLASSES open classes, or MAX_CLASSES_PER_VISITOR of one visitor's."""
        text, secret, now = checked_text(text), secrets.token_urlsafe(24), self.clock()
        step, language, model = checked_step(step), whole_text(language), whole_text(model)
        visitor = whole_text(visitor)
        with self.store.transaction(create=True) as db:
            self.delete_finished(db, now)
            check_room(db, visitor)
            for _ in range(20):
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                try:
                    db.execute("insert into classes values (?, ?, ?, ?, ?, ?, ?, 0, ?)",
                               (code, digest(secret), step, text, language, model, now, visitor))
                    return code, secret
                except sqlite3.IntegrityError as err:  # a code in use: draw again
                    if "UNIQUE" not in str(err):
                        raise
                    continue
        raise RuntimeError("no free class code")

    def delete_finished(self, db: sqlite3.Connection, now: float) -> None:
        """Classes idle past IDLE_LIMIT_S or ended ENDED_KEPT_S ago, with their students; students not seen lately."""
        db.execute("delete from classes where moved < ? or (ended > 0 and ended < ?)",
                   (now - IDLE_LIMIT_S, now - ENDED_KEPT_S))
        db.execute("delete from students where seen < ? or code not in (select code from classes)",
                   (now - 2 * FOLLOWING_S,))

    def state(self, code: str) -> ClassState:
        """The class's step and sentence; refused in one sentence when there is no such class or it has ended."""
        code = checked_code(code)
        with self.store.transaction() as db:
            row = db.execute("select step, text, language, model, moved, ended from classes where code = ?",
                             (code,)).fetchone()
        if row is None:
            raise InputError("no_such_class", N_("There is no class {code} on this server: check the link."),
                             code=code)
        step, text, language, model, moved, ended = row
        if ended or self.clock() - moved > IDLE_LIMIT_S:
            raise InputError("class_ended", N_("Class {code} has ended."), code=code)
        return ClassState(code, int(step), text, language, model, float(moved))

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
        with self.store.transaction() as db:
            row = db.execute("select secret from classes where code = ?", (code,)).fetchone()
        if row is None or not secret or not hmac.compare_digest(row[0], digest(str(secret))):
            raise InputError("not_the_teacher", N_("Only the teacher's own link moves class {code}."), code=code)

    def move(self, code: str, secret: str | None, since: ClassState, step: int | None = None,
             text: str | None = None) -> ClassState:
        """The teacher moves the class from `since` (the step and sentence their page shows) to `step` and/or a new
        sentence; anyone else is refused, and so is a move from a step or sentence the class has left (a page that
        had not yet followed another page's move)."""
        code = self.state(code).code
        self.check_teacher(code, secret)
        text = None if text is None else checked_text(text)
        step = None if step is None else checked_step(step)
        with self.store.transaction() as db:
            moved = db.execute("update classes set step = ?, text = ?, moved = ? where code = ? and step = ? and "
                               "text = ? and ended = 0",
                               (since.step if step is None else step, since.text if text is None else text,
                                self.clock(), code, since.step, since.text)).rowcount
        now = self.state(code)
        if not moved:
            raise InputError("class_moved_meanwhile", N_("Class {code} moved to step {step} meanwhile (from another "
                                                         "page): this page now shows it."), code=code, step=now.step)
        return now

    def end(self, code: str, secret: str | None) -> None:
        self.check_teacher(code, secret)
        with self.store.transaction() as db:
            db.execute("update classes set ended = ? where code = ?", (self.clock(), checked_code(code)))

    def seen(self, code: str, *students: str) -> None:
        """Students' pages checked in (the teacher's count of who follows), in one write."""
        code, now = checked_code(code), self.clock()
        with self.store.transaction() as db:
            db.executemany("insert or replace into students values (?, ?, ?)",
                           [(code, whole_text(student), now) for student in students])

    def following(self, code: str) -> int:
        """Students seen within FOLLOWING_S."""
        with self.store.transaction() as db:
            return int(db.execute("select count(*) from students where code = ? and seen > ?",
                                  (checked_code(code), self.clock() - FOLLOWING_S)).fetchone()[0])


def check_room(db: sqlite3.Connection, visitor: str) -> None:
    """A new class fits: fewer than MAX_CLASSES open ones, and fewer than MAX_CLASSES_PER_VISITOR of this visitor's."""
    open_classes = int(db.execute("select count(*) from classes where ended = 0").fetchone()[0])
    if open_classes >= MAX_CLASSES:
        raise InputError("class_limit_server", N_("This server holds {limit} classes, its most: start yours when "
                                                  "one has ended."), limit=MAX_CLASSES)
    mine = int(db.execute("select count(*) from classes where ended = 0 and visitor = ? and visitor != ''",
                          (visitor,)).fetchone()[0])
    if mine >= MAX_CLASSES_PER_VISITOR:
        raise InputError("class_limit_visitor", N_("You already run {limit} classes: end one before you start "
                                                   "another."), limit=MAX_CLASSES_PER_VISITOR)
