"""MVEI data: find the file, validate every row, resolve the images.

Two local formats under `EMO_DATA_ROOT/mvei/` (or the file named by EMO_MVEI_FILE):
- `mvei.json`, the authors' standard file: `{id: {"image_path", "prompt" (the statement), "ground_truth":
  "correct"|"incorrect", "other_info": {"statement_meta": {"class": <dimension>}}}}`;
- `mvei.jsonl`, one object per line: `{"image", "statement", "label", "dimension"}` (an optional "id").
Image paths are relative to the data file's folder unless absolute.  Default source: the Hub dataset `wudq/MVEI`
(override with EMO_MVEI_HUB_ID), searched for a file in the standard format.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, file_from_env, hub_snapshot, iter_jsonl

HUB_ID = "wudq/MVEI"
DIMENSIONS = ("sentiment polarity", "emotion interpretation", "scene context", "perception subjectivity")
LABELS = ("correct", "incorrect")
_FIX = (
    "Set EMO_DATA_ROOT to a folder containing mvei/mvei.json (the authors' standard file) or mvei/mvei.jsonl "
    "(image, statement, label, dimension), or EMO_MVEI_FILE to the file itself."
)


def data_file(env: dict[str, str] | None = None) -> Path:
    """The MVEI data file to load: EMO_MVEI_FILE, else EMO_DATA_ROOT/mvei/mvei.json(l), else the Hub."""
    env = dict(os.environ) if env is None else env
    path = file_from_env(env, "EMO_MVEI_FILE", _FIX)
    if path is not None:
        return path
    if env.get("EMO_DATA_ROOT"):
        folder = Path(env["EMO_DATA_ROOT"]).expanduser() / "mvei"
        found = [p for p in (folder / "mvei.json", folder / "mvei.jsonl") if p.is_file()]
        if not found:
            raise DataError(f"no MVEI data in {folder} (looked for mvei.json and mvei.jsonl). {_FIX}")
        if len(found) > 1:
            raise DataError(f"{folder} holds both mvei.json and mvei.jsonl: keep one, or set EMO_MVEI_FILE.")
        return found[0]
    return _hub_file(env.get("EMO_MVEI_HUB_ID") or HUB_ID)


def _hub_file(repo_id: str) -> Path:
    snapshot = hub_snapshot(repo_id, "Allow Hub access, or " + _FIX)
    for candidate in sorted(snapshot.rglob("*.json")) + sorted(snapshot.rglob("*.jsonl")):
        try:
            rows = _read_rows(candidate)
        except DataError:
            continue
        if rows and (_is_standard(rows[0][1]) or _is_plain(rows[0][1])):
            return candidate
    raise DataError(f"No MVEI data file in the standard or plain format in the Hub snapshot {snapshot}. {_FIX}")


def _read_rows(path: Path) -> list[tuple[str, Any]]:
    """(row id, raw row) pairs from either format."""
    try:
        if path.suffix == ".jsonl":
            return [(f"line {n}", row) for n, row in iter_jsonl(path)]
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON: {exc}") from exc
    if isinstance(data, dict):
        return [(f"id {key!r}", value) for key, value in data.items()]
    if isinstance(data, list):
        return [(f"row {i}", value) for i, value in enumerate(data)]
    raise DataError(f"{path}: expected an object (id -> row) or a list of rows, found {type(data).__name__}")


def _is_standard(row: Any) -> bool:
    return isinstance(row, dict) and "image_path" in row and "ground_truth" in row


def _is_plain(row: Any) -> bool:
    return isinstance(row, dict) and "statement" in row and "label" in row


def _row_fields(row: Any, where: str) -> tuple[str, str, str, str]:
    """(image, statement, label, dimension) from either format, validated."""
    if _is_standard(row):
        meta = (row.get("other_info") or {}).get("statement_meta") or {}
        image, statement, label, dimension = (
            row["image_path"],
            row.get("prompt"),
            row["ground_truth"],
            meta.get("class"),
        )
    elif _is_plain(row):
        image, statement, label, dimension = row.get("image"), row["statement"], row["label"], row.get("dimension")
    else:
        raise DataError(
            f"{where}: not an MVEI row. Expected the standard fields (image_path, prompt, ground_truth, "
            f"other_info.statement_meta.class) or the plain ones (image, statement, label, dimension); got "
            f"{json.dumps(row)[:200] if isinstance(row, (dict, list)) else repr(row)[:200]}"
        )
    if not isinstance(image, str) or not image.strip():
        raise DataError(f"{where}: missing image path")
    if not isinstance(statement, str) or not statement.strip():
        raise DataError(f"{where}: missing statement")
    if not isinstance(label, str) or label.strip().lower() not in LABELS:
        raise DataError(f"{where}: label must be 'correct' or 'incorrect', got {label!r}")
    if not isinstance(dimension, str) or dimension.strip().lower() not in DIMENSIONS:
        raise DataError(f"{where}: unknown dimension {dimension!r}; expected one of {', '.join(DIMENSIONS)}")
    return image.strip(), statement.strip(), label.strip().lower(), dimension.strip().lower()


def load_docs(path: Path, source: str = "benchmark") -> list[dict[str, Any]]:
    """Every row as an lmms-eval doc, validated; every image must exist (all missing ones are listed)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"MVEI data file not found: {path}. {_FIX}")
    rows = _read_rows(path)
    if not rows:
        raise DataError(f"MVEI data file {path} has no rows")
    docs, missing = [], []
    for i, (row_id, row) in enumerate(rows):
        where = f"{path} {row_id}"
        image, statement, label, dimension = _row_fields(row, where)
        image_path = Path(image) if os.path.isabs(image) else path.parent / image
        if not image_path.is_file():
            missing.append(f"{image_path} ({row_id})")
        docs.append(
            {
                "pair_id": row_id.split(" ", 1)[1].strip("'") if " " in row_id else row_id,
                "row": i,
                "image_path": str(image_path),
                "statement": statement,
                "label": label,
                "dimension": dimension,
                "data_source": source,
            }
        )
    if missing:
        shown = "\n  ".join(missing[:10])
        more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise DataError(f"{len(missing)} of {len(rows)} MVEI images listed in {path} are missing:\n  {shown}{more}")
    return docs


def load_image(path: str) -> Any:
    """The image as an RGB PIL image; a DataError naming the file when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise DataError(f"cannot read MVEI image {path}: {exc}") from exc
