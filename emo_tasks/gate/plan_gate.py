"""`emo-tasks plan-gate`: a subset of rows planned from an accepted run, big enough for the gate to catch a stated
drop with a stated power (issue 23).

Why: gating every checkpoint on the full benchmarks costs hours of GPU and ~13,000 judge calls, and `--limit`
(the first rows of each task) is biased with unknown power.  From the base run's per-sample values (and a second
run of the same model for the paired spread, when given) `emo_tasks.gate.power` says how many rows each headline task
needs; they are drawn at random, stratified by task and category (each benchmark's `subset_stratum`: an
MME-Emotion task's gold label, an MVEI dimension and label, a MultiEmo image's original label), in proportion,
with a seed, so the plan is reproducible and the subset unbiased.  Proportional stratification never increases
the variance of a mean over simple random sampling, so the planned power is kept or exceeded.

The plan is a subset file (`emo_tasks.subset`); a run with `EMO_SUBSET=<it>` answers only those rows, and
`emo-tasks compare FULL_BASE SUBSET_RUN` pairs the two on them.
"""

from __future__ import annotations

import importlib
import io
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks import cliargs, subset
from emo_tasks.benchmarks import benchmark_of
from emo_tasks.gate import compare
from emo_tasks.gate import power as gate_power  # not `power`: plan_gate() takes a `power` argument
from emo_tasks.judging.stage_types import StageError
from emo_tasks.results import reader


class PlanError(ValueError):
    """A plan that cannot be made from these runs or settings (the message says why)."""


@dataclass
class MetricPlan:
    task: str
    metric: str
    detect: float
    spread: gate_power.PairedSpread
    sd_drop: float  # sd of the paired differences under the drop
    needed: int  # rows the paired test needs
    expected_power: float = 0.0  # with the rows drawn
    calibration_se: float = 0.0  # across a judge change: the calibrated shift's standard error (gate.calibrated)


@dataclass
class TaskDraw:
    """One headline task's draw: its rows (the maximum any of its metrics needs, at most all) over its leaves."""

    task: str
    population: int
    rows: int
    metrics: list[MetricPlan]
    keys: dict[str, list[str]] = field(default_factory=dict)  # dataset_name -> unit keys, in data order
    unplanned: list[str] = field(default_factory=list)  # headline metrics given no drop (compare still tests them)


@dataclass
class GatePlan:
    name: str
    base: str
    second: str | None
    power: float
    alpha: float
    seed: int
    draws: list[TaskDraw]
    unused: list[str] = field(default_factory=list)  # --detect METRIC=D naming no metric planned
    calibration: dict[str, Any] | None = None  # --calibration: the file and the judges it carries the gate across

    def rows(self) -> dict[str, list[str]]:
        return {name: keys for d in self.draws for name, keys in d.keys.items()}

    def as_subset(self) -> dict[str, Any]:
        """The subset file's content."""
        detect = {m.metric: m.detect for d in self.draws for m in d.metrics}
        return {
            "emo_tasks_subset": subset.FORMAT,
            "name": self.name,
            "rows": self.rows(),
            "plan": {
                "detect": detect,
                "power": self.power,
                "alpha": self.alpha,
                "seed": self.seed,
                "base_run": self.base,
                "second_run": self.second,
                "spread": sorted({m.spread.source for d in self.draws for m in d.metrics}),
                "expected_power": {
                    f"{m.task}:{m.metric}": round(m.expected_power, 4) for d in self.draws for m in d.metrics
                },
                "rows": {d.task: d.rows for d in self.draws},
                "population": {d.task: d.population for d in self.draws},
                **({"calibration": self.calibration} if self.calibration else {}),
            },
        }


def parse_detect(specs: Sequence[str]) -> dict[str | None, float]:
    """`--detect D` (every headline metric, in its own units) and `--detect METRIC=D` (that metric) -> {metric or
    None: D}; each D must be > 0 (`cliargs.per_metric`, the rule calibrate's --tolerance shares)."""
    try:
        out = cliargs.per_metric(specs, "drop")
    except ValueError as exc:
        raise PlanError(f"--detect {exc}") from None
    if not out:
        raise PlanError("--detect is required: the drop the gate must catch (e.g. --detect 2 --detect srcc=0.02)")
    return out


