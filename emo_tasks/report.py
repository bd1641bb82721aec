"""Read lmms-eval output folders back: paper-style tables with bootstrap CIs, leaderboard JSON, plots, and the
paired regression gate behind `emo-tasks compare`.

Why a separate reader: lmms-eval's results.json only holds the aggregate numbers; their uncertainty and any paired
comparison need the per-sample values, which live in lmms-eval's sample logs (`--log_samples`) and in our own
judge logs (`<output_path>/emo_tasks_judge/`).  Everything here is files in, files out, no network.

This module knows no benchmark's internals: it asks each one (`emo_tasks.benchmarks`) for its metric table (names,
directions, headline flags, per-sample value functions) and for its per-sample values of a run.  A group's
per-sample values pool its subtasks' (lmms-eval's `group_subtasks`); the unit keys carry the task, so they do not
collide.

Leaderboard JSON (`emo-tasks report --format json`), schema "emo-tasks/leaderboard/1":

    {"schema": "emo-tasks/leaderboard/1",
     "generated_by": "emo-tasks <version>",
     "runs": [{
        "label": str,                 # model + model_args, or the folder name when that is ambiguous
        "run_dir": str,
        "model": str | null, "model_args": str | null,  # secrets masked; a dict as `name=value,...` text
        "emo_tasks_version": str,     # the emo-tasks that wrote the report (runs do not record theirs)
        "lmms_eval_version": str | null, "date": str | null,
        "data_source": {task: "benchmark" | "sample"},
        "judge_models": {task: {role: model}} | null,    # MME-Emotion judge summaries; null offline
        "judge_protocol": {task: str | null},
        "prompt_hashes": {task: {name: sha256[:16]}},
        "sample_counts": {task: int},                     # lmms-eval's n-samples (effective)
        "judge_failures": {task: {"<stage>:<reason>": count}},
        "n_rule_differs": {task: int | null},             # judged answers the official per-task script reads
                                                          # differently (`: d/1` only): its number could differ
        "judge_api_models": {task: {role: {model id the API reported: answers}} | null},
        "judge_endpoint": {task: "host[:port]" | null},
        "alpha": {task: float | null},
        "data_hash": {task: str | null},  # sha256[:16] over the sorted (doc_id, target) pairs of the sample
                                          # log (targets carry a row hash); null without --log_samples
        "subset": {task: {"name", "n", "digest"}},        # tasks run on a gate subset (EMO_SUBSET); {} = none
        "results_file": str,                              # the results file read
        "metrics": {task: {metric: {"value": float | null,   # results.json's number
                                    "ci_low": float | null, "ci_high": float | null,  # 95 % percentile bootstrap
                                    "n": int | null,          # per-sample values behind the CI
                                    # judge-dependent values of a task with judge counts (MME-Emotion) only:
                                    "n_scored": int | null, "n_judge_failed": int | null}}},
        "notes": [str]}]}             # what is missing and how to get it, the true reason of every null

A value of null means the run did not produce the metric (see notes); ci_* are null without per-sample files.
With `report --trend` the runs are in trend order and a `trend` list follows them (`emo_tasks/trend.py`).
Version 1 is additive-only: new keys may appear, existing keys keep their meaning.  `lmms_eval_version` is the
one results.json records, or the installed lmms_eval's when that says "unknown".

Which results file a folder means: every `*_results.json` under it counts, lmms-eval's and those `emo-tasks judge`
wrote (under `judged/`, or carrying an `emo_tasks_judge` block; of a judge folder judged again, its newest).  One
file: that one.  One lmms-eval run plus exactly one judged result of it: the judged one (the same run, scored).
Anything else is ambiguous: `compare` refuses it (exit 2) unless a run is picked (`--base-run` / `--new-run`, or
the results file as the argument); `report` takes the newest and says so.  Both print the file, its date and the
model they used.

Exit codes of `emo-tasks compare` (the regression gate): 0 pass; 1 regression; 2 not comparable (data, prompts, the
medium, generation settings or judges differ (`comparability`, the rule `report --trend` uses too), a data hash
differs, too many judge failures or too little paired coverage, a headline metric null in one run only, no or
several runs in a folder); 3 error (malformed input, a crash) - always with a one-line message, never a traceback.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark, all_benchmarks, benchmark_of
from emo_tasks.metrics import Metric
from emo_tasks.stats import PairedResult

SCHEMA = "emo-tasks/leaderboard/1"
#: Task-config fields that change what the model is asked (a difference means the prompts differ).
PROMPT_FIELDS = ("doc_to_text", "doc_to_messages", "lmms_eval_specific_kwargs", "description", "num_fewshot")
#: Summary keys that must agree for two runs to be comparable, and what a difference means.
SUMMARY_KEYS = (
    ("data_source", "data"),
    ("prompt_hashes", "prompts"),
    ("judge_models", "judges"),
    ("judge_protocol", "judges"),
    ("judge_mode", "judges"),
    ("alpha", "judges"),
)


def lower_is_better() -> frozenset[str]:
    """Metrics where a rise is a regression, from every benchmark's table."""
    return frozenset().union(*(b.table.lower_is_better for b in all_benchmarks()))


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


# ------------------------------------------------------------------------------------------------ loading
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
        """The run's model_args as text with secrets masked (`emo_tasks.redact.model_args_text`; a dict, as older
        lmms-eval versions record it, masked by key): they reach labels, JSON, CSV, the site, exports."""
        from emo_tasks.redact import model_args_text

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


_JUDGED_DIR = "judged"  # emo_tasks.stage.JUDGED_DIR
_MARKER = "emo_tasks_judge"  # emo_tasks.stage.MARKER


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc})") from exc


def _is_judged(path: Path, root: Path, data: Any) -> bool:
    rel = path.relative_to(root).parts[:-1] if root in path.parents else ()
    return _JUDGED_DIR in rel or (isinstance(data, dict) and _MARKER in data)


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
        from emo_tasks.vlmeval.runfolder import refused_note

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
        block = json.loads(path.read_text(encoding="utf-8")).get(_MARKER) or {}
        return Path(str(block.get("source_results") or "")).name or None
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None


