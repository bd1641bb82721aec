"""The one reader of a run folder: which results file a folder means, the run it holds (aggregate results,
per-sample values, the benchmarks' summaries), its data hash, the judge counts every tool reads, which judge log of
a task is the run's and the summary beside it, and why a VLMEvalKit run folder holds no results.

Why a separate reader: lmms-eval's results.json only holds the aggregate numbers; their uncertainty and any paired
comparison need the per-sample values, which live in lmms-eval's sample logs (`--log_samples`) and in our own
judge logs (`<output_path>/emo_tasks_judge/`).  Everything here is files in, files out, no network.  The names of a
run folder's files are `emo_tasks.results.layout`'s.

Which results file a folder means: every `*_results.json` under it counts, lmms-eval's and those `emo-tasks judge`
wrote (under `judged/`, or carrying an `emo_tasks_judge` block; of a judge folder judged again, its newest).  One
file: that one.  One lmms-eval run plus exactly one judged result of it: the judged one (the same run, scored).
Anything else is ambiguous: every command refuses it (exit 2) unless a run is picked (`--run`, `--base-run` /
`--new-run`, or the results file as the argument), and prints the file, its date and the model it used.

Which judge log of a task is the run's (`pick_judge_log`, for every command; the benchmark says which files are its
logs and reads their rows): the newest that can be read (rows and summary) and agrees with the run; a newer one that
cannot be read while an older one would be taken is refused, naming both (`JudgeLogRefused`, exit 2).  The summary
beside a log is read one way (`read_summary`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from emo_tasks.benchmarks import benchmark_of
from emo_tasks.common import once, remembering
from emo_tasks.metrics import Metric
from emo_tasks.results.layout import JUDGE_DIR, JUDGED_DIR, MARKER, REFUSED, summary_file

#: Task-config fields that change what the model is asked (a difference means the prompts differ).
PROMPT_FIELDS = ("doc_to_text", "doc_to_messages", "lmms_eval_specific_kwargs", "description", "num_fewshot")


class ReportError(Exception):
    """A run folder that cannot be used: no results file, or several and none picked (exit 2)."""


class InputError(ReportError):
    """Malformed input: a results file that is not the JSON lmms-eval writes (exit 3)."""


#: Result metrics that count a task's judged samples: a benchmark whose numbers depend on a judge reports these two,
#: and a task with them has judge-dependent values (all but its table's `judge_free` metrics).
JUDGE_COUNTS = ("n_scored", "n_judge_failed")


def judge_free(task: str, metric: str) -> bool:
    """The metric's value does not depend on the judge (the judge counts, or a metric its table says so of)."""
    bench = benchmark_of(task)
    return metric in JUDGE_COUNTS or (bench is not None and metric in bench.table and bench.table[metric].judge_free)


@dataclass
class Run:
    """One lmms-eval output folder: aggregate results plus whatever per-sample values could be found."""

    path: Path
    results_file: Path
    data: dict[str, Any]
    label: str = ""
    #: task -> metric -> {sample key: value}
    samples: dict[str, dict[str, dict[Any, float]]] = field(default_factory=dict)
    #: task -> the benchmark's own summary of it (judge models, prompt hashes, ...)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: why this results file was chosen when the folder held others (None: it was the only one, or picked)
    choice: str | None = None
    #: leaf task -> `data_hash` of its sample log (None without one)
    data_hashes: dict[str, str | None] = field(default_factory=dict)
    #: leaf task -> its sample log's (doc_id, target) rows, in log order (None without one)
    logged: dict[str, list[tuple[str, str]] | None] = field(default_factory=dict)

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        return self.data.get("results") or {}

    @property
    def configs(self) -> dict[str, dict[str, Any]]:
        return self.data.get("configs") or {}

    @property
    def model(self) -> str | None:
        return (self.data.get("config") or {}).get("model")

    @property
    def model_args(self) -> str | None:
        """The run's model_args as text with secrets masked (`emo_tasks.results.redact.model_args_text`; a dict, as
        older lmms-eval versions record it, masked by key): they reach labels, JSON, CSV, the site, exports."""
        from emo_tasks.results.redact import model_args_text

        return model_args_text((self.data.get("config") or {}).get("model_args"))

    def value(self, task: str, metric: str) -> float | None:
        """results.json's number (None when absent, null or not a number)."""
        v = self.results.get(task, {}).get(f"{metric},none")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
            return None
        return float(v)

    def has(self, task: str, metric: str) -> bool:
        return f"{metric},none" in self.results.get(task, {})

    def subtasks(self, group: str) -> list[str]:
        """The group's tasks, as lmms-eval recorded them."""
        return list((self.data.get("group_subtasks") or {}).get(group) or [])

    def subset(self, task: str) -> dict[str, Any] | None:
        """The subset a leaf task ran on (`emo_tasks.subset`, recorded in its config), None for the full data."""
        from emo_tasks.subset import recorded

        return recorded(self.configs.get(task) or {})

    def subset_tasks(self, task: str) -> list[str]:
        """The leaf tasks behind `task` that ran on a subset."""
        return [t for t in leaves(self, task) if self.subset(t) is not None]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc})") from exc


