"""Writes that a concurrent reader (another rank, another process) never sees half done.

One helper for every file the package writes (logs, summaries, samples, remuxed videos, placeholders): write to a
temporary sibling, then rename it over the target, which POSIX and Windows make atomic on one file system.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path, suffix: str = "") -> Iterator[Path]:
    """A temporary sibling of `path` to write to; renamed onto `path` when the block ends without an error, and
    removed otherwise.  `suffix` keeps an extension that a writer needs to pick a format (".mp4", ".png")."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp{suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)
