"""EmoBench-M's judge ratings for `emo-tasks agreement` and `emo-tasks calibrate`: what the judge logs of its LLM
scorer of SMILE's reasons hold (`judge_log.py` writes them) and how two judges' rows of one answer are compared.
The comparison itself is generic (`emo_tasks/judging/agreement.py`, `calibrate.py`), which finds this module
through the registry (`registry.BENCHMARK.judge_ratings`) and uses its module-level names, those of
`emo_tasks.judging.agreement.JudgeRatings`.

- logs: per task, the newest `emo_tasks_judge/[sample_]emobench_m_<scenario>_<stamp>_judge.jsonl` of a results
  folder and the `_summary.json` beside it (the one rule `reader.pick_judge_log` picks; a folder judged before
  these logs were written has none: `calibrate` says to rerun `emo-tasks judge`);
- rows: one JSON object a line, split on newlines only (an answer may hold U+2028).  A row names its `task`
  (a shared log's rows of other tasks are skipped), a `row_id` (once per task) and a `status`; a `scored` row
  carries `ratings` {"logical": 0-5, "multimodal": 0-5} (integers).  Anything else is an InputError naming file
  and line (exit 3);
- pairing: rows pair by (task, row id) when both are `scored` (`judge_failed` and `empty_answer` - never asked,
  rated 0 whatever the judge - are counted, never paired) and show the same `video` and `answer`;
- steps: the two dimension ratings (logical, multimodal), paired dimension by dimension;
- last step (calibrate's "recognition" row: Cohen's kappa, ICC): the answer's total (logical + multimodal, 0-10),
  the per-answer rating the headline `llm_total` averages; chosen over the multimodal rating alone, which says
  nothing of the logical one;
- scores: llm_logical, llm_multimodal and llm_total per answer, in the metrics' own units (0-5, 0-5, 0-10; the
  means of the paired answers, not the task's metric, which also counts failed and empty answers as 0);
- judge setup: the summary fields judge_models ({"judge": model}), judge_protocol, judge_sampling,
  judge_endpoint and judge_mode (`calibrate`'s identity adds the judge fingerprint);
- tolerance (`calibrate` without --tolerance): 1 % of each metric's range (0.05, 0.05, 0.1), as MME-Emotion's
  1 point of 100.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from emo_tasks.judging.agreement import SCORED, InputError, Sample, TaskLog, read_log_lines, summary_notes
from emo_tasks.judging.agreement import log_stamp as log_stamp  # the interface's: the stamp in a log's name
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX, summary_file

from .judge import DIMENSIONS, scorer_spec
from .protocol import scenarios
from .registry import TITLES
from .scoring import TABLE

TITLE = "EmoBench-M"
LOGS = f"**/{JUDGE_DIR}/[sample_]emobench_m_<scenario>_<stamp>{JUDGE_LOG_SUFFIX}"
_SAMPLE = "emobench_m_sample_"
#: The summary fields that make two judge logs one judge, titled.
SETUP_FIELDS = {
    "judge_models": "judge models",
    "judge_protocol": "protocol",
    "judge_sampling": "sampling",
    "judge_endpoint": "endpoint",
    "judge_mode": "judge mode",
}
#: The sample scores compared: the LLM scorer's per-answer ratings.
SCORES = {m: TABLE[m].title or m for m in ("llm_logical", "llm_multimodal", "llm_total")}
#: `calibrate`'s tolerance per score without --tolerance: 1 % of its range (MME-Emotion's 1 point of 100).
TOLERANCES = {"llm_logical": 0.05, "llm_multimodal": 0.05, "llm_total": 0.1}
_ANSWER = ("video", "answer")  # what a row judged: two rows pair only when these agree
_TASKS = tuple(TITLES)  # the benchmark's tasks in the protocol's order, then the sample's
_NAME = re.compile(
    rf"^(?P<sample>sample_)?(?P<tasks>emobench_m_[a-z0-9_+]+?)_(?P<stamp>\d{{8}}T\d{{6}}){re.escape(JUDGE_LOG_SUFFIX)}$"
)


def _tasks_of(name: str) -> list[str] | None:
    """The leaf tasks a judge log's file name covers; None for a file that is not one of ours."""
    m = _NAME.match(name)
    if m is None:
        return None
    out = []
    for task in m.group("tasks").split("+"):
        key = task.removeprefix("emobench_m_")
        if key not in scenarios():
            return None
        out.append((_SAMPLE if m.group("sample") else "emobench_m_") + key)
    return out


