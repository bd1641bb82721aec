"""`emo-tasks report`: paper-style tables with bootstrap CIs, leaderboard JSON, CSV and plots of runs read by
`emo_tasks.results.reader`.

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
        "n_judge_truncated": {task: int | null},          # judge failures that are answers cut off inside a
                                                          # reasoning judge's reasoning (docs/judges.md)
        "judge_api_models": {task: {role: {model id the API reported: answers}} | null},
        "judge_endpoint": {task: "host[:port]" | null},
        "judge_shutdown": {model: {"date": "YYYY-MM-DD", "roles": [str]}},  # the judge endpoint's shutdown_date
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
With `report --trend` the runs are in trend order and a `trend` list follows them (`emo_tasks/results/trend.py`).
Version 1 is additive-only: new keys may appear, existing keys keep their meaning.  `lmms_eval_version` is the
one results.json records, or the installed lmms_eval's when that says "unknown".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark, all_benchmarks, benchmark_of
from emo_tasks.metrics import Metric
from emo_tasks.results.judge_shutdown import run_shutdowns
from emo_tasks.results.layout import MARKER
from emo_tasks.results.reader import (
    Run,
    _failures,
    describe,
    has_judge_counts,
    judge_counts,
    judge_free,
    null_reason,
    samples_for,
)

SCHEMA = "emo-tasks/leaderboard/1"


def lower_is_better() -> frozenset[str]:
    """Metrics where a rise is a regression, from every benchmark's table."""
    return frozenset().union(*(b.table.lower_is_better for b in all_benchmarks()))


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
    from emo_tasks.results import stats

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
    for task, part in sorted(((run.data.get(MARKER) or {}).get("partial") or {}).items()):
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
                "n_judge_truncated": _by_task(run, "n_judge_truncated"),
                "judge_api_models": _by_task(run, "api_models"),
                "judge_endpoint": _by_task(run, "judge_endpoint"),
                "judge_shutdown": run_shutdowns(run),
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