def _is_judged(path: Path, root: Path, data: Any) -> bool:
    rel = path.relative_to(root).parts[:-1] if root in path.parents else ()
    return JUDGED_DIR in rel or (isinstance(data, dict) and MARKER in data)


def candidates(run_dir: Path) -> tuple[list[Path], list[Path]]:
    """(lmms-eval results files, judged results files) under run_dir, each sorted by name."""
    lmms, judged = [], []
    for path in sorted(run_dir.rglob("*results.json"), key=lambda p: (p.name, str(p))):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = None  # still a candidate: reading it reports the error if it is the one chosen
        (judged if _is_judged(path, run_dir, data) else lmms).append(path)
    return lmms, judged


def pick_results(run_dir: Path, pick: str, found: list[Path]) -> Path:
    """--run NAME_OR_PATH: a results file or folder (absolute, or relative to the cwd or to run_dir), else the
    one results file whose path below run_dir contains NAME."""
    for cand in (Path(pick), run_dir / pick):
        if cand.is_file():
            return cand
        if cand.is_dir() and cand != run_dir:
            return find_results(cand)[0]
    hits = [f for f in found if pick in str(f.relative_to(run_dir))]
    if len(hits) == 1:
        return hits[0]
    listed = "; ".join(str(f.relative_to(run_dir)) for f in found) or "none"
    what = "matches several" if hits else "matches no"
    raise ReportError(f"{run_dir}: --run {pick!r} {what} results file (found: {listed})")


def find_results(run_dir: Path, pick: str | None = None) -> tuple[Path, str | None]:
    """The results file a run folder means, by the one rule every command uses, and a note saying why.

    Every `*_results.json` under run_dir counts (lmms-eval nests them in a model folder; `emo-tasks judge` writes
    RUN/judged/<judge setup>/, where a judge run again only adds a newer result: the newest per judge folder
    counts).  One file: that one.  One lmms-eval run plus exactly one judged result made from it: the judged one
    (the same answers, scored).  Anything else is ambiguous and raises ReportError listing the files, so a number
    never comes from a run nobody chose; `pick` (--run / --base-run / --new-run) chooses."""
    if run_dir.is_file():
        return run_dir, None
    lmms, judged_all = candidates(run_dir)
    found_all = sorted(lmms + judged_all, key=lambda p: (p.name, str(p)))
    if pick:
        return pick_results(run_dir, pick, found_all), None
    judged = newest_per_folder(judged_all)
    found = sorted(lmms + judged, key=lambda p: (p.name, str(p)))
    if not found:
        refused = refused_note(run_dir)  # a VLMEvalKit run folder whose last evaluation was refused: say so
        raise ReportError(
            f"{run_dir}: {refused}" if refused
            else f"{run_dir}: no *_results.json found (was lmms-eval run with --output_path {run_dir}?)"
        )  # fmt: skip
    if len(found) == 1:
        return found[0], None
    if len(lmms) == 1 and len(judged) == 1 and _judged_from(judged[0]) == lmms[0].name:
        return judged[0], f"judged results of {lmms[0].name}"
    listed = ", ".join(str(f.relative_to(run_dir)) for f in found)
    raise ReportError(
        f"{run_dir} holds {len(found)} results files ({len(lmms)} lmms-eval run(s), {len(judged)} judged): "
        f"{listed}; pick one with --run (compare: --base-run/--new-run) NAME_OR_PATH, or pass the results file or "
        "judged folder itself"
    )


