"""`emo-tasks report RUN... --trend [auto|checkpoint|date|given]`: the headline metrics of a series of runs (say one
per training checkpoint) in order, each with its 95 % CI and its change since the first run.

Why: teams gate every checkpoint, and a pairwise `compare` does not show a slow slide over ten checkpoints, nor a
shell glob's order (`ckpt-1000` sorts before `ckpt-200`) the training order.  Everything here is pure: runs in
(`emo_tasks.results.reader.Run`), rows, Markdown, JSON records and a PNG out.

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

Which runs can share a line (`find_changes`): each run is checked against the one before it by the rule `emo-tasks
compare` uses (`comparable.comparability`): the same data (dataset, data hash of the sample logs, a subset's rows),
prompts (task config, medium, prompt hashes), generation settings and judges.  A change is refused (TrendError, exit
2, one line naming the two runs and what differs): a step between two judges or data versions is not the model's.
With `--allow-mixed` the trend is drawn with a break at each change, a note saying what changed, and Δ measured
from the first run after the last break.  Runs on different rows (a gate subset beside the full data) are not a
change: they get a note (`rows_note`).  With `--calibration` (`carry`), a change of judges alone from the
calibration's reference to its candidate is marked instead of refused: values after it are also shown adjusted by
the calibrated shift and Δ is the adjusted value's (docs/ci.md#moving-a-baseline-to-a-new-judge).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark, all_benchmarks, benchmark_of
from emo_tasks.common import file_stamp
from emo_tasks.metrics import Metric
from emo_tasks.results import comparable, judge_change, reader, report
from emo_tasks.results.calibration import Calibration

ORDERS = ("auto", "checkpoint", "date", "given")

#: a checkpoint word and its number; the word must not end a longer word, the number must end where it ends
_CHECKPOINT = re.compile(r"(?<![a-z])(?:ckpt|checkpoint|step|iter)[-_]?(\d+)(?![a-z0-9])", re.IGNORECASE)
_INTEGER = re.compile(r"\d+")
_STAMP = re.compile(r"^(\d{8}_\d{6})")
XLABELS = {"checkpoint": "checkpoint", "date": "run (by date)", "given": "run (given order)"}


class TrendError(reader.ReportError):
    """The runs cannot be put in the asked order (one lacks a key, or two share one), or two runs next to each
    other are not comparable and --allow-mixed was not given (exit 2)."""


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


def run_folder(run: reader.Run) -> Path:
    """The folder the run was given as: `run.path`, or RUN for a judged result under RUN/judged/<setup>."""
    return reader.judged_source(run.path)


def checkpoint_of(run: reader.Run) -> int | None:
    """The run's checkpoint number: its model args first (they name the weights), then its folder name."""
    found = checkpoint_in(run.model_args)
    return found if found is not None else checkpoint_in(run_folder(run).name, only_integer=True)


def date_of(run: reader.Run) -> str | None:
    """The run's date as lmms-eval's stamp (`YYYYMMDD_HHMMSS`, UTC+8), from results.json's `date`, else from the
    results file's name; None when neither has one."""
    date = run.data.get("date")
    if isinstance(date, (int, float)) and not isinstance(date, bool) and date > 0:
        return file_stamp(when=float(date))  # lmms-eval's clock
    for text in (date, run.results_file.name):
        match = _STAMP.match(text) if isinstance(text, str) else None
        if match:
            return match.group(1)
    return None


@dataclass
class Ordering:
    """Runs in trend order with the key each was ordered by (checkpoint number, date stamp, or 1-based position)."""

    how: str  # "checkpoint" | "date" | "given"
    runs: list[reader.Run]
    keys: list[int | str]
    why: str  # one line: how the order was chosen


def _keys(runs: Sequence[reader.Run], how: str) -> tuple[list[Any], str | None]:
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


def order_runs(runs: Sequence[reader.Run], how: str = "auto") -> Ordering:
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


