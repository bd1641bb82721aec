"""`compare --calibration C` and `plan-gate --calibration C`: a gate across a judge change (docs/ci.md#moving-a-
baseline-to-a-new-judge).

Why: when the paper's judge is retired, a baseline judged by it (the reference) can only be compared with new runs
judged by another judge (the candidate), and `compare` refuses that pair.  A calibration (`emo-tasks calibrate`,
read by `emo_tasks.results.calibration`) measured the candidate's shift on the same answers, with a CI.  The gate
then tests the model's change alone:

    delta' = (NEW - BASE) - shift              the judge's part taken out
    se'    = sqrt(se_gate^2 + se_cal^2)        both uncertainties, in quadrature (the two estimates independent)
    p'     = 2 (1 - Phi(|delta'| / se'))       two-sided, normal; the 95 % CI is delta' +- 1.96 se'

with se_gate = the paired test's 95 % CI width / (2 x 1.96) and se_cal = the calibration's half width / z of its
level.  A regression is as without a judge change: p' < alpha and a drop beyond --max-drop.  Independence holds when
the calibration was measured on other answers than these two runs'; measured on BASE's own answers the two errors
share BASE's judging noise with the same sign, which the quadrature sum over-counts (conservative).

Which metrics need a shift: those of tasks whose judge identity differs between BASE and NEW
(`results.judge_change.changed`); a task scored without a judge needs none.  A metric that needs one and that the
calibration does not cover (or covers without a CI) is never gated silently: `compare` refuses (exit 2, naming it;
leave it out with --metric or calibrate it), `plan-gate` too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from statistics import NormalDist

from emo_tasks.benchmarks import benchmark_of
from emo_tasks.gate.compare import Comparison
from emo_tasks.results import judge_change
from emo_tasks.results.calibration import Calibration
from emo_tasks.results.reader import Run

#: The rule, as `compare` and `plan-gate` print it.
RULE = ("delta' = (new - base) - shift; se' = sqrt(se_gate^2 + se_calibration^2) (quadrature, the two independent); "
        "p' two-sided normal; regression: p' < alpha and a drop beyond --max-drop")  # fmt: skip

_Z95 = judge_change.z_of(0.95)


def across(r: Comparison, carried: judge_change.Carried) -> Comparison:
    """The paired test `r` (NEW - BASE, as judged) carried across the judge change (module docstring)."""
    se_gate = (r.high - r.low) / (2 * _Z95)
    se = math.sqrt(se_gate**2 + carried.se**2)
    delta = r.delta - carried.shift.shift
    if se > 0:
        p = 2 * (1 - NormalDist().cdf(abs(delta) / se))
    else:  # neither test nor calibration varies: the shifted change is exact
        p = 0.0 if delta != 0 else 1.0
    spec = benchmark_of(r.task)
    lower_better = spec is not None and r.metric in spec.table and not spec.table[r.metric].higher_is_better
    return replace(
        r, delta=delta, low=delta - _Z95 * se, high=delta + _Z95 * se, p_value=min(1.0, p),
        method=f"{r.method} - calibrated shift", drop=delta if lower_better else -delta,
        shift=carried.shift.shift, shift_se=carried.se, judged=(r.delta, r.low, r.high, r.p_value),
    )  # fmt: skip


def needs_shift(base: Run, new: Run, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (task, metric) pairs whose task's judge differs between the runs."""
    return [(t, m) for t, m in pairs if judge_change.changed(base, new, t)]


def header(calibration: Calibration, base: Run, new: Run, tasks: Sequence[str]) -> list[str]:
    """What compare prints before its table: the judge change and the calibration that carries it."""
    ref, _ = judge_change.run_identity(base, tasks, "base")
    cand, _ = judge_change.run_identity(new, tasks, "new")
    return [
        f"judge change: base judged by {_models(ref)}, new by {_models(cand)}; gated across it with calibration "
        f"{calibration.path} (level {judge_change.level_of(calibration):g})",
        f"rule: {RULE}",
    ]


def _models(identity: dict) -> str:
    models = identity.get("judge_models")
    if isinstance(models, dict):
        return ", ".join(f"{role} {model}" for role, model in models.items())
    return str(models)


def lines(results: Sequence[Comparison]) -> list[str]:
    """One line per metric gated across the change: as judged, the shift with its CI, the shifted result."""
    out = []
    for r in results:
        if r.shift is None or r.judged is None:
            continue
        d, lo, hi, _p = r.judged
        half = r.shift_se * _Z95
        out.append(
            f"  {r.task} {r.metric}: as judged {d:+.3f} [{lo:+.3f}, {hi:+.3f}]; calibrated shift {r.shift:+.3f} "
            f"(+-{half:.3f} at 95 %); gated on {r.delta:+.3f} [{r.low:+.3f}, {r.high:+.3f}], p {r.p_value:.4f}"
        )
    return out