def refused_note(folder: Path) -> str | None:
    """Why `folder` holds no results when its last VLMEvalKit evaluation was refused (the `REFUSED` note
    `emo_tasks.vlmeval.runfolder.evaluation` writes there), else None."""
    try:
        data = json.loads((folder / REFUSED).read_text(encoding="utf-8"))
        return (
            f"the last VLMEvalKit evaluation of {data['dataset']} ({data['refused_at']}, prediction file "
            f"{data['prediction_file']}) was refused, so no results of it are kept: {data['reason']}"
        )
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None


def newest_per_folder(files: Sequence[Path]) -> list[Path]:
    """The newest results file of each folder (a judge folder judged again, failures resent, adds a newer one)."""
    newest: dict[Path, Path] = {}
    for f in files:
        if f.parent not in newest or f.name > newest[f.parent].name:
            newest[f.parent] = f
    return sorted(newest.values(), key=lambda p: (p.name, str(p)))


def _judged_from(path: Path) -> str | None:
    """The file name of the lmms-eval results a judged results file was made from."""
    try:
        block = json.loads(path.read_text(encoding="utf-8")).get(MARKER) or {}
        return Path(str(block.get("source_results") or "")).name or None
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None


def load_run(run_dir: str | Path, pick: str | None = None) -> Run:
    """Read one run folder; missing per-sample files become notes, never errors.  `pick`: see `find_results`
    (a folder holding several runs and no pick raises ReportError).  A malformed results file raises InputError.
    Each file is read once (`common.remembering`: one judge log covers several tasks)."""
    with remembering():
        return _load_run(Path(run_dir), pick)


def _load_run(path: Path, pick: str | None) -> Run:
    if not path.exists():
        raise ReportError(f"{path}: no such run folder")
    results_file, choice = find_results(path, pick)
    data = _read_json(results_file)
    if not isinstance(data, dict) or not isinstance(data.get("results", {}), dict):
        raise InputError(f"{results_file}: not an lmms-eval results file (no 'results' object)")
    for key in ("configs", "config", "n-samples", "group_subtasks"):
        if not isinstance(data.get(key) or {}, dict):
            raise InputError(f"{results_file}: '{key}' is not an object")
    for task, row in data["results"].items():
        if not isinstance(row, dict):
            raise InputError(f"{results_file}: results[{task!r}] is not an object")
    run = Run(path=run_root(path, results_file), results_file=results_file, data=data, choice=choice)
    for task in sorted(run.results):
        bench = benchmark_of(task)
        if bench is None or task in bench.groups or bench.read_samples is None:
            continue
        got = bench.read_samples(run.path, run.results_file, task, run.configs.get(task) or {})
        if got.values:
            run.samples[task] = got.values
        if got.summary is not None:
            run.summaries[task] = got.summary
            if got.summary.get("n_rule_differs"):
                run.notes.append(
                    f"{task}: {got.summary['n_rule_differs']} judged answers are read differently by the official "
                    "per-task script (it reads only `: d/1` ratings), so its per-task number could differ from "
                    "ours; the Overall script reads them as we do (n_rule_differs)"
                )
            if got.summary.get("n_judge_truncated"):
                run.notes.append(
                    f"{task}: {got.summary['n_judge_truncated']} answers of the judge agents were cut off inside "
                    "their reasoning (n_judge_truncated; counted among the judge failures, not scored): give the "
                    "reasoning judge more tokens and judge again (docs/judges.md#reasoning-judges)"
                )
        run.notes.extend(got.notes)
        run.logged[task] = logged_rows(run.path, run.results_file, task)
        run.data_hashes[task] = hash_rows(run.logged[task])
    return run


