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
        "model": str | null, "model_args": str | null,
        "emo_tasks_version": str,     # the emo-tasks that wrote the report (runs do not record theirs)
        "lmms_eval_version": str | null, "date": str | null,
        "data_source": {task: "benchmark" | "sample"},
        "judge_models": {task: {role: model}} | null,    # MME-Emotion judge summaries; null offline
        "judge_protocol": {task: str | null},
        "prompt_hashes": {task: {name: sha256[:16]}},
        "sample_counts": {task: int},                     # lmms-eval's n-samples (effective)
        "judge_failures": {task: {"<stage>:<reason>": count}},
        "metrics": {task: {metric: {"value": float | null,   # results.json's number
                                    "ci_low": float | null, "ci_high": float | null,  # 95 % percentile bootstrap
                                    "n": int | null}}},       # per-sample values behind the CI
        "notes": [str]}]}             # what is missing and how to get it

A value of null means the run did not produce the metric (see notes); ci_* are null without per-sample files.
Version 1 is additive-only: new keys may appear, existing keys keep their meaning.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
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
    """A run folder that cannot be read at all (no results.json)."""


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
        return (self.data.get("config") or {}).get("model_args")

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


def find_results(run_dir: Path) -> Path:
    """The newest `<date>_results.json` under run_dir (lmms-eval nests it in a model folder)."""
    if run_dir.is_file():
        return run_dir
    found = sorted(run_dir.rglob("*results.json"), key=lambda p: (p.name, str(p)))
    if not found:
        raise ReportError(f"{run_dir}: no *_results.json found (was lmms-eval run with --output_path {run_dir}?)")
    return found[-1]


