"""Read once per command: within `remembering()`, `once(kind, path, compute)` computes a value derived from a file
one time, and later calls get the same value while the file is unchanged (same inode, size and mtime).

Why: one command (`emo-tasks view`, `compare --view`) asks several tools about the same run, and each reads the
same files again: the report's per-sample values and the viewer both parse a MultiEmo sample log and score its
10,344 images; each of MME-Emotion's 8 tasks parses the one judge log that covers them all.  Outside the block
nothing is kept (a long-lived process sees a file change between two calls).  Values are shared, not copied: a
caller must not change what it gets.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: dict[tuple[Any, ...], Any] | None = None


@contextmanager
def remembering() -> Iterator[None]:
    """Within the block, `once` computes each (kind, file) once; nested blocks share the outer one's values."""
    global _MEMO
    before = _MEMO
    if _MEMO is None:
        _MEMO = {}
    try:
        yield
    finally:
        _MEMO = before


def once(kind: Hashable, path: str | Path, compute: Callable[[], T]) -> T:
    """`compute()`, or within `remembering()` the value computed before for this kind and this file's content (a
    file that cannot be stat'ed is computed every time: `compute` raises what it raises)."""
    if _MEMO is None:
        return compute()
    try:
        st = os.stat(path)
    except OSError:
        return compute()
    key = (kind, os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _MEMO:
        _MEMO[key] = compute()
    return _MEMO[key]
