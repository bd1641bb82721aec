"""What `emo-tasks view` shows, as JSON-ready data: the overview (the report's tables, CIs and notes, one row per
run) and, per task of each run, its samples as the benchmark's `view_samples` gives them.

Why separate from the files: this is the one place that decides what the pages hold, and it knows no benchmark.
The numbers are the report's own (`report.build_tables`, `report.run_notes`), so the site and `emo-tasks report`
never disagree; what is benchmark-specific comes from the registry (`Benchmark.table`, `titles`, `plot_ylabel`,
`view_samples`) and, optionally, from the view module's `FIELD_DOCS` ({field: one-line explanation} for its
`details` keys and for gold, verdict, answers, prompt, media).  The page finds categories and numeric filters in
the samples themselves: a `details` field of short strings shared by several samples is a category, one of numbers
a filter.

Sample addresses: `#<task>/<key>` where key is the lmms-eval doc id (else the sample's unit without its task),
stable across runs of the same data.  A task's samples are split into chunk files by a hash of the key (FNV-1a,
the same in `assets/app.js`), so a sample's page loads one chunk and a task's page loads its task only.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark, SampleView, all_benchmarks, load_object
from emo_tasks.gate.flips import changes, compared_metrics, headline_metrics, titles
from emo_tasks.metrics import Metric
from emo_tasks.results.judge_shutdown import describe as shutdown_words
from emo_tasks.results.judge_shutdown import run_shutdowns
from emo_tasks.results.layout import MARKER
from emo_tasks.results.reader import Run, describe
from emo_tasks.results.report import Cell, Table, run_notes, run_task, task_for_column

SAMPLES_PER_CHUNK = 500
#: A category: a string field with at most this many distinct values, each at most this long.
MAX_CATEGORIES, MAX_CATEGORY_CHARS = 30, 40
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def run_id(index: int) -> str:
    return f"r{index + 1}"


def chunk_of(key: str, n_chunks: int) -> int:
    """The chunk file holding a sample: FNV-1a (32 bit) of its key modulo the task's chunk count."""
    h = 0x811C9DC5
    for ch in key:
        h = ((h ^ ord(ch)) * 0x01000193) & 0xFFFFFFFF
    return h % max(1, n_chunks)


def safe_name(text: str) -> str:
    """`text` usable in a file name and a URL fragment unescaped (a task name already is)."""
    return _UNSAFE.sub("-", str(text)).strip("-") or "_"


def sample_keys(views: Sequence[SampleView]) -> list[str]:
    """Each sample's address in its task: the doc id, else its unit without the task name ("u" + parts); a repeated
    key gets "~2", "~3", ..."""
    keys, seen = [], Counter()
    for v in views:
        if v.doc_id is not None:
            key = safe_name(v.doc_id)
        else:
            parts = v.unit if isinstance(v.unit, list | tuple) else (v.unit,)
            key = "u" + safe_name("-".join(str(p) for p in parts if p != v.task))
        seen[key] += 1
        keys.append(key if seen[key] == 1 else f"{key}~{seen[key]}")
    return keys


