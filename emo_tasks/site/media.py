"""Thumbnails of the image files a sample's media names: JPEG, at most 320 px a side, named by the sha256 of the
source file's content (`media/<sha256>.jpg`), so a frame shared by many samples or runs is one file.

Why a cache: the full-scale site shows tens of thousands of video frames; encoding a thumbnail costs far more than
hashing its source, so each thumbnail is also kept in `<emo-tasks cache>/view_thumbs/` and a later site (of any
run) copies it from there.  A site holds copies only, never a hard link (to the cache's file or the user's own),
and only of files `Allowed` lets in (the run folder, the benchmark's data).  A media entry that is not an existing
image file Pillow can read gets no thumbnail: the page shows it as text.  An image that is a symbolic link is
resolved to its regular file (`source_file`), so a site and the cache hold regular files only, never a link
(broken once placed elsewhere, or naming a local path); a cache entry that is not a regular file is made again.

Why a `Thumbnailer` that takes files while the site is being read: at full scale the thumbnails are most of the
work and reading the runs' samples is single-threaded Python, so the thumbnails are made meanwhile, in worker
processes.  Threads share the reader's GIL (Pillow's and hashlib's C parts release it, the per-file Python around
them does not): on the full-scale benchmark, 2 cores, two thumbnail threads took 47 s and 65 s of CPU where two
processes took 36 s and 55 s (benchmarks/RESULTS.md).  A site with fewer images than a batch never starts a
process: its thumbnails are made in the calling process.
Resizing is bilinear (Pillow's, antialiased over the whole source area): at these sizes it looks as bicubic does
and costs a third less.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

MAX_SIDE = 320
QUALITY = 85
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff"})
THUMB_CACHE = "view_thumbs"


def image_file(entry: str, run_dir: Path) -> Path | None:
    """The image file a media entry names (absolute, or relative to the run folder), None when it names none."""
    if not isinstance(entry, str) or Path(entry).suffix.lower() not in IMAGE_SUFFIXES:
        return None
    path = Path(entry).expanduser()
    for cand in (path,) if path.is_absolute() else (run_dir / path, path):
        try:
            if cand.is_file():
                return cand
        except OSError:  # a name too long for the file system, a bad character: not a file
            return None
    return None


class Allowed:
    """Where a site's media may come from: `allowed(path)` is whether the file `path` names, after every symbolic
    link is resolved, lies inside one of `roots` (the run folder, the benchmark's data folders).  Why: a run
    folder is untrusted input (a leaderboard maintainer views runs others sent), and a link in it or a path in
    its sample log would otherwise put any file of the maintainer's into a site meant to be published."""

    def __init__(self, roots: Iterable[Path]) -> None:
        real = {os.path.realpath(r) for r in roots}
        self.roots = tuple(sorted(r.rstrip(os.sep) + os.sep for r in real))
        self._seen: dict[Path, bool] = {}  # each file resolved once: for the thumbnails, then the pages

    def __call__(self, path: Path) -> bool:
        if path not in self._seen:
            real = os.path.realpath(path) + os.sep
            self._seen[path] = any(real.startswith(root) for root in self.roots)
        return self._seen[path]


def content_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def encode(src: Path, dest: Path) -> None:
    """A JPEG thumbnail of `src` (transparency on white) at `dest`, written whole or not at all."""
    from PIL import Image

    with Image.open(src) as im:
        if im.format == "JPEG" and im.mode in ("RGB", "L") and max(im.size) <= MAX_SIDE:
            _place(src, dest)  # already a small JPEG (a judge's frame): its own bytes, nothing re-encoded
            return
        im.draft("RGB", (MAX_SIDE, MAX_SIDE))  # a JPEG decodes at a reduced scale: much faster
        im.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.BILINEAR)
        if im.mode in ("RGBA", "LA", "P"):
            im = im.convert("RGBA")
            canvas = Image.new("RGB", im.size, "white")
            canvas.paste(im, mask=im.getchannel("A"))
            im = canvas
        im = im.convert("RGB")
        fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                im.save(f, "JPEG", quality=QUALITY)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _place(src: Path, dest: Path) -> None:
    """`src`'s bytes at `dest` (a small JPEG as it is, or a cached thumbnail) as a copy, written whole or not at
    all: never a hard link, which would make the site's file the user's own (one inode: published with it, changed
    with it) or the cache's; `dest` already there as a regular file is the same content (its name is the content's
    hash), placed meanwhile.  `src` is a regular file (`source_file`)."""
    if regular(dest):
        return
    fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def regular(path: Path) -> bool:
    """Whether `path` itself is a regular file (not a symlink to one): what a site and its cache hold."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def source_file(src: Path) -> Path:
    """The regular file whose bytes `src` names: a symlink resolved (relative or absolute, a chain of them), so the
    site holds those bytes and never the link (a relative link placed elsewhere points at nothing; an absolute one
    points out of the site and names a local path).  Raises OSError when it is not a regular file."""
    real = Path(os.path.realpath(src)) if os.path.islink(src) else src
    if not stat.S_ISREG(os.stat(real).st_mode):
        raise OSError(f"{src}: not a regular file")
    return real


def thumbnail(src: Path, media_dir: Path, cache: Path | None) -> str | None:
    """The thumbnail's name in `media_dir` (`<sha256>.jpg`), made or taken from `cache`; None when `src` is not an
    image Pillow can read.  A cache entry that is not a regular file (a symlink an older version placed there,
    broken or not) is made again."""
    try:
        src = source_file(src)
        name = f"{content_hash(src)}.jpg"
        dest = media_dir / name
        if regular(dest):
            return name
        cached = cache / name if cache is not None else None
        if cached is None or not regular(cached):
            target = cached if cached is not None else dest
            target.parent.mkdir(parents=True, exist_ok=True)
            encode(src, target)
        if cached is not None:
            _place(cached, dest)
        return name
    except Exception:  # noqa: BLE001 - not an image (or unreadable): shown as text, never stops the site
        return None


class Thumbnailer:
    """Thumbnails made in the background while the caller goes on: `add(files)` queues them (each distinct file
    once), `names()` waits for all and gives {file: name or None}.  Files go to `workers` processes in batches of
    BATCH; the pool starts with the first full batch, so a site with fewer images makes them in this process."""

    BATCH = 256

    def __init__(self, media_dir: Path, cache: Path | None, workers: int | None = None) -> None:
        self.media_dir, self.cache = media_dir, cache
        self.workers = workers or min(8, os.cpu_count() or 1)
        self._pool: Executor | None = None
        self._seen: set[Path] = set()
        self._pending: list[Path] = []
        self._done: dict[Path, str | None] = {}
        self._jobs: list[tuple[list[Path], Future]] = []

    def add(self, files: Iterable[Path]) -> None:
        for f in files:
            if f not in self._seen:
                self._seen.add(f)
                self._pending.append(f)
        while len(self._pending) >= self.BATCH and self.workers > 1:
            batch, self._pending = self._pending[: self.BATCH], self._pending[self.BATCH :]
            if self._pool is None:
                self.media_dir.mkdir(parents=True, exist_ok=True)
                self._pool = _start_pool(self.workers)
            self._jobs.append((batch, self._pool.submit(_batch, batch, self.media_dir, self.cache)))

    def names(self) -> dict[Path, str | None]:
        """{file: thumbnail name or None} of every file added; raises when a worker process died."""
        if self._pending and self._pool is not None:  # the last, partial batch: shared by the workers
            step = -(-len(self._pending) // self.workers)
            for i in range(0, len(self._pending), step):
                batch = self._pending[i : i + step]
                self._jobs.append((batch, self._pool.submit(_batch, batch, self.media_dir, self.cache)))
        elif self._pending:
            self.media_dir.mkdir(parents=True, exist_ok=True)
            self._done.update(zip(self._pending, _batch(self._pending, self.media_dir, self.cache), strict=True))
        self._pending = []
        for batch, job in self._jobs:
            self._done.update(zip(batch, job.result(), strict=True))
        self._jobs = []
        return dict(self._done)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Thumbnailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _start_pool(workers: int) -> Executor:
    """Worker processes forked from this one when it runs no other thread (fork copies nothing until written, and
    unlike spawn it never imports the caller's `__main__` again: a script without a main guard works); threads
    otherwise.  Every object alive now is frozen for the fork (`gc.freeze`), so no collection in a worker touches,
    and so copies, the parent's memory."""
    if "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return ThreadPoolExecutor(workers, thread_name_prefix="thumbnail")
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    gc.freeze()
    try:
        pool.submit(int).result()  # starts the workers now, while nothing else runs
    finally:
        gc.unfreeze()
    return pool


def _batch(files: list[Path], media_dir: Path, cache: Path | None) -> list[str | None]:
    """A worker's job: the thumbnails of `files`, in order."""
    return [thumbnail(f, media_dir, cache) for f in files]


def thumbnails(
    files: Iterable[Path], media_dir: Path, cache: Path | None, workers: int | None = None
) -> dict[Path, str | None]:
    """Every file's thumbnail name (None: none): `Thumbnailer` for a list known at once."""
    with Thumbnailer(media_dir, cache, workers) as pool:
        pool.add(files)
        return pool.names()
