"""What a results viewer (`emo-tasks view`) shows of each MME-Emotion sample of a run: one `SampleView` per row of
the run's own judge log, with the judge's evidence (steps, ratings, judge text, audio clue, why it failed) beside
its values.

Why here: the viewer knows no benchmark, and only MME-Emotion knows which judge log is the run's and what its rows
mean.  It reads what `results.read_samples` reads, by the same functions (`own_judge_log`, `log_values`), so a
sample's values are the report's; the run's sample log gives each row its lmms-eval doc id and prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import SampleView
from emo_tasks.datafiles import read_jsonl_rows, sample_log

from .results import log_values, logged_record, own_judge_log

DETAILS = ("steps", "ratings", "judge_text", "step_text", "audio_clue", "failed_stage", "failure_reason",
           "predicted_labels", "n_steps")  # fmt: skip


def view_samples(run_dir: Path, results_file: Path, task: str) -> list[SampleView]:
    """One view per judge-log row of a leaf task ([] when no judge log is this run's: the report notes why)."""
    log, rows, _ = own_judge_log(run_dir, results_file, task)
    if log is None:
        return []
    values = log_values(log, rows, task).values
    lines: dict[int, dict[str, Any]] = {}
    samples = sample_log(Path(results_file).parent, Path(results_file), task)
    for line in read_jsonl_rows(samples) if samples else []:
        rec = logged_record(line)
        if rec is not None:
            lines[int(rec["row"])] = line
    views = []
    for r in rows:
        unit, line = (task, int(r["row"])), lines.get(int(r["row"])) or {}
        views.append(
            SampleView(
                task=task,
                doc_id=line.get("doc_id"),
                unit=unit,
                media=(r["video_id"],) if r.get("video_id") else (),
                prompt=line.get("input"),
                answers=(r.get("answer") or "",),
                gold=r.get("label"),
                verdict=r.get("status"),
                values={m: v[unit] for m, v in values.items() if unit in v},
                details={k: r.get(k) for k in DETAILS},
            )
        )
    return views
