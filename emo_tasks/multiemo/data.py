"""MultiEmo-Bench data in our documented format (no official file format is public).

One JSON object per line (`multiemo.jsonl`):

    {"id": "emoset_000123",                      # unique per file
     "image": "images/emoset_000123.jpg",        # relative to the file's folder, and inside it
     "votes": {"amusement": 3, "anger": 0, "awe": 12, "contentment": 9, "disgust": 0,
               "excitement": 4, "fear": 0, "sadness": 0, "none": 1},   # annotators who selected each (0..n)
     "n_annotators": 20,
     "original_label": "awe",                    # the EmoSet/FI single label (one of the eight)
     "source": "EmoSet",                         # EmoSet | FI
     "annotators": [["awe", "contentment"], ["none"], ...]}   # optional: each annotator's selections

`annotators`, when present, must list exactly `n_annotators` selections whose counts equal `votes` (it is what the
human split-half baseline needs).  Without it, the votes (with "none") must add up to at least `n_annotators`:
every annotator selects at least one option.  Files are UTF-8 (a byte-order mark is fine).
Location (see `settings`): `EMO_MULTIEMO_FILE`, else
`EMO_DATA_ROOT/multiemo/multiemo.jsonl`, else the Hub dataset named by `EMO_MULTIEMO_HUB_ID` (a file in this
format in the snapshot).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, hub_snapshot, iter_jsonl
from emo_tasks.datafiles import check_listed_files
from emo_tasks.images import image_path, portable_name

from . import scoring
from .sample import sample_file
from .scoring import EMOTIONS
from .settings import FIX as _FIX
from .settings import MultiEmoSettings

VOTE_KEYS = (*EMOTIONS, "none")
SOURCES = ("EmoSet", "FI")


def data_file(settings: MultiEmoSettings) -> Path:
    """The data file to load: the bundled sample (generated on first use) for the sample source, else the local
    file the settings name (--data, EMO_MULTIEMO_FILE or EMO_DATA_ROOT/multiemo), else the Hub dataset's."""
    if settings.source == "sample":
        return sample_file(settings.common.cache_dir)
    if settings.data.file is not None:
        return settings.data.file
    if settings.data.hub_id:
        return _hub_file(settings.data.hub_id)
    raise DataError(f"No MultiEmo-Bench data configured. {_FIX}")


def _hub_file(repo_id: str) -> Path:
    snapshot = hub_snapshot(repo_id, _FIX)
    found = sorted(snapshot.rglob("multiemo.jsonl")) or sorted(snapshot.rglob("*.jsonl"))
    if not found:
        raise DataError(f"No .jsonl data file in the Hub snapshot {snapshot}. {_FIX}")
    return found[0]


def validate_row(row: Any, where: str) -> dict[str, Any]:
    """A validated, normalised image row; DataError naming `where` otherwise."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for key in ("id", "image", "votes", "n_annotators", "original_label", "source"):
        if key not in row:
            raise DataError(f"{where}: missing field {key!r}")
    if not isinstance(row["id"], str) or not row["id"].strip():
        raise DataError(f"{where}: id must be a non-empty string")
    if not isinstance(row["image"], str) or not row["image"].strip():
        raise DataError(f"{where}: image must be a path string")
    n = row["n_annotators"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise DataError(f"{where}: n_annotators must be an integer >= 2, got {n!r}")
    votes = row["votes"]
    if not isinstance(votes, dict):
        raise DataError(f"{where}: votes must be an object with the keys {', '.join(VOTE_KEYS)}")
    missing = [k for k in VOTE_KEYS if k not in votes]
    extra = [k for k in votes if k not in VOTE_KEYS]
    if missing or extra:
        raise DataError(f"{where}: votes keys wrong (missing {missing}, unknown {extra}); expected {list(VOTE_KEYS)}")
    for k in VOTE_KEYS:
        v = votes[k]
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= n:
            raise DataError(f"{where}: votes[{k!r}] must be an integer in 0..{n}, got {v!r}")
    if row["original_label"] not in EMOTIONS:
        raise DataError(f"{where}: original_label {row['original_label']!r} is not one of {', '.join(EMOTIONS)}")
    if row["source"] not in SOURCES:
        raise DataError(f"{where}: source must be one of {', '.join(SOURCES)}, got {row['source']!r}")
    annotators = row.get("annotators")
    total = sum(votes[k] for k in VOTE_KEYS)
    if annotators is None and total < n:
        # every annotator selects at least one option (an emotion or "none"), so the votes add up to >= n
        raise DataError(
            f"{where}: votes (with 'none') add up to {total}, fewer than n_annotators={n}; every annotator selects "
            "at least one option, so a vote is missing or n_annotators is too large"
        )
    if annotators is not None:
        if not isinstance(annotators, list) or len(annotators) != n:
            raise DataError(f"{where}: annotators must list {n} selections (n_annotators), got {len(annotators or [])}")
        counts: Counter[str] = Counter()
        for j, sel in enumerate(annotators):
            if not isinstance(sel, list) or any(s not in VOTE_KEYS for s in sel) or len(set(sel)) != len(sel):
                raise DataError(f"{where}: annotator {j} selection {sel!r} must be a list of distinct {VOTE_KEYS}")
            counts.update(sel)
        diff = {k: (counts.get(k, 0), votes[k]) for k in VOTE_KEYS if counts.get(k, 0) != votes[k]}
        if diff:
            raise DataError(f"{where}: annotators do not add up to votes (selected, votes): {diff}")
    return {
        "image_id": row["id"].strip(),
        "image": row["image"].strip(),
        "votes": [votes[e] for e in EMOTIONS],
        "votes_none": votes["none"],
        "n_annotators": n,
        "original_label": row["original_label"],
        "source": row["source"],
        "annotators": annotators,
    }


def load_images(path: Path) -> list[dict[str, Any]]:
    """Every image row, validated; image files must exist (all missing ones are listed); ids unique."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"MultiEmo-Bench data file not found: {path}. {_FIX}")
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    missing = []
    for n, raw in iter_jsonl(path):
        where = f"{path} line {n}"
        row = validate_row(raw, where)
        if row["image_id"] in seen:
            raise DataError(f"{where}: id {row['image_id']!r} repeats line {seen[row['image_id']]}")
        seen[row["image_id"]] = n
        row["image_path"] = str(image_path(row["image"], path, where))  # inside the file's folder
        row["image_name"] = portable_name(row["image"], path)
        if not Path(row["image_path"]).is_file():
            missing.append(f"{row['image_path']} (line {n})")
        row["line"] = n
        rows.append(row)
    if not rows:
        raise DataError(f"MultiEmo-Bench data file {path} has no rows")
    check_listed_files(missing, len(rows), "images", path)
    return rows


def image_result(img: dict[str, Any], scores: Sequence[float | None], n_parse_failed: int = 0) -> scoring.ImageResult:
    """One loaded image row (`load_images`) with its 8 predicted scores (None = no usable score) as the image's
    per-sample unit."""
    return scoring.ImageResult(
        image_id=img["image_id"],
        votes=tuple(img["votes"]),
        n_annotators=img["n_annotators"],
        original_label=img["original_label"],
        scores=tuple(scores),
        n_parse_failed=n_parse_failed,
    )