def load_run(run_dir: str | Path, pick: str | None = None) -> Run:
    """Read one run folder; missing per-sample files become notes, never errors.  `pick`: see `find_results`
    (a folder holding several runs and no pick raises ReportError).  A malformed results file raises InputError."""
    path = Path(run_dir)
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
    setup = judge_setup_text((run.data.get(_MARKER) or {}).get("judge_setup"))
    text += f"; judge setup: {setup})" if setup else ")"
    subsets = sorted({(r["name"], sum(1 for t in run.results if (x := run.subset(t)) and x["name"] == r["name"]))
                      for t in run.results if (r := run.subset(t)) is not None})  # fmt: skip
    for name, n_tasks in subsets:
        text += f" [subset {name!r}: {n_tasks} task(s) ran on its rows]"
    return text + (f" [{run.choice}]" if run.choice else "")


def judge_setup_text(setup: Any) -> str | None:
    """One line naming a judged result's judge setup (`emo-tasks judge`'s `judge_setup`), None without one."""
    if not isinstance(setup, dict) or not setup:
        return None
    parts = [f"mode {setup.get('judge_mode')}"]
    if isinstance(setup.get("models"), dict):
        parts.append(", ".join(f"{role} {model}" for role, model in setup["models"].items()))
    for key, value in setup.items():  # what the benchmarks recorded (protocol, alpha, ...), then the endpoint
        if key not in ("judge_mode", "models") and value is not None:
            parts.append(f"{key.replace('_', ' ')} {value}")
    return "; ".join(parts)


def run_root(path: Path, results_file: Path) -> Path:
    """Where a run's own files are: the nearest folder from the results file up to `path` that holds
    `emo_tasks_judge/` (lmms-eval nests results in a model folder; `emo-tasks judge` writes RUN/judged/<judge>/),
    else `path`."""
    top = path if path.is_dir() else path.parent
    folder = results_file.parent
    while True:
        if (folder / "emo_tasks_judge").is_dir():
            return folder
        if folder == top or folder == folder.parent or top not in folder.parents:
            return top
        folder = folder.parent


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


# ------------------------------------------------------------------------------------------------ cells
@dataclass
class Cell:
    """One reported number: results.json's value with a bootstrap CI from the per-sample values."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    #: judge-dependent values only: (n scored, n judge-failed) of the task, else None
    judged: tuple[int | None, int | None] | None = None

    def text(self, digits: int = 2) -> str:
        if self.value is None:
            return "n/a"
        s = f"{self.value:.{digits}f}"
        if self.ci_low is not None and self.ci_high is not None:
            s += f" [{self.ci_low:.{digits}f}, {self.ci_high:.{digits}f}]"
        if self.judged is not None and self.judged[0] is not None:
            s += f" ({self.judged[0]} scored, {self.judged[1] or 0} failed)"
        return s

    def as_dict(self) -> dict[str, Any]:
        d = {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}
        if self.judged is not None:
            d["n_scored"], d["n_judge_failed"] = self.judged
        return d


def cell(run: Run, task: str, metric: str, resamples: int, seed: int) -> Cell:
    """results.json's value and, when per-sample values exist, their 95 % percentile-bootstrap CI."""
    from emo_tasks import stats

    value = run.value(task, metric)
    c = Cell(value)
    if not judge_free(task, metric) and has_judge_counts(run, task):
        c.judged = judge_counts(run, task)
    if value is None:
        return c
    vals = samples_for(run, task).get(metric)
    if vals:
        ci = stats.bootstrap_ci(list(vals.values()), n_resamples=resamples, seed=seed)
        c.ci_low, c.ci_high, c.n = ci.low, ci.high, ci.n
    return c


# ------------------------------------------------------------------------------------------------ report
@dataclass
class Table:
    """One rendered table: a title, column names with their metrics, rows of (label, cells)."""

    benchmark: str
    title: str
    columns: list[str]
    rows: list[tuple[str, list[Cell]]]
    #: the metric of each column (for the number of decimals)
    metrics: list[Metric]


def _present(runs: Sequence[Run]) -> list[Benchmark]:
    """The benchmarks any of the runs has results for, in report order."""
    tasks = {t for r in runs for t in r.results}
    return [b for b in all_benchmarks() if any(b.owns(t) for t in tasks)]


def _columns(bench: Benchmark, runs: Sequence[Run]) -> list[str]:
    """Per-task column titles present in the runs, in the benchmark's order, then "Overall" (its groups)."""
    present = {t for r in runs for t in r.results}
    cols: list[str] = []
    for task in bench.tasks:
        title = bench.titles.get(task, task)
        if task in present and title not in cols:
            cols.append(title)
    return cols + ["Overall"]


def task_for_column(bench: Benchmark, run: Run, column: str) -> str | None:
    """The run's task (or group, for "Overall") behind a column title; None if the run lacks it."""
    names = bench.groups if column == "Overall" else [t for t in bench.tasks if bench.titles.get(t, t) == column]
    return next((n for n in names if n in run.results), None)


def run_task(bench: Benchmark, run: Run) -> str | None:
    """The one task of a benchmark without groups that the run has (benchmark or sample flavour)."""
    return next((t for t in bench.tasks if t in run.results), None)


