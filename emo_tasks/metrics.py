"""The shape of a benchmark's metric table: the single source of its metric names, directions, headline flags
and per-sample value functions.

Why: a metric listed in five places drifts.  Each benchmark's `scoring.TABLE` is the one list; its lmms-eval
aggregation functions (`MetricTable.aggregations`), the report, `compare` and the tests of the task YAMLs'
`metric_list` are all derived from it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: A per-sample value function: one per-sample unit (a judged MME answer, an MVEI pair, a MultiEmo image) ->
#: its value on the metric's own scale, or None when that unit has no value for the metric.
PerSample = Callable[[Any], float | None]


@dataclass(frozen=True)
class Metric:
    """One metric of a benchmark.

    `headline`: a quality score that `emo-tasks compare` tests by default.
    `per_sample`: the unit value whose mean is the metric (what bootstrap CIs and paired tests resample); None
    for counts and for metrics that are not a mean of per-sample values.  Metrics with one are the report's
    CSV/JSON rows; `table` (default: the same) puts them in the report's Markdown tables and `plot` in its figure.
    `outcome`: per-sample values are 0/100 outcomes, so McNemar's exact test applies to value/100.
    `digits`: decimals in the Markdown tables.  `null_reason`: why the value can legitimately be null.
    `judge_free`: in a judged task, the value does not depend on the judge (an answer's length, the judge counts
    themselves), so the report shows no judge counts beside it.
    `paired`: the per-sample headline that lmms-eval's `--baseline` paired t-test reads (one per benchmark at
    most; the task YAMLs' `score_key` names it, `paired_fields` writes it into each sample's record).
    """

    name: str
    doc: str
    higher_is_better: bool = True
    headline: bool = False
    title: str | None = None
    per_sample: PerSample | None = None
    outcome: bool = False
    table: bool | None = None
    plot: bool = False
    digits: int = 2
    null_reason: str | None = None
    judge_free: bool = False
    paired: bool = False

    @property
    def in_table(self) -> bool:
        return self.per_sample is not None if self.table is None else self.table

    @property
    def display(self) -> str:
        return self.title or self.name


@dataclass(frozen=True)
class MetricTable:
    """A benchmark's metrics, in the order lmms-eval reports them."""

    benchmark: str  # short key: "mme", "mvei", "multiemo"
    title: str  # "MME-Emotion"
    metrics: tuple[Metric, ...]

    def __post_init__(self) -> None:
        names = [m.name for m in self.metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.title}: duplicate metric names in {names}")

    def __iter__(self) -> Iterator[Metric]:
        return iter(self.metrics)

    def __getitem__(self, name: str) -> Metric:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(f"{self.title} has no metric {name!r}; known: {', '.join(self.names)}")

    def __contains__(self, name: object) -> bool:
        return any(m.name == name for m in self.metrics)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    @property
    def paired(self) -> Metric | None:
        """The metric lmms-eval's `--baseline` pairs per sample (None: the benchmark has none, see docs/ci.md)."""
        found = [m for m in self.metrics if m.paired]
        if len(found) > 1:
            raise ValueError(f"{self.title}: more than one paired metric: {[m.name for m in found]}")
        return found[0] if found else None

    @property
    def headline(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.headline)

    @property
    def reported(self) -> tuple[Metric, ...]:
        """The metrics the report writes (CSV/JSON): those with per-sample values, so with a CI."""
        return tuple(m for m in self.metrics if m.per_sample is not None)

    @property
    def lower_is_better(self) -> frozenset[str]:
        return frozenset(m.name for m in self.metrics if not m.higher_is_better)

    def per_sample_values(self, units: Mapping[Any, Any]) -> dict[str, dict[Any, float]]:
        """{metric: {unit key: value}} for every metric with a per-sample function (units without a value are
        left out; metrics without any value are dropped)."""
        out: dict[str, dict[Any, float]] = {}
        for m in self.metrics:
            if m.per_sample is None:
                continue
            values = {}
            for key, unit in units.items():
                v = m.per_sample(unit)
                if v is not None:
                    values[key] = float(v)
            if values:
                out[m.name] = values
        return out

    def aggregations(self, compute: Callable[..., Mapping[str, Any]]) -> dict[str, Callable[..., Any]]:
        """lmms-eval aggregation functions `agg_<metric>`, one per metric, all reading one `compute(items, args)`
        (memoised by the caller so that a task's metrics share one judge or scoring pass).  lmms-eval passes
        `args` (its CLI namespace) to aggregations that accept it."""
        out = {}
        for metric in self.metrics:
            fn = _aggregation(compute, metric.name)
            fn.__name__ = fn.__qualname__ = f"agg_{metric.name}"
            fn.__doc__ = f"{self.title} `{metric.name}`: {metric.doc}"
            out[fn.__name__] = fn
        return out

    def yaml_metric_list(self) -> list[dict[str, Any]]:
        """What a task YAML's `metric_list` must say (metric, aggregation function name, direction)."""
        return [
            {"metric": m.name, "aggregation": f"utils.agg_{m.name}", "higher_is_better": m.higher_is_better}
            for m in self.metrics
        ]


#: The exit code of an lmms-eval run whose judge model is retired or unknown (`emo-tasks judge`'s exit 3).
EXIT_JUDGE_GONE = 3


def _aggregation(compute: Callable[..., Mapping[str, Any]], name: str) -> Callable[..., Any]:
    def aggregate(items: Sequence[Any], args: Any = None) -> Any:
        from judges.endpoint import JudgeModelNotFound

        try:
            return compute(items, args)[name]
        except JudgeModelNotFound as exc:
            # lmms-eval prints an evaluation error's traceback, writes no results and exits 0: a retired judge
            # would look like a finished run.  One line, and the run stops with exit 3 (SystemExit passes
            # lmms-eval's `except Exception`), as `emo-tasks judge` does.
            print(f"emo-tasks: judging stopped: {exc}", file=sys.stderr, flush=True)
            raise SystemExit(EXIT_JUDGE_GONE) from None

    return aggregate


#: lmms-eval 0.7.3's `--baseline` reads a sample's per-sample score as `sample[score_key]["score"]` (0-1 scale:
#: it reports means x100), where the task YAML's `score_key` names one of our metrics; `score_of` says which metric
#: the record's `score` belongs to (None: the benchmark has no per-row value), so that emo_tasks' baseline loader
#: (`lmms_patch`) reads our records and nothing else.  Not `score` alone: lmms-eval's CLT standard error reads
#: `item[score_key]`, which our records do not carry, so it stays N/A instead of a naive per-row error.
PAIRED_SCORE = "score"
PAIRED_OF = "score_of"


def paired_fields(table: MetricTable, value: float | None) -> dict[str, Any]:
    """The fields a per-sample record carries for lmms-eval's paired test: `score_of` always (the paired metric's
    name, or None), `score` (value / 100) only when the sample has a value (unscored samples are not paired)."""
    metric = table.paired
    out: dict[str, Any] = {PAIRED_OF: metric.name if metric else None}
    if metric is not None and value is not None:
        out[PAIRED_SCORE] = float(value) / 100.0
    return out