# ------------------------------------------------------------------------------------------------ changes
@dataclass
class Change:
    """Where the trend breaks: run `index` is not comparable with the run before it (`differences`)."""

    index: int
    differences: list[comparable.Difference]
    #: a judge change this calibration carries (`carry`): marked, not a break; values after it adjusted by its shift
    calibration: Calibration | None = None

    @property
    def is_break(self) -> bool:
        return self.calibration is None

    def summary(self) -> str:
        """What differs, once per thing (`comparable.summarize`), "; "-joined."""
        return "; ".join(comparable.summarize(self.differences))


def run_text(ordering: Ordering, i: int) -> str:
    """A run as the trend's messages name it: its label, folder and key ("checkpoint 200", "date ...", "#2")."""
    run, folder = ordering.runs[i], str(run_folder(ordering.runs[i]))
    key = key_text(ordering, i) if ordering.how == "given" else f"{ordering.how} {ordering.keys[i]}"
    return f"{run.label} ({key})" if folder == run.label else f"{run.label} ({folder}, {key})"


def find_changes(ordering: Ordering) -> tuple[list[Change], list[str]]:
    """Each run against the one before it by `comparable.comparability` (unpaired: either may be a subset run, whose
    rows must be the other's): the changes, and the notes (data identity or generation settings not checked)."""
    changes, notes = [], []
    for i in range(1, len(ordering.runs)):
        earlier, later = ordering.runs[i - 1], ordering.runs[i]
        found = comparable.comparability(earlier, later, paired=False, names=("earlier", "later"))
        if found.differences:
            changes.append(Change(i, found.differences))
        pair = f"{run_text(ordering, i - 1)} -> {run_text(ordering, i)}"
        if found.unchecked:
            notes.append(f"{pair}: data identity could not be checked for {', '.join(found.unchecked)}")
        notes.extend(f"{pair}: {note}" for note in found.notes)
    return changes, notes


def carry(ordering: Ordering, changes: Sequence[Change], calibrations: Sequence[Calibration]) -> list[Change]:
    """`changes` with each change of judges alone that one of `calibrations` carries (the earlier run judged by its
    reference, the later by its candidate: `judge_change.carries`) marked as carried, not a break; a change of
    judges none carries keeps its differences plus the lines saying why.  Several calibrations: a chain (A->B,
    B->C), each change carried by its own; two carrying one change is a TrendError (which one would be silent)."""
    out = []
    for c in changes:
        if not any(d.kind == "judges" for d in c.differences):
            out.append(c)
            continue
        earlier, later = ordering.runs[c.index - 1], ordering.runs[c.index]
        shared = sorted(t for t in set(earlier.results) & set(later.results) if benchmark_of(t))
        whys = [(cal, judge_change.carries(cal, earlier, later, shared, names=("earlier", "later")))
                for cal in calibrations]  # fmt: skip
        carriers = [cal for cal, why in whys if why is None]
        if len(carriers) > 1:
            raise TrendError(f"--calibration: the judge change before {run_text(ordering, c.index)} is carried by "
                             f"{len(carriers)} files ({', '.join(str(cal.path) for cal in carriers)}): give one per "
                             "judge change")  # fmt: skip
        if carriers and all(d.kind == "judges" for d in c.differences):
            out.append(Change(c.index, c.differences, carriers[0]))
        elif carriers:
            out.append(c)
        else:
            lines = dict.fromkeys(why for _, why in whys if why)
            added = [comparable.Difference("judges", w, w.split(": ", 1)[1]) for w in lines]
            out.append(Change(c.index, [*c.differences, *added]))
    return out


def unused(changes: Sequence[Change], calibrations: Sequence[Calibration]) -> list[str]:
    """Notes for the calibrations that carry no judge change of the trend (a file given by mistake is said)."""
    used = {id(c.calibration) for c in changes if c.calibration is not None}
    return [f"--calibration {cal.path} carries no judge change of this trend" for cal in calibrations
            if id(cal) not in used]  # fmt: skip


