"""A persistent, crash-safe answer cache (SQLite in WAL mode).

Why SQLite: each answer is committed in its own transaction the moment it arrives, so a process killed with
`kill -9` loses only the calls that were in flight; several processes (lmms-eval ranks, parallel runs) can share
one file safely; and a rerun looks up a whole batch in one query.  Only validated answers are stored — failures
never are — and nothing secret is: rows hold the key (a content hash), the model name, the answer, token usage
and a short request summary.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_FILENAME = "judge_cache.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    summary TEXT
)
"""


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

    def __init__(self, path: str | Path) -> None:
        """`path`: the SQLite file, or a folder to hold `judge_cache.sqlite3` (the caller chooses where)."""
        path = Path(path)
        if path.is_dir() or path.suffix == "":
            path = path / CACHE_FILENAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(path), timeout=60.0, check_same_thread=False, isolation_level=None)
        try:
            with self._lock:
                self._conn.execute("PRAGMA journal_mode=WAL")
                # WAL + NORMAL: every committed transaction survives a process crash (kill -9); only an OS crash
                # or power loss can drop the last few, which a rerun then simply asks again.
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("PRAGMA busy_timeout=60000")
                self._conn.execute(_SCHEMA)
                columns = {row[1] for row in self._conn.execute("PRAGMA table_info(answers)")}
                for column in ("api_model", "endpoint"):  # files written before the column existed
                    if column not in columns:
                        self._conn.execute(f"ALTER TABLE answers ADD COLUMN {column} TEXT")
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise CacheFileError(
                f"The judge answer cache {path} is not a usable SQLite database ({exc}). Move it away or delete it "
                f"(rm {path}*; cached answers are lost and will be asked again), or point EMO_CACHE_DIR elsewhere."
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

    def keys(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self._conn.execute("SELECT key FROM answers")}

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