def logged_rows(run_dir: Path, results_file: Path, task: str) -> list[tuple[str, str]] | None:
    """The (doc_id, target) of each line of the task's sample log, in order; None without a usable one."""
    from emo_tasks.datafiles import read_jsonl_rows, sample_log

    log = sample_log(run_dir, results_file, task)
    if log is None:
        return None
    try:
        rows = [(str(r.get("doc_id")), str(r.get("target"))) for r in read_jsonl_rows(log)]
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return rows or None


def hash_rows(rows: Sequence[tuple[str, str]] | None) -> str | None:
    """sha256[:16] over the sorted (doc_id, target) pairs of a sample log, every row counted (a multiset: a row
    logged twice changes it): every task's target is the gold answer plus a hash of its row, so this identifies
    the data the run used.  None without a usable sample log."""
    import hashlib

    if not rows:
        return None
    return hashlib.sha256(json.dumps(sorted(rows)).encode("utf-8")).hexdigest()[:16]


def data_hash(run_dir: Path, results_file: Path, task: str) -> str | None:
    """`hash_rows` of the task's sample log."""
    return hash_rows(logged_rows(run_dir, results_file, task))


def describe(run: Run) -> str:
    """Which results file a run is: path, its date (results.json's, and the file's mtime) and the model."""
    import datetime

    mtime = datetime.datetime.fromtimestamp(run.results_file.stat().st_mtime, datetime.timezone.utc)
    model = f"{run.model or '?'}" + (f" ({run.model_args})" if run.model_args else "")
    text = f"{run.results_file} (date {run.data.get('date')}, written {mtime:%Y-%m-%d %H:%M:%S} UTC, model {model}"
    setup = judge_setup_text((run.data.get(MARKER) or {}).get("judge_setup"))
    text += f"; judge setup: {setup})" if setup else ")"
    subsets = sorted({(r["name"], sum(1 for t in run.results if (x := run.subset(t)) and x["name"] == r["name"]))
                      for t in run.results if (r := run.subset(t)) is not None})  # fmt: skip
    for name, n_tasks in subsets:
        text += f" [subset {name!r}: {n_tasks} task(s) ran on its rows]"
    from emo_tasks.results.judge_shutdown import describe as shutdown_words
    from emo_tasks.results.judge_shutdown import run_shutdowns

    shutdowns = shutdown_words(run_shutdowns(run))
    if shutdowns:  # what the judge endpoint reported when it judged: a judge that shuts down
        text += f" [judge shutdown reported: {'; '.join(shutdowns)}]"
    return text + (f" [{run.choice}]" if run.choice else "")


def judge_setup_text(setup: Any) -> str | None:
    """One line naming a judged result's judge setup (`emo-tasks judge`'s `judge_setup`), None without one."""
    if not isinstance(setup, dict) or not setup:
        return None
    parts = [f"mode {setup.get('judge_mode')}"]
    if isinstance(setup.get("models"), dict):
        parts.append(", ".join(f"{role} {model}" for role, model in setup["models"].items()))
    for key, value in setup.items():  # what the benchmarks recorded (protocol, alpha, ...), then the endpoint
        if key == "judge_fingerprint" and value is not None:  # a JSON value: named by a short hash, not dumped
            digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:10]
            parts.append(f"judge fingerprint {digest}")
        elif key not in ("judge_mode", "models") and value is not None:
            parts.append(f"{key.replace('_', ' ')} {value}")
    return "; ".join(parts)


def run_root(path: Path, results_file: Path) -> Path:
    """Where a run's own files are: the nearest folder from the results file up to `path` that holds
    `emo_tasks_judge/` (lmms-eval nests results in a model folder; `emo-tasks judge` writes RUN/judged/<judge>/),
    else `path`."""
    top = path if path.is_dir() else path.parent
    folder = results_file.parent
    while True:
        if (folder / JUDGE_DIR).is_dir():
            return folder
        if folder == top or folder == folder.parent or top not in folder.parents:
            return top
        folder = folder.parent


def judged_source(folder: Path) -> Path:
    """The run a judged result was made from: RUN for a folder under RUN/judged/<judge setup>/ (the last `judged/`
    in the path), else the folder itself.  The one rule `report --trend` (which run a point is) and `plan-gate`
    (whose saved answers a results file scores) share."""
    parts = Path(folder).parts
    if JUDGED_DIR in parts[:-1]:
        return Path(*parts[: len(parts) - 1 - parts[::-1].index(JUDGED_DIR)])
    return Path(folder)


