"""MVEI data: find the file, validate every row, resolve the images.

Two local formats (the file named by EMO_MVEI_FILE, or under `EMO_DATA_ROOT/mvei/`; see `settings`):
- `mvei.json`, the authors' standard file: `{id: {"image_path", "prompt" (the statement), "ground_truth":
  "correct"|"incorrect", "other_info": {"statement_meta": {"class": <dimension>}}}}`;
- `mvei.jsonl`, one object per line: `{"image", "statement", "label", "dimension"}` (an optional "id").
Image paths are relative to the data file's folder and must stay inside it (`emo_tasks.images.contained_path`).
Files are UTF-8 (a byte-order mark is fine); an id that repeats in `mvei.json` is an error naming both rows.
Default source: the Hub dataset `wudq/MVEI` (override with EMO_MVEI_HUB_ID), searched for a file in the standard
format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, hub_snapshot, iter_jsonl, load_json
from emo_tasks.datafiles import check_listed_files
from emo_tasks.images import image_path as resolve_image
from emo_tasks.images import portable_name

from .sample import sample_file
from .scoring import DIMENSIONS, LABELS
from .settings import FIX as _FIX
from .settings import HUB_ID, MVEISettings


def data_file(settings: MVEISettings) -> Path:
    """The MVEI data file to load: the bundled sample (generated on first use) for the sample source, else the
    local file the settings name (EMO_MVEI_FILE or EMO_DATA_ROOT/mvei), else the Hub dataset's."""
    if settings.source == "sample":
        return sample_file(settings.common.cache_dir)
    if settings.data.file is not None:
        return settings.data.file
    return _hub_file(settings.data.hub_id or HUB_ID)


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


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, second: int, rows: tuple[Any, Any]) -> None:
        super().__init__(key)
        self.key, self.first, self.second, self.rows = key, first, second, rows


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: an object, or _DuplicateKey when a key repeats (json.load would keep the last,
    silently dropping a row of the standard file's id -> row mapping)."""
    seen: dict[str, int] = {}
    for i, (key, _value) in enumerate(pairs):
        if key in seen:
            raise _DuplicateKey(key, seen[key], i, (pairs[seen[key]][1], pairs[i][1]))
        seen[key] = i
    return dict(pairs)


def _short(row: Any) -> str:
    return (json.dumps(row, ensure_ascii=False) if isinstance(row, (dict, list)) else repr(row))[:120]


def _read_rows(path: Path) -> list[tuple[str, Any]]:
    """(row id, raw row) pairs from either format; a repeated id (or any repeated key) is a DataError naming both."""
    if path.suffix == ".jsonl":
        return [(f"line {n}", row) for n, row in iter_jsonl(path)]
    try:
        data = load_json(path, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as dup:
        raise DataError(
            f"{path}: id {dup.key!r} appears twice (entries {dup.first + 1} and {dup.second + 1} of one object: "
            f"{_short(dup.rows[0])} and {_short(dup.rows[1])}); ids (and a row's fields) must be unique, so rename "
            "or remove one"
        ) from None
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
        image_path = resolve_image(image, path, where)  # inside the data file's folder (emo_tasks.images)
        if not image_path.is_file():
            missing.append(f"{image_path} ({row_id})")
        docs.append(
            {
                "pair_id": row_id.split(" ", 1)[1].strip("'") if " " in row_id else row_id,
                "row": i,
                "image_path": str(image_path),
                "image_name": portable_name(image, path),
                "statement": statement,
                "label": label,
                "dimension": dimension,
                "data_source": source,
            }
        )
    check_listed_files(missing, len(rows), "MVEI images", path)
    return docs
