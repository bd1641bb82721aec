"""`emo-tasks report RUN... --trend [auto|checkpoint|date|given]`: the headline metrics of a series of runs (say one
per training checkpoint) in order, each with its 95 % CI and its change since the first run.

Why: teams gate every checkpoint, and a pairwise `compare` does not show a slow slide over ten checkpoints, nor a
shell glob's order (`ckpt-1000` sorts before `ckpt-200`) the training order.  Everything here is pure: runs in
(`emo_tasks.report.Run`), rows, Markdown, JSON records and a PNG out.

Which order (`order_runs`):

- `checkpoint`: the run's checkpoint number (`checkpoint_of`): in its model args, else in its folder name, the
  last integer right after `ckpt`, `checkpoint`, `step` or `iter` (any case; separated by `-`, `_` or nothing; the
  word not preceded by a letter, the number not followed by a letter or digit): `pretrained=org/model-ckpt-1200`,
  `.../checkpoint-1200`, `step1200`, `global_step_1200`, `iter_0001200` and `runs/ckpt-1200` all give 1200.  A
  folder name without such a word gives its only integer (`runs/1200`, `runs/ep3`), none when it has several.  The
  folder is the one given to `report` (for a judged result, `RUN/judged/<setup>`, it is RUN).  Model args are not
  searched for a lone integer: other arguments hold numbers too (`max_pixels=...`).
- `date`: the results file's `date` (lmms-eval's stamp `20261201_130501`, in its clock, UTC+8 by default; an
  epoch number in older files, converted to that clock), else the stamp its file name starts with.  A judged
  result's date is when it was judged.
- `given`: the command line's order.
- `auto`: `checkpoint` when every run has one and no two share one, else `date` the same way, else `given`.

Under an explicit `checkpoint` or `date`, a run without one, or two runs sharing one, is an error (exit 2) naming
the run: an order nobody can read off the report is worse than none.

Which metrics (`trend_rows`): every headline metric (`bench.table.headline`) of every benchmark present; of a
benchmark with groups its groups (pooled, as the report's "Overall"), else its tasks.  Δ is value − the first run's
value, in the metric's units (n/a when either is missing).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emo_tasks import report
from emo_tasks.benchmarks import Benchmark, all_benchmarks, benchmark_of
from emo_tasks.common import STAMP_TZ
from emo_tasks.metrics import Metric

ORDERS = ("auto", "checkpoint", "date", "given")

#: a checkpoint word and its number; the word must not end a longer word, the number must end where it ends
_CHECKPOINT = re.compile(r"(?<![a-z])(?:ckpt|checkpoint|step|iter)[-_]?(\d+)(?![a-z0-9])", re.IGNORECASE)
_INTEGER = re.compile(r"\d+")
_STAMP = re.compile(r"^(\d{8}_\d{6})")
#: lmms-eval's default clock for its stamps (`utils.get_datetime_str`); every name emo-tasks stamps uses it too
_STAMP_TZ = STAMP_TZ
XLABELS = {"checkpoint": "checkpoint", "date": "run (by date)", "given": "run (given order)"}


class TrendError(report.ReportError):
    """The runs cannot be put in the asked order: one lacks a key, or two share one (exit 2)."""


# ------------------------------------------------------------------------------------------------ keys
def checkpoint_in(text: str | None, only_integer: bool = False) -> int | None:
    """The last integer after a checkpoint word in `text`; with `only_integer`, failing that, its only integer."""
    if not text:
        return None
    found = _CHECKPOINT.findall(text)
    if found:
        return int(found[-1])
    if only_integer:
        numbers = _INTEGER.findall(text)
        if len(numbers) == 1:
            return int(numbers[0])
    return None


def run_folder(run: report.Run) -> Path:
    """The folder the run was given as: `run.path`, or RUN for a judged result under RUN/judged/<setup>."""
    parts = run.path.parts
    if report._JUDGED_DIR in parts[:-1]:
        cut = len(parts) - 1 - parts[::-1].index(report._JUDGED_DIR)
        return Path(*parts[:cut])
    return run.path


def checkpoint_of(run: report.Run) -> int | None:
    """The run's checkpoint number: its model args first (they name the weights), then its folder name."""
    found = checkpoint_in(run.model_args)
    return found if found is not None else checkpoint_in(run_folder(run).name, only_integer=True)


