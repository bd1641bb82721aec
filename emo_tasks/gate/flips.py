"""Which samples changed between two runs of the same samples (two checkpoints, or two judges of one run's answers):
the one list `emo-tasks compare` prints when it exits 1 and `emo-tasks view`'s comparison pages show.

Why a module of its own: both the gate (cli) and the site need it, and the site may import the report, never the
other way round; this module imports only the registry's generic parts, so no import circle can form.  It knows no
benchmark: a sample is a mapping with `task`, `doc_id`, `unit`, `verdict` and `values` (a `SampleView` as a dict,
or a site record), and the values compared are the benchmark's headline per-sample metrics (`headline_metrics`).

A *flip*: the verdict goes from "correct" to anything else, or a headline per-sample value drops from above 0 to 0.
`changes` lists the flips first (largest drop first), then the other samples whose headline values dropped (largest
drop first); with `judges=True` (two judges of the same answers) it lists every pair that differs, largest absolute
difference first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark, benchmark_of, sample_views

CORRECT = "correct"


def headline_metrics(bench: Benchmark, carried: Iterable[str]) -> list[str]:
    """The per-sample values shown and compared: the headline metrics the report plots, else the headline ones,
    else the first three, of those the samples carry (in the metric table's order)."""
    carried = set(carried)
    metrics = [m for m in bench.table if m.name in carried]
    for pick in (lambda m: m.headline and m.plot, lambda m: m.headline):
        chosen = [m.name for m in metrics if pick(m)]
        if chosen:
            return chosen
    return [m.name for m in metrics[:3]]


def compared_metrics(bench: Benchmark, carried: Iterable[str]) -> list[str]:
    """The headline metrics a flip or drop is judged on: those where higher is better."""
    return [m for m in headline_metrics(bench, carried) if bench.table[m].higher_is_better]


def titles(bench: Benchmark) -> dict[str, str]:
    """{metric: its display name} of a benchmark's table."""
    return {m.name: m.display for m in bench.table}


def pair_key(sample: Mapping[str, Any]) -> tuple[str, str]:
    """How two runs' samples are paired: (task, doc id), else (task, unit)."""
    doc = sample.get("doc_id")
    return sample["task"], str(doc) if doc is not None else json.dumps(sample.get("unit"), default=str)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def change(
    a: Mapping[str, Any], b: Mapping[str, Any], metrics: Sequence[str], titles: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """How sample `a` (base, or judge A) became `b`: the flip, the largest drop, the largest absolute difference
    and one line saying what changed (metrics named by `titles` when given)."""
    what, drop, diff, flip = [], 0.0, 0.0, False
    va, vb = a.get("verdict"), b.get("verdict")
    if va != vb:
        what.append(f"verdict {va} → {vb}")
        flip = va == CORRECT
    for m in metrics:
        x, y = _num(a.get("values", {}).get(m)), _num(b.get("values", {}).get(m))
        if x is None and y is None or x == y:
            continue
        what.append(f"{(titles or {}).get(m, m)} {_fmt(x)} → {_fmt(y)}")
        if x is not None and y is not None:
            drop, diff = max(drop, x - y), max(diff, abs(x - y))
            flip = flip or (x > 0 and y == 0)
    return {"flip": flip, "drop": drop, "diff": diff, "what": "; ".join(what)}


def changes(
    base: Sequence[Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    judges: bool = False,
    titles: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The paired samples that changed, in the module docstring's order: each {"task", "doc_id", "a", "b" (the
    two samples' `key` when they have one), "flip", "drop", "diff", "what"}."""
    by_key = {pair_key(s): s for s in new}
    out = []
    for a in base:
        b = by_key.get(pair_key(a))
        if b is None:
            continue
        c = change(a, b, metrics, titles)
        if not c["what"] or (not judges and not c["flip"] and c["drop"] <= 0):
            continue
        out.append({"task": a["task"], "doc_id": a.get("doc_id"), "a": a.get("key"), "b": b.get("key"), **c})
    if judges:
        out.sort(key=lambda c: -c["diff"])
    else:
        out.sort(key=lambda c: (not c["flip"], -c["drop"]))
    return out


# ------------------------------------------------------------------------------------------------ for compare
def run_samples(path: Path, results_file: Path, task: str) -> list[dict[str, Any]]:
    """One leaf task's samples of a run as dicts (`benchmarks.sample_views`; [] without a viewer)."""
    return [asdict(v) for v in sample_views(path, results_file, task)]


def run_flips(base: Any, new: Any, tasks: Iterable[str]) -> list[dict[str, Any]]:
    """The flips (only) between two loaded runs (`reader.Run`) over leaf `tasks`, largest drop first."""
    out = []
    for task in tasks:
        bench = benchmark_of(task)
        a, b = run_samples(base.path, base.results_file, task), run_samples(new.path, new.results_file, task)
        if bench is None or not a or not b:
            continue
        metrics = compared_metrics(bench, {m for s in a for m in s["values"]})
        out += [c for c in changes(a, b, metrics, titles=titles(bench)) if c["flip"]]
    return sorted(out, key=lambda c: -c["drop"])
