"""EmoBench-M as the generic tools (report, compare, export, view) see it: its metric table, task and group names,
and its per-sample values read back from a run.

Per-sample unit: a sample (key: row id), rebuilt from the `process_results` record lmms-eval logs with
`--log_samples` (`<date>_samples_<task>.jsonl`); its values are the metric table's per-sample functions (accuracy =
100 * right over kept samples, coverage = 100 * an answer naming a label, bleu / rouge_l / bert_score x 100).  A
group (`emobench_m` / `emobench_m_sample`) pools its scenarios' samples.
"""

from __future__ import annotations

from typing import Any

from emo_tasks.benchmarks import Benchmark
from emo_tasks.common import DataError
from emo_tasks.datafiles import sample_log_reader

from . import scoring
from .hooks import sample_result
from .protocol import scenarios

GROUPS = ("emobench_m", "emobench_m_sample")
#: Leaf task -> the report's column title (the scenario's, for the benchmark and the sample).
TITLES = {**{s.task: s.title for s in scenarios().values()}, **{s.sample_task: s.title for s in scenarios().values()}}
MEMBERS = {"emobench_m": tuple(s.task for s in scenarios().values()),
           "emobench_m_sample": tuple(s.sample_task for s in scenarios().values())}  # fmt: skip


def sample_lines(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`<scenario>/<row id>` -> its line of a task's sample log (whose `accuracy` holds the record): the key
    carries the scenario, so a group pooling its scenarios' samples keeps them apart.  A row on two lines is a
    DataError naming it."""
    lines: dict[str, dict[str, Any]] = {}
    for line in rows:
        row_id = f"{line['accuracy']['scenario']}/{line['accuracy']['row_id']}"
        if row_id in lines:
            raise DataError(f"row id {row_id!r} is on two lines of the sample log; each row is logged once")
        lines[row_id] = line
    return lines


def sample_values(rows: list[dict[str, Any]]) -> dict[str, dict[Any, float]]:
    """{metric: {`<scenario>/<row id>`: value}} from a task's sample-log lines."""
    units = {row_id: sample_result(line["accuracy"]) for row_id, line in sample_lines(rows).items()}
    return scoring.TABLE.per_sample_values(units)


BENCHMARK = Benchmark(
    key="emobench_m",
    title="EmoBench-M",
    table=scoring.TABLE,
    tasks=tuple(TITLES),
    groups=GROUPS,
    read_samples=sample_log_reader(sample_values),
    titles=TITLES,
    plot_ylabel="accuracy (%)",
    hooks="emo_tasks.emobench_m.hooks",
    group_aggregate=scoring.group_aggregate,
    members=MEMBERS,
    exports={"emobench-m-official": "emo_tasks.emobench_m.export:export_emobench_m_official"},
    view_samples="emo_tasks.emobench_m.view:view_samples",
)
