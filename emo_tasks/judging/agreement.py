"""Judge-vs-judge calibration: `emo-tasks agreement RUN_A RUN_B` on two judged results of the same answers.

Can an open judge (say Qwen2.5-VL-72B) stand in for the paper's GPT-4o?  Judge the same answers with both and
compare the two per-sample judge logs.  This module reads the two sides (the newest judged result under each path,
its logs, its judge setup) and says what the command does; `emo_tasks.judging.agreement_report` pairs the samples,
computes (a)-(c) below and prints them.  Both are the same for any benchmark; what is the benchmark's
- where its judge logs are and how their rows are read and checked, a row's per-step ratings, what identifies the
answer a row judged, the task order and titles, the sample scores and the summary fields that make up a judge
setup - comes from its judge-ratings module (`Benchmark.judge_ratings` in the registry), which defines the
module-level names of `JudgeRatings`: MME-Emotion's `emo_tasks/mme_emotion/agreement.py` and EmoBench-M's
`emo_tasks/emobench_m/agreement.py` (its LLM scorer of SMILE's reasons), whose docstrings say what they read and
how (the examples below are MME-Emotion's).

- input: the newest judge log per task in a results folder's `emo_tasks_judge/` and the summary beside it
  (MME-Emotion: `[sample_]<task>_<stamp>_judge.jsonl` and `_summary.json`) by the one rule of every command
  (`reader.pick_judge_log`: a newer log unreadable beside an older one is refused).  A path may hold several judged
  results (`RUN/emo_tasks_judge/`, `RUN/judged/<slug>/emo_tasks_judge/`, ...): the newest one (newest log stamp) is
  used and the choice is printed on stderr;
- judge setup: each side's setup (the benchmark's setup fields; MME-Emotion: judge models per role, protocol,
  alpha, audio clues, endpoint, judge mode) is read from its summaries, never from a folder name, and printed with
  the logs.  When the logs of one side record different setups (one folder holding several judges' logs, newest
  per task), the comparison would mix judges: it is refused (exit 2; pass one `RUN/judged/<one>` per side).  A field
  a summary does not record is unknown, not a difference.  When A and B record the same setup, stderr warns that
  only nondeterminism is measured;
- pairing: samples by (task, row) that are `scored` in both runs and show the same answer (every identifying field
  both rows record is equal; MME-Emotion: video and answer); samples judged in only one run, not scored in one
  (judge_failed / offline), or with different answers are counted and left out;
- (a) `steps`: per-step rating agreement, every step's value paired step by step, over the pairs whose two judges
  rated the same number of steps (the others are counted in `n_count_mismatch`);
- (b) `last_step`: the same on the final rating (MME-Emotion: the last step, recognition; EmoBench-M: the total
  of its two dimensions, `Sample.final`) of every pair;
- (c) `scores`: the benchmark's sample scores (MME-Emotion: Rec-S, Rea-S, CoT-S x100) of each judge over the pairs,
  and the seeded paired bootstrap (`emo_tasks.results.stats.paired_bootstrap`) of B - A.  From fewer than 2 pairs there
  is no interval to estimate (one pair would give a zero-width CI and a tiny p): CI and p are null / `n/a` with a note.

(a) and (b) report n, Spearman's rho, Cohen's kappa (each distinct value, rounded to 9 decimals, is a category),
the ICC (default ICC(2,1): absolute agreement, so a harsher judge disagrees) and the mean offset B - A.  A measure
that is undefined (constant ratings, fewer than two pairs) is null with a note; it never stops the report.

Exit codes (one line on stderr each): 0 ok; 2 the runs share no sample scored in both, both paths resolve to the
same judged result, one side's logs record more than one judge setup, the two sides hold different benchmarks'
logs, or a task's newest judge log cannot be read beside an older one (the reason is printed); 3 unreadable
input (a path that is missing or holds no judge log, a malformed log line - named by file and line number - or
summary).

JSON (`--format json`), schema `emo-tasks/judge-agreement/1` (field names and examples as MME-Emotion gives them)::

    {
      "schema": "emo-tasks/judge-agreement/1",
      "icc_form": "ICC(2,1)", "resamples": 1000, "seed": 0, "level": 0.95,
      "runs": {"a": Run, "b": Run},
      "tasks": [Block, ...],          # one per task judged in either run, in the paper's order
      "overall": Block,               # every task's pairs pooled (task = "overall")
      "notes": [str, ...],            # run-level remarks (different alpha or protocol, same judge model, ...)
      "same_setup": bool              # A and B record the same judge setup: only nondeterminism is measured
    }
    Run = {
      "path": str,                    # as given
      "results_dir": str,             # the folder whose emo_tasks_judge/ was read
      "candidates": [str, ...],       # every judged result found under `path` (newest first)
      "logs": {task: str},            # the judge log used per task
      # then what the benchmark shows per task (`TaskLog.shown`); MME-Emotion:
      "judge_models": {task: {role: model} | null},
      "alpha": {task: float},         # from the summary; 0.5 when it has none
      "judge_protocol": {task: str | null},
      "summaries": {task: str | null},  # the _summary.json read per task (null: none beside the log)
      "setup": Setup                  # the judge setup those summaries record
    }
    Setup = {                         # per field: the value every summary recording it agrees on; null: none does
      # the benchmark's setup fields (`JudgeRatings.SETUP_FIELDS`); MME-Emotion:
      "judge_models": {role: model} | null, "judge_protocol": str | null, "alpha": float | null,
      "audio_clues": str | null, "judge_endpoint": str | null,   # "host[:port]"
      "judge_mode": str | null,       # api | offline | defer
      "api_models": {role: [model id the API reported, ...]} | null,
      "differs": [field, ...]         # fields the summaries disagree on (their value is null); `agreement` refuses
    }
    Block = {
      "task": str, "title": str,      # "mme_emotion_er_lab", "ER-Lab" ("[sample]" for the sample tasks)
      "status": {"a": {status: count}, "b": {status: count}},   # every row of the task in each log
      "n_paired": int,                # scored in both, same answer: the samples of (b) and (c)
      "n_only_a": int, "n_only_b": int,                         # judged in one run only
      "n_not_scored": int,            # in both logs, not scored in at least one (judge_failed / offline)
      "n_answer_mismatch": int,       # in both, scored, but a different video or answer: left out
      "n_count_mismatch": int,        # paired, different numbers of ratings: left out of "steps"
      "steps": Agreement, "last_step": Agreement,
      "scores": {score: Score}        # the benchmark's sample scores; MME-Emotion: "rec_s", "rea_s", "cot_s"
    }
    Agreement = {"n": int, "spearman": float | null, "cohen_kappa": float | null, "icc": float | null,
                 "mean_offset": float | null, "notes": [str, ...]}    # n: rating pairs; offset = mean(B - A)
    Score = {"n": int, "a": float | null, "b": float | null, "delta": float | null,   # delta = b - a
             "ci_low": float | null, "ci_high": float | null, "p_value": float | null,  # null from n < 2
             "notes": [str, ...]}     # why CI and p are null

Files in, files out: no network.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from emo_tasks import benchmarks
from emo_tasks.results import reader
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX

SCORED = "scored"  # the status of a usable judgement: only samples scored in both runs are paired


class InputError(reader.InputError):
    """A path or file that cannot be read as a judged run (exit 3; the reader's kind: `reader.pick_judge_log`)."""


# ------------------------------------------------------------------------------------- what a benchmark gives
@dataclass(frozen=True)
class Sample:
    """One judged sample (one row of a task) as the benchmark reads it from its judge log."""

    status: str  # the log's status: SCORED, or why not (judge_failed, offline, ...); counted per status
    answer: Mapping[str, Any] = field(default_factory=dict)  # what was judged: a field both rows hold must agree
    steps: tuple[float, ...] = ()  # scored: the value of every step's rating, the last one the final rating
    scores: Mapping[str, float | None] = field(default_factory=dict)  # scored: sample score -> value (None: none)
    #: scored: the final rating (`last_step`, calibrate's kappa) when it is not the last step (EmoBench-M: the total
    #: of its two dimensions); None: the last step is
    final: float | None = None

    @property
    def last(self) -> float:
        """The final rating: `final`, else the last step."""
        return self.steps[-1] if self.final is None else self.final


@dataclass
class TaskLog:
    """One task's judge log and its summary, read and checked by the benchmark (`JudgeRatings.read_task`)."""

    log: Path
    summary: dict[str, Any]  # the summary beside the log; {} when there is none
    summary_file: Path | None  # None: no summary beside the log
    #: setup field -> the value the summary records; None, "" and empty containers: not recorded
    setup: dict[str, Any] = field(default_factory=dict)
    shown: dict[str, Any] = field(default_factory=dict)  # what the JSON's Run lists per task, in its order
    #: row -> sample, every row of the task in the log (the benchmark's row key: MME-Emotion's row number,
    #: EmoBench-M's row id)
    samples: dict[Any, Sample] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # remarks on the log (no summary, ...)


class JudgeRatings(Protocol):
    """What a benchmark's judge-ratings module (the registry's `Benchmark.judge_ratings`) defines at module level for
    `agreement`.  Everything else - finding the newest judged result, setups and refusals, pairing, statistics,
    output - is this module's and `agreement_report`'s, the same for every benchmark."""

    TITLE: str  # the benchmark's name, in messages
    LOGS: str  # where its judge logs are, in the message for a path that holds none
    #: summary field -> its title: what makes two logs one judge.  "judge_models" ({role: model}) is one of them.
    SETUP_FIELDS: Mapping[str, str]
    SCORES: Mapping[str, str]  # sample score -> its title, in output order

    def judge_logs(self, folder: Path) -> dict[str, Path]:
        """Task -> its newest judge log in `folder`/emo_tasks_judge/ ({}: none)."""

    def all_judge_logs(self, folder: Path) -> dict[str, list[Path]]:
        """Task -> every judge log of it in `folder`/emo_tasks_judge/, newest first (the one rule picks among them)."""

    def log_stamp(self, log: Path) -> str:
        """A log's time stamp: the newest judged result under a path has the newest one."""

    def task_order(self, task: str) -> Any:
        """A task's sort key."""

    def task_title(self, task: str) -> str: ...

    def read_task(self, task: str, log: Path, summary: dict[str, Any] | None) -> TaskLog:
        """The task's rows of its log, read and checked with the summary beside it (`reader.read_summary`; None:
        there is none), InputError naming the file."""

    def pair_notes(self, task: str, a: TaskLog, b: TaskLog) -> list[str]:
        """Remarks on a task judged in both runs (a different alpha, the same judge models, ...)."""


def log_stamp(log: Path) -> str:
    """A judge log's time stamp, the last `_`-part of its name (`[sample_]<task>_<stamp>_judge.jsonl`): what every
    benchmark's judge-ratings module gives as its `log_stamp`, the benchmarks naming their logs alike."""
    return log.name[: -len(JUDGE_LOG_SUFFIX)].rsplit("_", 1)[-1]


def read_log_lines(log: Path) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a judge log with their line numbers, split on newlines only; InputError naming the file
    and line for one that is not a JSON object."""
    try:
        lines = log.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{log}: {exc}") from exc
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{log}:{i}: not valid JSON ({exc})") from exc
        if not isinstance(obj, dict):
            raise InputError(f"{log}:{i}: expected a JSON object, got {type(obj).__name__}")
        out.append((i, obj))
    return out


def summary_notes(task: str, a: TaskLog, b: TaskLog, keys: Sequence[str], models: str) -> list[str]:
    """A judge-ratings module's `pair_notes` from the two summaries: each of `keys` both record and differ on, and
    the same judge `models` ("judge model(s)") on both sides, where only run-to-run consistency is measured."""
    notes = []
    sa, sb = a.summary, b.summary
    for k in keys:
        if sa.get(k) != sb.get(k) and sa.get(k) is not None and sb.get(k) is not None:
            notes.append(f"{task}: {k} differs (A {sa.get(k)}, B {sb.get(k)})")
    if sa.get("judge_models") and sa.get("judge_models") == sb.get("judge_models"):
        notes.append(
            f"{task}: both runs used the same {models} {sa['judge_models']}: this measures run-to-run "
            "consistency, not one judge against another"
        )
    return notes


def judge_ratings() -> list[JudgeRatings]:
    """Every benchmark's judge-ratings module, in registry order."""
    modules = [b.judge_ratings for b in benchmarks.all_benchmarks() if b.judge_ratings]
    return [cast(JudgeRatings, importlib.import_module(m)) for m in modules]


@dataclass
class JudgedRun:
    """The newest judged result under a path: its benchmark's judge ratings and its per-task logs."""

    path: Path
    folder: Path
    candidates: list[Path]
    ratings: JudgeRatings
    tasks: dict[str, TaskLog] = field(default_factory=dict)  # task -> its log, in task order
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------------- input
def is_run_form(a: str, b: str) -> bool:
    """True when `agreement` was given run folders (either argument is a directory) rather than rating files."""
    return Path(a).is_dir() or Path(b).is_dir()


def _newest_key(folder: Path, ratings: JudgeRatings) -> tuple[str, float, str]:
    logs = list(ratings.judge_logs(folder).values())
    return (max(ratings.log_stamp(p) for p in logs), max(p.stat().st_mtime for p in logs), str(folder))


def find_results(path: Path, ratings: JudgeRatings) -> list[Path]:
    """Every folder at or under `path` with the benchmark's judge logs in its `emo_tasks_judge/`, newest first."""
    if not path.exists():
        raise InputError(f"{path}: no such directory")
    if not path.is_dir():
        raise InputError(f"{path}: not a directory (give two run folders, or two JSONL rating files)")
    if path.name == JUDGE_DIR:
        path = path.parent
    try:
        found = {p.parent for p in path.rglob(JUDGE_DIR) if p.is_dir()}
        if (path / JUDGE_DIR).is_dir():
            found.add(path)
        folders = [f for f in found if ratings.judge_logs(f)]
        return sorted(folders, key=lambda f: _newest_key(f, ratings), reverse=True)
    except OSError as exc:
        raise InputError(f"{path}: {exc}") from exc


def load_run(path: str | Path) -> JudgedRun:
    """The newest judged result at or under `path`, every task's newest log read and checked.  The benchmark is
    the first, in registry order, with judge logs there."""
    path = Path(path)
    every = judge_ratings()
    for ratings in every:
        candidates = find_results(path, ratings)
        if candidates:
            break
    else:
        raise InputError(
            f"{path}: no {' or '.join(r.TITLE for r in every)} judge log (expected "
            f"{' or '.join(r.LOGS for r in every)}; run lmms-eval with --output_path, or `emo-tasks judge`)"
        )
    run = JudgedRun(path=path, folder=candidates[0], candidates=candidates, ratings=ratings)
    for task, logs in sorted(ratings.all_judge_logs(run.folder).items(), key=lambda kv: ratings.task_order(kv[0])):
        pick = reader.pick_judge_log(task, logs, lambda log, summary, t=task: ratings.read_task(t, log, summary))
        if pick.content is None:  # no log of the task could be read: the newest one's error (exit 3)
            exc = pick.unreadable[0][1]
            if isinstance(exc, InputError):
                raise exc
            raise InputError(str(exc)) from exc
        run.tasks[task] = pick.content
        run.notes += pick.content.notes
    return run


# ------------------------------------------------------------------------------------------------ judge setup
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def setup_values(run: JudgedRun) -> dict[str, dict[str, tuple[Any, list[str]]]]:
    """Per setup field, every distinct recorded value -> (value, the tasks whose summary records it).  A summary
    that does not record a field (an older summary, no summary at all) adds nothing: unknown is not different."""
    out: dict[str, dict[str, tuple[Any, list[str]]]] = {name: {} for name in run.ratings.SETUP_FIELDS}
    for task, log in run.tasks.items():
        for name in run.ratings.SETUP_FIELDS:
            value = log.setup.get(name)
            if value not in (None, "", {}, []):
                out[name].setdefault(_canonical(value), (value, []))[1].append(task)
    return out


def _api_models(run: JudgedRun) -> dict[str, list[str]] | None:
    """{role: [model id the API reported, ...]} over every summary (the judge engine's `api_models` counts answers
    per id)."""
    roles: dict[str, set[str]] = {}
    for log in run.tasks.values():
        api = log.summary.get("api_models")
        if not isinstance(api, dict):
            continue
        for role, ids in api.items():
            if isinstance(ids, dict | list):
                roles.setdefault(str(role), set()).update(str(i) for i in ids)
    return {role: sorted(ids) for role, ids in sorted(roles.items())} or None


def judge_setup(run: JudgedRun) -> dict[str, Any]:
    """The judge setup a run's summaries record (the `Setup` of the module docstring): read from the summaries,
    not the folder name, so two judges can be told apart whatever their folders are called."""
    values = setup_values(run)
    setup: dict[str, Any] = {}
    for name in run.ratings.SETUP_FIELDS:
        found = list(values[name].values())
        setup[name] = found[0][0] if len(found) == 1 else None
    setup["api_models"] = _api_models(run)
    setup["differs"] = [name for name in run.ratings.SETUP_FIELDS if len(values[name]) > 1]
    return setup


def _show(value: Any) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, dict):
        return ", ".join(f"{role} {model}" for role, model in value.items())
    return str(value)


