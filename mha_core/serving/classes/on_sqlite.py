"""The classes of one machine in one SQLite file (issue 47; the embedded default): every app process of the machine
reads it, make run's one and make serve's behind HAProxy. One connection per process, reopened after an error or when
the file was replaced; a deleted or damaged file is recreated by the next class started (issue 78). Nothing of SQLite
leaves this module: a failure is stored.unavailable(reason)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from mha_core.messages import N_, InputError
from mha_core.serving.classes.stored import (
    ENDED_KEPT_S,
    FAILED,
    FOLLOWING_S,
    FULL,
    IDLE_LIMIT_S,
    STARTED,
    TAKEN,
    VISITOR_FULL,
    Limits,
    Row,
    unavailable,
)

SCHEMA_VERSION = 2  # 2: classes.visitor (issue 78); an older file's classes are dropped
STORE_NAME = f"classes-v{SCHEMA_VERSION}.sqlite"  # a file per schema: processes of an older version keep theirs
SCHEMA = """
create table if not exists classes (code text primary key, secret text not null, step integer not null,
    text text not null, language text not null, model text not null, moved real not null,
    ended integer not null default 0, visitor text not null default '');
create table if not exists students (code text not null, student text not null, seen real not null,
    primary key (code, student));
"""
REASONS = {  # SQLite's error names -> why, in one phrase a page words in its language
    "SQLITE_CORRUPT": N_("its store is damaged"), "SQLITE_NOTADB": N_("its store is damaged"),
    "SQLITE_READONLY": N_("its store cannot be written"), "SQLITE_BUSY": N_("its store is locked by another program"),
    "SQLITE_LOCKED": N_("its store is locked by another program"), "SQLITE_CANTOPEN": N_("its store cannot be opened"),
    "SQLITE_FULL": N_("the disk under its store is full")}
MISSING = N_("its store was deleted")


class SqliteStore:
    """One SQLite connection per process, guarded by a lock; reopened after an error or when the file was replaced
    or deleted (a deleted file is created again only by a write that asks for it: a new class)."""

    pushes_moves = False

    def __init__(self, path: Path, busy_s: float) -> None:
        self.path, self.busy_s, self.location = path, busy_s, str(path)
        self.lock = threading.Lock()
        self.db: sqlite3.Connection | None = None
        self.inode: int | None = None  # the file the connection has open
        self.last_inode: int | None = None  # the file last opened (or tried): another one there was put in its place
        self.opened_once = False  # a file this process opened and that is gone now was deleted: said, not remade

    def create(self, code: str, row: Row, now: float, limits: Limits) -> str:
        with self.transaction(create=True) as db:
            delete_finished(db, now)
            full = room_left(db, row.visitor, limits)
            if full:
                return full
            try:
                db.execute("insert into classes values (?, ?, ?, ?, ?, ?, ?, 0, ?)",
                           (code, row.secret, row.step, row.text, row.language, row.model, row.moved, row.visitor))
            except sqlite3.IntegrityError as err:  # a code in use: the room draws again
                if "UNIQUE" not in str(err):
                    raise
                return TAKEN
        return STARTED

    def read(self, code: str) -> Row | None:
        with self.transaction() as db:
            found = db.execute("select step, text, language, model, moved, ended, secret, visitor from classes "
                               "where code = ?", (code,)).fetchone()
        if found is None:
            return None
        step, text, language, model, moved, ended, secret, visitor = found
        return Row(int(step), text, language, model, float(moved), float(ended), secret, visitor)

    def update(self, code: str, since: tuple[int, str], to: tuple[int, str], now: float) -> bool:
        with self.transaction() as db:
            return bool(db.execute("update classes set step = ?, text = ?, moved = ? where code = ? and step = ? and "
                                   "text = ? and ended = 0", (*to, now, code, *since)).rowcount)

    def end(self, code: str, now: float) -> None:
        with self.transaction() as db:
            db.execute("update classes set ended = ? where code = ?", (now, code))

    def seen(self, code: str, students: list[str], now: float) -> None:
        with self.transaction() as db:
            db.executemany("insert or replace into students values (?, ?, ?)",
                           [(code, student, now) for student in students])

    def following(self, code: str, since: float) -> int:
        with self.transaction() as db:
            return int(db.execute("select count(*) from students where code = ? and seen > ?",
                                  (code, since)).fetchone()[0])

    def listen(self, heard: Callable[[str | None], None], lost: Callable[[InputError], None]) -> None:
        raise NotImplementedError("a SQLite store is read by its watcher: it pushes no moves")

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


def delete_finished(db: sqlite3.Connection, now: float) -> None:
    """Classes idle past IDLE_LIMIT_S or ended ENDED_KEPT_S ago, with their students; students not
    seen lately."""
    db.execute("delete from classes where moved < ? or (ended > 0 and ended < ?)",
               (now - IDLE_LIMIT_S, now - ENDED_KEPT_S))
    db.execute("delete from students where seen < ? or code not in (select code from classes)",
               (now - 2 * FOLLOWING_S,))


def room_left(db: sqlite3.Connection, visitor: str, limits: Limits) -> str | None:
    """FULL or VISITOR_FULL when a new class does not fit; None when it does."""
    if int(db.execute("select count(*) from classes where ended = 0").fetchone()[0]) >= limits.classes:
        return FULL
    mine = int(db.execute("select count(*) from classes where ended = 0 and visitor = ? and visitor != ''",
                          (visitor,)).fetchone()[0])
    return VISITOR_FULL if mine >= limits.per_visitor else None
