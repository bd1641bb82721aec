"""The paired regression gate behind `emo-tasks compare`: which runs are comparable (the rule `report --trend`
uses too), the paired tests per metric, and what counts as a regression.

Exit codes of `emo-tasks compare` (the regression gate): 0 pass; 1 regression; 2 not comparable (data, prompts, the
medium, generation settings or judges differ (`comparability`, the rule `report --trend` uses too), a data hash
differs, too many judge failures or too little paired coverage, a headline metric null in one run only, no or
several runs in a folder); 3 error (malformed input, a crash) - always with a one-line message, never a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from emo_tasks.benchmarks import benchmark_of
from emo_tasks.metrics import Metric
from emo_tasks.results.reader import Run, null_reason, samples_for
from emo_tasks.results.stats import PairedResult


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
    step: float = 0.0  # the mean size of a changed row (`emo_tasks.gate.power.PairedSpread.step`)
    on_subset: bool = False  # the new run ran on a subset: base/new are the means over its rows
    #: across a judge change (`emo_tasks.gate.calibrated`): the calibration's shift and its standard error; delta,
    #: low, high, p_value and drop are then the shifted test's, `judged` the test's as judged (delta, low, high, p)
    shift: float | None = None
    shift_se: float = 0.0
    judged: tuple[float, float, float, float] | None = None

    def coverage(self) -> float:
        """The paired share of the smaller-covered run's samples; a subset run's: the share of its own samples
        (the base run has the rest of the data by design)."""
        own = self.n / self.n_new if self.n_new else 0.0
        return own if self.on_subset else min(self.n / self.n_base if self.n_base else 0.0, own)

    def detectable_drop(self, power: float = 0.8, alpha: float = 0.05) -> float | None:
        """The drop this test catches with probability `power` (`emo_tasks.gate.power.detectable_drop`): what a pass
        rules out.  None without a spread."""
        from emo_tasks.gate.power import detectable_drop

        if self.sd_diff is None:
            return None
        # across a judge change, the calibration's variance se^2 of the mean is n x se^2 per row (gate.calibrated)
        sd = math.sqrt(self.sd_diff**2 + self.n * self.shift_se**2) if self.shift_se else self.sd_diff
        return detectable_drop(self.n, sd, self.step, power, alpha)

    def power_for(self, drop: float, alpha: float = 0.05) -> float | None:
        """The probability this test flags a true drop of `drop` (`emo_tasks.gate.power.expected_power` over these `n`
        rows, the spread under the drop from their observed paired spread: sqrt(sd^2 + step x drop)); the inverse
        of `detectable_drop`.  None without a spread (fewer than 2 rows, or every row one value in both runs)."""
        from emo_tasks.gate.power import expected_power

        if self.sd_diff is None or self.n < 1:
            return None
        sd = math.sqrt(self.sd_diff**2 + self.step * abs(drop) + self.n * self.shift_se**2)
        return None if sd == 0 else expected_power(self.n, sd, drop, alpha)


def _metric(task: str, metric: str) -> Metric | None:
    bench = benchmark_of(task)
    return bench.table[metric] if bench is not None and metric in bench.table else None


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
    from emo_tasks.results import stats

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
        from emo_tasks.gate.power import paired_spread

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