def date_of(run: report.Run) -> str | None:
    """The run's date as lmms-eval's stamp (`YYYYMMDD_HHMMSS`, UTC+8), from results.json's `date`, else from the
    results file's name; None when neither has one."""
    date = run.data.get("date")
    if isinstance(date, (int, float)) and not isinstance(date, bool) and date > 0:
        return datetime.datetime.fromtimestamp(float(date), _STAMP_TZ).strftime("%Y%m%d_%H%M%S")
    for text in (date, run.results_file.name):
        match = _STAMP.match(text) if isinstance(text, str) else None
        if match:
            return match.group(1)
    return None


@dataclass
class Ordering:
    """Runs in trend order with the key each was ordered by (checkpoint number, date stamp, or 1-based position)."""

    how: str  # "checkpoint" | "date" | "given"
    runs: list[report.Run]
    keys: list[int | str]
    why: str  # one line: how the order was chosen


def _keys(runs: Sequence[report.Run], how: str) -> tuple[list[Any], str | None]:
    """Every run's key and the problem that makes the order unusable (a run without a key, a shared key)."""
    keys = [checkpoint_of(r) if how == "checkpoint" else date_of(r) for r in runs]
    what = "checkpoint number (in its model args or folder name)" if how == "checkpoint" else "date"
    for run, key in zip(runs, keys, strict=True):
        if key is None:
            return keys, f"{run.label} ({run_folder(run)}) has no {what}"
    for i, run in enumerate(runs):
        for other, key in zip(runs[:i], keys[:i], strict=True):
            if key == keys[i]:
                return keys, f"{run.label} ({run_folder(run)}) has the same {how} {key} as {other.label}"
    return keys, None


def order_runs(runs: Sequence[report.Run], how: str = "auto") -> Ordering:
    """Sort runs by `how` (ORDERS); `auto` picks the first of checkpoint / date / given that every run has,
    distinct.  Raises TrendError when an explicit checkpoint or date order is missing or tied for a run."""
    if how not in ORDERS:
        raise ValueError(f"--trend {how!r}: one of {', '.join(ORDERS)}")
    if how == "given":
        return Ordering("given", list(runs), list(range(1, len(runs) + 1)), "given (--trend given)")
    tried = []
    for cand in ("checkpoint", "date") if how == "auto" else (how,):
        keys, problem = _keys(runs, cand)
        if problem is None:
            ranked = sorted(zip(keys, range(len(runs)), runs, strict=True), key=lambda t: (t[0], t[1]))
            if how == "auto":
                why = f"{cand} (auto: " + "".join(f"{t}; " for t in tried) + f"every run has a distinct {cand})"
            else:
                why = f"{cand} (--trend {cand})"
            return Ordering(cand, [r for _, _, r in ranked], [k for k, _, _ in ranked], why)
        if how != "auto":
            raise TrendError(f"--trend {how}: {problem}")
        tried.append(f"no {cand} order ({problem})")
    why = "given (auto: " + "; ".join(tried) + "; so the command line's order)"
    return Ordering("given", list(runs), list(range(1, len(runs) + 1)), why)


# ------------------------------------------------------------------------------------------------ rows
@dataclass
class Point:
    """One run's number on one metric: the report's cell and its change since the first run."""

    cell: report.Cell
    delta: float | None


@dataclass
class Series:
    """One headline metric of one task across the ordered runs."""

    bench: Benchmark
    task: str
    metric: Metric
    points: list[Point]

    @property
    def name(self) -> str:
        return f"{self.task}:{self.metric.name}"


