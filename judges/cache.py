"""A persistent, crash-safe answer cache (SQLite in WAL mode).

Why SQLite: each answer is committed in its own transaction the moment it arrives, so a process killed with
`kill -9` loses only the calls that were in flight; several processes (lmms-eval ranks, parallel runs) can share
one file safely, opening it at the same moment included (`judges.sqlitefile`); and a rerun looks up a whole
batch in one query.  Only validated answers are stored — failures never are — and nothing secret is: rows hold
the key (a content hash), the model name, the answer, token usage and a short request summary.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sqlitefile import NotADatabase, open_shared

CACHE_FILENAME = "judge_cache.sqlite3"

#: Callbacks told the keys every `get_many` of this process found (`judges.cache_transfer.recorded_reads`: which
#: cached answers a re-judge reads, so exactly those can be exported).  Empty: nothing is told.
READ_OBSERVERS: list[Callable[[Iterable[str]], None]] = []

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    summary TEXT,
    api_model TEXT,
    endpoint TEXT
)
"""
#: Columns that files written before they existed lack: added once, in the schema's own transaction.
_LATER_COLUMNS = (("answers", "api_model", "TEXT"), ("answers", "endpoint", "TEXT"))


@dataclass(frozen=True)
class CachedAnswer:
    key: str
    model: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    api_model: str | None = None
    endpoint: str | None = None


class CacheFileError(RuntimeError):
    """The cache file exists but is not a usable SQLite database; the message names it and the fix."""


class JudgeCache:
    """Thread-safe and multi-process-safe key -> answer store in one SQLite file."""

    def __init__(self, path: str | Path, timeout: float = 60.0) -> None:
        """`path`: the SQLite file, or a folder to hold `judge_cache.sqlite3` (the caller chooses where);
        `timeout`: how long to wait for another process's lock (seconds)."""
        path = Path(path)
        if path.is_dir() or path.suffix == "":
            path = path / CACHE_FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        try:
            self._conn = open_shared(path, [_SCHEMA], _LATER_COLUMNS, timeout=timeout)
        except NotADatabase as exc:
            raise CacheFileError(
                f"The judge answer cache {path} is not a usable SQLite database ({exc}). Move it away or delete it "
                f"(rm {path}*; cached answers are lost and will be asked again), or point EMO_CACHE_DIR elsewhere."
            ) from exc
        except sqlite3.Error as exc:  # healthy but not usable now: locked past the timeout, read-only, disk full
            raise CacheFileError(
                f"The judge answer cache {path} could not be opened ({exc}); its answers are kept. Free what "
                "holds or blocks it (another process, permissions, disk space) and run again, or point "
                "EMO_CACHE_DIR elsewhere."
            ) from exc

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedAnswer]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, CachedAnswer] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    "SELECT key, model, text, prompt_tokens, completion_tokens, api_model, endpoint FROM answers "
                    f"WHERE key IN ({marks})",
                    chunk,
                ).fetchall()
                for row in rows:
                    found[row[0]] = CachedAnswer(*row)
        for observe in list(READ_OBSERVERS):
            observe(found)
        return found

    def get(self, key: str) -> CachedAnswer | None:
        return self.get_many([key]).get(key)

    def put(
        self,
        key: str,
        model: str,
        text: str,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        summary: dict[str, Any] | None = None,
        api_model: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        """Store one validated answer, committed at once (its own transaction)."""
        blob = json.dumps(summary, ensure_ascii=False, default=str) if summary is not None else None
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO answers (key, model, text, prompt_tokens, completion_tokens, created, summary,"
                " api_model, endpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, model, text, int(prompt_tokens), int(completion_tokens), time.time(), blob, api_model, endpoint),
            )

    def put_many(self, rows: Iterable[tuple[Any, ...]]) -> int:
        """Store many validated answers (each row `put`'s arguments, summary included) in one transaction: a batch
        round's thousands of answers cost one commit, not one each.  Returns how many."""
        values = [
            (key, model, text, int(p), int(c), time.time(),
             json.dumps(summary, ensure_ascii=False, default=str) if summary is not None else None, api_model, endpoint)
            for key, model, text, p, c, summary, api_model, endpoint in rows
        ]  # fmt: skip
        if not values:
            return 0
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO answers (key, model, text, prompt_tokens, completion_tokens, created, "
                    "summary, api_model, endpoint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    values,
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        return len(values)

    def keys(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._conn.execute("SELECT key FROM answers")}

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