def all_judge_logs(folder: Path) -> dict[str, list[Path]]:
    """Task -> every judge log of it in `folder`/emo_tasks_judge/, newest first (stamp, then name)."""
    judged = Path(folder) / JUDGE_DIR
    logs = sorted(judged.glob(f"*{JUDGE_LOG_SUFFIX}")) if judged.is_dir() else []
    named = [(log_stamp(log), log.name, log, tasks) for log in logs if (tasks := _tasks_of(log.name))]
    found: dict[str, list[Path]] = {}
    for _, _, log, tasks in sorted(named, key=lambda x: (x[0], x[1]), reverse=True):
        for task in tasks:
            found.setdefault(task, []).append(log)
    return found


def judge_logs(folder: Path) -> dict[str, Path]:
    """Task -> its newest judge log in `folder`/emo_tasks_judge/."""
    return {task: logs[0] for task, logs in all_judge_logs(folder).items()}


def task_order(task: str) -> tuple[int, str]:
    return (_TASKS.index(task) if task in _TASKS else len(_TASKS), task)


def task_title(task: str) -> str:
    return TITLES.get(task, task) + (" [sample]" if task.startswith(_SAMPLE) else "")


def _sample(where: str, row: dict[str, Any]) -> Sample:
    """A row as the comparison sees it; a scored row's ratings checked (integers on the authors' scale)."""
    if not isinstance(row.get("status"), str):
        raise InputError(f"{where}: no 'status'")
    answer = {k: row[k] for k in _ANSWER if k in row}
    if row["status"] != SCORED:
        return Sample(status=row["status"], answer=answer)
    ratings = row.get("ratings")
    low, high = scorer_spec()["scale"]
    if not isinstance(ratings, dict):
        raise InputError(f"{where}: a scored answer needs 'ratings' {{{', '.join(DIMENSIONS)}: {low}-{high}}}")
    steps = []
    for dim in DIMENSIONS:
        v = ratings.get(dim)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise InputError(f"{where}: a scored answer's {dim!r} rating must be an integer {low}-{high}, got {v!r}")
        steps.append(float(v))
    logical, multimodal = steps
    total = logical + multimodal
    scores = {"llm_logical": logical, "llm_multimodal": multimodal, "llm_total": total}
    return Sample(row["status"], answer, (logical, multimodal), scores, final=total)


def read_task(task: str, log: Path, summary: dict[str, Any] | None) -> TaskLog:
    """One task's rows of its judge log, read and checked, with the summary beside it (None: there is none)."""
    out = TaskLog(log=log, summary=summary or {}, summary_file=None if summary is None else summary_file(log))
    if summary is None:
        out.notes.append(f"{task}: no {summary_file(log).name}: its judge is not recorded")
    s = out.summary
    out.shown = {"judge_models": s.get("judge_models"), "judge_protocol": s.get("judge_protocol")}
    out.setup = {name: s.get(name) for name in SETUP_FIELDS}
    for line, row in read_log_lines(log):
        where = f"{log}:{line}"
        if not isinstance(row.get("task"), str) or not isinstance(row.get("row_id"), str):
            raise InputError(f"{where}: needs a 'task' and a 'row_id' (text)")
        if row["task"] != task:
            continue
        if row["row_id"] in out.samples:
            raise InputError(f"{where}: row {row['row_id']!r} of {task} appears twice")
        out.samples[row["row_id"]] = _sample(where, row)
    return out


def pair_notes(task: str, a: TaskLog, b: TaskLog) -> list[str]:
    return summary_notes(task, a, b, ("judge_sampling", "data_source"), "judge model")