def trend_tasks(runs: Sequence[report.Run]) -> list[str]:
    """The tasks whose headline metrics the trend shows: per benchmark present, the groups any run has (their
    numbers pool the subtasks'), else its tasks any run has; a run lacking one shows n/a there."""
    present = {t for r in runs for t in r.results if benchmark_of(t) is not None}
    groups = {t for t in present if t in benchmark_of(t).groups}  # type: ignore[union-attr]
    grouped = {benchmark_of(t).key for t in groups}  # type: ignore[union-attr]
    return sorted(t for t in present if t in groups or benchmark_of(t).key not in grouped)  # type: ignore[union-attr]


def trend_rows(runs: Sequence[report.Run], resamples: int = 1000, seed: int = 0) -> list[Series]:
    """Every headline metric of `trend_tasks` over the runs (already in trend order), benchmarks in report order:
    value with bootstrap CI (`report.cell`) and Δ to the first run."""
    order = {b.key: i for i, b in enumerate(all_benchmarks())}
    tasks = sorted(trend_tasks(runs), key=lambda t: (order[benchmark_of(t).key], t))  # type: ignore[union-attr]
    out = []
    for task in tasks:
        bench = benchmark_of(task)
        assert bench is not None
        for metric in bench.table.headline:
            cells = [report.cell(r, task, metric.name, resamples, seed) if task in r.results else report.Cell(None)
                     for r in runs]  # fmt: skip
            first = cells[0].value if cells else None
            points = [Point(c, None if c.value is None or first is None else c.value - first) for c in cells]
            out.append(Series(bench, task, metric, points))
    return out


# ------------------------------------------------------------------------------------------------ output
def key_text(ordering: Ordering, i: int) -> str:
    """A run's key as shown: the checkpoint number, the date stamp, or its position."""
    return str(ordering.keys[i]) if ordering.how != "given" else f"#{ordering.keys[i]}"


def _signed(x: float | None, digits: int) -> str:
    """A delta with its sign; one that rounds to zero is +0 (float noise must not read as a drop)."""
    if x is None:
        return "n/a"
    return f"{0.0 if round(x, digits) == 0 else x:+.{digits}f}"


def rows_note(runs: Sequence[report.Run]) -> str | None:
    """A warning when the runs did not all answer the same rows (a gate subset, `EMO_SUBSET`, beside the full data
    or another subset): their values are means over different rows, so a step between them is not the model's."""
    seen: dict[str, list[str]] = {}
    for run in runs:
        names = sorted({f"subset {r['name']!r}" for t in run.results if (r := run.subset(t)) is not None})
        seen.setdefault(", ".join(names) or "the full data", []).append(run.label)
    if len(seen) < 2:
        return None
    parts = "; ".join(f"{', '.join(labels)} on {rows}" for rows, labels in seen.items())
    return (
        f"**Note:** the runs did not answer the same rows ({parts}): values over different rows differ by more "
        "than the model. `emo-tasks compare FULL_RUN SUBSET_RUN` pairs a subset run with a full one on its rows."
    )


def render_trend_markdown(ordering: Ordering, series: Sequence[Series]) -> str:
    """The report's "Trend" section: one table per headline metric, one row per run in trend order."""
    column = {"checkpoint": "Checkpoint", "date": "Date", "given": "#"}[ordering.how]
    out = ["## Trend", "", f"Runs ordered by {ordering.why}. Δ: value − the first run's value, in the metric's units."]
    out.append("")
    note = rows_note(ordering.runs)
    if note:
        out += [note, ""]
    if not series:
        out += ["No headline metric of an emo-tasks benchmark in these runs.", ""]
    for s in series:
        direction = "" if s.metric.higher_is_better else " (lower is better)"
        out += [f"### {s.bench.title} — {s.metric.display} ({s.task}){direction}", ""]
        out += [f"| {column} | Run | Value [95 % CI] | Δ vs first | n |", "|---|---|---|---|---|"]
        for i, (run, p) in enumerate(zip(ordering.runs, s.points, strict=True)):
            n = "n/a" if p.cell.n is None else str(p.cell.n)
            out.append(
                f"| {key_text(ordering, i)} | {run.label.replace('|', '/')} | {p.cell.text(s.metric.digits)} "
                f"| {_signed(p.delta, s.metric.digits)} | {n} |"
            )
        out.append("")
    return "\n".join(out)