def check_comparable(
    ordering: Ordering, allow_mixed: bool = False, calibration: Calibration | Sequence[Calibration] | None = None
) -> tuple[list[Change], list[str]]:
    """`find_changes` (with `calibration`, one or several, judge changes they carry marked: `carry`); a change that
    is a break without `allow_mixed` raises TrendError, one line naming the runs and what differs."""
    changes, notes = find_changes(ordering)
    calibrations = [calibration] if isinstance(calibration, Calibration) else list(calibration or ())
    if calibrations:
        changes = carry(ordering, changes, calibrations)
        notes += unused(changes, calibrations)
    breaks = [c for c in changes if c.is_break]
    if breaks and not allow_mixed:
        parts = [f"{run_text(ordering, c.index - 1)} -> {run_text(ordering, c.index)}: {c.summary()}" for c in breaks]
        raise TrendError(
            "--trend: the runs are not comparable (as `emo-tasks compare` would say): "
            + " | ".join(parts)
            + " (--allow-mixed draws the trend with a break and a note at each change)"
        )
    return changes, notes


# ------------------------------------------------------------------------------------------------ rows
@dataclass
class Point:
    """One run's number on one metric: the report's cell and its change since the first run."""

    cell: report.Cell
    delta: float | None
    #: after a judge change carried by a calibration: the calibrated shift, and the value adjusted by it (value -
    #: shift, on the reference judge's scale; its CI widened by the calibration's in quadrature); `shift` None and
    #: `uncalibrated` True when the calibration has no shift for the metric (Δ then restarts at the change)
    shift: float | None = None
    adjusted: report.Cell | None = None
    uncalibrated: bool = False


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


def trend_tasks(runs: Sequence[reader.Run]) -> list[str]:
    """The tasks whose headline metrics the trend shows: per benchmark present, the groups any run has (their
    numbers pool the subtasks'), else its tasks any run has; a run lacking one shows n/a there."""
    present = {t for r in runs for t in r.results if benchmark_of(t) is not None}
    groups = {t for t in present if t in benchmark_of(t).groups}  # type: ignore[union-attr]
    grouped = {benchmark_of(t).key for t in groups}  # type: ignore[union-attr]
    return sorted(t for t in present if t in groups or benchmark_of(t).key not in grouped)  # type: ignore[union-attr]


def trend_rows(
    runs: Sequence[reader.Run], resamples: int = 1000, seed: int = 0, breaks: Sequence[int] = (),
    crossings: Sequence[Change] = (),
) -> list[Series]:  # fmt: skip
    """Every headline metric of `trend_tasks` over the runs (already in trend order), benchmarks in report order:
    value with bootstrap CI (`report.cell`) and Δ to the first run; with `breaks` (the indices of runs not
    comparable with the one before, `Change.index`), to the first run since the last break.  `crossings`: judge
    changes a calibration carries (`carry`): after one, a judged task's value is also shown adjusted by the
    calibrated shift, and Δ is the adjusted value's (a metric without a shift: Δ restarts there)."""
    order = {b.key: i for i, b in enumerate(all_benchmarks())}
    tasks = sorted(trend_tasks(runs), key=lambda t: (order[benchmark_of(t).key], t))  # type: ignore[union-attr]
    out = []
    for task in tasks:
        bench = benchmark_of(task)
        assert bench is not None
        for metric in bench.table.headline:
            cells = [report.cell(r, task, metric.name, resamples, seed) if task in r.results else report.Cell(None)
                     for r in runs]  # fmt: skip
            shifts = _shifts(runs, task, metric.name, breaks, crossings)
            restarts = [c.index for c in crossings if isinstance(shifts.get(c.index), str)]
            points = []
            for i, c in enumerate(cells):
                first = cells[max([0, *(b for b in [*breaks, *restarts] if b <= i)])].value
                carried = next((v for k, v in sorted(shifts.items(), reverse=True) if k <= i), None)
                if isinstance(carried, judge_change.Carried):
                    adjusted = _adjusted(c, carried)
                    delta = None if adjusted.value is None or first is None else adjusted.value - first
                    points.append(Point(c, delta, carried.shift.shift, adjusted))
                else:
                    point = Point(c, None if c.value is None or first is None else c.value - first)
                    point.uncalibrated = isinstance(carried, str)
                    points.append(point)
            out.append(Series(bench, task, metric, points))
    return out