def label_runs(runs: Sequence[Run]) -> None:
    """model + model_args; the folder name when two runs would share a label (or nothing identifies the model)."""
    base = [f"{r.model or '?'}" + (f" ({r.model_args})" if r.model_args else "") for r in runs]
    for run, label in zip(runs, base, strict=True):
        ambiguous = base.count(label) > 1 or run.model is None
        run.label = run.path.name if ambiguous else label
    names = [r.label for r in runs]
    for i, run in enumerate(runs):
        if names.count(run.label) > 1:
            run.label = f"{run.label} [{i + 1}]"


def samples_for(run: Run, task: str) -> dict[str, dict[Any, float]]:
    """A task's per-sample values; a group pools its subtasks' (their keys carry the task)."""
    bench = benchmark_of(task)
    if bench is None or task not in bench.groups:
        return run.samples.get(task, {})
    pooled: dict[str, dict[Any, float]] = {}
    for sub in sorted(run.subtasks(task)):  # sorted: the seeded bootstrap draws depend on the order
        for m, vals in run.samples.get(sub, {}).items():
            pooled.setdefault(m, {}).update(vals)
    return pooled


def leaves(run: Run, task: str) -> list[str]:
    """A group's subtasks (as lmms-eval recorded them), else the task itself."""
    bench = benchmark_of(task)
    return sorted(run.subtasks(task)) if bench is not None and task in bench.groups else [task]


def has_judge_counts(run: Run, task: str) -> bool:
    return all(run.has(task, m) for m in JUDGE_COUNTS)


def _count(run: Run, task: str, metric: str) -> int | None:
    v = run.value(task, metric)
    if v is None:  # results.json lacks it: the benchmark's summary may hold it
        v = ((run.summaries.get(task) or {}).get("metrics") or {}).get(metric)
        if v is None:
            v = (run.summaries.get(task) or {}).get(metric)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def judge_counts(run: Run, task: str) -> tuple[int | None, int | None]:
    """(n_scored, n_judge_failed) of a task or group, from results.json (else the task's summary); None when the
    run did not count them (deferred judging, a benchmark without a judge)."""
    return _count(run, task, "n_scored"), _count(run, task, "n_judge_failed")


def judge_mode(run: Run, task: str) -> str | None:
    """The judge mode the benchmark's summary records for the task (a group: its subtasks' when they agree)."""
    modes = {(run.summaries.get(t) or {}).get("judge_mode") for t in leaves(run, task)}
    modes.discard(None)
    return modes.pop() if len(modes) == 1 else None


def null_reason(run: Run, task: str, metric: Metric) -> str | None:
    """Why a metric is null in this run: deferred judging, judge failures, or offline mode (the summary's
    judge_mode and the judge counts say which), else the metric's own reason."""
    mode = judge_mode(run, task)
    scored, failed = judge_counts(run, task)
    if mode == "defer" or (mode is None and has_judge_counts(run, task) and scored is None):
        return f"judging deferred (EMO_JUDGE=defer): run `emo-tasks judge {run.path}` to score it"
    if failed and not scored:
        fails = _failures(run, task)
        return f"every judged sample failed: {failed} judge failures" + (f" ({fails})" if fails else "")
    if mode == "offline" or metric.null_reason is None or mode is None:
        return metric.null_reason
    return f"no sample scored ({scored} scored, {failed} failed; judge mode {mode})"


def _failures(run: Run, task: str) -> str:
    """The summaries' failure counts of a task or group, "stage:reason xN" joined."""
    counts: dict[str, int] = {}
    for t in leaves(run, task):
        for k, v in ((run.summaries.get(t) or {}).get("judge_failures") or {}).items():
            counts[k] = counts.get(k, 0) + int(v)
    return ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))


