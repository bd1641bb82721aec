"""MME-Emotion data: find the files, validate every row, join the audio clues, check the videos.

Knows file layouts and nothing else.  Every error names the path or the row and says how to fix it.

Sources:
- `benchmark`: `EMO_DATA_ROOT/mme_emotion/` in the official layout when EMO_DATA_ROOT is set, else the Hub
  dataset `Karl28/MME-Emotion` (override with EMO_MME_HUB_ID) downloaded by huggingface_hub into its cache.
  (The variables are read by `settings.py`; the functions here take their values.)
- `sample`: the bundled sample (real rows, generated clips), written on first use (see `sample.py`).

Official layout: `<root>/<Task>/question/<Task_>.json` (rows `{video_id, label, label_set}`),
`<root>/<Task>/audio_clue/<Task_>_qwen2_audio_clues.json` (rows `{video_id, ground_truth, audio_clue}`) and the
videos at `<root>/<video_id>` (the id carries its folder and extension).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, hub_snapshot, load_json
from emo_tasks.images import contained_path, leaves_root
from judges.atomic import atomic_write_text
from judges.media import file_digest

from .protocol import TaskSpec, spec_for, task_specs

HUB_ID = "Karl28/MME-Emotion"


# ------------------------------------------------------------------------------------------------------ roots
def benchmark_root(data_root: str | Path | None, hub_id: str = HUB_ID) -> Path:
    """Where the benchmark files are: `<data_root>/mme_emotion` (EMO_DATA_ROOT), else the Hub snapshot of
    `hub_id` (EMO_MME_HUB_ID)."""
    if data_root:
        root = Path(data_root).expanduser() / "mme_emotion"
        if not root.is_dir():
            raise DataError(
                f"EMO_DATA_ROOT is set to {str(data_root)!r} but {root} does not exist. Put the MME-Emotion files "
                "there in the official layout (<Task>/question/<Task_>.json, <Task>/audio_clue/..., videos at "
                "<root>/<video_id>), or unset EMO_DATA_ROOT to use the Hub dataset " + HUB_ID + "."
            )
        return root
    return hub_root(hub_id or HUB_ID)


def hub_root(repo_id: str) -> Path:
    """Download (or reuse) the Hub dataset and return the folder holding the official layout.

    Archives in the snapshot (`*.zip`, `*.tar*`) are extracted once next to it, as lmms-eval does for video
    datasets."""
    snapshot = hub_snapshot(
        repo_id,
        "Either allow Hub access (and accept the dataset's terms / set HF_TOKEN if it is gated), or download "
        "MME-Emotion yourself and set EMO_DATA_ROOT to the folder that contains mme_emotion/ in the official layout.",
    )
    root = _find_layout(snapshot)
    if root is None:
        extracted = snapshot.parent.parent / "emo_tasks_extracted" / snapshot.name
        _extract_archives(snapshot, extracted)
        root = _find_layout(extracted)
    if root is None:
        raise DataError(
            f"The Hub snapshot of {repo_id} at {snapshot} does not contain the official layout "
            "(<Task>/question/<Task_>.json). Download the data yourself and set EMO_DATA_ROOT."
        )
    return root


def _find_layout(base: Path, max_depth: int = 3) -> Path | None:
    probe = next(iter(task_specs().values())).question_relpath
    if not base.is_dir():
        return None
    frontier = [base]
    for _ in range(max_depth + 1):
        nxt = []
        for folder in frontier:
            if (folder / probe).is_file():
                return folder
            nxt.extend(p for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith("."))
        frontier = nxt
    return None


def _extract_archives(snapshot: Path, target: Path) -> None:
    import tarfile
    import zipfile

    done = target / ".extracted"
    if done.is_file():
        return
    target.mkdir(parents=True, exist_ok=True)
    for archive in sorted(snapshot.rglob("*")):
        if archive.suffix == ".zip":
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(target)
        elif ".tar" in archive.name:
            with tarfile.open(archive) as tf:
                tf.extractall(target, filter="data")
    atomic_write_text(done, "ok\n")


# ------------------------------------------------------------------------------------------------------- rows
def _read_json_list(path: Path, what: str, fix: str) -> list[Any]:
    if not path.is_file():
        raise DataError(f"MME-Emotion {what} not found: {path}. {fix}")
    try:
        data = load_json(path)  # the shared reader: UTF-8 (a BOM is fine), bad bytes named with file and offset
    except DataError as exc:
        raise DataError(f"MME-Emotion {what}: {exc}") from exc
    if not isinstance(data, list):
        raise DataError(f"MME-Emotion {what} {path} must hold a JSON list of rows, found {type(data).__name__}")
    return data


def validate_question_row(row: Any, spec: TaskSpec, where: str) -> None:
    """Raise DataError naming `where` (file and row) when a question row is unusable."""
    if not isinstance(row, dict):
        raise DataError(f"{where}: a row must be an object with video_id, label, label_set; got {row!r:.80}")
    missing = [k for k in ("video_id", "label", "label_set") if k not in row]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)} (row: {json.dumps(row)[:200]})")
    if not isinstance(row["video_id"], str) or not row["video_id"].strip():
        raise DataError(f"{where}: video_id must be a non-empty path string, got {row['video_id']!r}")
    if leaves_root(row["video_id"]):  # the one path policy of all three benchmarks (emo_tasks.images)
        raise DataError(f"{where}: video_id must be relative to the data root, got {row['video_id']!r}")
    labels = row["label_set"]
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) and x.strip() for x in labels):
        raise DataError(f"{where}: label_set must be a non-empty list of strings, got {labels!r:.120}")
    if not isinstance(row["label"], str):
        raise DataError(f"{where}: label must be a string, got {row['label']!r}")
    gold = spec.gold_labels(row["label"])
    if not gold:
        raise DataError(f"{where}: empty label")
    unknown = [g for g in gold if g not in labels]
    if unknown:
        sep = f" (labels are split on {spec.label_separator!r})" if spec.multi_label else ""
        raise DataError(f"{where}: label(s) {unknown} not in the row's label_set {labels}{sep}")


def load_task_docs(
    spec: TaskSpec | str, root: Path, *, source: str = "benchmark", need_clues: bool = True
) -> list[dict[str, Any]]:
    """The task's rows as lmms-eval docs, validated, with their audio clue and absolute video path.

    `need_clues=False` (live audio-clue mode) tolerates a missing clue file or row."""
    spec = spec_for(spec) if isinstance(spec, str) else spec
    root = Path(root)
    qpath = root / spec.question_relpath
    fix = (
        "Set EMO_DATA_ROOT to the folder that contains mme_emotion/ in the official layout, or unset it to use "
        f"the Hub dataset {HUB_ID}."
    )
    rows = _read_json_list(qpath, "question file", fix)
    if not rows:
        raise DataError(f"MME-Emotion question file {qpath} has no rows")
    clues: dict[str, str] = {}
    cpath = root / spec.clue_relpath
    if cpath.is_file() or need_clues:
        clue_rows = _read_json_list(
            cpath, "audio-clue file", fix + " (Or set EMO_MME_AUDIO_CLUES=live to make clues with EMO_AUDIO_MODEL.)"
        )
        for i, row in enumerate(clue_rows):
            if not isinstance(row, dict) or not isinstance(row.get("video_id"), str):
                raise DataError(f"{cpath} row {i}: expected an object with video_id and audio_clue")
            if not isinstance(row.get("audio_clue"), str):
                raise DataError(f"{cpath} row {i} ({row['video_id']}): audio_clue must be a string")
            clues[row["video_id"]] = row["audio_clue"]
    docs = []
    seen: dict[str, int] = {}
    resolved: dict[str, str] = {}  # the root and the video folders, resolved once for all rows (contained_path)
    for i, row in enumerate(rows):
        where = f"{qpath} row {i}"
        validate_question_row(row, spec, where)
        vid = row["video_id"]
        if vid in seen:
            raise DataError(f"{where}: video_id {vid!r} repeats row {seen[vid]}")
        seen[vid] = i
        if need_clues and vid not in clues:
            raise DataError(
                f"{where}: no audio clue for video_id {vid!r} in {cpath}. Restore the released clue file, or set "
                "EMO_MME_AUDIO_CLUES=live to make clues with EMO_AUDIO_MODEL."
            )
        docs.append(
            {
                "mme_task": spec.key,
                "row": i,
                "video_id": vid,
                "video_path": str(contained_path(vid, root, where, "video", resolved)),  # no symlink out of root
                "label": row["label"],
                "labels": spec.gold_labels(row["label"]),
                "label_set": list(row["label_set"]),
                "audio_clue": clues.get(vid),
                "data_source": source,
            }
        )
    return docs


def check_videos_exist(docs: Sequence[dict[str, Any]], task: str) -> None:
    """Every doc's video must exist before inference starts; one error lists what is missing."""
    missing = [d["video_path"] for d in docs if not os.path.isfile(d["video_path"])]
    if missing:
        shown = "\n  ".join(missing[:10])
        more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise DataError(
            f"{task}: {len(missing)} of {len(docs)} videos are missing:\n  {shown}{more}\n"
            "Videos are read from <root>/<video_id>: check EMO_DATA_ROOT (or the Hub download) is complete."
        )


