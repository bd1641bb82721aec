"""EmoBench-M data: the authors' annotation files and videos, validated row by row.

Layout (the authors' README, "Dataset Structure"): `<root>/benchmark_json/<file>` per scenario (`protocol.yml`), a
JSON list of `{"id", "video", "conversations": [{"from": "human", "value": "<video>\\n<prompt>"}, {"from": "gpt",
"value": <answer>}]}`; `video` is relative to `<root>/dataset/<folder>/` (also tried: `<root>/dataset/` and `<root>/`,
since the download's exact nesting is not documented beyond the README's tree).  The gold answer is the label
(classification), the emotion and intent in the requested format (MC-EIU, read by `scoring.read_joint`), or the
reference reason (SMILE).  A row that cannot be read is a DataError naming the file and the row; missing videos are
listed together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, load_json
from emo_tasks.datafiles import check_listed_files
from emo_tasks.images import contained_path

from . import scoring
from .protocol import Scenario
from .settings import FIX, VARIABLE

VIDEO_TAG = "<video>"


def annotation_file(root: Path, sc: Scenario) -> Path:
    """`<root>/benchmark_json/<file>`; a DataError naming the variable, the file and the download when missing."""
    path = Path(root) / "benchmark_json" / sc.file
    if not path.is_file():
        raise DataError(f"EmoBench-M {sc.title}: {path} is missing ({VARIABLE}={root}). {FIX}")
    return path


def _video(root: Path, sc: Scenario, video: str, where: str) -> Path:
    bases = [root / "dataset" / sc.folder, root / "dataset", root]
    paths = [contained_path(video, base, where, "video") for base in bases]
    return next((p for p in paths if p.is_file()), paths[0])


def _turns(row: Any, where: str) -> tuple[str, str]:
    """(prompt, gold answer) of a row's conversation, the `<video>` tag taken off the prompt."""
    turns = row.get("conversations") if isinstance(row, dict) else None
    if not isinstance(turns, list):
        raise DataError(f"{where}: no 'conversations' list (expected the authors' format: id, video, conversations)")
    human = [t.get("value") for t in turns if isinstance(t, dict) and t.get("from") == "human"]
    gpt = [t.get("value") for t in turns if isinstance(t, dict) and t.get("from") == "gpt"]
    if not human or not isinstance(human[0], str) or not human[0].strip():
        raise DataError(f"{where}: no 'human' turn with the prompt")
    if not gpt or not isinstance(gpt[0], str) or not gpt[0].strip():
        raise DataError(f"{where}: no 'gpt' turn with the answer")
    return human[0].replace(VIDEO_TAG, "").strip(), gpt[0].strip()


def load_docs(root: Path, sc: Scenario, source: str = "benchmark") -> list[dict[str, Any]]:
    """Every row of a scenario as an lmms-eval doc (doc_id = index); every video must exist (all missing listed)."""
    root = Path(root)
    path = annotation_file(root, sc)
    rows = load_json(path)
    if not isinstance(rows, list) or not rows:
        raise DataError(f"{path}: expected a non-empty JSON list of rows, found {type(rows).__name__}")
    seen_labels = {g for g in (_gold_label(r, sc) for r in rows) if g}
    labels = (
        tuple(dict.fromkeys([*sc.labels, *sorted(seen_labels)])) if sc.kind == scoring.CLASSIFICATION else sc.labels
    )
    docs, missing, ids = [], [], {}
    for i, row in enumerate(rows):
        where = f"{path} row {i}"
        if not isinstance(row, dict) or not isinstance(row.get("video"), str) or not row["video"].strip():
            raise DataError(f"{where}: no 'video' path")
        row_id = str(row.get("id", i))
        if row_id in ids:
            raise DataError(f"{where}: id {row_id!r} is also row {ids[row_id]}; ids must be unique")
        ids[row_id] = i
        prompt, answer = _turns(row, where)
        gold, gold_intent = scoring.norm(answer), ""
        if sc.kind == scoring.JOINT:
            emotion, intent = scoring.read_joint(answer, sc.labels, sc.intents)
            if emotion is None or intent is None:
                raise DataError(f"{where}: cannot read an emotion and an intent from the answer {answer[:120]!r}")
            gold, gold_intent = emotion, intent
        elif sc.kind == scoring.GENERATION:
            gold = answer
        video = _video(root, sc, row["video"].strip(), where)
        if not video.is_file():
            missing.append(f"{video} ({row_id})")
        docs.append({"row_id": row_id, "row": i, "scenario": sc.key, "kind": sc.kind, "video": row["video"].strip(),
                     "video_path": str(video), "prompt": prompt, "gold": gold, "gold_intent": gold_intent,
                     "labels": list(labels), "intents": list(sc.intents), "data_source": source})  # fmt: skip
    check_listed_files(missing, len(rows), f"EmoBench-M {sc.title} videos", path)
    return docs


def _gold_label(row: Any, sc: Scenario) -> str | None:
    """A classification row's gold label (the labels the data uses join the protocol's for reading answers)."""
    try:
        return scoring.norm(_turns(row, "")[1]) if sc.kind == scoring.CLASSIFICATION else None
    except DataError:
        return None