def failure_share(run: Run, tasks: Sequence[str]) -> tuple[int, int] | None:
    """(judge-failed, scored + judge-failed) over the leaf tasks behind `tasks`; None when no task counts them."""
    failed = total = 0
    counted = False
    for leaf in sorted({t for task in tasks for t in leaves(run, task)}):
        scored, fails = judge_counts(run, leaf)
        if scored is None and fails is None:
            continue
        counted = True
        failed += fails or 0
        total += (scored or 0) + (fails or 0)
    return (failed, total) if counted else None


# ------------------------------------------------------------------------------------------------ judge logs
#: What a benchmark reads of one judge log of a task (its rows, checked as it needs them).
T = TypeVar("T")


class JudgeLogRefused(ReportError):
    """A task's judge log cannot be chosen (exit 2): a newer log of the task cannot be read while an older one
    would be taken; the unreadable one may be the run's own, so taking the older would be a guess."""


@dataclass
class JudgeLogPick(Generic[T]):
    """The outcome of the one rule (`pick_judge_log`) for one task: the run's own log, or why there is none."""

    task: str
    log: Path | None = None  # the log used (None: none is the run's, or none could be read)
    content: T | None = None  # what the benchmark read of it
    summary: dict[str, Any] | None = None  # the summary beside it (`read_summary`; None: there is none)
    #: the logs that could not be read (their rows or their summary), newest first, each with its error
    unreadable: list[tuple[Path, Exception]] = field(default_factory=list)
    #: the readable logs that are another run's, newest first, each with why
    others: list[tuple[Path, str]] = field(default_factory=list)


def read_summary(log: Path) -> dict[str, Any] | None:
    """The summary beside a judge log (`layout.summary_file`): a JSON object, None when there is none.  The one way
    every command reads it: a summary that is not readable JSON or not an object raises InputError naming it."""
    path = summary_file(log)
    if not path.exists():
        return None
    return once("judge-summary", path, lambda: _read_summary(path))


def _read_summary(path: Path) -> dict[str, Any]:
    summary = _read_json(path)
    if not isinstance(summary, dict):
        raise InputError(f"{path}: expected a JSON object")
    return summary


def pick_judge_log(
    task: str,
    logs: Sequence[Path],
    read: Callable[[Path, dict[str, Any] | None], T],
    not_this_runs: Callable[[T], str | None] | None = None,
) -> JudgeLogPick[T]:
    """The one rule every command picks a task's judge log by: of `logs` (the task's logs in a run's judge folder,
    newest first) the newest that can be read (its summary by `read_summary`, its rows by the benchmark's `read`,
    given that summary) and is the run's (`not_this_runs(content)` is None; without it every readable log is).

    Why: a folder's judge folder can hold logs of several runs, and a log that cannot be read cannot be proven to
    be another run's.  So when a newer log cannot be read and an older one would be taken, this refuses naming
    both (JudgeLogRefused, exit 2) instead of guessing; when none is taken the pick says why (`unreadable`,
    `others`, or no logs at all) and each command says so in its own way (report: a note, no CIs; export: an
    error or a refusal)."""
    pick: JudgeLogPick[T] = JudgeLogPick(task)
    for log in logs:
        try:
            summary = read_summary(log)
            content = read(log, summary)
        except (OSError, ValueError, InputError) as exc:
            pick.unreadable.append((log, exc))
            continue
        why = not_this_runs(content) if not_this_runs is not None else None
        if why is not None:
            pick.others.append((log, why))
            continue
        if pick.unreadable:
            newer, exc = pick.unreadable[0]
            why = _about(newer, " ".join(str(exc).split()))
            raise JudgeLogRefused(
                f"{task}: the judge log {newer.name} in {newer.parent} cannot be read ({why}), and an older one, "
                f"{log.name}, can: the unreadable newer log may be this run's own, so neither is used; repair or "
                f"remove {newer.name}"
            )
        pick.log, pick.content, pick.summary = log, content, summary
        break
    return pick


def _about(path: Path, message: str) -> str:
    """An error message about `path` without the path it starts with (the refusal names the file already):
    "<path> line 3: ..." and "<path>:3: ..." read "line 3: ..."."""
    if not message.startswith(str(path)):
        return message
    rest = message[len(str(path)) :]
    return "line " + rest[1:] if rest.startswith(":") and rest[1:2].isdigit() else rest.lstrip(" :")