# ----------------------------------------------------------------------------------------------- video checks
_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}


def probe_video(path: str) -> None:
    """Open the container and decode one video frame; raise DataError naming the file if that fails.

    Memoised per path, thread-safe: a video is probed once per process."""
    with _probe_lock:
        if path in _probed:
            problem = _probed[path]
            if problem:
                raise DataError(problem)
            return
    problem = None
    if not os.path.isfile(path):
        problem = f"video not found: {path}"
    else:
        try:
            import av

            with av.open(path) as container:
                if not container.streams.video:
                    problem = f"no video stream in {path}"
                else:
                    next(container.decode(container.streams.video[0]))
        except StopIteration:
            problem = f"no decodable frame in video {path}"
        except Exception as exc:  # av.error.* or anything the demuxer raises
            problem = f"cannot decode video {path}: {type(exc).__name__}: {exc}"
    with _probe_lock:
        _probed[path] = problem
    if problem:
        raise DataError(problem + " (replace the file, or remove the row from your local copy)")


def video_identity(path: str, video_id: str) -> str:
    """The machine-independent name of a video's content in the frame- and answer-cache keys: id, size and the
    sha256 of the whole file (its first 32 hex digits).

    Why the whole file: a video replaced by another of the same size whose first bytes (the container header)
    are the same must be judged on its own frames, never on the old file's cached frames or answers.  The hash is
    memoised per process by the file's stat signature (`judges.media.file_digest`): each video is read once per
    process, not once per request.  No path in it: a cache moved to another machine still hits."""
    size, digest = file_digest(path)
    return f"{video_id}:{size}:{digest[:32]}"