def _shifts(
    runs: Sequence[reader.Run], task: str, metric: str, breaks: Sequence[int], crossings: Sequence[Change]
) -> dict[int, judge_change.Carried | str | None]:
    """{run index: the calibrated shift in force from it on (its `Carried`, or why there is none), None from a
    break on}: a crossing changes a task's numbers only when the task's judge changed there.  Along a chain of
    crossings (A->B, B->C) the shifts add up and their errors combine (`judge_change.chained`): values stay on the
    scale of the judge the segment began with, and a return to that judge needs no shift."""
    out: dict[int, judge_change.Carried | str | None] = {b: None for b in breaks}
    events = sorted([*((b, None) for b in breaks), *((c.index, c) for c in crossings if c.calibration is not None)],
                    key=lambda e: e[0])  # fmt: skip
    scale, running = judge_change.task_identity(runs[0], task), None
    for i, c in events:
        if c is None:
            scale, running = judge_change.task_identity(runs[i], task), None
            continue
        if not judge_change.changed(runs[i - 1], runs[i], task):
            continue
        step = judge_change.carried(c.calibration, task, metric)  # type: ignore[arg-type]
        if isinstance(step, str):  # not calibrated: Δ restarts on the new judge's scale
            out[i], scale, running = step, judge_change.task_identity(runs[i], task), None
        elif judge_change.same(judge_change.task_identity(runs[i], task), scale):
            out[i] = running = None  # back on the segment's own judge: values as judged
        else:
            out[i] = running = step if running is None else judge_change.chained(running, step)
    return out


def _adjusted(cell: report.Cell, carried: judge_change.Carried) -> report.Cell:
    """A candidate-judged value on the reference judge's scale: value - shift, each side of its 95 % CI widened by
    the calibration's (at 95 %) in quadrature."""
    if cell.value is None:
        return report.Cell(None)
    value = cell.value - carried.shift.shift
    extra = carried.se * judge_change.z_of(0.95)
    if cell.ci_low is None or cell.ci_high is None:
        return report.Cell(value, value - extra, value + extra, cell.n)
    low = value - (max(cell.value - cell.ci_low, 0.0) ** 2 + extra**2) ** 0.5
    high = value + (max(cell.ci_high - cell.value, 0.0) ** 2 + extra**2) ** 0.5
    return report.Cell(value, low, high, cell.n)


# ------------------------------------------------------------------------------------------------ output
def key_text(ordering: Ordering, i: int) -> str:
    """A run's key as shown: the checkpoint number, the date stamp, or its position."""
    return str(ordering.keys[i]) if ordering.how != "given" else f"#{ordering.keys[i]}"


def _signed(x: float | None, digits: int) -> str:
    """A delta with its sign; one that rounds to zero is +0 (float noise must not read as a drop)."""
    if x is None:
        return "n/a"
    return f"{0.0 if round(x, digits) == 0 else x:+.{digits}f}"


def rows_note(runs: Sequence[reader.Run]) -> str | None:
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


def crossings_note(ordering: Ordering, changes: Sequence[Change]) -> list[str]:
    """The Markdown note of a trend across judge changes a calibration carries (--calibration): where, which
    judges, and how the values after it read."""
    out = []
    for c in changes:
        if c.calibration is None:
            continue
        out.append(f"**Judge change (--calibration {c.calibration.path}):** before {run_text(ordering, c.index)}, "
                   f"{c.summary()}. The calibration carries it: values after it are shown as judged, and adjusted "
                   "(value − the calibrated shift: on the reference judge's scale, its 95 % CI widened by the "
                   "calibration's in quadrature; after a chain of judge changes their shifts add up and their CIs "
                   "combine, on the first judge's scale, and a return to that judge is shown as judged); Δ after it "
                   "is the adjusted value's. A metric the calibration does not cover has no adjusted value and its "
                   "Δ restarts there.".replace("|", "/"))  # fmt: skip
    return [*out, ""] if out else []


