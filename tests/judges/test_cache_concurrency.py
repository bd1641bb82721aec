"""The judge answer cache opened by several processes at once (lmms-eval ranks under `accelerate`, two
`emo-tasks judge` side by side): every open succeeds, the schema is made or migrated once, a lock is waited for,
and only a file that really is not SQLite is called damaged (issue 32, item 1)."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import pytest

from judges import filehash
from judges.cache import CacheFileError, JudgeCache
from judges.sqlitefile import NotADatabase, is_damaged, open_shared

PROCESSES, ROUNDS = 6, 20

_OLD_SCHEMA = """CREATE TABLE answers (key TEXT PRIMARY KEY, model TEXT NOT NULL, text TEXT NOT NULL,
prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL,
summary TEXT)"""


def _opener(rank: int, folders: list[str], barrier: mp.synchronize.Barrier, out: mp.Queue) -> None:
    """Each round: wait for every process, then open the round's cache, write one answer, read every answer."""
    failures = []
    for round_, folder in enumerate(folders):
        try:
            barrier.wait(timeout=60)
        except Exception:  # noqa: BLE001 - a broken barrier is reported by the process that broke it
            pass
        try:
            cache = JudgeCache(folder)
            cache.put(f"k{rank}", "m", f"answer {rank}", api_model="m-2024", endpoint="127.0.0.1")
            cache.get_many([f"k{i}" for i in range(PROCESSES)])
            cache.close()
        except Exception:  # noqa: BLE001 - counted, with the traceback's last line
            failures.append(f"round {round_} rank {rank}: {traceback.format_exc().strip().splitlines()[-1]}")
    out.put(failures)


def _open_together(folders: list[Path]) -> list[str]:
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_opener, args=(r, [str(f) for f in folders], barrier, out)) for r in range(PROCESSES)]
    for p in procs:
        p.start()
    failures = [f for _ in procs for f in out.get(timeout=300)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return failures


def _answers(folder: Path) -> list[tuple]:
    con = sqlite3.connect(folder / "judge_cache.sqlite3")
    try:
        return sorted(con.execute("SELECT key, text, api_model, endpoint FROM answers").fetchall())
    finally:
        con.close()


def test_six_processes_open_a_fresh_cache_together_twenty_times(tmp_path: Path) -> None:
    folders = [tmp_path / f"round{i}" for i in range(ROUNDS)]
    failures = _open_together(folders)
    assert failures == [], f"{len(failures)} of {PROCESSES * ROUNDS} opens failed: {failures[:5]}"
    for folder in folders:  # every process's answer is there, with the columns added after the first schema
        assert _answers(folder) == [(f"k{r}", f"answer {r}", "m-2024", "127.0.0.1") for r in range(PROCESSES)]


def test_an_old_schema_cache_is_migrated_once_while_opened_by_six(tmp_path: Path) -> None:
    folders = [tmp_path / f"round{i}" for i in range(ROUNDS)]
    for folder in folders:  # a cache written before api_model/endpoint existed, holding a paid-for answer
        folder.mkdir()
        con = sqlite3.connect(folder / "judge_cache.sqlite3")
        con.execute(_OLD_SCHEMA)
        con.execute("INSERT INTO answers VALUES ('old', 'm', 'kept', 1, 2, 0.0, NULL)")
        con.commit()
        con.close()
    failures = _open_together(folders)
    assert failures == [], f"{len(failures)} of {PROCESSES * ROUNDS} opens failed: {failures[:5]}"
    for folder in folders:
        con = sqlite3.connect(folder / "judge_cache.sqlite3")
        columns = [row[1] for row in con.execute("PRAGMA table_info(answers)")]
        con.close()
        assert columns.count("api_model") == 1 and columns.count("endpoint") == 1
        rows = _answers(folder)
        assert ("old", "kept", None, None) in rows and len(rows) == PROCESSES + 1


def test_a_locked_cache_is_waited_for_not_called_damaged(tmp_path: Path) -> None:
    """Another process holds the write lock while the cache is first made: the open waits for it, then succeeds."""
    path = tmp_path / "judge_cache.sqlite3"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sqlite3, sys, time
            con = sqlite3.connect({str(path)!r}, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("BEGIN IMMEDIATE")
            con.execute("CREATE TABLE other (x)")
            print("locked", flush=True)
            time.sleep(1.5)
            con.execute("COMMIT")
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        cache = JudgeCache(path)
        waited = time.monotonic() - started
        cache.put("k", "m", "answer")
        cache.close()
    finally:
        holder.wait(timeout=60)
    assert waited > 0.5, "the open did not wait for the lock"
    assert JudgeCache(path).get("k").text == "answer"


def test_only_a_file_that_is_not_sqlite_is_called_damaged(tmp_path: Path) -> None:
    bad = tmp_path / "bad" / "judge_cache.sqlite3"
    bad.parent.mkdir()
    bad.write_bytes(b"\x00\x17 definitely not sqlite " * 100)
    with pytest.raises(CacheFileError, match="not a usable SQLite database.*delete"):
        JudgeCache(bad)
    with pytest.raises(NotADatabase):
        open_shared(bad, ["CREATE TABLE IF NOT EXISTS t (x)"])
    # a healthy cache locked by another process past the wait: its answers are kept, never "delete"
    good = tmp_path / "good"
    cache = JudgeCache(good)
    cache.put("k", "m", "paid for")
    cache.close()
    holder = sqlite3.connect(good / "judge_cache.sqlite3", isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CacheFileError) as err:
            JudgeCache(good, timeout=0.3)
        assert "delete" not in str(err.value) and "answers are kept" in str(err.value)
        assert "locked" in str(err.value)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert JudgeCache(good).get("k").text == "paid for"
    assert not is_damaged(sqlite3.OperationalError("database is locked"))
    assert is_damaged(sqlite3.DatabaseError("file is not a database"))


def test_the_file_hash_store_opens_together_too(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    barrier = ctx.Barrier(PROCESSES)

    def open_store(rank: int) -> None:
        bad = 0
        for i in range(ROUNDS):
            barrier.wait(timeout=60)
            try:
                store = filehash.DigestStore(tmp_path / f"r{i}" / "file_hashes.sqlite3")
                store.put((rank, 1, 2, 3, 4), 2, "0" * 64)
                store.close()
            except Exception:  # noqa: BLE001
                bad += 1
        out.put(bad)

    procs = [ctx.Process(target=open_store, args=(r,)) for r in range(PROCESSES)]
    for p in procs:
        p.start()
    assert sum(out.get(timeout=300) for _ in procs) == 0
    for p in procs:
        p.join(timeout=60)