def _units(run: reader.Run, leaf: str, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(unit key, stratum) of each unit of a leaf task's data as the base run used it (each unit once)."""
    config = run.configs.get(leaf) or {}
    name = config.get("dataset_name")
    bench = benchmark_of(leaf)
    if not name or bench is None or not bench.hooks:
        raise PlanError(f"{leaf}: the base run records no dataset_name for it")
    hooks = importlib.import_module(bench.hooks)
    docs = hooks.load_task(name, env)
    effective = ((run.data.get("n-samples") or {}).get(leaf) or {}).get("effective")
    if isinstance(effective, int) and effective < len(docs):
        raise PlanError(
            f"{leaf}: the base run answered {effective} of its {len(docs)} rows (--limit?): a plan needs a full run "
            "to draw from"
        )
    seen: dict[str, str] = {}
    for doc in docs:
        seen.setdefault(hooks.subset_unit(doc), f"{leaf}/{hooks.subset_stratum(doc)}")
    return list(seen.items())


def allocate(strata: Mapping[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of `n` rows over strata of the given sizes (largest remainder; ties by name), each
    at most its size."""
    total = sum(strata.values())
    if n >= total:
        return dict(strata)
    exact = {h: n * size / total for h, size in strata.items()}
    out = {h: int(x) for h, x in exact.items()}
    rest = n - sum(out.values())
    for h in sorted(strata, key=lambda h: (-(exact[h] - out[h]), h))[:rest]:
        out[h] += 1
    return out


def allocate_in_groups(groups: Mapping[str, Mapping[str, int]], n: int) -> dict[str, int]:
    """`n` rows over groups of strata (a group task's leaf tasks, each with its categories): proportional over the
    groups with at least one row each (a subset run answers every task of a group, and lmms-eval cannot run a
    task with no rows), then each group's rows proportional over its strata (`allocate`).  Fewer rows than groups
    become one row per group."""
    sizes = {g: sum(s.values()) for g, s in groups.items()}
    per = allocate(sizes, max(n, len(groups)))
    for g in sorted(g for g in per if per[g] == 0 and sizes[g]):
        donor = max((h for h in per if per[h] > 1), key=lambda h: (per[h], h), default=None)
        if donor is None:
            break
        per[donor] -= 1
        per[g] = 1
    out: dict[str, int] = {}
    for g, strata in groups.items():
        out.update(allocate(strata, per[g]))
    return out


def draw(
    units: Sequence[tuple[str, str]], n: int, seed: int, task: str, group_of: Callable[[str], str] | None = None
) -> set[str]:
    """`n` unit keys drawn at random within strata (`allocate`; with `group_of`, stratum -> group,
    `allocate_in_groups`), reproducible from `seed` and the task name."""
    by: dict[str, list[str]] = {}
    for key, stratum in units:
        by.setdefault(stratum, []).append(key)
    if group_of is None:
        counts = allocate({h: len(k) for h, k in by.items()}, n)
    else:
        groups: dict[str, dict[str, int]] = {}
        for h, keys in by.items():
            groups.setdefault(group_of(h), {})[h] = len(keys)
        counts = allocate_in_groups(groups, n)
    rng = random.Random(f"{seed}:{task}")
    chosen: set[str] = set()
    for h in sorted(by):
        chosen.update(rng.sample(sorted(by[h]), counts[h]))
    return chosen


def plan_gate(
    base_dir: str | Path,
    detect: Mapping[str | None, float],
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    second_dir: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    seed: int = 0,
    name: str | None = None,
    pick: str | None = None,
    env: Mapping[str, str] | None = None,
    calibration: str | Path | None = None,
) -> GatePlan:
    """The plan (module docstring).  Raises PlanError (or ReportError for an unreadable run).  `calibration`: plan
    the gate of candidate-judge runs against this reference-judge base run (`emo_tasks.gate.calibrated`)."""
    from emo_tasks.settings import environ

    base = reader.load_run(base_dir, pick)
    second = reader.load_run(second_dir) if second_dir else None
    heads = compare.headline_tasks(base, base)
    if tasks:
        unknown = [t for t in tasks if t not in heads]
        if unknown:
            raise PlanError(f"--tasks {', '.join(unknown)}: not a headline task of the base run ({', '.join(heads)})")
        heads = [t for t in heads if t in tasks]
    if not heads:
        raise PlanError(f"{base.results_file}: the base run has no emo-tasks task")
    cal = _calibration(calibration, base, heads) if calibration else None
    load_env = {k: v for k, v in (environ() if env is None else env).items() if k != subset.ENV}
    load_env["EMO_JUDGE"] = "offline"  # the rows only: no judge is needed to list them
    draws = []
    for task in heads:
        if base.subset_tasks(task):
            raise PlanError(f"{task}: the base run itself ran on a subset; plan from a full run")
        bench = benchmark_of(task)
        assert bench is not None
        values = reader.samples_for(base, task)
        metrics, unplanned = [], []
        for m in bench.table.headline:
            if not values.get(m.name):
                continue
            d = detect.get(m.name, detect.get(None) if m.outcome else None)
            if d is None:  # a bare D is in points: it fits 0/100 outcomes, not a distance or a correlation
                unplanned.append(m.name)
                continue
            other = reader.samples_for(second, task).get(m.name) if second is not None else None
            if second is not None and not other:
                raise PlanError(f"{task} {m.name}: the second run has no per-sample values for it")
            try:
                spread = gate_power.paired_spread(values[m.name], other)
            except ValueError as exc:
                raise PlanError(f"{task} {m.name}: {exc}") from None
            sd = spread.under_drop(d)
            se = _calibration_se(cal, base, task, m.name)
            try:
                needed = gate_power.required_rows(sd, d, power, alpha, extra_se=se)
            except ValueError as exc:  # the calibration's CI alone hides the drop
                raise PlanError(f"{task} {m.name}: across the judge change calibrated by {calibration}: {exc}; "
                                "ask for a larger drop, or calibrate on more rows") from None  # fmt: skip
            metrics.append(MetricPlan(task, m.name, d, spread, sd, needed, calibration_se=se))
        if not metrics:
            raise PlanError(f"{task}: no headline metric to plan for: " + (
                f"give a drop for one of {', '.join(unplanned)} (--detect METRIC=D, in its units)" if unplanned
                else _why_no_values(base, task)))  # fmt: skip
        leaves = reader.leaves(base, task)
        units = {leaf: _units(base, leaf, load_env) for leaf in leaves}
        pooled = [(f"{leaf}\0{k}", s) for leaf in leaves for k, s in units[leaf]]
        # every leaf task answers at least one row: a group's run needs each of its tasks
        n = min(max(max(m.needed for m in metrics), len(leaves)), len(pooled))
        chosen = draw(pooled, n, seed, task, group_of=lambda stratum: stratum.split("/", 1)[0])
        for m in metrics:
            m.expected_power = gate_power.expected_power(n, m.sd_drop, m.detect, alpha, extra_se=m.calibration_se)
        keys = {}
        for leaf in leaves:
            name_of = base.configs[leaf]["dataset_name"]
            keys[name_of] = [k for k, _ in units[leaf] if f"{leaf}\0{k}" in chosen]
        draws.append(TaskDraw(task, len(pooled), n, metrics, {k: v for k, v in keys.items() if v}, unplanned))
    used = {m.metric for d in draws for m in d.metrics}
    unused = sorted(k for k in detect if k is not None and k not in used)
    label = name or f"gate-p{power:g}-" + "-".join(f"{k or 'all'}{v:g}" for k, v in sorted(
        detect.items(), key=lambda kv: kv[0] or ""))  # fmt: skip
    carried = None
    if cal is not None:
        carried = {"file": str(calibration), "reference": cal.reference, "candidate": cal.candidate,
                   "se": {f"{m.task}:{m.metric}": m.calibration_se for d in draws for m in d.metrics
                          if m.calibration_se}}  # fmt: skip
    return GatePlan(label, str(base.results_file), str(second.results_file) if second else None, power, alpha,
                    seed, draws, unused, carried)  # fmt: skip


def _calibration(path: str | Path, base: reader.Run, tasks: Sequence[str]) -> Any:
    """The calibration whose reference judge is the base run's (PlanError otherwise, one line naming the key)."""
    from emo_tasks.results import judge_change
    from emo_tasks.results.calibration import CalibrationError, load_calibration

    try:
        cal = load_calibration(path)
    except CalibrationError as exc:
        raise PlanError(f"--calibration: {exc}") from None
    why = judge_change.reference_mismatch(cal, base, tasks)
    if why:
        raise PlanError(why)
    return cal


def _calibration_se(cal: Any, base: reader.Run, task: str, metric: str) -> float:
    """The calibrated shift's standard error of a judged task's metric (0: no calibration, or a task scored
    without a judge); PlanError for a metric the calibration does not cover."""
    from emo_tasks.results import judge_change

    if cal is None or not judge_change.task_identity(base, task):
        return 0.0
    got = judge_change.carried(cal, task, metric)
    if isinstance(got, str):
        raise PlanError(f"{task} {metric} cannot be planned across the judge change: {got} (calibrate it, or leave "
                        "the task out with --tasks)")  # fmt: skip
    return got.se


def _why_no_values(base: reader.Run, task: str) -> str:
    """Why the base run has no per-sample values of a task's headline metrics, as far as its results tell."""
    scored, failed = base.value(task, "n_scored"), base.value(task, "n_judge_failed")
    if scored == 0 and failed:
        return (
            f"every judgement of the base run failed (n_judge_failed {failed:g}): fix the judge and rerun only "
            "the failures with `emo-tasks judge`, then plan from the judged results"
        )
    return (
        "the base run has no per-sample values of them (a --predict_only run: judge it first with "
        "`emo-tasks judge`, and plan from the judged results)"
    )


def render(plan: GatePlan) -> str:
    """The plan as a table: per headline metric, the spread, the rows needed and drawn, the expected power."""
    spread = (f"; spread from the second run {plan.second}" if plan.second
              else "; no second run: spread from the independence assumption (conservative)")  # fmt: skip
    lines = [f"gate plan {plan.name!r}: power {plan.power:g} at alpha {plan.alpha:g}, seed {plan.seed}",
             f"base: {plan.base}{spread}"]  # fmt: skip
    if plan.calibration:
        lines.append(
            f"across the judge change calibrated by {plan.calibration['file']}: each judged metric's "
            "calibration se adds to the test's in quadrature: rows = z^2 sd^2 / (drop^2 - (z se)^2)"
        )
    header = ("task", "metric", "drop", "spread", "sd under drop", "rows needed", "rows drawn", "of", "share",
              "expected power") + (("calibration se",) if plan.calibration else ())  # fmt: skip
    table = []
    for d in plan.draws:
        for m in d.metrics:
            se = (f"{m.calibration_se:.4g}" if m.calibration_se else "-",) if plan.calibration else ()
            table.append((d.task, m.metric, f"{m.detect:g}", f"{m.spread.sd:.4g} ({m.spread.source})",
                          f"{m.sd_drop:.4g}", str(m.needed), str(d.rows), str(d.population),
                          f"{d.rows / d.population:.1%}", f"{m.expected_power:.3f}", *se))  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    short = [f"{m.task} {m.metric}" for d in plan.draws for m in d.metrics if m.expected_power < plan.power - 1e-9]
    if short:
        lines.append(f"note: the whole data is too small for power {plan.power:g} in: {', '.join(short)}")
    for d in plan.draws:
        if d.unplanned:
            lines.append(f"note: {d.task}: no drop given for {', '.join(d.unplanned)} (compare still tests them, "
                         "with no planned power; --detect METRIC=D in the metric's units plans for them)")  # fmt: skip
    if plan.unused:
        lines.append(f"note: --detect {', '.join(plan.unused)}: no headline metric with per-sample values in the base "
                     "run by that name (a metric undefined on every sample has none)")  # fmt: skip
    rows = sum(d.rows for d in plan.draws)
    population = sum(d.population for d in plan.draws)
    lines.append(f"rows: {rows} of {population} ({rows / population:.1%} of the full run)")
    return "\n".join(lines)


def answers_folder(results_file: str | Path) -> Path:
    """The run folder whose saved answers a results file scores: for `emo-tasks judge`'s output
    (`RUN/judged/<setup>/`), RUN; else the results file's folder."""
    return reader.judged_source(Path(results_file).parent)


def dry_run_cost(
    plan: GatePlan, keep: Mapping[str, Sequence[str]] | None, prices: Mapping[str, tuple[float, float]],
    env: Mapping[str, str],
) -> str:  # fmt: skip
    """The judge stage's dry run over the base run's answers (of the subset's rows when `keep`), as for a new
    checkpoint: nothing counted as cached (EMO_JUDGE_CACHE=0).  Returns its report; StageError when it fails."""
    from emo_tasks.judging.stage import judge_run

    buf = io.StringIO()
    folder = answers_folder(plan.base)
    code = judge_run(folder, dry_run=True, prices=prices, env={**env, "EMO_JUDGE_CACHE": "0", "EMO_SUBSET": ""},
                     stream=buf, keep=keep)  # fmt: skip
    text = buf.getvalue()
    if code != 0:
        raise StageError(f"the dry run over {folder} failed: {text.strip().splitlines()[-1] if text else code}")
    skip = ("emo-tasks judge: ", "emo-tasks judge --dry-run: no judge endpoint")
    return "\n".join(line for line in text.splitlines() if not line.startswith(skip))


def write(plan: GatePlan, out: str | Path) -> Path:
    """Write the subset file (refusing nothing: a plan is cheap to remake)."""
    from judges.atomic import atomic_write_text

    path = Path(out)
    atomic_write_text(path, json.dumps(plan.as_subset(), indent=1) + "\n")
    return path


#: plan-gate's `--detect D` / `--detect METRIC=D` (`parse_detect`'s rule) as the argument is parsed, so a bad drop is
#: exit 3: a finite drop > 0.
detect_arg = cliargs.per_metric_arg("drop", "2, srcc=0.02")
