"""The registry the generic tools (report, compare, export) ask about each benchmark.

Why: `emo_tasks/report.py` must not know a benchmark's internals.  Each benchmark package describes itself here
through its `results.BENCHMARK`: its metric table (names, directions, headline flags, per-sample value functions),
its task and group names, and how to read its per-sample values back from an lmms-eval output folder.  Imports
are lazy, so asking about one benchmark loads nothing of the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.metrics import MetricTable

#: Benchmark key -> module holding its `BENCHMARK` (in report order).
_MODULES = {
    "mme": "emo_tasks.mme_emotion.results",
    "mvei": "emo_tasks.mvei.results",
    "multiemo": "emo_tasks.multiemo.results",
}


@dataclass
class SampleValues:
    """What a benchmark reads back for one task of one run: per-sample values per metric ({metric: {unit key:
    value}}, the units the metric's mean is over), its own summary of the run (judge models, prompt hashes, ...;
    None when it writes none) and notes saying what is missing and how to get it."""

    values: dict[str, dict[Any, float]] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


#: (run folder, lmms-eval results file, task name, that task's config from the results file) -> SampleValues.
#: Missing files are notes, never exceptions.
SampleReader = Callable[[Path, Path, str, dict[str, Any]], SampleValues]


@dataclass(frozen=True)
class Benchmark:
    key: str  # "mme" | "mvei" | "multiemo"
    title: str  # "MME-Emotion"
    table: MetricTable
    tasks: tuple[str, ...]  # every leaf task name (benchmark and sample)
    groups: tuple[str, ...] = ()  # group names whose numbers pool their subtasks' samples
    read_samples: SampleReader | None = None
    #: Column titles of the report's per-task tables (e.g. "mme_emotion_sample_er_lab" -> "ER-Lab"); a
    #: benchmark with groups gets one table per metric with its tasks as columns, one without gets one table.
    titles: dict[str, str] = field(default_factory=dict)
    plot_ylabel: str = ""
    #: The module with the lmms-eval hooks the judge stage reuses: load_task(dataset_name, env) -> docs,
    #: doc_to_text, doc_to_target, process_results, evaluate(records, args) (see emo_tasks/stage.py).
    hooks: str = ""
    #: How a group pools its subtasks' values (lmms-eval's group aggregation for this benchmark).
    group_aggregate: Callable[..., Any] | None = None

    def owns(self, task: str) -> bool:
        return task in self.tasks or task in self.groups


def benchmark(key: str) -> Benchmark:
    """One benchmark's description, by key."""
    if key not in _MODULES:
        raise KeyError(f"unknown benchmark {key!r}; known: {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[key]).BENCHMARK


def all_benchmarks() -> list[Benchmark]:
    return [benchmark(k) for k in _MODULES]


def benchmark_of(task: str) -> Benchmark | None:
    """The benchmark a task or group name belongs to, else None."""
    for b in all_benchmarks():
        if b.owns(task):
            return b
    return None


#: The lmms-eval hooks a task YAML names with `!function utils.<name>` (each benchmark defines those it needs).
YAML_HOOKS = ("process_docs", "doc_to_visual", "doc_to_text", "doc_to_messages", "doc_to_target", "process_results")


def yaml_functions(key: str) -> dict[str, Any]:
    """What a benchmark's `utils.py` gives its YAMLs: its hooks (from the benchmark's `hooks` module, so their
    state is shared by every YAML), `agg_<metric>` for every metric of its table — all reading one memoised
    `evaluate`, so a task's metrics share one judge or scoring pass — and `group_aggregate` when it has groups.
    Derived from the metric table, never written out by hand, so the YAML tests can check the two agree."""
    bench = benchmark(key)
    hooks = importlib.import_module(bench.hooks)
    out: dict[str, Any] = {name: getattr(hooks, name) for name in YAML_HOOKS if hasattr(hooks, name)}
    out.update(bench.table.aggregations(hooks.evaluate))
    if bench.group_aggregate is not None:
        out["group_aggregate"] = bench.group_aggregate
    return out
