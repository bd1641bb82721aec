"""The MultiEmo-Bench export format, `emo-tasks export RUN_DIR --format multiemo-table` (the generic part, the
command line, the export folder and provenance.json: `emo_tasks/results/export.py`).

multiemo-table
--------------
- `multiemo_images.csv`: one row per image: `image_id, score_<emotion> x8 (EMOTIONS order; empty = no usable
  score), votes_<emotion> x8, n_annotators, original_label, dominant_predicted, dominant_votes` (dominant sets as
  `;`-joined emotion names, `scoring.dominant_set`).
- `multiemo_metrics.md`: the paper-style table (metric | value) from the run's results.json.
- `summary.json`: `{"format": "multiemo-table", "task", "n_images", "metrics": {...}}`.

Beside these files every export folder holds `provenance.json` and `README.md` (`emo_tasks/results/export.py`).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from emo_tasks.results.export import ExportError, StrPath, finish, model_name_for, run_task_log, staged, write_text


def export_multiemo_table(
    run_dir: StrPath, out_dir: StrPath, model_name: str | None = None, *, pick: str | None = None, force: bool = False
) -> Path:
    """Per-image CSV (8 predicted scores, votes, dominant sets) and the paper-style metrics table; returns the
    CSV's path.  `pick`: the results file to use when RUN_DIR holds several (--run); `force`: replace an earlier
    export."""
    from emo_tasks.datafiles import read_sample_log
    from emo_tasks.multiemo import scoring
    from emo_tasks.multiemo.registry import reference_images

    run, task, log = run_task_log(run_dir, "MultiEmo-Bench", ("multiemo", "multiemo_sample"), "precision_ours", pick)
    name = model_name_for(run, model_name)
    images: dict[str, dict[str, Any]] = {}
    ref: dict[str, dict[str, Any]] | None = None
    for line in read_sample_log(log):
        rec = line.get("precision_ours") or {}
        if "image_id" not in rec:
            raise ExportError(f"{log}: line doc_id {line.get('doc_id')} has no MultiEmo record")
        doc = line.get("doc")
        if not doc or "votes" not in doc:
            if ref is None:
                try:
                    ref = reference_images(rec.get("data_source", "benchmark"))
                except Exception as exc:  # noqa: BLE001
                    raise ExportError(
                        f"the run's MultiEmo data cannot be loaded now ({exc}); it holds the votes"
                    ) from exc
            doc = ref.get(rec["image_id"])
            if doc is None:
                raise ExportError(f"image {rec['image_id']!r} of the run is not in the MultiEmo data loaded now")
        img = images.setdefault(rec["image_id"], {"doc": doc, "scores": {}})
        img["scores"][rec["emotion"]] = rec.get("predicted_score")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    emotions = scoring.EMOTIONS
    writer.writerow(
        ["image_id", *(f"score_{e}" for e in emotions), *(f"votes_{e}" for e in emotions), "n_annotators",
         "original_label", "dominant_predicted", "dominant_votes"]
    )  # fmt: skip
    for image_id in sorted(images):
        img = images[image_id]
        scores = [img["scores"].get(e) for e in emotions]
        votes = list(img["doc"]["votes"])
        pred = (
            ""
            if any(s is None for s in scores)
            else ";".join(emotions[i] for i in sorted(scoring.dominant_set(scores)))
        )
        gold = "" if not any(votes) else ";".join(emotions[i] for i in sorted(scoring.dominant_set(votes)))
        writer.writerow(
            [image_id, *("" if s is None else s for s in scores), *votes, img["doc"]["n_annotators"],
             img["doc"]["original_label"], pred, gold]
        )  # fmt: skip
    metrics = {m.name: run.value(task, m.name) for m in scoring.TABLE.metrics}
    table = ["| metric | value |", "|---|---|"]
    for m in scoring.TABLE.metrics:
        v = metrics[m.name]
        table.append(f"| {getattr(m, 'title', None) or m.name} | {'n/a' if v is None else f'{v:.4g}'} |")
    md = f"# MultiEmo-Bench: {name} ({task})\n\n" + "\n".join(table) + "\n"
    summary = {
        "format": "multiemo-table",
        "model_name": name,
        "task": task,
        "n_images": len(images),
        "metrics": metrics,
    }
    readme = md + (
        "\n`multiemo_images.csv`: per image the 8 predicted scores, the human votes and the dominant sets.\n"
        "Provenance: `provenance.json`.\n\n## Submitting to a leaderboard\n\nMultiEmo-Bench has no submission "
        "script: send both files and `provenance.json` for a comparison with the paper's table.\n"
    )
    files = ["multiemo_images.csv", "multiemo_metrics.md"]
    with staged(out_dir, force) as out:
        write_text(out / files[0], buf.getvalue())
        write_text(out / files[1], md)
        finish(out, run, "multiemo-table", name, [task], summary, files, readme)
    return Path(out_dir) / files[0]
