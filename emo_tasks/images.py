"""Still images the image benchmarks (MVEI, MultiEmo-Bench) show the model: where a data file's image path points,
and the image itself, as lmms-eval's image models take it.

Why shared: both benchmarks list images relative to their data file and hand lmms-eval `[PIL.Image]`; one reading
keeps the path rule (`contained_path`, which MME-Emotion's videos follow too), the size rule and the error
messages the same for all.

Size rule: an image above EMO_MAX_IMAGE_PIXELS (width x height, default 150,000,000; `emo_tasks.settings`) is a
DataError naming the file, read from its header before anything is decoded (Pillow's own bomb limit is raised to
match when EMO_MAX_IMAGE_PIXELS is set above it, and its warning below the limit is silenced).  An image above
HOLD_PIXELS (4096 x 4096, more than any image model in lmms-eval takes) is decoded at a reduced size (JPEG: `draft`,
the decoder's own 1/2-1/8 scaling; other formats: `reduce` right after decoding) and resized to fit HOLD_PIXELS
before it is held.
Images up to HOLD_PIXELS are returned exactly as before (opened, converted to RGB).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path, PurePath
from typing import Any

from emo_tasks.common import DataError

HOLD_PIXELS = 4096 * 4096


def leaves_root(relative: str) -> bool:
    """Whether a listed path is absolute or climbs out of its root with `..` (after folding "a/../b")."""
    pure = PurePath(relative)
    if os.path.isabs(relative) or pure.drive or pure.root:
        return True
    folded = os.path.normpath(relative)
    return folded == os.pardir or folded.startswith(os.pardir + os.sep)


def contained_path(
    relative: str, root: Path, where: str, what: str = "image", memo: dict[str, str] | None = None
) -> Path:
    """`root / relative`, refused (DataError naming `where`) when it can lead out of `root`: an absolute path, a
    `..` that climbs out of it (after folding "a/../b"), or — when it exists — a symlink (of the file or a folder
    on the way) that resolves outside the resolved root, except into the Hub cache's own store of the snapshot
    that holds the root (`_hub_blob`).  The one policy for every benchmark's media paths.

    `memo` (a dict the caller keeps for one pass over a data file's rows): the resolved root and folders, so that a
    folder of 6,500 videos is resolved once, not once per row (os.path.realpath lstats every component: a second of
    the judge stage's start-up).  The file's own last component is still checked on every call."""
    if leaves_root(relative):
        raise DataError(
            f"{where}: {what} path must be relative to {root} and stay inside it (no absolute path, no '..' out of "
            f"it), got {relative!r}"
        )
    full = Path(root) / relative
    if os.path.lexists(full):
        real, real_root = _real(str(full), memo), _real_folder(str(root), memo)
        inside = real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)
        if not inside and not _hub_blob(real, real_root):
            raise DataError(
                f"{where}: {what} path {relative!r} is a symlink leading out of {root} (to {real}); copy the file into "
                "the data folder, or link the whole data folder instead"
            )
    return full


def _hub_blob(real: str, real_root: str) -> bool:
    """Whether `real` is a file of the Hugging Face cache's `blobs/` folder of the repository whose snapshot holds
    `real_root` (`<cache>/datasets--org--name/snapshots/<revision>/...`).  Why: the Hub cache stores every file of
    a snapshot as a symlink to `../../blobs/<hash>` (`snapshot_download`'s layout), so a data set taken from the Hub
    is a folder of links leading out of it, into its own repository's store and nowhere else."""
    parts = Path(real_root).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith(("datasets--", "models--", "spaces--")):
            return os.path.dirname(real) == os.path.join(*parts[:i], "blobs")
    return False


def _real_folder(folder: str, memo: dict[str, str] | None) -> str:
    if memo is None:
        return os.path.realpath(folder)
    hit = memo.get(folder)
    if hit is None:
        hit = memo[folder] = os.path.realpath(folder)
    return hit


def _real(path: str, memo: dict[str, str] | None) -> str:
    """os.path.realpath(path), with the folder's resolution taken from `memo`: a last component that is not a
    symlink (nor `.`/`..`) resolves to the resolved folder joined with its name, as realpath itself would."""
    if memo is None:
        return os.path.realpath(path)
    folder, name = os.path.split(path)
    if not name or name in (os.curdir, os.pardir) or os.path.islink(path):
        return os.path.realpath(path)
    return os.path.join(_real_folder(folder, memo), name)


def image_path(image: str, data_file: Path, where: str | None = None) -> Path:
    """An image path as a data file lists it, relative to the data file's folder and inside it (`contained_path`;
    `where` names the row in the error, default the data file)."""
    return contained_path(image, Path(data_file).parent, where or str(data_file))


def portable_name(image: str, data_file: Path) -> str:
    """An image as a data file lists it, in a form that is the same on every machine: its path relative to the data
    file's folder (POSIX separators, "./" and ".." folded), or only its file name when the file lists an absolute
    path outside that folder.  Never a machine's absolute path: it is part of a row's identity (`doc_to_target`),
    which a judge stage run elsewhere, on a copy of the data, must find unchanged."""
    folder = os.path.abspath(Path(data_file).parent)
    full = os.path.abspath(Path(image) if Path(image).is_absolute() else Path(data_file).parent / image)
    if full == folder or not full.startswith(folder.rstrip(os.sep) + os.sep):
        return PurePath(full).name
    return PurePath(os.path.relpath(full, folder)).as_posix()


def load_image(path: str | Path, benchmark: str, max_pixels: int | None = None) -> Any:
    """The image as an RGB PIL image, downscaled to HOLD_PIXELS when larger; a DataError naming the benchmark and the
    file when it cannot be read or has more than `max_pixels` pixels (default EMO_MAX_IMAGE_PIXELS)."""
    from PIL import Image, UnidentifiedImageError

    from emo_tasks.settings import max_image_pixels

    limit = max_image_pixels() if max_pixels is None else max_pixels
    if Image.MAX_IMAGE_PIXELS is not None and limit > 2 * Image.MAX_IMAGE_PIXELS:
        Image.MAX_IMAGE_PIXELS = limit // 2 + 1  # Pillow raises above twice its value: ours is the rule
    too_big = (
        "Set EMO_MAX_IMAGE_PIXELS higher to accept it (needs {n}), or shrink the file; the limit keeps one image "
        "from taking gigabytes of memory."
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our limit decides, below
            img = Image.open(path)
        with img:
            w, h = img.size
            if w * h > limit:
                raise DataError(
                    f"{benchmark} image {path} is {w}x{h} = {w * h:,} pixels, above EMO_MAX_IMAGE_PIXELS={limit:,}. "
                    + too_big.format(n=w * h)
                )
            if w * h <= HOLD_PIXELS:
                return img.convert("RGB")
            return _reduced(img, Image)
    except Image.DecompressionBombError as exc:  # Pillow's own limit, hit before the size is known to us
        raise DataError(
            f"{benchmark} image {path} is too large to decode ({exc}); above EMO_MAX_IMAGE_PIXELS={limit:,} or "
            f"Pillow's limit. {too_big.format(n='its width x height')}"
        ) from exc
    except (OSError, UnidentifiedImageError) as exc:
        raise DataError(f"cannot read {benchmark} image {path}: {exc}") from exc


def _reduced(img: Any, image_module: Any) -> Any:
    """`img` (opened, not decoded, more than HOLD_PIXELS) as RGB within HOLD_PIXELS, aspect kept."""
    w, h = img.size
    scale = math.sqrt(HOLD_PIXELS / (w * h))
    target = (max(1, int(w * scale)), max(1, int(h * scale)))
    if img.format == "JPEG":
        img.draft("RGB", target)  # decode at 1/2, 1/4 or 1/8 scale, no smaller than target
    img.load()
    factor = min(img.size[0] // target[0], img.size[1] // target[1])
    if factor > 1:
        img = img.reduce(factor)  # cheap box reduction in the file's own mode; the full decode is dropped
    img = img.convert("RGB")
    if img.size[0] * img.size[1] > HOLD_PIXELS:
        img = img.resize(target, image_module.Resampling.LANCZOS)
    return img
