"""A bounded on-disk cache of sampled video frames (the encoded JPEG bytes a judge request sends).

Why: decoding is most of a judge phase's CPU (issue 13).  The request cache only helps when the whole request is
the same; a second judge model, a changed prompt or a rerun with a cold request cache would decode every video
again.  This cache is keyed by the video's content identity and the sampling parameters only, so any of those
decodes nothing.

- Off unless configured: the engine has no cache location of its own, the caller passes one
  (`configure_frame_cache(<emo-tasks cache>/frames, max_bytes)`).
- One file per (video, parameters), written atomically (`judges.atomic.atomic_path`), with a checksum: a reader
  never sees half a file, and a damaged or vanished file is a miss, never an error.  Safe across threads and
  processes (lmms-eval ranks, a render pool) sharing the folder.
- Bounded: when the folder passes `max_bytes`, the least recently used files (by mtime, refreshed on every hit)
  are removed down to 90 % of the bound.
- `clear_frame_cache(folder)` removes it all.

A judge turns the caches on, and gets its videos ready ahead of the requests, with one call: `prepare_media`
(a viewer that reads the judge's frames: `media_caches`).
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from .atomic import atomic_path
from .config import MediaSettings
from .filehash import active_digest_store, configure_digest_store, file_sha256, hash_files

T = TypeVar("T")

DEFAULT_FRAME_CACHE_MAX_MB = 2048
#: Bump when the sampling rule or the encoder settings change, so old entries are never served.  (Not bumped for
#: whole-file content identities: that changed the identities themselves, so entries under the old ones are never
#: looked up again and age out; bumping would also drop valid entries keyed by a file's sha256.)
FRAME_CACHE_VERSION = "frames-v1"
_MAGIC = b"EMOFRM1\n"
_SUFFIX = ".frames"
_EVICT_TO = 0.9


def frame_cache_key(identity: str, interval_s: float, max_frames: int, max_side: int | None, quality: int) -> str:
    """The cache key of one video's sampled frames: content identity + every parameter that changes the bytes."""
    text = f"{FRAME_CACHE_VERSION};id={identity};interval={interval_s!r};max={max_frames};side={max_side};q={quality}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _pack(frames: list[bytes]) -> bytes:
    body = struct.pack("<I", len(frames)) + b"".join(struct.pack("<I", len(f)) for f in frames) + b"".join(frames)
    return _MAGIC + body + hashlib.sha256(body).digest()