def changes_note(ordering: Ordering, changes: Sequence[Change]) -> list[str]:
    """The Markdown note of a trend drawn across changes (--allow-mixed): each break, before which run, and what
    changed.  (Judge changes a calibration carries are not breaks: `crossings_note`.)"""
    changes = [c for c in changes if c.is_break]
    if not changes:
        return []
    out = [f"**Not comparable (--allow-mixed):** the trend breaks {len(changes)} time(s), where a run is not "
           "comparable with the one before it (as `emo-tasks compare` would refuse them): a step across a break "
           "is not the model's. Δ restarts at each break (value − the first run's value since the break).",
           ""]  # fmt: skip
    for k, c in enumerate(changes, 1):
        out.append(f"- break {k}, before {run_text(ordering, c.index).replace('|', '/')}: "
                   f"{c.summary().replace('|', '/')}")  # fmt: skip
    return [*out, ""]


def _crosses(series: Series, change: Change) -> bool:
    """The series' task changed judge at a carried judge change (its point there is adjusted, or has no shift)."""
    p = series.points[change.index]
    return p.adjusted is not None or p.uncalibrated


def render_trend_markdown(ordering: Ordering, series: Sequence[Series], changes: Sequence[Change] = ()) -> str:
    """The report's "Trend" section: one table per headline metric, one row per run in trend order; a break row
    before each run not comparable with the one above (`changes`, --allow-mixed)."""
    column = {"checkpoint": "Checkpoint", "date": "Date", "given": "#"}[ordering.how]
    breaks = [c for c in changes if c.is_break]
    first = "the first run's value since the last break" if breaks else "the first run's value"
    out = ["## Trend", "", f"Runs ordered by {ordering.why}. Δ: value − {first}, in the metric's units."]
    out.append("")
    out += changes_note(ordering, changes)
    out += crossings_note(ordering, changes)
    note = rows_note(ordering.runs)
    if note:
        out += [note, ""]
    break_at = {c.index: k for k, c in enumerate(breaks, 1)}
    if not series:
        out += ["No headline metric of an emo-tasks benchmark in these runs.", ""]
    for s in series:
        direction = "" if s.metric.higher_is_better else " (lower is better)"
        out += [f"### {s.bench.title} — {s.metric.display} ({s.task}){direction}", ""]
        crossed = {c.index for c in changes if not c.is_break and _crosses(s, c)}
        adjusted = " Adjusted for the judge change [95 % CI] |" if crossed else ""
        out += [f"| {column} | Run | Value [95 % CI] |{adjusted} Δ vs first | n |",
                "|---|---|---|" + ("---|" if crossed else "") + "---|---|"]  # fmt: skip
        blank = "| | | |" + (" |" if crossed else "")
        for i, (run, p) in enumerate(zip(ordering.runs, s.points, strict=True)):
            if i in break_at:
                out.append(f"| — | **break {break_at[i]}**: not comparable with the run above (see the note); Δ "
                           f"restarts {blank}")  # fmt: skip
            if i in crossed:
                out.append(f"| — | **judge change** (calibrated, see the note): values below as judged and adjusted "
                           f"{blank}")  # fmt: skip
            n = "n/a" if p.cell.n is None else str(p.cell.n)
            cells = [key_text(ordering, i), run.label.replace("|", "/"), p.cell.text(s.metric.digits)]
            if crossed:
                cells.append(p.adjusted.text(s.metric.digits) if p.adjusted is not None
                             else "n/a (not calibrated: Δ restarts)" if p.uncalibrated else "—")  # fmt: skip
            out.append("| " + " | ".join([*cells, _signed(p.delta, s.metric.digits), n]) + " |")
        out.append("")
    return "\n".join(out)


