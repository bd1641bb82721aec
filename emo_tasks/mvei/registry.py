"""MVEI as the generic tools (report, compare, export) see it: its metric table, its task names, and its
per-sample values read back from a run.

Per-sample unit: a pair (key: pair_id), rebuilt from the `process_results` record lmms-eval logs with
`--log_samples` (`<date>_samples_<task>.jsonl`); its values are the metric table's per-sample functions
(acc_total and acc_<its dimension> = 100*right, positive_ratio = 100*(final == correct), give_up_ratio =
100*(final == give_up)).
"""

from __future__ import annotations

from typing import Any

from emo_tasks.benchmarks import Benchmark
from emo_tasks.common import DataError
from emo_tasks.datafiles import sample_log_reader

from . import scoring
from .hooks import pair_result


def pair_lines(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """pair_id -> its line of a task's sample log, whose `acc_total` holds the pair's `process_results` record.  A
    pair on two lines is a DataError naming it: each row counts once, and no line silently wins over another."""
    lines: dict[str, dict[str, Any]] = {}
    for line in rows:
        pair_id = line["acc_total"]["pair_id"]
        if pair_id in lines:
            raise DataError(f"pair_id {pair_id!r} is on two lines of the sample log; each pair is logged once")
        lines[pair_id] = line
    return lines


def sample_values(rows: list[dict[str, Any]]) -> dict[str, dict[Any, float]]:
    """{metric: {pair_id: value}} from a task's sample-log lines (`pair_lines`)."""
    units = {pair_id: pair_result(line["acc_total"]) for pair_id, line in pair_lines(rows).items()}
    return scoring.TABLE.per_sample_values(units)


BENCHMARK = Benchmark(
    key="mvei",
    title="MVEI",
    table=scoring.TABLE,
    tasks=("mvei", "mvei_sample"),
    read_samples=sample_log_reader(sample_values),
    plot_ylabel="accuracy (%)",
    hooks="emo_tasks.mvei.hooks",
    exports={"mvei-official": "emo_tasks.mvei.export:export_mvei_official"},
    view_samples="emo_tasks.mvei.view:view_samples",
    vlmeval_datasets=("emo_tasks.mvei.vlmeval:dataset_class",),
)