def _unpack(data: bytes) -> list[bytes] | None:
    if len(data) < len(_MAGIC) + 4 + 32 or not data.startswith(_MAGIC):
        return None
    body, digest = data[len(_MAGIC) : -32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    (count,) = struct.unpack_from("<I", body, 0)
    offset = 4 + 4 * count
    if offset > len(body):
        return None
    lengths = struct.unpack_from(f"<{count}I", body, 4)
    if offset + sum(lengths) != len(body):
        return None
    frames = []
    for n in lengths:
        frames.append(body[offset : offset + n])
        offset += n
    return frames


class FrameCache:
    """Sampled frames (lists of JPEG bytes) under `root`, one file per key, at most about `max_bytes` in all."""

    def __init__(self, root: str | Path, max_bytes: int = DEFAULT_FRAME_CACHE_MAX_MB << 20) -> None:
        if max_bytes <= 0:
            raise ValueError(f"frame cache bound must be positive, got {max_bytes} bytes")
        self.root = Path(root)
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._approx_bytes: int | None = None  # this process's running estimate; rescanned when over the bound

    def _file(self, key: str) -> Path:
        return self.root / key[:2] / (key + _SUFFIX)

    def get(self, key: str) -> list[bytes] | None:
        path = self._file(key)
        try:
            data = path.read_bytes()
        except OSError:  # not there, or evicted by another process meanwhile
            return None
        frames = _unpack(data)
        if frames is None:
            return None
        try:
            os.utime(path)  # least recently used = oldest mtime
        except OSError:
            pass
        return frames

    def put(self, key: str, frames: list[bytes]) -> None:
        data = _pack(frames)
        try:
            with atomic_path(self._file(key)) as tmp:
                tmp.write_bytes(data)
        except OSError:  # a full or read-only disk costs a decode next time, never the request
            return
        with self._lock:
            if self._approx_bytes is None:
                self._approx_bytes = self.size_bytes()
            else:
                self._approx_bytes += len(data)
            if self._approx_bytes > self.max_bytes:
                self._approx_bytes = self._evict()

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        if not self.root.is_dir():
            return out
        for sub in os.scandir(self.root):
            if not sub.is_dir():
                continue
            for entry in os.scandir(sub.path):
                if entry.name.endswith(_SUFFIX):
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    out.append((st.st_mtime, st.st_size, Path(entry.path)))
        return out

    def size_bytes(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _evict(self) -> int:
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        target = int(self.max_bytes * _EVICT_TO)
        for _, size, path in entries:
            if total <= target:
                break
            try:
                path.unlink()
            except OSError:
                pass
            total -= size
        return total


def clear_frame_cache(root: str | Path) -> int:
    """Remove every cached frame file (and stale temporaries) under `root`; returns how many files went."""
    root = Path(root)
    removed = 0
    if not root.is_dir():
        return 0
    for sub in os.scandir(root):
        if not sub.is_dir():
            continue
        for entry in os.scandir(sub.path):
            if entry.name.endswith(_SUFFIX) or (entry.name.startswith(".") and ".tmp" in entry.name):
                try:
                    os.unlink(entry.path)
                    removed += 1
                except OSError:
                    pass
        try:
            os.rmdir(sub.path)
        except OSError:
            pass
    return removed


def frame_cache_max_bytes(env: Mapping[str, str]) -> int:
    """`EMO_FRAME_CACHE_MAX_MB` of `env` in bytes (see `judges.config.frame_cache_max_mb`)."""
    from .config import frame_cache_max_mb

    return frame_cache_max_mb(env, DEFAULT_FRAME_CACHE_MAX_MB) << 20


_active: FrameCache | None = None


def configure_frame_cache(root: str | Path | None, max_bytes: int = DEFAULT_FRAME_CACHE_MAX_MB << 20) -> None:
    """Turn the frame cache on at `root` (bounded by `max_bytes`), or off with None or `max_bytes=0`.
    Process-wide (a render pool's workers must call it too); call it before rendering (emo-tasks: with
    `<cache dir>/frames`)."""
    global _active
    if root is None or max_bytes <= 0:
        _active = None
    elif _active is None or _active.root != Path(root) or _active.max_bytes != int(max_bytes):
        _active = FrameCache(root, max_bytes)


def active_frame_cache() -> FrameCache | None:
    return _active


# Render statistics (benchmarks read them; cheap enough to keep always on).
_stats_lock = threading.Lock()
_stats: dict[str, float] = {}


def reset_render_stats() -> None:
    with _stats_lock:
        _stats.clear()
        _stats.update(decodes=0, decode_s=0.0, encode_s=0.0, cache_hits=0, cache_misses=0, cache_read_s=0.0)


def render_stats() -> dict[str, float]:
    """Counts and CPU-side seconds of frame rendering since the last reset: decodes, decode_s (demux + decode +
    RGB), encode_s (JPEG), cache_hits, cache_misses, cache_read_s."""
    with _stats_lock:
        return dict(_stats)


def _add_stats(**values: Any) -> None:
    with _stats_lock:
        for name, value in values.items():
            _stats[name] = _stats.get(name, 0) + value


reset_render_stats()
_now = time.perf_counter


# ------------------------------------------------------------------------------------------------ pre-rendering
_pool: Any = None
_pool_key: tuple[str, int, int] | None = None
_pending: dict[str, Any] = {}  # frame-cache key -> concurrent.futures.Future of a render running in the pool
_pool_lock = threading.Lock()


def _worker_init(root: str, max_bytes: int) -> None:
    configure_frame_cache(root, max_bytes)


def _render_into_cache(part: Any) -> int:
    """In a pool worker: decode and encode one video's kept frames into the frame cache (the main process reads
    them from there); returns how many frames were kept."""
    return len(part.frames_jpeg())


def part_key(part: Any) -> str | None:
    """The frame-cache key of a video part (None when no frame cache is configured).

    The part's `identity` travels with it into the render pool's workers (pickled), so a worker files the frames
    under the very key the parent looks up, without hashing the video again; a part without one is keyed by
    the file's whole-content sha256, memoised per process (`media.file_sha256`), the same in every process."""
    cache = _active
    if cache is None:
        return None
    identity = part.identity if part.identity is not None else "sha256:" + file_sha256(part.path)
    return frame_cache_key(identity, part.interval_s, part.max_frames, part.max_side, part.quality)


def prerender(parts: Iterable[Any], workers: int) -> int:
    """Render the frames of `parts` (VideoFramesPart) into the frame cache in a pool of `workers` processes, in the
    background and in order, so that decoding runs on every core, outside the request-concurrency slots, while
    other work (the step agent's batch) goes on; each request waits only for its own video
    (`VideoFramesPart.pending()`).  Parts already cached, or already being rendered, are skipped.  Needs a frame
    cache (it is where the frames go); returns how many renders were started."""
    cache = _active
    if cache is None or workers <= 0:
        return 0
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _pool, _pool_key
    started = 0
    with _pool_lock:
        key = (str(cache.root), cache.max_bytes, workers)
        if _pool is None or _pool_key != key:
            if _pool is not None:
                _pool.shutdown(wait=False, cancel_futures=True)
            _pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=multiprocessing.get_context("spawn"),  # no fork of a process with threads
                initializer=_worker_init,
                initargs=(str(cache.root), cache.max_bytes),
            )
            _pool_key = key
        for part in parts:
            try:
                k = part_key(part)
            except OSError:  # a missing file fails its own request, naming the file
                continue
            if k is None or k in _pending or cache._file(k).exists():
                continue
            with _caller_main_hidden():  # the first submits start the workers
                future = _pool.submit(_render_into_cache, part)
            _pending[k] = future
            future.add_done_callback(lambda _f, k=k: _forget(k))
            started += 1
    return started


@contextmanager
def _caller_main_hidden() -> Iterator[None]:
    """Start spawned workers without importing the caller's program: spawn re-imports the parent's `__main__` in
    every child (for `python -m lmms_eval` that is ~10 s of imports before the first frame), and the workers need
    only `judges`.  So `__main__` is a bare module while the workers start."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _forget(key: str) -> None:
    # A done-callback: it runs in the pool's manager thread (or inline, for a future already done) and must never
    # wait for `_pool_lock`, which `prerender` holds while it submits: dict.pop is atomic under the GIL.
    _pending.pop(key, None)


def pending_render(key: str | None) -> Any:
    """The pool's future for a frame-cache key being rendered now, else None."""
    if key is None:
        return None
    return _pending.get(key)  # atomic under the GIL; no lock, so a request never waits behind `prerender`


def shutdown_prerender() -> None:
    """Stop the render pool (tests; the pool's processes also end with the program)."""
    global _pool, _pool_key
    with _pool_lock:
        pool, _pool, _pool_key = _pool, None, None
        _pending.clear()
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------------------------------- a judge's media
#: Videos hashed and handed to the render pool at a time by `prepare_media`.
MEDIA_CHUNK = 64


@contextmanager
def media_caches(media: MediaSettings) -> Iterator[None]:
    """The frame cache and the content-hash store as a judge with `media` has them, for the block only (a viewer
    reading the frames a judge was sent); the process's own are restored after."""
    before = active_frame_cache()
    store = active_digest_store()
    configure_frame_cache(media.frame_cache, media.frame_cache_max_bytes)
    configure_digest_store(media.digest_store)
    try:
        yield
    finally:
        configure_frame_cache(before.root if before else None, before.max_bytes if before else 0)
        configure_digest_store(store.path if store else None)


#: `prepare_media` leaves its thread running when its block ends (`linger`)
_linger = False


def linger(on: bool) -> None:
    """While on, a pipeline that ends leaves its media thread queueing frames for the render pool (a batched
    stage's pass ends long before its judge round; the frames are then ready when the round comes)."""
    global _linger
    _linger = on


@contextmanager
def prepare_media(
    media: MediaSettings, groups: Sequence[Sequence[T]], path: Callable[[T], str | Path], part: Callable[[T], Any]
) -> Iterator[list[list[Future]]]:
    """The video parts of a pipeline's rows, made ready ahead of their requests: per row of `groups` (nested the
    same way) a future of its `part(row)` (a `VideoFramesPart` of the video at `path(row)`).

    The frame cache and the content-hash store are turned on as `media` says (process-wide: a second judge model,
    a changed prompt or a cold answer cache then decodes no video again, and unchanged videos of earlier runs are
    not read again; the store is opened by the thread below).  Then, in a thread of its own, a chunk at a time in
    pipeline order, the videos are hashed
    (several at once: `hash_files`), their parts made and their frames queued for the render pool (`prerender`:
    decoded in other processes while the first agents work).  So a row's request waits (outside the concurrency
    slots) for its own video only, and a request that needs no video starts at once (hashing 6,500 videos first
    held the first request back by 1.5-3 s).  An error fails every part not yet made, so the pipeline raises it.
    Leaving the block (the pipeline ended, say on an error) stops the thread: no further chunk is hashed or
    rendered for a run that is gone; except while `linger` is on (a batched stage, `judges.batch.activated`):
    there a pass ends with its rows stopped at requests that wait for a batch, and the thread goes on queueing
    every video's frames for the render pool, so the judge round's frames are decoded while the client waits for
    the provider, not after."""
    configure_frame_cache(media.frame_cache, media.frame_cache_max_bytes)
    stop = threading.Event()
    futures: list[list[Future]] = [[Future() for _ in group] for group in groups]
    order = [(f, r) for fs, group in zip(futures, groups, strict=True) for f, r in zip(fs, group, strict=True)]
    threading.Thread(
        target=_make_ready, args=(order, path, part, media, stop), name="judges-media", daemon=True
    ).start()
    try:
        yield futures
    finally:
        if not _linger:
            stop.set()


def _make_ready(
    order: Sequence[tuple[Future, T]],
    path: Callable[[T], str | Path],
    part: Callable[[T], Any],
    media: MediaSettings,
    stop: threading.Event,
) -> None:
    """`prepare_media`'s thread: open the content-hash store (here, so that a store another process holds locked
    never holds back the first request), then, a chunk of rows at a time, hash their videos, make their parts,
    queue their frames for the render pool and hand each row its part; an error goes to every part not yet made."""
    try:
        configure_digest_store(media.digest_store)
        for start in range(0, len(order), MEDIA_CHUNK):
            if stop.is_set():
                return
            chunk = order[start : start + MEDIA_CHUNK]
            hash_files(path(r) for _, r in chunk)
            parts = [(f, part(r)) for f, r in chunk]
            prerender((p for _, p in parts), media.render_workers)
            for f, p in parts:
                f.set_result(p)
    except BaseException as exc:  # noqa: BLE001 - handed to the pipeline, which raises it
        for f, _ in order:
            if not f.done():
                f.set_exception(exc)