def mixed_setup_reason(run: JudgedRun) -> str | None:
    """Why one side's logs are not one judge (None when they are): the differing fields, each value with the
    tasks that record it.  Comparing such a side with another would mix judges task by task."""
    values = setup_values(run)
    order, title = run.ratings.task_order, run.ratings.task_title
    parts = []
    for name, name_title in run.ratings.SETUP_FIELDS.items():
        if len(values[name]) > 1:
            shown = " vs ".join(
                f"{_show(v)} ({', '.join(title(t) for t in sorted(tasks, key=order))})"
                for v, tasks in values[name].values()
            )
            parts.append(f"{name_title} {shown}")
    if not parts:
        return None
    return f"the judge logs read from {run.folder} come from more than one judge setup: " + "; ".join(parts)


def same_setup(a: Mapping[str, Any], b: Mapping[str, Any], fields: Sequence[str]) -> bool:
    """True when two `Setup`s are the same judge: judge models recorded and equal on both sides, and every other
    field that both record equal.  Comparing such runs measures only the judge's nondeterminism."""
    if a["differs"] or b["differs"] or a["judge_models"] is None or b["judge_models"] is None:
        return False
    return all(
        _canonical(a[name]) == _canonical(b[name]) for name in fields if a[name] is not None and b[name] is not None
    )


def describe_setup(setup: Mapping[str, Any], fields: Mapping[str, str]) -> str:
    """One line naming a `Setup` (`fields`: setup field -> title): every field, "not recorded" or "differs by
    task" where there is no one value."""
    parts = []
    for name, title in fields.items():
        value = "differs by task" if name in setup["differs"] else _show(setup[name])
        parts.append(f"{title}: {value}")
    if setup.get("api_models"):
        reported = "; ".join(f"{role} {', '.join(ids)}" for role, ids in setup["api_models"].items())
        parts.append(f"API reported: {reported}")
    return "; ".join(parts)