def trend_json(ordering: Ordering, series: Sequence[Series], changes: Sequence[Change] = ()) -> list[dict[str, Any]]:
    """The leaderboard JSON's `trend`: one record per run in trend order, with `task:metric` -> value, CI, n, Δ;
    `segment` (0, then +1 at each break) and `break` (null, or what differs from the run before: --allow-mixed)."""
    records = []
    by_index = {c.index: c for c in changes if c.is_break}
    crossed = {c.index: c for c in changes if not c.is_break}
    segment = 0
    for i, run in enumerate(ordering.runs):
        change = by_index.get(i)
        segment += change is not None
        metrics = {}
        for s in series:
            p = s.points[i]
            metrics[s.name] = {"value": p.cell.value, "ci_low": p.cell.ci_low, "ci_high": p.cell.ci_high,
                               "n": p.cell.n, "delta": p.delta}  # fmt: skip
            if p.adjusted is not None:
                metrics[s.name].update(shift=p.shift, adjusted=p.adjusted.value, adjusted_ci_low=p.adjusted.ci_low,
                                       adjusted_ci_high=p.adjusted.ci_high)  # fmt: skip
            elif p.uncalibrated:
                metrics[s.name].update(shift=None, adjusted=None)
        record = {"label": run.label, "run_dir": str(run.path), "order": ordering.how, "key": ordering.keys[i],
                  "segment": segment,
                  "break": None if change is None else {"differences": comparable.summarize(change.differences,
                                                                                           limit=100)},
                  "metrics": metrics}  # fmt: skip
        if crossed:
            c = crossed.get(i)
            record["judge_change"] = None if c is None or c.calibration is None else {
                "calibration": str(c.calibration.path), "reference": c.calibration.reference,
                "candidate": c.calibration.candidate,
                "differences": comparable.summarize(c.differences, limit=100)}  # fmt: skip
        records.append(record)
    return records


def _tick(i: int, label: str, width: int = 24) -> str:
    """A run's tick label: its position and its label's end (where model args name the weights)."""
    return f"#{i} " + (label if len(label) <= width else "…" + label[-(width - 1) :])


