"""Still images the image benchmarks (MVEI, MultiEmo-Bench) show the model: where a data file's image path points,
and the image itself, as lmms-eval's image models take it.

Why shared: both benchmarks list images relative to their data file and hand lmms-eval `[PIL.Image]`; one reading
keeps the path rule and the error message the same for both.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Any

from emo_tasks.common import DataError


def image_path(image: str, data_file: Path) -> Path:
    """An image path as a data file lists it: absolute as given, else relative to the data file's folder."""
    path = Path(image)
    return path if path.is_absolute() else Path(data_file).parent / image


def portable_name(image: str, data_file: Path) -> str:
    """An image as a data file lists it, in a form that is the same on every machine: its path relative to the data
    file's folder (POSIX separators, "./" and ".." folded), or only its file name when the file lists an absolute
    path outside that folder.  Never a machine's absolute path: it is part of a row's identity (`doc_to_target`),
    which a judge stage run elsewhere, on a copy of the data, must find unchanged."""
    folder = os.path.abspath(Path(data_file).parent)
    full = os.path.abspath(image_path(image, data_file))
    if full == folder or not full.startswith(folder.rstrip(os.sep) + os.sep):
        return PurePath(full).name
    return PurePath(os.path.relpath(full, folder)).as_posix()


def load_image(path: str | Path, benchmark: str) -> Any:
    """The image as an RGB PIL image; a DataError naming the benchmark and the file when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise DataError(f"cannot read {benchmark} image {path}: {exc}") from exc