def build_tables(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> list[Table]:
    """Every benchmark table: one per metric with the tasks as columns for a benchmark with groups
    (MME-Emotion, as in the paper), one with the metrics as columns otherwise."""
    tables: list[Table] = []
    for bench in _present(runs):
        metrics = [m for m in bench.table if m.in_table]
        if bench.groups:
            cols = _columns(bench, runs)
            for metric in metrics:
                rows = []
                for run in runs:
                    cells = []
                    for col in cols:
                        task = task_for_column(bench, run, col)
                        cells.append(Cell(None) if task is None else cell(run, task, metric.name, resamples, seed))
                    rows.append((run.label, cells))
                tables.append(Table(bench.key, f"{bench.title} — {metric.display}", cols, rows, [metric] * len(cols)))
        else:
            rows = []
            for run in runs:
                task = run_task(bench, run)
                rows.append(
                    (run.label, [Cell(None) if task is None else cell(run, task, m.name, resamples, seed)
                                 for m in metrics])
                )  # fmt: skip
            tables.append(Table(bench.key, bench.title, [m.name for m in metrics], rows, metrics))
    return tables


def missing_notes(runs: Sequence[Run]) -> list[str]:
    """What is absent, one line per (run, problem), tasks sharing a problem listed together; plus loader notes."""
    present = _present(runs)
    return [f"{run.label}: {note}" for run in runs for note in run_notes(run, present)]


def subset_summary(run: Run) -> dict[str, dict[str, Any]]:
    """{leaf task: {name, n, digest}} of the tasks that ran on a gate subset ({} for a run on the whole data)."""
    return {t: {k: rec.get(k) for k in ("name", "n", "digest")} for t in sorted(run.configs)
            if (rec := run.subset(t)) is not None}  # fmt: skip


def run_notes(run: Run, present: Sequence[Benchmark] | None = None) -> list[str]:
    """One run's notes (without its label): missing and null metrics with their true reason, judge failures,
    the results-file choice, then the loader's notes."""
    lines = []
    if run.choice:
        lines.append(f"results file {run.results_file} ({run.choice})")
    subsets = subset_summary(run)
    if subsets:
        lines.append("ran on a gate subset (EMO_SUBSET), not the whole data: " + "; ".join(
            f"{task} {rec['n']} rows of subset {rec['name']!r}" for task, rec in subsets.items()))  # fmt: skip
    host = run.data.get("emo_tasks_vlmeval") or {}  # a VLMEvalKit run (emo_tasks/vlmeval): what it flagged
    if host.get("n_infer_failed"):
        lines.append(f"{host.get('task')}: {host['n_infer_failed']} answers VLMEvalKit could not get (left out)")
    for note in host.get("notes") or []:
        lines.append(f"{host.get('task')}: {note}")
    for task, part in sorted(((run.data.get(_MARKER) or {}).get("partial") or {}).items()):
        lines.append(
            f"{task}: a partial judgement (emo-tasks judge --partial): {part.get('judged')} of the {part.get('of')} "
            "rows the run answered; its numbers are not the run's"
        )
    for bench in _present([run]) if present is None else present:
        tasks = sorted(t for t in run.results if bench.owns(t))
        if not tasks:
            lines.append(f"no {bench.title} results in {run.results_file}")
            continue
        problems: dict[str, list[str]] = {}
        for task in tasks:
            for m in bench.table:
                if not m.in_table:
                    continue
                if not run.has(task, m.name):
                    problems.setdefault(f"no {m.name} in {run.results_file.name}", []).append(task)
                elif run.value(task, m.name) is None:
                    reason = null_reason(run, task, m)
                    why = f" ({reason})" if reason else ""
                    problems.setdefault(f"{m.name} is null in {run.results_file.name}{why}", []).append(task)
            scored, failed = judge_counts(run, task) if has_judge_counts(run, task) else (None, None)
            if failed:
                fails = _failures(run, task)
                problems.setdefault(
                    f"{failed} of {failed + (scored or 0)} samples judge-failed" + (f" ({fails})" if fails else "")
                    + f"; its judge-dependent values are over the {scored or 0} scored", []
                ).append(task)  # fmt: skip
        for problem, names in problems.items():
            lines.append(f"{', '.join(names)}: {problem}")
    lines.extend(run.notes)
    return lines


def render_markdown(runs: Sequence[Run], tables: Sequence[Table]) -> str:
    out = ["# emo-tasks report", ""]
    out.append("Values are lmms-eval's; brackets: 95 % percentile-bootstrap CI over per-sample values.")
    out.append("")
    for t in tables:
        out.append(f"## {t.title}")
        out.append("")
        out.append("| Run | " + " | ".join(t.columns) + " |")
        out.append("|---|" + "---|" * len(t.columns))
        for label, cells in t.rows:
            shown = [c.text(m.digits) for c, m in zip(cells, t.metrics, strict=True)]
            out.append(f"| {label.replace('|', '/')} | " + " | ".join(shown) + " |")
        out.append("")
    notes = missing_notes(runs)
    if notes:
        out.append("## Missing")
        out.append("")
        out.extend(f"- {n}" for n in notes)
        out.append("")
    out.append("## Runs")
    out.append("")
    for run in runs:
        out.append(f"- {run.label}: {describe(run)}")
    out.append("")
    out.append("Judge-dependent values show (n scored, n judge-failed) of the task.")
    return "\n".join(out) + "\n"


def metric_rows(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One record per (run, benchmark, task, metric): what the CSV and the JSON `metrics` hold."""
    records = []
    for run in runs:
        for task in sorted(run.results):
            bench = benchmark_of(task)
            if bench is None:
                continue
            for m in bench.table.reported:
                if not run.has(task, m.name):
                    continue
                c = cell(run, task, m.name, resamples, seed)
                records.append(
                    {"run": run.label, "benchmark": bench.title, "task": task, "metric": m.name, **c.as_dict()}
                )
    return records


def render_csv(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=["run", "benchmark", "task", "metric", "value", "ci_low", "ci_high", "n"], lineterminator="\n"
    )
    writer.writeheader()
    for rec in metric_rows(runs, resamples, seed):
        writer.writerow({k: ("" if v is None else v) for k, v in rec.items() if k in writer.fieldnames})
    return buf.getvalue()


def _by_task(run: Run, key: str) -> dict[str, Any]:
    return {task: s.get(key) for task, s in sorted(run.summaries.items())}


def lmms_eval_version(run: Run) -> str | None:
    """results.json's lmms_eval_version; the installed lmms_eval's when that is missing or says "unknown"."""
    recorded = run.data.get("lmms_eval_version")
    if isinstance(recorded, str) and recorded and "unknown" not in recorded:
        return recorded
    try:
        from importlib.metadata import version

        return version("lmms_eval")
    except Exception:  # noqa: BLE001 - not installed: keep what the run recorded
        return recorded if isinstance(recorded, str) else None


def leaderboard(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The versioned submission document (schema in the module docstring)."""
    from emo_tasks import __version__

    out_runs = []
    records = metric_rows(runs, resamples, seed)
    for run in runs:
        metrics: dict[str, dict[str, Any]] = {}
        for rec in records:
            if rec["run"] == run.label:
                metrics.setdefault(rec["task"], {})[rec["metric"]] = {
                    k: rec[k] for k in ("value", "ci_low", "ci_high", "n", "n_scored", "n_judge_failed") if k in rec
                }
        data_source = {}
        for task, cfg in sorted(run.configs.items()):
            name = str(cfg.get("dataset_name") or "")
            if benchmark_of(task):
                data_source[task] = "sample" if "/sample" in name else "benchmark"
        judge_models = _by_task(run, "judge_models")
        counts = {
            t: (v.get("effective") if isinstance(v, dict) else v)
            for t, v in sorted((run.data.get("n-samples") or {}).items())
        }
        out_runs.append(
            {
                "label": run.label,
                "run_dir": str(run.path),
                "model": run.model,
                "model_args": run.model_args,
                "emo_tasks_version": __version__,
                "lmms_eval_version": lmms_eval_version(run),
                "date": run.data.get("date"),
                "data_source": data_source,
                "judge_models": judge_models if any(judge_models.values()) else None,
                "judge_protocol": _by_task(run, "judge_protocol"),
                "prompt_hashes": _by_task(run, "prompt_hashes"),
                "sample_counts": counts,
                "judge_failures": _by_task(run, "judge_failures"),
                "n_rule_differs": _by_task(run, "n_rule_differs"),
                "judge_api_models": _by_task(run, "api_models"),
                "judge_endpoint": _by_task(run, "judge_endpoint"),
                "alpha": _by_task(run, "alpha"),
                "data_hash": dict(sorted(run.data_hashes.items())),
                "subset": subset_summary(run),
                "results_file": str(run.results_file),
                "metrics": metrics,
                "notes": run_notes(run),
            }
        )
    return {"schema": SCHEMA, "generated_by": f"emo-tasks {__version__}", "runs": out_runs}


def plot(runs: Sequence[Run], path: str | Path, resamples: int = 1000, seed: int = 0) -> None:
    """One PNG, one panel per benchmark present: grouped bars (metric x run) with CI error bars; a benchmark with
    groups is shown by its overall (group) numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = []
    for bench in _present(runs):
        tasks = bench.groups or bench.tasks
        panels.append((bench.title + (" (overall)" if bench.groups else ""), [m for m in bench.table if m.plot],
                       tasks, bench.plot_ylabel))  # fmt: skip
    if not panels:
        panels.append(("no emo-tasks results", [], (), ""))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    width = 0.8 / max(1, len(runs))
    for ax, (title, metrics, tasks, ylabel) in zip(axes[0], panels, strict=True):
        x = np.arange(len(metrics))
        for i, run in enumerate(runs):
            task = next((t for t in tasks if t in run.results), None)
            cells = [cell(run, task, m.name, resamples, seed) if task else Cell(None) for m in metrics]
            heights = [c.value if c.value is not None else 0.0 for c in cells]
            err = np.array(
                [
                    [
                        max(0.0, c.value - c.ci_low) if c.ci_low is not None and c.value is not None else 0.0
                        for c in cells
                    ],
                    [
                        max(0.0, c.ci_high - c.value) if c.ci_high is not None and c.value is not None else 0.0
                        for c in cells
                    ],
                ]
            )
            positions = x + (i - (len(runs) - 1) / 2) * width
            ax.bar(positions, heights, width, yerr=err, capsize=3, label=run.label)
            for pos, c in zip(positions, cells, strict=True):
                if c.value is None:  # not available: say so instead of drawing a zero
                    ax.text(pos, 1, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_title(title)
        ax.set_xticks(x)
        ax.set_xticklabels(
            [m.title or m.name.replace("acc_", "").replace("_", " ") for m in metrics], rotation=30, ha="right"
        )
        ax.set_ylabel(ylabel)
        ax.set_xlabel("metric")
        ax.set_ylim(0, 105)
    fig.suptitle("emo-tasks: bars = value, whiskers = 95 % bootstrap CI, n/a = not available")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:  # one legend under the panels, so long run labels never cover the bars
        fig.legend(handles, labels, loc="lower center", ncol=1 if len(runs) > 2 else len(runs), fontsize=8)
    fig.tight_layout(rect=(0, 0.04 + 0.04 * len(runs) if len(runs) > 2 else 0.1, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ compare
@dataclass(frozen=True)
class Comparison(PairedResult):
    """A paired test's result (delta, CI, p-value, n, method) for one task's metric, with both runs' values."""

    task: str = ""
    metric: str = ""
    base: float | None = None
    new: float | None = None
    drop: float = 0.0  # in the metric's units, positive = worse (orientation applied)
    n_base: int = 0  # the metric's per-sample values in each run: paired coverage = n / n_base, n / n_new
    n_new: int = 0
    sd_diff: float | None = None  # the sd of the paired per-sample differences (None: fewer than 2)
    step: float = 0.0  # the mean size of a changed row (`emo_tasks.gate.PairedSpread.step`)
    on_subset: bool = False  # the new run ran on a subset: base/new are the means over its rows

    def coverage(self) -> float:
        """The paired share of the smaller-covered run's samples; a subset run's: the share of its own samples
        (the base run has the rest of the data by design)."""
        own = self.n / self.n_new if self.n_new else 0.0
        return own if self.on_subset else min(self.n / self.n_base if self.n_base else 0.0, own)

    def detectable_drop(self, power: float = 0.8, alpha: float = 0.05) -> float | None:
        """The drop this test catches with probability `power` (`emo_tasks.gate.detectable_drop`): what a pass
        rules out.  None without a spread."""
        from emo_tasks.gate import detectable_drop

        return None if self.sd_diff is None else detectable_drop(self.n, self.sd_diff, self.step, power, alpha)

    def power_for(self, drop: float, alpha: float = 0.05) -> float | None:
        """The probability this test flags a true drop of `drop` (`emo_tasks.gate.expected_power` over these `n`
        rows, the spread under the drop from their observed paired spread: sqrt(sd^2 + step x drop)); the inverse
        of `detectable_drop`.  None without a spread (fewer than 2 rows, or every row one value in both runs)."""
        from emo_tasks.gate import expected_power

        if self.sd_diff is None or self.n < 1:
            return None
        sd = math.sqrt(self.sd_diff**2 + self.step * abs(drop))
        return None if sd == 0 else expected_power(self.n, sd, drop, alpha)


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


@dataclass(frozen=True)
class Difference:
    """One reason two runs are not comparable (`comparability`): its kind (data, rows, prompts, judges,
    generation), the line `compare` prints, and the same said without the task (`what`, with the `tasks` it is
    true of), so that a summary over many tasks (`summarize`: the trend's note) says it once."""

    kind: str
    line: str
    what: str
    tasks: tuple[str, ...] = ()


@dataclass
class Comparability:
    """What `comparability` found: `setup` (prompts, medium, generation settings, judges, data config) and `data`
    (data hashes, subset rows) differences make two runs not comparable; `unchecked` and `notes` are said, not
    refused (data identity without sample logs, a generation setting only one run records)."""

    setup: list[Difference] = field(default_factory=list)
    data: list[Difference] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def differences(self) -> list[Difference]:
        return self.setup + self.data


def comparability(
    base: Run, new: Run, tasks: Sequence[str] | None = None, *, paired: bool = True,
    names: tuple[str, str] = ("base", "new"),
) -> Comparability:  # fmt: skip
    """The one rule for whether two runs' numbers can be set side by side, used by `emo-tasks compare` (BASE vs
    NEW) and by `report --trend` (each run vs the one before it): the same data (dataset_name, data hash of the
    sample logs, a subset's rows), prompts (task config, medium, prompt hashes, system instruction), generation
    settings and judges (models, protocol, mode, alpha).  `tasks`: the tasks whose data identity is checked
    (default: every emo-tasks task both runs have).  `paired` (compare): NEW is paired with BASE on its rows, so a
    base run on a subset needs a new run on the same subset; unpaired (a trend): either may be the subset run.
    `names`: how the messages call the two runs."""
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    out = Comparability(setup=setup_differences(base, new, names))
    out.notes.extend(generation_differences(base, new, shared, names, out.setup))
    differ, out.unchecked = data_identity(base, new, shared if tasks is None else tasks, paired, names)
    out.data.extend(differ)
    return out


def summarize(differences: Sequence[Difference], limit: int = 3) -> list[str]:
    """The differences, one line per thing that differs ("kind: what (tasks)"), a task list cut after `limit`."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for d in differences:
        tasks = grouped.setdefault((d.kind, d.what), [])
        tasks.extend(t for t in d.tasks if t not in tasks)
    out = []
    for (kind, what), tasks in grouped.items():
        shown = ", ".join(tasks[:limit]) + (f" and {len(tasks) - limit} more" if len(tasks) > limit else "")
        out.append(f"{kind}: {what}" + (f" ({shown})" if tasks else ""))
    return out


def data_identity(
    base: Run, new: Run, tasks: Sequence[str], paired: bool = True, names: tuple[str, str] = ("base", "new")
) -> tuple[list[Difference], list[str]]:
    """(reasons: leaf tasks whose data hashes differ, unchecked: leaf tasks a run has no sample log for).  A new
    run on a subset against a full base run is proven by `subset_rows` instead; unpaired (`comparability`), a
    base run on a subset against a full new run too, and two runs on different subsets are unchecked."""
    reasons, unchecked = [], []
    b_name, n_name = names
    for leaf in sorted({t for task in tasks for t in leaves(base, task) + leaves(new, task)}):
        bs, ns = base.subset(leaf), new.subset(leaf)
        if not paired and bs is not None and ns is not None and ns.get("digest") != bs.get("digest"):
            unchecked.append(f"{leaf} (the runs ran on different subsets, {bs.get('name')!r} and {ns.get('name')!r})")
            continue
        if not paired and bs is not None and ns is None:
            reasons.extend(subset_rows(new, base, leaf, bs, names=(n_name, b_name)))
            continue
        if bs is not None and (ns is None or ns.get("digest") != bs.get("digest")):
            reasons.append(Difference(
                "data",
                f"data: {leaf}: the base run ran on subset {bs.get('name')!r} ({bs.get('n')} rows) and the new run "
                + ("on the full data" if ns is None else f"on subset {ns.get('name')!r}")
                + ": a gate compares a subset run against a full base run, or two runs of one subset",
                "the base run ran on a subset, the new run " + ("on the full data" if ns is None else "on another"),
                (leaf,),
            ))  # fmt: skip
            continue
        if ns is not None and bs is None:
            reasons.extend(subset_rows(base, new, leaf, ns, names=names))
            continue
        bh, nh = base.data_hashes.get(leaf), new.data_hashes.get(leaf)
        if bh is None or nh is None:
            side = " and ".join(s for s, h in ((b_name, bh), (n_name, nh)) if h is None)
            unchecked.append(f"{leaf} (no sample log in the {side} run)")
        elif bh != nh:
            reasons.append(Difference(
                "data",
                f"data: {leaf} used different data (data hash {bh} vs {nh}: the rows or their gold labels differ, "
                "e.g. another EMO_DATA_ROOT or dataset version)",
                "another data hash (the rows or their gold labels differ, e.g. another EMO_DATA_ROOT or dataset "
                "version)",
                (leaf,),
            ))  # fmt: skip
    return reasons, unchecked


def subset_rows(
    base: Run, new: Run, leaf: str, rec: Mapping[str, Any], names: tuple[str, str] = ("base", "new")
) -> list[Difference]:
    """Why a subset run's task is not a sample of the base run's rows ([] when it is): each of its rows logged
    once, every row of its subset (`rec`, as the run recorded it) answered, and each row's target (the gold answer
    plus a hash of the row's content) one the base run logged: the rows are the base run's own, so comparing on
    them needs no second base run.  `names`: how the messages call the full run and the subset run."""
    from collections import Counter

    from emo_tasks.subset import digest

    b_name, n_name = names

    def diff(kind: str, text: str, what: str) -> Difference:
        return Difference(kind, f"{kind}: {leaf}: {text}", what, (leaf,))

    name, n = rec.get("name"), rec.get("n")
    keys = [str(k) for k in rec.get("keys") or []]
    if len(keys) != n or rec.get("digest") != digest(keys):
        return [
            diff(
                "data",
                f"the {n_name} run's subset record is inconsistent (its keys do not match its count "
                "or digest): the results file was edited",
                f"the {n_name} run's subset record is edited",
            )
        ]
    bl, nl = base.logged.get(leaf), new.logged.get(leaf)
    if bl is None or nl is None:
        side = " and ".join(s for s, rows in ((b_name, bl), (n_name, nl)) if rows is None)
        return [
            diff(
                "data",
                f"the {n_name} run ran on subset {name!r}, and without a sample log in the {side} run "
                f"its rows cannot be proven to be the {b_name} run's (run lmms-eval with --log_samples)",
                f"a subset run's rows not proven (no sample log in the {side} run)",
            )
        ]
    reasons = []
    ids = Counter(d for d, _ in nl)
    twice = sorted((d for d, c in ids.items() if c > 1), key=lambda d: (len(d), d))
    if twice:
        reasons.append(
            diff(
                "rows",
                f"the {n_name} run logs {len(twice)} row(s) twice (doc_id {', '.join(twice[:10])})",
                f"the {n_name} run logs rows twice",
            )
        )
    counts = (new.data.get("n-samples") or {}).get(leaf) or {}
    original, effective = counts.get("original"), counts.get("effective")
    if effective != original:
        reasons.append(
            diff(
                "rows",
                f"the {n_name} run answered {effective} of its subset {name!r}'s {original} "
                "rows (--limit): a gate runs on every row it planned",
                f"the {n_name} run answered part of its subset (--limit)",
            )
        )
    elif len(ids) != original:
        reasons.append(
            diff(
                "rows",
                f"the {n_name} run's sample log holds {len(ids)} of the {original} rows it "
                "answered (an edited or cut sample log)",
                f"the {n_name} run's sample log is cut",
            )
        )
    foreign = list((Counter(t for _, t in nl) - Counter(t for _, t in bl)).elements())
    if foreign:
        reasons.append(
            diff(
                "data",
                f"{len(foreign)} of the {n_name} run's {len(nl)} rows are not rows of the "
                f"{b_name} run (first target {foreign[0]!r}): another dataset or data version",
                f"the {n_name} run's subset rows are not rows of the {b_name} run (another dataset or data version)",
            )
        )
    return reasons


#: What the model is sent, by the medium its prompt names (`lmms_eval_specific_kwargs` `medium`, MME-Emotion's):
#: lmms-eval picks the entry by the model's name, VLMEvalKit by --video-llm.
MEDIA = {"video": "a video model, sent the video", "video frames": "an image model, sent frames of the video",
         "audio": "an audio model, sent the audio track"}  # fmt: skip


def prompt_kwargs(run: Run, task: str) -> dict[str, Any]:
    """The `lmms_eval_specific_kwargs` a task's prompt was built with, as lmms-eval picks them: the entry named
    like the model, else the table's `default` (which lmms-eval merges into the table it records, at the top)."""
    table = (run.configs.get(task) or {}).get("lmms_eval_specific_kwargs")
    if not isinstance(table, dict):
        return {}
    if isinstance(table.get(run.model), dict):
        return dict(table[run.model])
    top = {k: v for k, v in table.items() if not isinstance(v, dict)}
    return top or dict(table.get("default") or table.get("dataset") or {})


def _kwargs_table(config: Mapping[str, Any]) -> Any:
    """A config's `lmms_eval_specific_kwargs` table of per-model entries, without what was merged into it for the
    run's model and without its fallback entries (lmms-eval merges `default` in at the top; a VLMEvalKit run writes
    its medium into `default`): what the run's model was asked is compared by `prompt_kwargs`."""
    table = config.get("lmms_eval_specific_kwargs")
    if not isinstance(table, dict):
        return table
    return {k: v for k, v in table.items() if isinstance(v, dict) and k not in ("default", "dataset")}


def setup_differences(base: Run, new: Run, names: tuple[str, str] = ("base", "new")) -> list[Difference]:
    """Data config, prompts (task config, the prompt's medium, prompt hashes, system instruction), generation
    settings and judges that differ between two runs, over the emo-tasks tasks both have."""
    reasons = []
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    if not shared:
        reasons.append(Difference("data", "data: the runs share no emo-tasks task", "the runs share no task"))
    media: dict[tuple[Any, Any], list[str]] = {}
    for task in shared:
        bc, nc = base.configs.get(task, {}), new.configs.get(task, {})
        if bc.get("dataset_name") != nc.get("dataset_name"):
            what = f"dataset_name {bc.get('dataset_name')!r} vs {nc.get('dataset_name')!r}"
            reasons.append(Difference("data", f"data: {task} {what}", what, (task,)))
        for f in PROMPT_FIELDS:
            if f == "lmms_eval_specific_kwargs":
                if _stable(_kwargs_table(bc)) != _stable(_kwargs_table(nc)):
                    what = f"config field {f} differs"
                    reasons.append(Difference("prompts", f"prompts: {task} {what}", what, (task,)))
                bk, nk = prompt_kwargs(base, task), prompt_kwargs(new, task)
                for key in sorted(set(bk) | set(nk)):
                    if _stable(bk.get(key)) == _stable(nk.get(key)):
                        continue
                    if key == "medium":
                        media.setdefault((bk.get(key), nk.get(key)), []).append(task)
                    else:
                        what = f"prompt setting {key} {bk.get(key)!r} vs {nk.get(key)!r} (lmms_eval_specific_kwargs)"
                        reasons.append(Difference("prompts", f"prompts: {task} {what}", what, (task,)))
            elif _stable(bc.get(f)) != _stable(nc.get(f)):
                what = f"config field {f} differs"
                reasons.append(Difference("prompts", f"prompts: {task} {what}", what, (task,)))
        bs, ns = base.summaries.get(task), new.summaries.get(task)
        if bs is not None and ns is not None:
            for key, kind in SUMMARY_KEYS:
                if bs.get(key) != ns.get(key):
                    what = f"{key} {bs.get(key)!r} vs {ns.get(key)!r}"
                    reasons.append(Difference(kind, f"{kind}: {task} {what}", what, (task,)))
    for (bm, nm), tasks in media.items():
        what = (f"the medium differs: the {names[0]} run's prompt asked about {bm!r} ({_sent(bm)}), the "
                f"{names[1]} run's about {nm!r} ({_sent(nm)})")  # fmt: skip
        line = (f"prompts: {what}, in {_tasks_text(tasks)}: the model saw other input (lmms-eval picks the medium by "
                "the model's name, lmms_eval_specific_kwargs; VLMEvalKit by --video-llm)")  # fmt: skip
        reasons.append(Difference("prompts", line, what, tuple(tasks)))
    if (base.data.get("system_instruction") or None) != (new.data.get("system_instruction") or None):
        reasons.append(Difference("prompts", "prompts: system_instruction differs", "system_instruction differs"))
    return reasons


def _sent(medium: Any) -> str:
    return MEDIA.get(medium, "a medium of its own") if medium is not None else "no medium named"


def _tasks_text(tasks: Sequence[str]) -> str:
    return f"{len(tasks)} tasks ({', '.join(tasks)})" if len(tasks) > 1 else f"{tasks[0]}"


#: lmms-eval's `generation_kwargs` name of a setting a VLMEvalKit run records under another name
GENERATION_NAMES = {"max_tokens": "max_new_tokens"}


def generation_settings(run: Run, task: str) -> tuple[dict[str, Any], bool, str] | None:
    """(settings, complete, source) a leaf task's answers were generated with: lmms-eval's task config
    `generation_kwargs` (the YAML's with --gen_kwargs applied: every setting the model was handed, complete),
    else what a VLMEvalKit run recorded (`emo_tasks_vlmeval.generation`: the settings it knows, names mapped to
    lmms-eval's; not complete: what it does not record is the model's own); None when the run records none."""
    kwargs = (run.configs.get(task) or {}).get("generation_kwargs")
    if isinstance(kwargs, dict):
        return dict(kwargs), True, "generation_kwargs"
    host = run.data.get("emo_tasks_vlmeval")
    gen = host.get("generation") if isinstance(host, dict) else None
    if isinstance(gen, dict):
        settings = {GENERATION_NAMES.get(k, k): v for k, v in gen.items() if k != "model"}
        return settings, False, f"VLMEvalKit, {gen.get('model') or 'its model'}"
    return None


def _same_setting(a: Any, b: Any) -> bool:
    """Two settings' values are the same: numbers by value (0 and 0.0), anything else as JSON."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return float(a) == float(b) if numbers else _stable(a) == _stable(b)


def generation_differences(
    base: Run, new: Run, tasks: Sequence[str], names: tuple[str, str], out: list[Difference]
) -> list[str]:
    """Generation settings that differ between two runs' leaf tasks, appended to `out` (one Difference per setting
    and pair of values, with its tasks); returns the notes: settings only one run records where the other's record
    is not complete (a VLMEvalKit run records only what it knows), or a run that records none.

    Every setting can move the number (max_new_tokens cuts an answer; temperature, do_sample, top_p, top_k,
    num_beams and repetition_penalty change what is sampled; until stops an answer), so a setting both runs record
    with different values, or that one run sets and the other, complete, leaves to the model, is a difference."""
    diffs: dict[tuple[str, str, str], list[str]] = {}
    unknown: dict[tuple[str, str], dict[str, list[str]]] = {}  # (side, its record) -> {unrecorded key: tasks}
    leaf_tasks = sorted({t for task in tasks for t in leaves(base, task) + leaves(new, task)
                         if t in base.results and t in new.results})  # fmt: skip
    for leaf in leaf_tasks:
        b, n = generation_settings(base, leaf), generation_settings(new, leaf)
        if b is None and n is None:
            continue
        if b is None or n is None:
            side = names[0] if b is None else names[1]
            unknown.setdefault((side, "no record"), {}).setdefault("any setting", []).append(leaf)
            continue
        for key in sorted(set(b[0]) | set(n[0])):
            if key in b[0] and key in n[0]:
                if _same_setting(b[0][key], n[0][key]):
                    continue
            elif not (n[1] if key in b[0] else b[1]):  # the other run's record is not complete: unknown there
                side, other = (names[1], n[2]) if key in b[0] else (names[0], b[2])
                unknown.setdefault((side, other), {}).setdefault(key, []).append(leaf)
                continue
            shown = [repr(r[0][key]) if key in r[0] else "not set (the model's default)" for r in (b, n)]
            k = (key, shown[0], shown[1])
            diffs.setdefault(k, []).append(leaf)
    for k, leaves_ in diffs.items():
        what = f"{k[0]} {k[1]} vs {k[2]}"
        out.append(Difference(
            "generation",
            f"generation: {what} in {_tasks_text(leaves_)}: answers can be cut or sampled otherwise, so the numbers "
            "can differ",
            what,
            tuple(leaves_),
        ))  # fmt: skip
    notes = []
    for (side, record), keys in unknown.items():
        tasks_ = sorted({t for ts in keys.values() for t in ts})
        if record == "no record":
            notes.append(f"generation settings not checked for {_tasks_text(tasks_)}: the {side} run records none")
        else:
            notes.append(f"generation settings not checked for {_tasks_text(tasks_)}: {', '.join(sorted(keys))} "
                         f"(the {side} run, {record}, does not record them)")  # fmt: skip
    return notes


def _metric(task: str, metric: str) -> Metric | None:
    bench = benchmark_of(task)
    return bench.table[metric] if bench is not None and metric in bench.table else None


def _stable(value: Any) -> str:
    """A config value without the memory addresses lmms-eval leaves in function reprs ('<function f at 0x..>')."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", json.dumps(value, sort_keys=True, default=str))