def load_run(run_dir: str | Path) -> Run:
    """Read one run folder; missing per-sample files become notes, never errors."""
    path = Path(run_dir)
    if not path.exists():
        raise ReportError(f"{path}: no such run folder")
    results_file = find_results(path)
    try:
        data = json.loads(results_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{results_file}: not readable JSON ({exc})") from exc
    run = Run(path=_run_root(path, results_file), results_file=results_file, data=data)
    for task in sorted(run.results):
        bench = benchmark_of(task)
        if bench is None or task in bench.groups or bench.read_samples is None:
            continue
        got = bench.read_samples(run.path, run.results_file, task, run.configs.get(task) or {})
        if got.values:
            run.samples[task] = got.values
        if got.summary is not None:
            run.summaries[task] = got.summary
        run.notes.extend(got.notes)
    return run


def _run_root(path: Path, results_file: Path) -> Path:
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


# ------------------------------------------------------------------------------------------------ cells
@dataclass
class Cell:
    """One reported number: results.json's value with a bootstrap CI from the per-sample values."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None

    def text(self, digits: int = 2) -> str:
        if self.value is None:
            return "n/a"
        s = f"{self.value:.{digits}f}"
        if self.ci_low is not None and self.ci_high is not None:
            s += f" [{self.ci_low:.{digits}f}, {self.ci_high:.{digits}f}]"
        return s

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


def cell(run: Run, task: str, metric: str, resamples: int, seed: int) -> Cell:
    """results.json's value and, when per-sample values exist, their 95 % percentile-bootstrap CI."""
    from emo_tasks import stats

    value = run.value(task, metric)
    c = Cell(value)
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


def _task_for_column(bench: Benchmark, run: Run, column: str) -> str | None:
    """The run's task (or group, for "Overall") behind a column title; None if the run lacks it."""
    names = bench.groups if column == "Overall" else [t for t in bench.tasks if bench.titles.get(t, t) == column]
    return next((n for n in names if n in run.results), None)


def _run_task(bench: Benchmark, run: Run) -> str | None:
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
                        task = _task_for_column(bench, run, col)
                        cells.append(Cell(None) if task is None else cell(run, task, metric.name, resamples, seed))
                    rows.append((run.label, cells))
                tables.append(Table(bench.key, f"{bench.title} — {metric.display}", cols, rows, [metric] * len(cols)))
        else:
            rows = []
            for run in runs:
                task = _run_task(bench, run)
                rows.append(
                    (run.label, [Cell(None) if task is None else cell(run, task, m.name, resamples, seed)
                                 for m in metrics])
                )  # fmt: skip
            tables.append(Table(bench.key, bench.title, [m.name for m in metrics], rows, metrics))
    return tables


def missing_notes(runs: Sequence[Run]) -> list[str]:
    """What is absent, one line per (run, problem), tasks sharing a problem listed together; plus loader notes."""
    present = _present(runs)
    lines = []
    for run in runs:
        for bench in present:
            tasks = sorted(t for t in run.results if bench.owns(t))
            if not tasks:
                lines.append(f"{run.label}: no {bench.title} results in {run.results_file}")
                continue
            problems: dict[str, list[str]] = {}
            for task in tasks:
                for m in bench.table:
                    if not m.in_table:
                        continue
                    if not run.has(task, m.name):
                        problems.setdefault(f"no {m.name} in {run.results_file.name}", []).append(task)
                    elif run.value(task, m.name) is None:
                        why = f" ({m.null_reason})" if m.null_reason else ""
                        problems.setdefault(f"{m.name} is null in {run.results_file.name}{why}", []).append(task)
            for problem, names in problems.items():
                lines.append(f"{run.label}: {', '.join(names)}: {problem}")
        lines.extend(f"{run.label}: {n}" for n in run.notes)
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
        out.append(f"- {run.label}: {run.results_file}")
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
        writer.writerow({k: ("" if v is None else v) for k, v in rec.items()})
    return buf.getvalue()


def _by_task(run: Run, key: str) -> dict[str, Any]:
    return {task: s.get(key) for task, s in sorted(run.summaries.items())}


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
                    k: rec[k] for k in ("value", "ci_low", "ci_high", "n")
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
                "lmms_eval_version": run.data.get("lmms_eval_version"),
                "date": run.data.get("date"),
                "data_source": data_source,
                "judge_models": judge_models if any(judge_models.values()) else None,
                "judge_protocol": _by_task(run, "judge_protocol"),
                "prompt_hashes": _by_task(run, "prompt_hashes"),
                "sample_counts": counts,
                "judge_failures": _by_task(run, "judge_failures"),
                "metrics": metrics,
                "notes": [n.split(": ", 1)[1] for n in missing_notes([run])],
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


def mismatches(base: Run, new: Run) -> list[str]:
    """Reasons why the two runs are not comparable: data, prompts or judges differ (empty list: comparable)."""
    reasons = []
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    if not shared:
        reasons.append("data: the runs share no emo-tasks task")
    for task in shared:
        bc, nc = base.configs.get(task, {}), new.configs.get(task, {})
        if bc.get("dataset_name") != nc.get("dataset_name"):
            reasons.append(f"data: {task} dataset_name {bc.get('dataset_name')!r} vs {nc.get('dataset_name')!r}")
        for f in PROMPT_FIELDS:
            if _stable(bc.get(f)) != _stable(nc.get(f)):
                reasons.append(f"prompts: {task} config field {f} differs")
        bs, ns = base.summaries.get(task), new.summaries.get(task)
        if bs is not None and ns is not None:
            for key, kind in SUMMARY_KEYS:
                if bs.get(key) != ns.get(key):
                    reasons.append(f"{kind}: {task} {key} {bs.get(key)!r} vs {ns.get(key)!r}")
    if (base.data.get("system_instruction") or None) != (new.data.get("system_instruction") or None):
        reasons.append("prompts: system_instruction differs")
    return reasons


def _metric(task: str, metric: str) -> Metric | None:
    bench = benchmark_of(task)
    return bench.table[metric] if bench is not None and metric in bench.table else None


def _stable(value: Any) -> str:
    """A config value without the memory addresses lmms-eval leaves in function reprs ('<function f at 0x..>')."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", json.dumps(value, sort_keys=True, default=str))


def default_metrics(base: Run, new: Run) -> list[tuple[str, str]]:
    """Benchmark-level headline metrics present (non-null) in both runs (a benchmark with groups: the groups)."""
    pairs = []
    for task in sorted(set(base.results) & set(new.results)):
        bench = benchmark_of(task)
        if bench is None or (bench.groups and task not in bench.groups):
            continue
        for m in bench.table.headline:
            if base.value(task, m.name) is not None and new.value(task, m.name) is not None:
                pairs.append((task, m.name))
    return pairs


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
    return Comparison(
        delta=delta, low=low, high=high, p_value=r.p_value, n=r.n, method=r.method,
        task=task, metric=metric, base=base.value(task, metric), new=new.value(task, metric), drop=drop,
    )  # fmt: skip
