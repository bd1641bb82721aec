"""How many rows a CI gate needs to catch a stated drop (issue 23): the sample size of `emo-tasks compare`'s own
paired tests, from a baseline run's per-sample values.

Why: a smaller `--limit` (the first N rows) is biased and has unknown power, so a gate run on it can pass a 2-point
drop without saying so.  The gate flags a regression when its paired test (McNemar's exact test for 0/1 outcomes,
else the paired bootstrap; `compare.compare_metric`) rejects at level `alpha`, two-sided, and the new run is worse.
For a true mean drop D, with sd_d the standard deviation of the per-row paired difference (new - base), its power
with n rows is close to

    power(n) = Phi(D * sqrt(n) / sd_d - z_{1 - alpha/2})            (the normal approximation of the paired test)

so n = ceil(((z_{1 - alpha/2} + z_power) * sd_d / D)^2) rows give the asked power.  `benchmarks/gate_power.py`
checks this against the real compare logic on simulated checkpoints (detection rate within 5 points of the asked
power, false alarms at most alpha + 1 point).

sd_d is the spread under the drop, not without it: a checkpoint that drops D points does so by rows that change
(a recognised clip no longer recognised), and each changed row adds to the spread.  From the data:
- sd_0, the spread of a model against itself: with a second run of the same model (the run-to-run noise of
  sampling and judging), the sd of the paired differences between the two runs; without one, sqrt(2) x the sd of
  the baseline's per-row values, which assumes the two runs' rows independent, the largest spread any
  non-negative correlation gives (a rerun, or a checkpoint, answers the same rows alike): conservative;
- the size s of a row's change (the mean |difference| of the rows that changed between the two runs; without a
  second run, between two rows of the baseline): a drop of D made of such changes adds s x D to the variance, so
  sd_d = sqrt(sd_0^2 + s x D).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

_Z = NormalDist()


def _check(detect: float, power: float, alpha: float) -> None:
    if not detect > 0:
        raise ValueError(f"the drop to detect must be positive, got {detect}")
    if not 0.5 <= power < 1:
        raise ValueError(f"power must be in [0.5, 1), got {power}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def required_rows(sd_diff: float, detect: float, power: float = 0.8, alpha: float = 0.05, extra_se: float = 0.0) -> int:
    """Rows for the gate's two-sided paired test at level `alpha` to flag a mean drop of `detect` (the metric's
    units) with probability `power`, the per-row paired differences having sd `sd_diff` (at least 1).

    `extra_se`: a standard error the rows do not shrink, added in quadrature (a gate across a judge change: the
    calibrated shift's, `emo_tasks.gate.calibrated`): detect = z sqrt(sd^2 / n + se^2), so n = z^2 sd^2 / (detect^2
    - z^2 se^2); ValueError when detect <= z se (no number of rows catches it)."""
    _check(detect, power, alpha)
    if sd_diff < 0 or math.isnan(sd_diff):
        raise ValueError(f"sd of the paired differences must be >= 0, got {sd_diff}")
    z = _Z.inv_cdf(1 - alpha / 2) + _Z.inv_cdf(power)
    if not extra_se:  # the plain gate, computed as it always was
        return max(1, math.ceil((z * sd_diff / detect) ** 2 - 1e-9))
    room = detect**2 - (z * extra_se) ** 2
    if room <= 0:
        raise ValueError(f"a drop of {detect:g} is within z x the fixed standard error {extra_se:.4g}: no number of "
                         f"rows catches it with power {power:g} (the smallest is {z * extra_se:.3g})")  # fmt: skip
    return max(1, math.ceil(z**2 * sd_diff**2 / room - 1e-9))


def expected_power(n: int, sd_diff: float, detect: float, alpha: float = 0.05, extra_se: float = 0.0) -> float:
    """The gate's probability of flagging a true drop of `detect` with `n` rows (the approximation above; `extra_se`
    as in `required_rows`)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not extra_se:  # the plain gate, computed as it always was
        if sd_diff == 0:
            return 1.0
        return _Z.cdf(detect * math.sqrt(n) / sd_diff - _Z.inv_cdf(1 - alpha / 2))
    return _Z.cdf(detect / math.sqrt(sd_diff**2 / n + extra_se**2) - _Z.inv_cdf(1 - alpha / 2))


def detectable_drop(n: int, sd_diff: float, step: float = 0.0, power: float = 0.8, alpha: float = 0.05) -> float:
    """The smallest true drop D the gate flags with probability `power` with `n` rows: `required_rows` solved for
    D, the spread under the drop being sqrt(sd_0^2 + s x D) (module docstring), i.e. the positive root of
    (n / z^2) D^2 - s D - sd_0^2 = 0.  What a pass rules out, stated on each verdict of `emo-tasks compare`."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    _check(1.0, power, alpha)
    z = _Z.inv_cdf(1 - alpha / 2) + _Z.inv_cdf(power)
    a = n / z**2
    return (step + math.sqrt(step**2 + 4 * a * sd_diff**2)) / (2 * a)


@dataclass(frozen=True)
class PairedSpread:
    """What a plan knows of the per-row paired differences, and where it comes from."""

    sd: float  # sd_0: the spread of a model against itself
    step: float  # s: the mean size of a row's change
    n: int
    source: str  # "second run" | "independence assumption"

    def under_drop(self, detect: float) -> float:
        """sd_d when the new run is `detect` worse: sqrt(sd_0^2 + s x D) (module docstring)."""
        return math.sqrt(self.sd**2 + self.step * abs(detect))


def _sd(values: list[float]) -> float:
    if len(values) < 2:
        raise ValueError(f"need at least 2 per-row values to estimate a spread, got {len(values)}")
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _mean_change(diffs: list[float]) -> float:
    changed = [abs(d) for d in diffs if d != 0]
    return math.fsum(changed) / len(changed) if changed else 0.0


def paired_spread(base: Mapping[Any, float], second: Mapping[Any, float] | None = None) -> PairedSpread:
    """The spread over the rows both runs of the same model have (`second`), else from `base` alone under the
    independence assumption (module docstring).  Keys are the runs' per-sample keys (`reader.samples_for`)."""
    if second is not None:
        diffs = [second[k] - base[k] for k in base if k in second]
        return PairedSpread(_sd(diffs), _mean_change(diffs), len(diffs), "second run")
    values = list(base.values())
    shifted = values[1:] + values[:1]  # each row against another: the changes of independent runs
    diffs = [b - a for a, b in zip(values, shifted, strict=True)]
    return PairedSpread(math.sqrt(2) * _sd(values), _mean_change(diffs), len(values), "independence assumption")
