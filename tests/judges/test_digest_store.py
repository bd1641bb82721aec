"""Content hashes kept across runs (`judges.filehash.configure_digest_store`): an unchanged file is not read again
by a later process, a changed one always is, and a store that cannot be used costs reads, never a wrong hash."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from emo_tasks.settings import CommonSettings
from judges import filehash


@pytest.fixture(autouse=True)
def cold() -> None:
    filehash.reset_hash_stats(forget=True)
    yield
    filehash.configure_digest_store(None)
    filehash.reset_hash_stats(forget=True)


def _old(path: Path, data: bytes) -> Path:
    """A file written, then its ctime left to age past the racy window (as a dataset's videos are)."""
    path.write_bytes(data)
    return path


def _age(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filehash, "_RACY_NS", 0)  # the files of a test are fresh: treat them as settled


def _child_hashes(store: Path, files: list[Path]) -> str:
    """Hash `files` in a fresh interpreter with the store: its `hash_stats()` and digests, as text."""
    code = textwrap.dedent(f"""
        from judges import filehash
        filehash.configure_digest_store({str(store)!r})
        paths = {[str(f) for f in files]!r}
        filehash.hash_files(paths)
        print(filehash.hash_stats()["files"], filehash.hash_stats()["store_hits"],
              *[filehash.file_sha256(p) for p in paths])
    """)
    root = Path(__file__).resolve().parent.parent.parent
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout


def test_a_later_process_reads_no_unchanged_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _age(monkeypatch)
    files = [_old(tmp_path / f"v{i}.mp4", os.urandom(20_000 + i)) for i in range(5)]
    store = tmp_path / "cache" / "file_hashes.sqlite3"
    filehash.configure_digest_store(store)
    filehash.hash_files(files)
    assert filehash.hash_stats()["files"] == 5
    filehash.configure_digest_store(None)
    out = _child_hashes(store, files).split()
    assert out[:2] == ["0", "5"]  # nothing read, every hash from the store
    assert out[2:] == [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]


def test_a_rewritten_file_is_read_again_even_with_its_old_size_and_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _age(monkeypatch)
    video = _old(tmp_path / "v.mp4", b"a" * 50_000)
    store = tmp_path / "file_hashes.sqlite3"
    filehash.configure_digest_store(store)
    first = filehash.file_sha256(video)
    st = video.stat()
    time.sleep(0.01)
    video.write_bytes(b"b" * 50_000)  # same size ...
    os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the old mtime, as `cp -p` would leave it
    assert video.stat().st_ctime_ns != st.st_ctime_ns  # the kernel moved ctime
    filehash.configure_digest_store(None)
    out = _child_hashes(store, [video]).split()
    assert out[:2] == ["1", "0"] and out[2] == hashlib.sha256(b"b" * 50_000).hexdigest() != first


def test_a_fresh_file_is_not_kept(tmp_path: Path) -> None:
    video = tmp_path / "fresh.mp4"
    video.write_bytes(b"x" * 1000)  # ctime now: within the racy window
    store = tmp_path / "file_hashes.sqlite3"
    filehash.configure_digest_store(store)
    filehash.file_sha256(video)
    filehash.configure_digest_store(None)
    assert _child_hashes(store, [video]).split()[:2] == ["1", "0"]


def test_a_damaged_store_is_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _age(monkeypatch)
    video = _old(tmp_path / "v.avi", b"y" * 3000)
    store = tmp_path / "file_hashes.sqlite3"
    store.write_bytes(b"this is not a database" * 100)
    filehash.configure_digest_store(store)
    assert filehash.active_digest_store() is None
    assert filehash.file_sha256(video) == hashlib.sha256(b"y" * 3000).hexdigest()
    assert filehash.hash_stats()["files"] == 1


def test_emo_file_hash_memo_turns_it_off(tmp_path: Path) -> None:
    on = CommonSettings.from_env({"EMO_CACHE_DIR": str(tmp_path)})
    off = CommonSettings.from_env({"EMO_CACHE_DIR": str(tmp_path), "EMO_FILE_HASH_MEMO": "0"})
    assert on.digest_store == tmp_path / "file_hashes.sqlite3" and off.digest_store is None
