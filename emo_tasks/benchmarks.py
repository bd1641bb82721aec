"""The registry the generic tools (report, compare, export, agreement, judge) ask about each benchmark.

Why: the generic tools must not know a benchmark's internals, so adding a benchmark touches its own folder and
one line of `_MODULES`.  Each benchmark package describes itself through its `results.BENCHMARK`: its metric
table (names, directions, headline flags, per-sample value functions), its task and group names, how to read its
per-sample values back from an lmms-eval output folder, the export formats it offers, its judge setup and its
per-sample judge ratings (for `emo-tasks agreement`).  Imports are lazy, so asking about one benchmark loads
nothing of the others, and the generic tools import no benchmark module: no import circle can form.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.metrics import MetricTable

#: Benchmark key -> module holding its `BENCHMARK` (in report order).
_MODULES = {
    "mme": "emo_tasks.mme_emotion.registry",
    "mvei": "emo_tasks.mvei.registry",
    "multiemo": "emo_tasks.multiemo.registry",
    "emobench_m": "emo_tasks.emobench_m.registry",
}


@dataclass
class SampleValues:
    """What a benchmark reads back for one task of one run: per-sample values per metric ({metric: {unit key:
    value}}, the units the metric's mean is over), its own summary of the run (judge models, prompt hashes, ...;
    None when it writes none) and notes saying what is missing and how to get it."""

    values: dict[str, dict[Any, float]] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class SampleView:
    """What a results viewer (`emo-tasks view`) shows of one sample, as its benchmark reads it from the run's own
    files: the evidence beside the numbers, so the viewer itself knows no benchmark.

    `doc_id`: lmms-eval's doc id (the sample's stable address `task/doc_id`); `unit`: the key of its per-sample
    values in `SampleValues.values` (a MultiEmo image, an MME (task, row), an MVEI pair id); `media`: image or
    video paths as the data names them; `answers`: the model's answer(s), model output shown as text, never HTML;
    `verdict`: "correct" / "incorrect" / "judge_failed" / ... (None when the benchmark has no such notion);
    `predicted`: the label the answer names, on the same scale as `gold` (a task's confusion matrix is gold vs
    predicted; None when the benchmark has no single predicted label or the answer names none);
    `values`: the sample's value per metric (the metric table's per-sample functions); `details`: the rest of the
    evidence, benchmark-specific and JSON-ready (steps and ratings and judge text, votes, ...)."""

    task: str
    doc_id: int | None
    unit: Any
    media: tuple[str, ...] = ()
    prompt: str | None = None
    answers: tuple[str, ...] = ()
    gold: str | None = None
    verdict: str | None = None
    predicted: str | None = None
    values: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


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
    #: doc_to_text, doc_to_target, process_results, evaluate(records, args) (see emo_tasks/judging/stage.py).
    hooks: str = ""
    #: How a group pools its subtasks' values (lmms-eval's group aggregation for this benchmark).
    group_aggregate: Callable[..., Any] | None = None
    #: Each group's leaf tasks, as its group YAML lists them: a calibration (`emo-tasks calibrate`) pools them into
    #: the group's shift the way `compare` pools a group's samples, without a results file to read them from.
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The export formats it offers: format name -> "module:function", the function being
    #: (run_dir, out_dir, model_name=None, *, pick=None, force=False) -> Path (see emo_tasks/results/export.py).
    exports: Mapping[str, str] = field(default_factory=dict)
    #: The module that gives its per-sample judge ratings to `emo-tasks agreement` ("" = no judge to compare); it
    #: defines the names of `emo_tasks.judging.agreement.JudgeRatings` (see emo_tasks/mme_emotion/agreement.py).
    judge_ratings: str = ""
    #: (env, extra_judge) -> the parts of the judge setup that can change its numbers ({} = none), for the judge
    #: stage's folder name and results; `extra_judge`: the optional judge stage was asked for (--multiemo-judge).
    judge_setup: Callable[[Mapping[str, str], bool], dict[str, Any]] | None = None
    #: "module:function" giving what a viewer shows of each sample of one task of a run, read from the same files
    #: as `read_samples`: (run folder, results file, task) -> list[SampleView] ("" = none).
    view_samples: str = ""
    #: "module:function"s each giving a VLMEvalKit dataset class (`emo_tasks.vlmeval`; the function imports vlmeval,
    #: so nothing does unless a class is asked for).
    vlmeval_datasets: tuple[str, ...] = ()

    def owns(self, task: str) -> bool:
        return task in self.tasks or task in self.groups


def benchmark(key: str) -> Benchmark:
    """One benchmark's description, by key."""
    if key not in _MODULES:
        raise KeyError(f"unknown benchmark {key!r}; known: {', '.join(_MODULES)}")
    return importlib.import_module(_MODULES[key]).BENCHMARK


def all_benchmarks() -> list[Benchmark]:
    return [benchmark(k) for k in _MODULES]


def load_object(spec: str) -> Any:
    """The object a "module:name" string names (the registry's lazy references)."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def sample_views(path: Path, results_file: Path, task: str) -> list[SampleView]:
    """One leaf task's samples of a run as its benchmark's viewer reads them ([] for a task no benchmark owns, or
    whose benchmark has no viewer).  Read once per `common.remembering()` block (one command that both lists a
    run's flips and writes its site reads them once)."""
    from emo_tasks.common import once

    bench = benchmark_of(task)
    if bench is None or not bench.view_samples:
        return []
    read = load_object(bench.view_samples)
    return once(("views", task, str(Path(path).resolve())), results_file, lambda: list(read(path, results_file, task)))


def export_formats() -> dict[str, Benchmark]:
    """Every export format, in registry order, with the benchmark offering it."""
    return {fmt: b for b in all_benchmarks() for fmt in b.exports}


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