def headline_tasks(base: Run, new: Run) -> list[str]:
    """The tasks both runs have whose headline metrics a comparison checks by default: of a benchmark with groups,
    the groups both have, or, when they share none (one task of it each, as a VLMEvalKit dataset is), its tasks."""
    shared = set(base.results) & set(new.results)
    groups = {t for t in shared if (b := benchmark_of(t)) is not None and t in b.groups}
    grouped = {benchmark_of(t).key for t in groups}  # type: ignore[union-attr]
    return sorted(
        t for t in shared
        if (b := benchmark_of(t)) is not None and (t in groups or not b.groups or b.key not in grouped)
    )  # fmt: skip


def default_metrics(base: Run, new: Run) -> list[tuple[str, str]]:
    """Headline metrics present (non-null) in both runs, of `headline_tasks`."""
    pairs = []
    for task in headline_tasks(base, new):
        bench = benchmark_of(task)
        assert bench is not None
        for m in bench.table.headline:
            if base.value(task, m.name) is not None and new.value(task, m.name) is not None:
                pairs.append((task, m.name))
    return pairs


def one_sided_headlines(base: Run, new: Run) -> list[str]:
    """Headline metrics (as `default_metrics` picks them) that one run has a value for and the other has not: a
    run whose judge failed everywhere must not pass by leaving its metrics out of the comparison."""
    reasons = []
    for task in headline_tasks(base, new):
        bench = benchmark_of(task)
        assert bench is not None
        for m in bench.table.headline:
            values = {"base": base.value(task, m.name), "new": new.value(task, m.name)}
            if (values["base"] is None) != (values["new"] is None):
                side, run = ("base", base) if values["base"] is None else ("new", new)
                why = null_reason(run, task, m) if run.has(task, m.name) else "not in its results"
                reasons.append(f"missing: {task} {m.name} is null in the {side} run ({why})")
    return reasons


