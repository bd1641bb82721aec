"""MME-Emotion as the generic report sees it: its metric table, task and group names, and how to read one task's
per-sample values back from an lmms-eval output folder.

Per-sample values (key: (task, row)) come from our judge logs, `<output_path>/emo_tasks_judge/
[sample_]<task>_<stamp>_judge.jsonl` (the run's own, by the one rule `reader.pick_judge_log`: the newest log naming
the task whose rows are this run's), through `scoring.TABLE`'s per-sample
functions: rec_s = 100*recognition (status scored or offline), rea_s = 100*reasoning (scored), cot_s = alpha*rec +
(1-alpha)*rea (scored; alpha from the log's `_summary.json`), rec_s_strict = 100*strict_recognition, avg_step =
n_steps (scored), avg_token = o200k tokens of the answer.  A group (`mme_emotion_all` / `mme_emotion_sample`)
pools its tasks' samples.  Files in, values out: no network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark, SampleValues
from emo_tasks.common import DataError, once
from emo_tasks.datafiles import read_jsonl_numbered, read_sample_log
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX, MARKER
from emo_tasks.results.reader import JudgeLogPick, pick_judge_log

from .protocol import spec_for, task_specs
from .scoring import DEFAULT_ALPHA, TABLE, group_aggregate

GROUPS = ("mme_emotion_all", "mme_emotion_sample")
_SAMPLE = {s.task.replace("mme_emotion_", "mme_emotion_sample_", 1): s.key for s in task_specs().values()}
#: Leaf task -> the report's column title: the official task key ("ER-Lab"), for the benchmark and the sample.
TITLES = {**{s.task: s.key for s in task_specs().values()}, **_SAMPLE}
TASKS = tuple(TITLES)  # the 8 benchmark tasks in the paper's order, then their 8 sample twins
#: Group -> its leaf tasks (mme_emotion_all.yaml, mme_emotion_sample.yaml)
MEMBERS = {"mme_emotion_all": tuple(s.task for s in task_specs().values()), "mme_emotion_sample": tuple(_SAMPLE)}

_JUDGE_FILE = re.compile(
    rf"^(?P<sample>sample_)?(?P<tasks>mme_emotion_.+?)_(?P<stamp>\d{{8}}T\d{{6}}){re.escape(JUDGE_LOG_SUFFIX)}$"
)


def judge_logs(run_dir: Path) -> dict[str, Path]:
    """Leaf task name -> the newest judge log that covers it, in `<run_dir>/emo_tasks_judge/` (whether or not it is
    the run's own: `own_judge_log` says which is)."""
    return {task: logs[0] for task, logs in all_judge_logs(run_dir).items()}


def all_judge_logs(run_dir: Path) -> dict[str, list[Path]]:
    """Leaf task name -> every judge log in `<run_dir>/emo_tasks_judge/` that covers it, newest first."""
    folder = Path(run_dir) / JUDGE_DIR
    logs = sorted(folder.glob(f"*{JUDGE_LOG_SUFFIX}")) if folder.is_dir() else []
    named = [(m, log) for log in logs if (m := _JUDGE_FILE.match(log.name))]
    found: dict[str, list[Path]] = {}
    for m, log in sorted(named, key=lambda ml: (ml[0].group("stamp"), ml[1].name), reverse=True):
        for t in m.group("tasks").split("+"):
            name = t.replace("mme_emotion_", "mme_emotion_sample_", 1) if m.group("sample") else t
            found.setdefault(name, []).append(log)
    return found


def _counts_of(results_file: Path, task: str) -> dict[str, int] | None:
    """The run's own counts of the task (rows, scored, judge-failed) from its results file; None when unreadable.
    A partial judgement (`emo-tasks judge --partial`) judged fewer rows than the run answered: those are its rows."""
    try:
        data = json.loads(Path(results_file).read_text(encoding="utf-8"))
        row = (data.get("results") or {}).get(task) or {}
        n = ((data.get("n-samples") or {}).get(task) or {}).get("effective")
        partial = ((data.get(MARKER) or {}).get("partial") or {}).get(task)
        n = partial.get("judged") if isinstance(partial, dict) else n
    except (OSError, ValueError, AttributeError):
        return None
    counts = {"rows": n, "n_scored": row.get("n_scored,none"), "n_judge_failed": row.get("n_judge_failed,none")}
    return {k: int(v) for k, v in counts.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _log_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "rows": len(rows),
        "n_scored": sum(1 for r in rows if r.get("status") in ("scored", "offline")),
        "n_judge_failed": sum(1 for r in rows if r.get("status") == "judge_failed"),
    }


def task_rows(log: Path, task: str) -> list[dict[str, Any]]:
    """The rows of one leaf task in a judge log (a log can cover several tasks); read errors propagate.  Once per
    `common.remembering()` block (one log covers the 8 tasks)."""
    return list(once(("judge-task-rows", task), log, lambda: _task_rows(log, task)))


def _task_rows(log: Path, task: str) -> list[dict[str, Any]]:
    base = task.replace("mme_emotion_sample_", "mme_emotion_", 1)
    out = []
    for n, r in read_jsonl_numbered(log):
        name = r.get("task") if isinstance(r, dict) else None  # a row without a task: the error below names it
        try:
            mine = spec_for(name).task == base
        except (KeyError, AttributeError, TypeError):
            raise DataError(f"{log} line {n}: not a judge-log row (task {name!r} is no MME-Emotion task)") from None
        if not mine:
            continue
        try:
            int(r["row"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{log} line {n}: a judge-log row of {task} needs an integer 'row'") from None
        out.append(r)
    return out


def logged_record(line: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `process_results` record in a line of lmms-eval's sample log (it holds the judge log's `row` and
    `answer`); None when the line has none."""
    return next((v for v in line.values() if isinstance(v, dict) and "row" in v and "answer" in v), None)


def not_this_runs(results_file: Path, task: str, rows: list[dict[str, Any]]) -> str | None:
    """Why judge-log rows are not the run's (None: they are), for `report` and `export` alike.  A folder's
    emo_tasks_judge/ can hold logs of several runs; rows are this run's only when they agree with the counts its
    results file states (rows, scored, judge-failed) and hold the answers of its sample log, row by row.  What the
    run does not record is not compared."""
    from emo_tasks.datafiles import sample_log

    expected = _counts_of(results_file, task) or {}
    got = _log_counts(rows)
    for name, want in expected.items():
        if got[name] != want:
            return f"{got[name]} {name}, the run's results say {want}"
    sample = sample_log(Path(results_file).parent, Path(results_file), task)
    if sample is None:
        return None
    ours: dict[int, Any] = {}
    for line in read_sample_log(sample):
        rec = logged_record(line)
        if rec is None:
            return None
        ours[int(rec["row"])] = rec["answer"]
    theirs = {int(r["row"]): r.get("answer") for r in rows}
    if ours and ours != theirs:
        n = sum(ours.get(k) != theirs.get(k) for k in set(ours) | set(theirs))
        return f"{n} of {len(ours)} rows differ from the answers of its sample log {sample.name}"
    return None


def own_judge_log(run_dir: Path, results_file: Path, task: str) -> JudgeLogPick[list[dict[str, Any]]]:
    """The run's own judge log of a leaf task, its rows and its summary, by the one rule every command uses
    (`reader.pick_judge_log`): of the task's logs in the run's `emo_tasks_judge/`, newest first, the newest that can
    be read and is this run's (`not_this_runs`: its counts and answers), so a log left by another run into the same
    folder is never taken for this one's.  A newer log that cannot be read while an older one would be taken is
    refused (`reader.JudgeLogRefused`, naming both); otherwise the pick says why there is none (`why_none`)."""
    return pick_judge_log(
        task,
        all_judge_logs(run_dir).get(task) or [],
        lambda log, _summary: task_rows(log, task),
        lambda rows: not_this_runs(results_file, task, rows),
    )


def why_none(run_dir: Path, pick: JudgeLogPick[Any]) -> str:
    """The report's note for a task without its own judge log (`own_judge_log` took none): no log, none readable,
    or only other runs' logs; each costs the confidence intervals, never the report."""
    task = pick.task
    if pick.unreadable:
        log, exc = pick.unreadable[0]
        return f"{task}: could not read {log.name} ({exc}); no CIs"
    if pick.others:
        listed = "; ".join(f"{log.name}: {reason}" for log, reason in pick.others[:2])
        return (
            f"{task}: no judge log in {Path(run_dir) / JUDGE_DIR} is this run's ({listed}); the logs there belong to "
            "other runs, so no confidence intervals"
        )
    return (
        f"{task}: no MME-Emotion judge log ({JUDGE_DIR}/*{task.replace('_sample', '')}*{JUDGE_LOG_SUFFIX}), so no "
        "confidence intervals; rerun lmms-eval with --output_path DIR (the judge writes it there)"
    )


def log_values(log: Path, rows: list[dict[str, Any]], task: str, summary: dict[str, Any] | None) -> SampleValues:
    """The per-sample values of a judge log's rows of one task (`task_rows(log, task)`; key: (task, row)) with the
    alpha of its summary (`reader.read_summary`; none there: the default), and notes; once per
    `common.remembering()` block (the answers' tokens are counted once)."""
    return once(("judge-log-values", task), log, lambda: _log_values(rows, task, summary or {}))


def _log_values(rows: list[dict[str, Any]], task: str, summary: dict[str, Any]) -> SampleValues:
    out = SampleValues(summary=summary)
    alpha = float(summary.get("alpha", DEFAULT_ALPHA))
    units = [{**r, "alpha": alpha} for r in rows]
    try:
        from emo_tasks.judging.tokens import count_tokens

        counts = count_tokens([r.get("answer") or "" for r in rows])
        for unit, n in zip(units, counts, strict=True):
            unit["answer_tokens"] = n
    except Exception as exc:  # noqa: BLE001 - a missing tokenizer must not stop the report
        out.notes.append(f"{task}: avg_token per sample not available ({exc})")
    out.values = TABLE.per_sample_values({(task, int(u["row"])): u for u in units})
    return out


def read_samples(run_dir: Path, results_file: Path, task: str, config: dict[str, Any]) -> SampleValues:
    """One leaf task's per-sample values, its judge summary and notes (a missing or unreadable file is a note).

    The judge log is the run's own (`own_judge_log`); none being this run's costs the confidence intervals (a
    note), never the report; a newer log that cannot be read beside an older one is refused (JudgeLogRefused)."""
    pick = own_judge_log(run_dir, results_file, task)
    if pick.log is None or pick.content is None:
        return SampleValues(notes=[why_none(run_dir, pick)])
    return log_values(pick.log, pick.content, task, pick.summary)


def judge_setup(env: Mapping[str, str], extra_judge: bool = False) -> dict[str, Any]:
    """What of MME-Emotion's judge can change its numbers: the models per role (the audio agent only when clues
    are made live), the protocol, alpha and the audio clues (for the judge stage's folder name and results)."""
    from dataclasses import replace

    from judges.config import model_for_role
    from judges.fingerprint import served_models

    from .judge import judge_fingerprint
    from .settings import MMESettings, role_sampling

    mme = MMESettings.from_env({**env, "EMO_JUDGE": "defer"}, "benchmark")  # the values, no endpoint check
    roles = ("step", "judge", "audio") if mme.audio_clues == "live" else ("step", "judge")
    models = {role: model_for_role(role, env) for role in roles}
    judged = replace(mme, models=tuple(models.items()), sampling=role_sampling(roles, env))
    return {
        "models": models,
        "protocol": mme.judge_protocol,
        "alpha": mme.alpha,
        "audio_clues": mme.audio_clues,
        # the judge is about to run: the endpoint is asked what it serves (once per process)
        "judge_fingerprint": judge_fingerprint(judged, served_models(mme.engine.endpoint)),
    }


BENCHMARK = Benchmark(
    key="mme",
    title="MME-Emotion",
    table=TABLE,
    tasks=TASKS,
    groups=GROUPS,
    read_samples=read_samples,
    titles=TITLES,
    plot_ylabel="score (0-100)",
    hooks="emo_tasks.mme_emotion.hooks",
    group_aggregate=group_aggregate,
    members=MEMBERS,
    exports={"mme-official": "emo_tasks.mme_emotion.export:export_mme_official"},
    judge_ratings="emo_tasks.mme_emotion.agreement",
    judge_setup=judge_setup,
    view_samples="emo_tasks.mme_emotion.view:view_samples",
    vlmeval_datasets=("emo_tasks.mme_emotion.vlmeval:dataset_class",),
)