def trend_json(ordering: Ordering, series: Sequence[Series]) -> list[dict[str, Any]]:
    """The leaderboard JSON's `trend`: one record per run in trend order, with `task:metric` -> value, CI, n, Δ."""
    records = []
    for i, run in enumerate(ordering.runs):
        metrics = {}
        for s in series:
            p = s.points[i]
            metrics[s.name] = {"value": p.cell.value, "ci_low": p.cell.ci_low, "ci_high": p.cell.ci_high,
                               "n": p.cell.n, "delta": p.delta}  # fmt: skip
        records.append(
            {"label": run.label, "run_dir": str(run.path), "order": ordering.how, "key": ordering.keys[i],
             "metrics": metrics}
        )  # fmt: skip
    return records


def _tick(i: int, label: str, width: int = 24) -> str:
    """A run's tick label: its position and its label's end (where model args name the weights)."""
    return f"#{i} " + (label if len(label) <= width else "…" + label[-(width - 1) :])


def plot_trend(ordering: Ordering, series: Sequence[Series], path: str | Path) -> None:
    """One PNG, one panel per headline metric: the values joined by a line with their 95 % CI shaded; x is the
    checkpoint number, else the run's position with its label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ncols = max(1, min(4, len(series)))
    nrows = max(1, -(-len(series) // ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows + 0.6), squeeze=False)
    by_checkpoint = ordering.how == "checkpoint"
    x = np.array(ordering.keys if by_checkpoint else range(1, len(ordering.runs) + 1), dtype=float)
    if by_checkpoint:
        ticks = [str(k) for k in ordering.keys]
    else:
        ticks = [_tick(i, r.label) for i, r in enumerate(ordering.runs, 1)]
    for ax, s in zip(axes.flat, series, strict=False):
        nan = float("nan")
        y = np.array([nan if p.cell.value is None else p.cell.value for p in s.points])
        low = np.array([nan if p.cell.ci_low is None else p.cell.ci_low for p in s.points])
        high = np.array([nan if p.cell.ci_high is None else p.cell.ci_high for p in s.points])
        ax.fill_between(x, low, high, alpha=0.25, color="tab:blue", linewidth=0, label="95 % CI")
        ax.plot(x, y, marker="o", color="tab:blue", label="value")
        if np.isnan(y).all():
            ax.text(0.5, 0.5, "n/a in every run", transform=ax.transAxes, ha="center", va="center", fontsize=9)
            ax.set_yticks([])
        else:
            for xi, yi in zip(x, y, strict=True):
                if np.isnan(yi):  # not available: say so instead of leaving a silent gap
                    ax.annotate("n/a", (xi, 0.05), xycoords=("data", "axes fraction"), ha="center", fontsize=8)
        direction = "" if s.metric.higher_is_better else " (lower is better)"
        ax.set_title(f"{s.bench.title} {s.metric.display}{direction}\n{s.task}", fontsize=9)
        ax.set_xticks(x)
        if by_checkpoint:
            ax.set_xticklabels(ticks, fontsize=7)
        else:
            ax.set_xticklabels(ticks, rotation=30, ha="right", fontsize=7)
        ax.set_xlabel(XLABELS[ordering.how], fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(series) :]:
        ax.axis("off")
    if not series:
        axes[0][0].text(0.5, 0.5, "no headline metric in these runs", ha="center", va="center")
    title = f"emo-tasks trend ({ordering.how} order): line = value, band = 95 % bootstrap CI, n/a = not available"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
