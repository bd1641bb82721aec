"""Open a SQLite file that several processes open at once: the judge answer cache and the file-hash store.

Why a module of its own: both files are shared by every process that judges (lmms-eval ranks under `accelerate`,
two `emo-tasks judge` side by side, the viewer), and each used to set its journal mode and add missing columns on
every open, outside a transaction.  Opened together on a fresh file, some opens failed ("duplicate column name",
"database is locked") and were reported as a damaged file to delete - a cache of paid-for answers.  Here:

- the journal mode is switched to WAL only when it is not WAL already (the switch needs the file to itself);
- the schema (every table in full, then any column a file of an older version lacks) is written in one
  `BEGIN IMMEDIATE` transaction, so one process migrates and the others wait for it and see it done;
- a lock met anyway (a busy or locked database, which SQLite reports at once in some cases rather than through its
  busy handler) is waited for, with backoff, up to the timeout;
- only a file that really is not a SQLite database (or is damaged) raises `NotADatabase`; any other failure
  (locked past the timeout, read-only, a full disk) raises `sqlite3.OperationalError` as SQLite said it.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

#: SQLite's primary result codes for a file that is not a database, or a damaged one (sqlite3.h).
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_DAMAGED_TEXT = ("file is not a database", "database disk image is malformed", "file is encrypted")


class NotADatabase(sqlite3.DatabaseError):
    """The file exists and is not a usable SQLite database (not SQLite at all, or damaged)."""


def is_damaged(exc: BaseException) -> bool:
    """True only for SQLite's 'not a database' and 'corrupt' errors: a locked, read-only or full database is
    healthy and must never be called damaged."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    return isinstance(exc, sqlite3.DatabaseError) and any(t in str(exc).lower() for t in _DAMAGED_TEXT)


def _is_lock(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def open_shared(
    path: str | Path,
    tables: Sequence[str],
    columns: Sequence[tuple[str, str, str]] = (),
    timeout: float = 60.0,
) -> sqlite3.Connection:
    """A connection (autocommit, usable from several threads under the caller's lock) to `path` in WAL mode with
    `tables` (CREATE TABLE IF NOT EXISTS statements) and `columns` ((table, column, type) that files written
    before the column existed lack) in place.  Safe when any number of processes open the same file at once."""
    deadline = time.monotonic() + timeout
    conn = sqlite3.connect(str(path), timeout=timeout, check_same_thread=False, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        _retry(lambda: _wal(conn), deadline)
        # WAL + NORMAL: every committed transaction survives a process crash (kill -9); only an OS crash or power
        # loss can drop the last few, which a rerun then simply asks again.
        conn.execute("PRAGMA synchronous=NORMAL")
        _retry(lambda: _schema(conn, tables, columns), deadline)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_damaged(exc):
            raise NotADatabase(str(exc)) from exc
        raise
    except BaseException:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection) -> None:
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL")


def _schema(conn: sqlite3.Connection, tables: Sequence[str], columns: Sequence[tuple[str, str, str]]) -> None:
    """Every table and column in one write transaction: one process creates or migrates, the others wait, then
    find it done.  A column already there is never added twice."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in tables:
            conn.execute(statement)
        have: dict[str, set[str]] = {}
        for table, column, kind in columns:
            if table not in have:
                have[table] = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if column not in have[table]:
                try:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                except sqlite3.OperationalError as exc:  # added by a writer that did not take the lock first
                    if "duplicate column" not in str(exc).lower():
                        raise
                have[table].add(column)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _retry(step: Callable[[], None], deadline: float) -> None:
    """Run `step` until it succeeds or the deadline passes; only a lock is waited for, every other error is
    raised at once."""
    pause = 0.005
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if not _is_lock(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause * (1 + random.random()))
        pause = min(pause * 2, 0.25)
