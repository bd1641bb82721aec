"""Content hashes of media files, memoised by stat signature: the cache identity of a video or image is its content.

Why a module of its own: the frame cache (`judges.frames`) and the request parts (`judges.media`) both key on
these hashes; below both, neither imports the other for them.

Two memos, both keyed by a file's stat signature (device, inode, size, mtime_ns, ctime_ns), never by its path:
- per process (always);
- across processes, when a caller configures a store (`configure_digest_store`; emo-tasks: `<cache>/file_hashes.
  sqlite3`, `EMO_FILE_HASH_MEMO=0` turns it off).  Why: the judge stage, a re-judge and the viewer each named
  every video of the run, and reading 6,500 videos whole (1.7 GB for the benchmark's small clips, tens of GB for
  the real ones) came before the first judge request, every run.  A file any write has touched since has another
  signature (a write moves mtime and ctime; setting mtime back moves ctime, which no user can set), so it is read
  again; an entry is only written for a file whose ctime was older than the racy window when it was read.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# ------------------------------------------------------------------------------------------- file content hashes
# Cache identities of media files are hashes of their whole content: a file replaced by another of the same size
# and the same header must not be served the old file's frames or answers.  Reading a file is the cost, so the
# hash is memoised per process by the file's stat signature (device, inode, size, mtime_ns, ctime_ns): an
# unchanged file is read once per process, however many requests name it, and any replacement or rewrite (a new
# inode, size or mtime; ctime also moves when mtime is set back by hand) is hashed again.
_HASH_MEMO_MAX = 1 << 16  # files; an entry is ~200 bytes
_hash_lock = threading.Lock()
_hash_memo: OrderedDict[tuple[int, ...], tuple[int, str]] = OrderedDict()
_hash_inflight: dict[tuple[int, ...], threading.Event] = {}
_hash_stats: dict[str, float] = {"files": 0, "bytes": 0, "seconds": 0.0, "memo_hits": 0, "store_hits": 0}
_HASH_TRIES = 3
#: A file changed (ctime) less than this before it was read is hashed again next time instead of memoised: a
#: rewrite in the same timestamp tick (coarse kernel clocks, 1-2 s on some filesystems) would leave its signature
#: unchanged ("racy git").  Only freshly written files pay for it, and only for this long.
_RACY_NS = 2_000_000_000


def _signature(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_sha256(fh: Any, chunk: int) -> tuple[int, str]:
    """(bytes read, sha256 hex) of an open file, streamed (hashlib releases the GIL on large blocks)."""
    h = hashlib.sha256()
    size = 0
    while block := fh.read(chunk):
        h.update(block)
        size += len(block)
    return size, h.hexdigest()


def _hash_file(path: str | Path, chunk: int) -> tuple[tuple[int, ...] | None, int, str]:
    """(signature to memoise under, or None when the file kept changing while read; size; sha256 hex)."""
    t0 = time.perf_counter()
    total = 0
    try:
        for _ in range(_HASH_TRIES):
            started = time.time_ns()
            with open(path, "rb") as fh:
                before = _signature(os.fstat(fh.fileno()))
                size, digest = _read_sha256(fh, chunk)
                total += size
                after = _signature(os.fstat(fh.fileno()))
            if before == after and size == before[2]:
                # ctime, not mtime: the kernel sets it on every change and nobody can set it back (an mtime may be
                # anything, even in the future, for files unpacked from an archive)
                racy = before[4] > started - _RACY_NS
                return None if racy else before, size, digest
        return None, size, digest  # being written right now: hash what was read, remember nothing
    finally:
        with _hash_lock:
            _hash_stats["files"] += 1
            _hash_stats["bytes"] += total
            _hash_stats["seconds"] += time.perf_counter() - t0


# ------------------------------------------------------------------------------------------- across processes
_DIGEST_STORE_MAX = 500_000  # entries (~120 bytes each); the oldest go first past it
_STORE_SCHEMA = "CREATE TABLE IF NOT EXISTS digests (sig TEXT PRIMARY KEY, size INTEGER NOT NULL, sha256 TEXT NOT " \
    "NULL, created REAL NOT NULL)"


class DigestStore:
    """Stat signature -> (size, sha256) in one SQLite file, shared by processes (WAL) and threads (a lock).
    Unusable (a damaged or unwritable file) means no store: files are then read, never trusted blindly."""

    def __init__(self, path: str | Path) -> None:
        from .sqlitefile import open_shared  # sqlite3 only where a store is used

        self.path = Path(path)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_shared(self.path, [_STORE_SCHEMA], timeout=30.0)
        self._puts = 0

    def get_many(self, signatures: Iterable[tuple[int, ...]]) -> dict[tuple[int, ...], tuple[int, str]]:
        by_text = {_sig_text(sig): sig for sig in signatures}
        out: dict[tuple[int, ...], tuple[int, str]] = {}
        keys = list(by_text)
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                rows = self._db.execute(
                    f"SELECT sig, size, sha256 FROM digests WHERE sig IN ({','.join('?' * len(part))})", part
                ).fetchall()
                for text, size, digest in rows:
                    sig = by_text[text]
                    if size == sig[2] and isinstance(digest, str) and len(digest) == 64:
                        out[sig] = (int(size), digest)
        return out

    def put(self, signature: tuple[int, ...], size: int, digest: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO digests (sig, size, sha256, created) VALUES (?, ?, ?, ?)",
                (_sig_text(signature), size, digest, time.time()),
            )
            self._puts += 1
            if self._puts % 10_000 == 0:
                self._trim()

    def _trim(self) -> None:
        (count,) = self._db.execute("SELECT COUNT(*) FROM digests").fetchone()
        if count > _DIGEST_STORE_MAX:
            self._db.execute(
                "DELETE FROM digests WHERE sig IN (SELECT sig FROM digests ORDER BY created LIMIT ?)",
                (count - _DIGEST_STORE_MAX,),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _sig_text(sig: tuple[int, ...]) -> str:
    return ":".join(str(v) for v in sig)


_store: DigestStore | None = None
_store_lock = threading.Lock()


def configure_digest_store(path: str | Path | None) -> None:
    """Keep content hashes across processes in the SQLite file `path` (None: this process only).  Process-wide,
    like the frame cache; a store that cannot be opened is left off (files are read)."""
    global _store
    with _store_lock:
        if path is not None and _store is not None and _store.path == Path(path):
            return
        old, _store = _store, None
        if old is not None:
            old.close()
        if path is None:
            return
        try:
            _store = DigestStore(path)
        except Exception:  # noqa: BLE001 - a damaged or read-only store costs reads, never a wrong identity
            _store = None


def active_digest_store() -> DigestStore | None:
    return _store


def _stored(signatures: Iterable[tuple[int, ...]]) -> dict[tuple[int, ...], tuple[int, str]]:
    store = _store
    if store is None:
        return {}
    try:
        return store.get_many(signatures)
    except Exception:  # noqa: BLE001 - unreadable: read the files
        return {}


def _store_put(signature: tuple[int, ...], size: int, digest: str) -> None:
    store = _store
    if store is None:
        return
    try:
        store.put(signature, size, digest)
    except Exception:  # noqa: BLE001 - unwritable: the next run reads the file again
        pass


def _remember(signature: tuple[int, ...], value: tuple[int, str]) -> None:
    with _hash_lock:
        _hash_memo[signature] = value
        _hash_memo.move_to_end(signature)
        while len(_hash_memo) > _HASH_MEMO_MAX:
            _hash_memo.popitem(last=False)


def file_digest(path: str | Path, chunk: int = 1 << 20) -> tuple[int, str]:
    """(size in bytes, sha256 hex) of a file's whole content, read once per process while the file is unchanged.

    Thread-safe; concurrent callers for the same unchanged file wait for one read.  Raises OSError when the file
    cannot be read."""
    while True:
        key = _signature(os.stat(path))
        with _hash_lock:
            hit = _hash_memo.get(key)
            if hit is not None:
                _hash_memo.move_to_end(key)
                _hash_stats["memo_hits"] += 1
                return hit
            waiting = _hash_inflight.get(key)
            if waiting is None:
                done = _hash_inflight[key] = threading.Event()
        if waiting is not None:  # another thread is reading this very file: take its result from the memo
            waiting.wait()
            continue
        try:
            stored = _stored([key]).get(key)
            if stored is not None:
                _remember(key, stored)
                with _hash_lock:
                    _hash_stats["store_hits"] += 1
                return stored
            signature, size, digest = _hash_file(path, chunk)
            if signature is not None:
                _remember(signature, (size, digest))
                _store_put(signature, size, digest)
            return size, digest
        finally:
            with _hash_lock:
                _hash_inflight.pop(key, None)
            done.set()


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """Content hash of a whole file, streamed and memoised per process (see `file_digest`): the cache identity
    of large media."""
    return file_digest(path, chunk)[1]


def hash_files(paths: Iterable[str | Path], workers: int | None = None) -> None:
    """Hash several files at once in a few threads (hashlib and file reads release the GIL), so that the
    identities asked for next are memo hits; unreadable files are skipped (their requests fail naming them).

    Why: a judge phase names thousands of videos; hashing them one by one before the first request would cost
    the sum of their reads on one core."""
    todo = list(dict.fromkeys(os.fspath(p) for p in paths))
    if not todo:
        return
    if _store is not None:  # one query for every file the store already knows
        sigs: dict[str, tuple[int, ...]] = {}
        for path in todo:
            try:
                sigs[path] = _signature(os.stat(path))
            except OSError:
                continue
        with _hash_lock:
            unknown = [sig for sig in sigs.values() if sig not in _hash_memo]
        found = _stored(unknown)
        for sig, value in found.items():
            _remember(sig, value)
        with _hash_lock:
            _hash_stats["store_hits"] += len(found)
        todo = [p for p in todo if p not in sigs or sigs[p] not in found]
    workers = max(1, min(workers or min(8, os.cpu_count() or 1), len(todo)))

    def one(path: str) -> None:
        try:
            file_digest(path)
        except OSError:
            pass

    if workers == 1:
        for path in todo:
            one(path)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hash-files") as pool:
        list(pool.map(one, todo))


def hash_stats() -> dict[str, float]:
    """What file hashing cost in this process since the last reset: files read (hashes computed), bytes,
    seconds (wall, summed over threads), memo hits and hashes taken from the digest store (benchmarks read it)."""
    with _hash_lock:
        return dict(_hash_stats)


def reset_hash_stats(forget: bool = False) -> None:
    """Zero `hash_stats()`; with `forget`, also empty the memo (benchmarks measuring a cold process, tests)."""
    with _hash_lock:
        _hash_stats.update(files=0, bytes=0, seconds=0.0, memo_hits=0, store_hits=0)
        if forget:
            _hash_memo.clear()