def trend_figure(ordering: Ordering, series: Sequence[Series], changes: Sequence[Change] = ()) -> Any:
    """The trend's matplotlib figure (`plot_trend`): one panel per headline metric, the values joined by a line with
    their 95 % CI shaded, x the checkpoint number, else the run's position with its label.  At each change
    (--allow-mixed) the line and band break, a dashed line marks it and the figure's foot says what changed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ncols = max(1, min(4, len(series)))
    nrows = max(1, -(-len(series) // ncols))
    crossings = [c for c in changes if not c.is_break]
    changes = [c for c in changes if c.is_break]
    foot = [f"break {k} (before {run_text(ordering, c.index)}): {c.summary()}" for k, c in enumerate(changes, 1)]
    foot += [f"judge change (before {run_text(ordering, c.index)}), carried by {c.calibration.path}: "  # type: ignore[union-attr]
             f"{c.summary()}" for c in crossings]  # fmt: skip
    # wrapped to the figure's width (about 12 characters an inch at the title's size, 16 at the footnotes'): a
    # one-panel figure is 4.2 inches wide, and a line longer than that was cut off at both edges
    foot = [part for line in foot for part in textwrap.wrap(line, int(4.2 * ncols * 16))]
    title = f"emo-tasks trend ({ordering.how} order): line = value, band = 95 % bootstrap CI, n/a = not available"
    if changes:
        title += "\ndashed red line = a break: the runs on either side are not comparable (--allow-mixed)"
    if crossings:
        title += ("\ndotted purple line = a judge change carried by --calibration; orange = the values after it "
                  "adjusted by the calibrated shift")  # fmt: skip
    title_lines = [part for line in title.split("\n") for part in textwrap.wrap(line, int(4.2 * ncols * 12))]
    height = 3.4 * nrows + 0.6 + 0.22 * len(foot) + 0.17 * max(0, len(title_lines) - 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, height), squeeze=False)
    by_checkpoint = ordering.how == "checkpoint"
    x = np.array(ordering.keys if by_checkpoint else range(1, len(ordering.runs) + 1), dtype=float)
    if by_checkpoint:
        ticks = [str(k) for k in ordering.keys]
    else:
        ticks = [_tick(i, r.label) for i, r in enumerate(ordering.runs, 1)]
    for ax, s in zip(axes.flat, series, strict=False):
        # the value line breaks at each break, and at each judge change of this series' task (its judges differ)
        judged = [c for c in crossings if _crosses(s, c)]
        starts = [0, *sorted(c.index for c in [*changes, *judged]), len(ordering.runs)]
        segments = [slice(a, b) for a, b in zip(starts, starts[1:], strict=False)]
        nan = float("nan")
        y = np.array([nan if p.cell.value is None else p.cell.value for p in s.points])
        low = np.array([nan if p.cell.ci_low is None else p.cell.ci_low for p in s.points])
        high = np.array([nan if p.cell.ci_high is None else p.cell.ci_high for p in s.points])
        for k, seg in enumerate(segments):  # one line per run of comparable runs: never joined across a change
            ax.fill_between(x[seg], low[seg], high[seg], alpha=0.25, color="tab:blue", linewidth=0,
                            label="95 % CI" if k == 0 else None)  # fmt: skip
            ax.plot(x[seg], y[seg], marker="o", color="tab:blue", label="value" if k == 0 else None)
            if seg.stop - seg.start == 1 and not np.isnan(y[seg][0]) and not np.isnan(low[seg][0]):  # no band
                ax.errorbar(x[seg], y[seg], yerr=[[y[seg][0] - low[seg][0]], [high[seg][0] - y[seg][0]]],
                            color="tab:blue", alpha=0.5, capsize=3, linewidth=1)  # fmt: skip
        for k, c in enumerate(changes, 1):
            at = (x[c.index - 1] + x[c.index]) / 2
            ax.axvline(at, color="tab:red", linestyle="--", linewidth=1)
            ax.annotate(f"break {k}", (at, 0.98), xycoords=("data", "axes fraction"), ha="center", va="top",
                        fontsize=7, color="tab:red")  # fmt: skip
        for k, c in enumerate(judged):  # the adjusted values, joined to the last value before the change
            at = (x[c.index - 1] + x[c.index]) / 2
            ax.axvline(at, color="tab:purple", linestyle=":", linewidth=1.2)
            ax.annotate("judge change", (at, 0.98), xycoords=("data", "axes fraction"), ha="center", va="top",
                        fontsize=7, color="tab:purple")  # fmt: skip
            stop = min([b for b in starts if b > c.index] or [len(ordering.runs)])
            adj = [(x[c.index - 1], y[c.index - 1])] + [
                (x[i], s.points[i].adjusted.value)
                for i in range(c.index, stop)  # type: ignore[union-attr]
                if s.points[i].adjusted is not None and s.points[i].adjusted.value is not None
            ]  # type: ignore[union-attr]
            if len(adj) > 1:
                ax.plot([a for a, _ in adj], [b for _, b in adj], marker="s", fillstyle="none", linestyle="--",
                        color="tab:orange", label="adjusted (value − shift)" if k == 0 else None)  # fmt: skip
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
    if crossings:
        for ax in list(axes.flat)[: len(series)]:
            ax.legend(fontsize=6, loc="best")  # where it hides no point
    fig.suptitle("\n".join(title_lines), fontsize=10)
    color = "tab:red"
    for k, line in enumerate(foot):
        if line.startswith(("break ", "judge change ")):  # a wrapped line keeps its footnote's colour
            color = "tab:purple" if line.startswith("judge change") else "tab:red"
        fig.text(0.01, 0.01 + 0.22 * (len(foot) - 1 - k) / height, line, fontsize=7, color=color, ha="left",
                 va="bottom")  # fmt: skip
    fig.tight_layout(rect=(0, (0.22 * len(foot) + 0.1) / height if foot else 0, 1, 1))
    return fig


def plot_trend(ordering: Ordering, series: Sequence[Series], path: str | Path, changes: Sequence[Change] = ()) -> None:
    """The trend's PNG (`trend_figure`)."""
    import matplotlib.pyplot as plt

    fig = trend_figure(ordering, series, changes)
    fig.savefig(path, dpi=110)
    plt.close(fig)
