"""MME-Emotion's judge ratings for `emo-tasks agreement RUN_A RUN_B`: what its judge logs hold and how two judges'
rows of one sample are compared.  The comparison itself - finding the newest judged result, the setup check and
refusals, pairing, the statistics, the text and the JSON schema, exit codes - is generic:
`emo_tasks/judging/agreement.py`, which finds this module through the registry (`registry.BENCHMARK.judge_ratings`)
and uses its module-level names, those of `emo_tasks.judging.agreement.JudgeRatings`: TITLE, LOGS, SETUP_FIELDS,
SCORES, judge_logs, all_judge_logs, log_stamp, task_order, task_title, read_task and pair_notes.

- logs: per task, the newest `emo_tasks_judge/[sample_]<task>_<stamp>_judge.jsonl` of a results folder (as
  `registry.all_judge_logs` finds them; one log may cover several tasks; the one rule `reader.pick_judge_log`
  picks) and the `_summary.json` beside it (alpha, judge models, ...; read by `reader.read_summary`).  The newest
  judged result under a path is the one with the newest log stamp;
- rows: one JSON object a line, split on newlines only (the logs are written with ensure_ascii=False, so an answer
  may hold U+2028 or U+0085, which str.splitlines would treat as line breaks).  A row names its task (official key
  or lmms-eval name; a shared log's rows of other tasks are skipped) and an integer `row`, once per task, and a
  `status`.  A `scored` row carries `ratings` [[num, den], ...] (at least one, finite numbers), a finite
  `recognition` and a finite or null `reasoning`.  Anything else is an `InputError` naming file and line (exit 3),
  and so is a summary that is not a JSON object or whose alpha is outside [0, 1];
- pairing: rows pair by (task, row) when both are `scored` (judge_failed / offline are counted, never paired) and
  show the same `video_id` and `answer` (where both record them);
- steps: the value num/den of every rating (den 0 -> 0, `scoring.rating_value`), the last one the recognition;
- scores: Rec-S, Rea-S and CoT-S x100 (`scoring.TABLE`'s per-sample functions), CoT-S with the alpha of the task's
  summary (0.5 when there is none or it records none; the text notes a missing summary);
- judge setup: the summary fields judge_models, judge_protocol, alpha (1 and 1.0 are one alpha), audio_clues,
  judge_endpoint and judge_mode; the JSON's `Run` lists judge_models, alpha and judge_protocol per task;
- notes on a task judged in both runs: a different alpha (the CoT-S difference mixes judge and alpha), protocol,
  audio clues or data source; the same judge models on both sides (run-to-run consistency, not two judges);
- tasks in the paper's order (`results.TASKS`), titled by their official keys ("ER-Lab", "ER-Lab [sample]").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from emo_tasks.judging.agreement import SCORED, InputError, Sample, TaskLog, read_log_lines, summary_notes
from emo_tasks.judging.agreement import log_stamp as log_stamp  # the interface's: the stamp in a log's name
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX, summary_file

from .protocol import spec_for
from .registry import TASKS, TITLES
from .registry import all_judge_logs as all_judge_logs  # the interface's: every log per task, newest first
from .registry import judge_logs as judge_logs  # the interface's: newest log per task
from .scoring import DEFAULT_ALPHA, TABLE, rating_value

TITLE = "MME-Emotion"
LOGS = f"**/{JUDGE_DIR}/[sample_]<task>_<stamp>{JUDGE_LOG_SUFFIX}"
_SAMPLE = "mme_emotion_sample_"
#: The summary fields that make two judge logs one judge (a difference in any of these mixes judges), titled.
SETUP_FIELDS = {
    "judge_models": "judge models",
    "judge_protocol": "protocol",
    "alpha": "alpha",
    "audio_clues": "audio clues",
    "judge_endpoint": "endpoint",
    "judge_mode": "judge mode",
}
#: The sample scores compared, titled as in the paper.
SCORES = {m: TABLE[m].title or m for m in ("rec_s", "rea_s", "cot_s")}
_ANSWER = ("video_id", "answer")  # what a row judged: two rows pair only when these agree


def task_order(task: str) -> tuple[int, str]:
    return (TASKS.index(task) if task in TASKS else len(TASKS), task)


def task_title(task: str) -> str:
    return TITLES.get(task, task) + (" [sample]" if task.startswith(_SAMPLE) else "")


def _check_row(log: Path, line: int, row: dict[str, Any]) -> None:
    """A scored row must carry ratings [[num, den], ...] (at least one) and a recognition."""
    where = f"{log}:{line}"
    if not isinstance(row.get("status"), str):
        raise InputError(f"{where}: no 'status'")
    if row["status"] != SCORED:
        return
    ratings = row.get("ratings")
    if not isinstance(ratings, list) or not ratings:
        raise InputError(f"{where}: a scored sample needs 'ratings' [[num, den], ...] with at least one rating")
    for r in ratings:
        if (
            not isinstance(r, list | tuple)
            or len(r) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in r)
        ):
            raise InputError(f"{where}: each rating must be [numerator, denominator], got {r!r}")
    for key, optional in (("recognition", False), ("reasoning", True)):
        v = row.get(key)
        if optional and v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise InputError(f"{where}: a scored sample needs a finite numeric {key!r}, got {v!r}")


def _sample(row: dict[str, Any]) -> Sample:
    """A checked row (with its task's alpha) as the comparison sees it."""
    answer = {k: row[k] for k in _ANSWER if k in row}
    if row["status"] != SCORED:
        return Sample(status=row["status"], answer=answer)
    steps = tuple(rating_value(n, d) for n, d in row["ratings"])
    return Sample(row["status"], answer, steps, {m: TABLE[m].per_sample(row) for m in SCORES})


def read_task(task: str, log: Path, summary: dict[str, Any] | None) -> TaskLog:
    """One task's rows of its judge log, read and checked, with the summary beside it (`reader.read_summary`, read
    by the one rule that picks the log; None: there is none)."""
    out = TaskLog(log=log, summary=summary or {}, summary_file=None if summary is None else summary_file(log))
    if summary is None:
        out.notes.append(f"{task}: no {summary_file(log).name}; alpha {DEFAULT_ALPHA}")
    alpha = out.summary.get("alpha", DEFAULT_ALPHA)
    alpha = DEFAULT_ALPHA if alpha is None else alpha
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 <= alpha <= 1.0:
        raise InputError(f"{summary_file(log)}: alpha must be in [0, 1], got {alpha!r}")
    s = out.summary
    out.shown = {
        "judge_models": s.get("judge_models"),
        "alpha": float(alpha),
        "judge_protocol": s.get("judge_protocol"),
    }
    out.setup = {name: s.get(name) for name in SETUP_FIELDS}
    recorded = out.setup["alpha"]
    if isinstance(recorded, int | float) and not isinstance(recorded, bool):
        out.setup["alpha"] = float(recorded)  # 1 and 1.0 are one alpha
    base = task.replace(_SAMPLE, "mme_emotion_", 1)
    for line, row in read_log_lines(log):
        try:
            mine = spec_for(str(row["task"])).task == base
            key = int(row["row"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{log}:{line}: needs a known 'task' and an integer 'row' ({exc})") from exc
        if not mine:
            continue
        _check_row(log, line, row)
        if key in out.samples:
            raise InputError(f"{log}:{line}: row {key} of {task} appears twice")
        out.samples[key] = _sample({**row, "alpha": float(alpha)})
    return out


def pair_notes(task: str, a: TaskLog, b: TaskLog) -> list[str]:
    notes = []
    if a.shown["alpha"] != b.shown["alpha"]:
        notes.append(
            f"{task}: alpha differs (A {a.shown['alpha']}, B {b.shown['alpha']}): the CoT-S difference mixes judge "
            "and alpha"
        )
    return notes + summary_notes(task, a, b, ("judge_protocol", "audio_clues", "data_source"), "judge models")