def select_metrics(base: Run, new: Run, wanted: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """--metric M (any task with it) or TASK:M; returns the pairs and what matched nothing."""
    pairs, unmatched = [], []
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    for w in wanted:
        task_part, _, metric = w.rpartition(":")
        found = [
            (t, metric)
            for t in shared
            if (not task_part or t == task_part) and base.has(t, metric) and new.has(t, metric)
        ]
        if not task_part:  # a bare metric name means a benchmark's groups when it has some
            grouped = {b.key for t, _ in found if (b := benchmark_of(t)) is not None and t in b.groups}
            found = [(t, m) for t, m in found if (b := benchmark_of(t)) is None or b.key not in grouped
                     or t in b.groups]  # fmt: skip
        if found:
            pairs.extend(p for p in found if p not in pairs)
        else:
            unmatched.append(w)
    return pairs, unmatched


def is_regression(r: Comparison, alpha: float, max_drop: float = 0.0) -> bool:
    """The gate's verdict on one paired test: a significant change (two-sided p < alpha) that is a drop beyond
    `max_drop` (the metric's units).  `emo-tasks compare` and `benchmarks/gate_power.py` both use it."""
    return r.p_value < alpha and r.drop > max_drop


def compare_metric(
    base: Run, new: Run, task: str, metric: str, resamples: int = 1000, seed: int = 0
) -> Comparison | str:
    """Paired test on the samples both runs share; a string says why it could not be done."""
    from emo_tasks import stats

    bv = samples_for(base, task).get(metric)
    nv = samples_for(new, task).get(metric)
    if not bv or not nv:
        side = "base" if not bv else "new"
        return f"{task} {metric}: no per-sample values in the {side} run (see `emo-tasks report` notes)"
    keys = [k for k in bv if k in nv]
    if not keys:
        return f"data: {task} {metric}: the runs share no sample (keys do not overlap)"
    b = [bv[k] for k in keys]
    n = [nv[k] for k in keys]
    on_subset = bool(new.subset_tasks(task)) and not base.subset_tasks(task)
    spec = _metric(task, metric)
    scale = 100.0 if spec is not None and spec.outcome else 1.0
    b01, n01 = [x / scale for x in b], [x / scale for x in n]
    if scale == 100.0 and stats.is_binary(b01) and stats.is_binary(n01):
        r = stats.mcnemar_exact(b01, n01, n_resamples=resamples, seed=seed)
        delta, low, high = r.delta * scale, r.low * scale, r.high * scale
    else:
        r = stats.paired_bootstrap(b, n, n_resamples=resamples, seed=seed)
        delta, low, high = r.delta, r.low, r.high
    drop = delta if spec is not None and not spec.higher_is_better else -delta
    sd, step = None, 0.0
    if len(keys) > 1:  # the spread the runs show, and the size of a changed row (else of a row of base vs another)
        from emo_tasks.gate import paired_spread

        pair = paired_spread(dict(zip(keys, b, strict=True)), dict(zip(keys, n, strict=True)))
        sd, step = pair.sd, pair.step or paired_spread(dict(zip(keys, b, strict=True))).step
    values = (
        (math.fsum(b) / len(b), math.fsum(n) / len(n))
        if on_subset
        else (base.value(task, metric), new.value(task, metric))
    )
    return Comparison(
        delta=delta, low=low, high=high, p_value=r.p_value, n=r.n, method=r.method,
        task=task, metric=metric, base=values[0], new=values[1], drop=drop,
        n_base=len(bv), n_new=len(nv), sd_diff=sd, step=step, on_subset=on_subset,
    )  # fmt: skip