# ------------------------------------------------------------------------------------------------ samples
@dataclass
class TaskSamples:
    """One task of one run: its benchmark, its samples (leaf tasks) or its leaves (groups), and the page's meta."""

    id: str  # "r1/<task>"
    run: str
    task: str
    bench: Benchmark
    records: list[dict[str, Any]] = field(default_factory=list)
    group: bool = False
    leaves: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        return f"data/{self.run}/{safe_name(self.task)}"

    def chunks(self) -> list[list[dict[str, Any]]]:
        """The records in their chunk files (see `chunk_of`), each chunk in sample order."""
        n = max(1, -(-len(self.records) // SAMPLES_PER_CHUNK))
        out: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        for rec in self.records:
            out[chunk_of(rec["key"], n)].append(rec)
        return out


def media_entries(
    view: SampleView, run_dir: Path, thumbs: Mapping[Path, str | None], image_file: Any, allowed: Any = None
) -> list:
    """The media of a sample as the page shows it: {"thumb": "media/<sha>.jpg", "text": entry} for an image with a
    thumbnail, {"text": entry, "outside": True} for an image file outside the run and the data (`allowed`, a
    `media.Allowed`: not placed), {"text": entry} for anything else."""
    out = []
    for entry in view.media:
        path = image_file(entry, run_dir)
        if path is not None and allowed is not None and not allowed(path):
            out.append({"text": str(entry), "outside": True})
            continue
        name = thumbs.get(path) if path is not None else None
        out.append({"thumb": f"media/{name}", "text": str(entry)} if name else {"text": str(entry)})
    return out


def media_roots(bench: Benchmark, env: Mapping[str, str]) -> list[Path]:
    """The folders a benchmark's media may come from besides the run folder: its view module's optional
    `media_roots(env)` (the bundled sample, the data folder, the Hub cache's copy); none without one."""
    if not bench.view_samples:
        return []
    roots = getattr(sys.modules[load_object(bench.view_samples).__module__], "media_roots", None)
    return list(roots(env)) if roots is not None else []


def records(views: Sequence[SampleView], media: Sequence[list[dict[str, str]]]) -> list[dict[str, Any]]:
    """One JSON-ready record per sample, in the view's order, each naming its neighbours (prev/next keys)."""
    keys = sample_keys(views)
    out = []
    for i, (v, key, med) in enumerate(zip(views, keys, media, strict=True)):
        out.append({
            "key": key, "index": i, "task": v.task, "doc_id": v.doc_id, "unit": v.unit, "gold": v.gold,
            "verdict": v.verdict, "predicted": v.predicted, "values": dict(v.values), "answers": list(v.answers),
            "prompt": v.prompt, "media": med, "details": dict(v.details),
            "prev": keys[i - 1] if i else None, "next": keys[i + 1] if i + 1 < len(keys) else None,
        })  # fmt: skip
    return out


def _fields(recs: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(category fields, numeric fields) of the samples: "gold" or "details.<name>" (details first).  A category
    holds short strings in at least half the samples, 2 to MAX_CATEGORIES distinct; a numeric field numbers in at
    least half, 2 or more distinct."""
    names = list(dict.fromkeys(k for r in recs for k in r["details"]))
    cats, nums = [], []
    for f in [f"details.{k}" for k in names] + ["gold"]:
        vals = [_get(r, f) for r in recs]
        present = [v for v in vals if v is not None]
        if not recs or len(present) * 2 < len(recs):
            continue
        if all(isinstance(v, str) and len(v) <= MAX_CATEGORY_CHARS for v in present):
            if 2 <= len(set(present)) <= MAX_CATEGORIES:
                cats.append(f)
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in present) and len(set(present)) > 1:
            nums.append(f)
    return cats, nums


def confusion_labels(recs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The labels of a task's confusion matrix (gold vs predicted), sorted; [] when no sample carries both."""
    pairs = [(r["gold"], r.get("predicted")) for r in recs if r["gold"] is not None and r.get("predicted") is not None]
    return sorted({str(x) for pair in pairs for x in pair}) if pairs else []


def confusion(recs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """{(gold, predicted): count} over the samples that carry both (what the page's heat map draws)."""
    out: Counter = Counter()
    for r in recs:
        if r["gold"] is not None and r.get("predicted") is not None:
            out[(str(r["gold"]), str(r["predicted"]))] += 1
    return dict(out)


def rating_fields(recs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The `details` fields holding a list of dicts with a numeric "value" (e.g. steps with their ratings): the page
    draws how the values spread."""
    names = []
    for name in dict.fromkeys(k for r in recs for k in r["details"]):
        lists = [r["details"].get(name) for r in recs]
        items = [x for v in lists if isinstance(v, list) for x in v]
        if items and all(isinstance(x, dict) for x in items) and any(_number(x.get("value")) for x in items):
            names.append(f"details.{name}")
    return names


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _get(rec: Mapping[str, Any], name: str) -> Any:
    if name.startswith("details."):
        return rec["details"].get(name.split(".", 1)[1])
    return rec.get(name)


def value_columns(bench: Benchmark, recs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The per-sample values a task's table shows (`flips.headline_metrics` of those the samples carry)."""
    return headline_metrics(bench, {m for r in recs for m in r["values"]})


def task_meta(ts: TaskSamples, recs: Sequence[Mapping[str, Any]], notes: Sequence[str]) -> dict[str, Any]:
    """What the overview says of a task's page: title, counts, columns, filters and the run's notes on it."""
    cats, nums = _fields(recs)
    if ts.group:  # a group's page: scores per task first
        cats.insert(0, "task")
    verdicts = Counter(r["verdict"] for r in recs if r["verdict"] is not None)
    short = ts.bench.titles.get(ts.task, ts.task)
    words = re.compile(rf"(?<![\w-]){re.escape(ts.task)}(?![\w-])")
    return {
        "id": ts.id, "run": ts.run, "task": ts.task, "benchmark": ts.bench.key, "short": short,
        "title": f"{ts.bench.title} — {short}" + (f" ({ts.task})" if short != ts.task else ""),
        "group": ts.group, "leaves": ts.leaves, "n_samples": len(recs),
        "n_chunks": 0 if ts.group else len(ts.chunks()), "folder": ts.folder,
        "columns": value_columns(ts.bench, recs), "categories": cats, "numbers": nums,
        "confusion_labels": confusion_labels(recs), "ratings": rating_fields(recs),
        "verdicts": dict(sorted(verdicts.items(), key=lambda kv: -kv[1])),
        "notes": [n for n in notes if words.search(n)],
    }  # fmt: skip


# ------------------------------------------------------------------------------------------------ overview
def metric_info(bench: Benchmark) -> list[dict[str, Any]]:
    """Every metric of the benchmark's table as the page explains it (the doc is the metric table's)."""
    return [
        {"name": m.name, "title": m.display, "doc": m.doc, "higher_is_better": m.higher_is_better,
         "digits": m.digits, "unit": bench.plot_ylabel if m.plot else None}
        for m in bench.table
    ]  # fmt: skip


def field_docs(bench: Benchmark) -> dict[str, str]:
    """The view module's optional `FIELD_DOCS`: {field: one-line explanation}."""
    if not bench.view_samples:
        return {}
    docs = getattr(sys.modules[load_object(bench.view_samples).__module__], "FIELD_DOCS", None) or {}
    return {str(k): str(v) for k, v in dict(docs).items()}


def _cell(c: Cell, metric: Metric, task: str | None, run: str) -> dict[str, Any]:
    d = metric.digits
    return {
        "run": run, "task": task, "value": c.value, "n": c.n, "ci_low": c.ci_low, "ci_high": c.ci_high,
        "text": "n/a" if c.value is None else f"{c.value:.{d}f}",
        "ci": f"[{c.ci_low:.{d}f}, {c.ci_high:.{d}f}]" if c.ci_low is not None and c.ci_high is not None else None,
        "judged": f"{c.judged[0]} scored, {c.judged[1] or 0} failed" if c.judged and c.judged[0] is not None else None,
    }  # fmt: skip


def table_data(bench: Benchmark, table: Table, runs: Sequence[Run]) -> dict[str, Any]:
    """A report table with each cell's task (the page links the number to that task's samples)."""
    rows = []
    for i, (run, (label, cells)) in enumerate(zip(runs, table.rows, strict=True)):
        out = []
        for col, c, m in zip(table.columns, cells, table.metrics, strict=True):
            task = task_for_column(bench, run, col) if bench.groups else run_task(bench, run)
            out.append(_cell(c, m, task, run_id(i)))
        rows.append({"run": run_id(i), "label": label, "cells": out})
    grouped = bool(bench.groups)
    return {
        "title": table.title, "metric": table.metrics[0].name if grouped and table.metrics else None,
        "columns": list(table.columns) if grouped else [m.display for m in table.metrics],
        "column_metrics": [m.name for m in table.metrics], "rows": rows,
    }  # fmt: skip


def chart_data(bench: Benchmark, tables: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The leaderboard chart (the report's plot): per plotted metric, each run's benchmark-level cell (a
    benchmark with groups: its "Overall" column)."""
    plotted = {m.name: m for m in bench.table if m.plot}
    bars = []
    for t in tables:
        for j, name in enumerate(t["column_metrics"]):
            if name not in plotted or (bench.groups and t["columns"][j] != "Overall"):
                continue
            cells = [row["cells"][j] | {"label": row["label"]} for row in t["rows"]]
            bars.append({"metric": name, "title": plotted[name].display, "cells": cells})
    return bars


def benchmark_data(bench: Benchmark, tables: Sequence[Table], runs: Sequence[Run], tasks: Sequence[str]) -> dict:
    shown = [table_data(bench, t, runs) for t in tables if t.benchmark == bench.key]
    return {
        "key": bench.key, "title": bench.title, "unit": bench.plot_ylabel, "grouped": bool(bench.groups),
        "metrics": metric_info(bench), "field_docs": field_docs(bench), "tables": shown,
        "chart": chart_data(bench, shown), "tasks": list(tasks),
    }  # fmt: skip


def run_data(i: int, run: Run) -> dict[str, Any]:
    return {
        "id": run_id(i), "label": run.label, "model": run.model, "model_args": run.model_args,
        "results_file": str(run.results_file), "date": run.data.get("date"), "describe": describe(run),
        "notes": run_notes(run),
        # the judge endpoint's announced shutdown of each judge model, where it gave one (results/judge_shutdown)
        "judge_shutdown": shutdown_words(run_shutdowns(run)),
    }  # fmt: skip


def site_tasks(runs: Sequence[Run]) -> list[TaskSamples]:
    """Every task of every run that a registered benchmark owns, in registry order, each benchmark's groups first;
    a group lists its leaves that the run has."""
    out = []
    for i, run in enumerate(runs):
        for bench in all_benchmarks():
            for task in (*bench.groups, *bench.tasks):
                if task not in run.results:
                    continue
                ts = TaskSamples(id=f"{run_id(i)}/{task}", run=run_id(i), task=task, bench=bench)
                if task in bench.groups:  # its leaves in the benchmark's order (the paper's); a results file
                    subtasks = set(run.subtasks(task)) or set(bench.tasks)  # without group_subtasks: all the run has
                    ts.group = True
                    ts.leaves = [f"{run_id(i)}/{t}" for t in bench.tasks if t in subtasks and t in run.results]
                out.append(ts)
    return out


# ------------------------------------------------------------------------------------------------ comparisons
#: A comparison page lists at most this many changed samples per task (flips first).
MAX_CHANGES = 200
#: Text details longer than this are cut on a comparison page (the sample's own page has them whole).
MAX_TEXT = 4000


def judged_source(run: Run) -> str | None:
    """The lmms-eval results a judged results file was made from (`emo-tasks judge` records it), else None."""
    block = run.data.get(MARKER)
    return str(block.get("source_results") or "") or None if isinstance(block, dict) else None


def _side(rec: Mapping[str, Any]) -> dict[str, Any]:
    """What a comparison page shows of one side: verdict, values, answers and the text details (judge texts)."""
    texts = {k: v[:MAX_TEXT] for k, v in rec["details"].items() if isinstance(v, str) and v}
    return {"key": rec["key"], "gold": rec["gold"], "predicted": rec["predicted"], "verdict": rec["verdict"],
            "values": rec["values"], "answers": rec["answers"], "texts": texts}  # fmt: skip


def comparison(a: str, b: str, tasks: Sequence[TaskSamples], judges: bool) -> dict[str, Any]:
    """The comparison page of runs `a` and `b` (ids): per leaf task both have, its changed samples (`flips.changes`;
    `judges`: two judges of the same answers, every difference, largest first)."""
    by = {ts.id: ts for ts in tasks if not ts.group}
    out = []
    for ts in tasks:
        other = by.get(f"{b}/{ts.task}")
        if ts.run != a or ts.group or other is None:
            continue
        metrics = compared_metrics(ts.bench, {m for r in ts.records for m in r["values"]})
        found = changes(ts.records, other.records, metrics, judges=judges, titles=titles(ts.bench))
        recs_a, recs_b = {r["key"]: r for r in ts.records}, {r["key"]: r for r in other.records}
        rows = [c | {"sa": _side(recs_a[c["a"]]), "sb": _side(recs_b[c["b"]])} for c in found[:MAX_CHANGES]]
        out.append({"task": ts.task, "title": ts.meta.get("title", ts.task), "metrics": metrics,
                    "n_paired": len({r["key"] for r in ts.records} & set(recs_b)),
                    "n_flips": sum(c["flip"] for c in found), "n_changed": len(found), "rows": rows})  # fmt: skip
    return {"a": a, "b": b, "judges": judges, "tasks": out}
