"""Which judge made a run, and whether a calibration carries a step from one judge to another: the part of a gate
or a trend across a judge change (docs/ci.md#moving-a-baseline-to-a-new-judge) that `report --trend` (here, in
`results/`) and `compare` / `plan-gate` (`gate/`) share.

Why its own module: the layer rule lets the trend use `results/` only, and the gate and the trend must read a run's
judge the same way: `calibration.judge_identity` of each judged leaf task's summary, and one value over the run's
judged tasks (a run whose tasks were judged by different judges cannot be carried by one calibration).  A task whose
summary records no judge (a benchmark scored without one) has no identity and never needs a shift.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from emo_tasks.results.calibration import Calibration, Shift, judge_identity
from emo_tasks.results.reader import Run, leaves
from emo_tasks.results.same_judge import group_by_judge, identity_difference


def _key(identity: dict[str, Any]) -> str:
    return json.dumps(identity, sort_keys=True, default=str)


def task_identity(run: Run, task: str) -> dict[str, Any]:
    """The judge identity of a task (a group: of its leaves, when they agree; {} when none records a judge).  Leaves
    judged by different judges give the first one's: `run_identity` refuses such a run."""
    found = [judge_identity(run.summaries.get(leaf)) for leaf in leaves(run, task)]
    found = [i for i in found if i]
    return found[0] if found else {}


def run_identity(run: Run, tasks: Sequence[str], side: str) -> tuple[dict[str, Any], str | None]:
    """(the one judge identity of `tasks`' judged leaves in `run`, the problem: None, or one line naming the side
    when its tasks were judged by different judges).  {} when no task records a judge."""
    found = [
        (i, leaf) for task in tasks for leaf in leaves(run, task) if (i := judge_identity(run.summaries.get(leaf)))
    ]
    seen = group_by_judge(found)
    if len(seen) > 1:
        parts = [f"{', '.join(sorted(ts)[:3])}{' ...' if len(ts) > 3 else ''}: {_key(i)}" for i, ts in seen]
        return {}, (f"judges: the {side} run's tasks were judged by {len(seen)} different judges "
                    f"({' | '.join(parts)}): one calibration carries one judge to one other")  # fmt: skip
    return (seen[0][0] if seen else {}), None


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two judge identities are one judge (compared as `changed` compares them)."""
    return _key(a) == _key(b)


def changed(earlier: Run, later: Run, task: str) -> bool:
    """The task's judge differs between the two runs (`same_judge`'s rule): its numbers need the calibration's
    shift."""
    return bool(identity_difference(task_identity(earlier, task), task_identity(later, task)))


def carries(calibration: Calibration, reference: Run, candidate: Run, tasks: Sequence[str],
            names: tuple[str, str] = ("base", "new")) -> str | None:  # fmt: skip
    """Why `calibration` does not carry `reference`'s judge to `candidate`'s over `tasks` (one line naming the side
    and the identity keys), None when it does: each run's judged tasks have one identity, the reference run's is
    the calibration's reference and the candidate run's its candidate."""
    ref, problem = run_identity(reference, tasks, names[0])
    if problem:
        return problem
    cand, problem = run_identity(candidate, tasks, names[1])
    if problem:
        return problem
    return _named(calibration.mismatch(ref, cand), names)


def reference_mismatch(calibration: Calibration, run: Run, tasks: Sequence[str], name: str = "base") -> str | None:
    """Why `run`'s judge is not `calibration`'s reference (one line), None when it is: a gate planned from it
    (`plan-gate --calibration`) compares candidate-judge runs with it."""
    ref, problem = run_identity(run, tasks, name)
    return problem or _named(calibration.mismatch(ref, calibration.candidate), (name, "new"))


def _named(why: str | None, names: tuple[str, str]) -> str | None:
    """`Calibration.mismatch`'s line with the runs named: "the reference judge (the base run's) differs in ..."."""
    if why is None:
        return None
    for side, name in zip(("reference", "candidate"), names, strict=True):
        why = why.replace(f"the {side} judge differs", f"the {side} judge (the {name} run's) differs")
    return f"judges: --calibration {why}"


_Z = NormalDist()


def z_of(level: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 for 0.95)."""
    return _Z.inv_cdf((1 + level) / 2)


def level_of(calibration: Calibration) -> float:
    """The calibration's confidence level (its shifts' CIs), 0.95 unless the file says otherwise."""
    level = calibration.data.get("level")
    ok = isinstance(level, int | float) and not isinstance(level, bool) and 0 < level < 1
    return float(level) if ok else 0.95


@dataclass(frozen=True)
class Carried:
    """One metric carried across the judge change: the calibrated shift (candidate - reference) and its standard
    error (its CI's half width over the normal quantile of the calibration's level)."""

    shift: Shift
    se: float
    level: float

    @property
    def half_width(self) -> float:
        """The calibration's CI half width at its own level."""
        return self.se * z_of(self.level)


def carried(calibration: Calibration, task: str, metric: str) -> Carried | str:
    """The calibrated shift of a metric, or why it cannot be carried (no shift for it, or no CI)."""
    s = calibration.shift(task, metric)
    if s is None:
        return f"{calibration.path} has no shift for {task} {metric}"
    half = s.half_width()
    if half is None or not math.isfinite(half):
        return f"{calibration.path} gives {task} {metric}'s shift no CI"
    level = level_of(calibration)
    return Carried(s, half / z_of(level), level)


def chained(first: Carried, then: Carried) -> Carried:
    """Two judge changes in a row (A->B, then B->C) as one, A->C: the shifts add, their standard errors combine in
    quadrature (the two calibrations measured independently), at the 95 % level.  Why: a trend across a chain of
    judges stays on the first judge's scale (`report --trend` with several --calibration)."""
    shift = first.shift.shift + then.shift.shift
    se = math.sqrt(first.se**2 + then.se**2)
    half = se * z_of(0.95)
    s = Shift(then.shift.benchmark, then.shift.task, then.shift.metric, min(first.shift.n, then.shift.n), shift,
              shift - half, shift + half, then.shift.tolerance, False)  # fmt: skip
    return Carried(s, se, 0.95)
