"""Still images the image benchmarks (MVEI, MultiEmo-Bench) show the model: where a data file's image path points,
and the image itself, as lmms-eval's image models take it.

Why shared: both benchmarks list images relative to their data file and hand lmms-eval `[PIL.Image]`; one reading
keeps the path rule and the error message the same for both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emo_tasks.common import DataError


def image_path(image: str, data_file: Path) -> Path:
    """An image path as a data file lists it: absolute as given, else relative to the data file's folder."""
    path = Path(image)
    return path if path.is_absolute() else Path(data_file).parent / image


def load_image(path: str | Path, benchmark: str) -> Any:
    """The image as an RGB PIL image; a DataError naming the benchmark and the file when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise DataError(f"cannot read {benchmark} image {path}: {exc}") from exc
