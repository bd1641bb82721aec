"""Thumbnails of the image files a sample's media names: JPEG, at most 320 px a side, named by the sha256 of the
source file's content (`media/<sha256>.jpg`), so a frame shared by many samples or runs is one file.

Why a cache: the full-scale site shows tens of thousands of video frames; encoding a thumbnail costs far more than
hashing its source, so each thumbnail is also kept in `<emo-tasks cache>/view_thumbs/` and a later site (of any
run) links or copies it from there.  A media entry that is not an existing image file Pillow can read gets no
thumbnail: the page shows it as text.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
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
            _copy_whole(src, dest)  # already a small JPEG (a judge's frame): its own bytes, nothing re-encoded
            return
        im.draft("RGB", (MAX_SIDE, MAX_SIDE))  # a JPEG decodes at a reduced scale: much faster
        im.thumbnail((MAX_SIDE, MAX_SIDE))
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


def _copy_whole(src: Path, dest: Path) -> None:
    """`src`'s bytes at `dest`: a hard link (no copy; files are never rewritten in place), else a copy written whole
    or not at all."""
    try:
        os.link(src, dest)
        return
    except FileExistsError:  # the same content, placed meanwhile
        return
    except OSError:  # another file system, or links not allowed
        pass
    fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _place(cached: Path, dest: Path) -> None:
    try:
        os.link(cached, dest)
    except FileExistsError:  # the same content under another source path, placed meanwhile
        pass
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(cached, dest)


def thumbnail(src: Path, media_dir: Path, cache: Path | None) -> str | None:
    """The thumbnail's name in `media_dir` (`<sha256>.jpg`), made or taken from `cache`; None when `src` is not an
    image Pillow can read."""
    try:
        name = f"{content_hash(src)}.jpg"
        dest = media_dir / name
        if dest.exists():
            return name
        cached = cache / name if cache is not None else None
        if cached is None or not cached.is_file():
            target = cached if cached is not None else dest
            target.parent.mkdir(parents=True, exist_ok=True)
            encode(src, target)
        if cached is not None:
            _place(cached, dest)
        return name
    except Exception:  # noqa: BLE001 - not an image (or unreadable): shown as text, never stops the site
        return None


def thumbnails(
    files: Iterable[Path], media_dir: Path, cache: Path | None, workers: int | None = None
) -> dict[Path, str | None]:
    """Every file's thumbnail name (None: none), made in parallel (Pillow decodes without the GIL)."""
    unique = list(dict.fromkeys(files))
    if not unique:
        return {}
    media_dir.mkdir(parents=True, exist_ok=True)
    workers = workers or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        names = list(pool.map(lambda f: thumbnail(f, media_dir, cache), unique))
    return dict(zip(unique, names, strict=True))
