"""EmoBench-M as the generic tools (report, compare, export, view) see it: its metric table, task and group names,
and its per-sample values read back from a run.

Per-sample unit: a sample (key: row id), rebuilt from the `process_results` record lmms-eval logs with
`--log_samples` (`<date>_samples_<task>.jsonl`); its values are the metric table's per-sample functions (accuracy =
100 * right over kept samples, coverage = 100 * an answer naming a label, bleu / rouge_l / bert_score x 100).  A
group (`emobench_m` / `emobench_m_sample`) pools its scenarios' samples.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def judge_setup(env: Mapping[str, str], extra_judge: bool = False) -> dict[str, Any]:
    """The LLM scorer of SMILE's reasons, when one is configured: its model and fingerprint (for the judge stage's
    folder name and results); {} otherwise (the rule metrics need no judge)."""
    from .settings import EmoBenchMSettings

    settings = EmoBenchMSettings.from_env(env, "sample")  # the judge's values; the data are not needed here
    if settings.judge_mode != "api" or settings.engine is None:
        return {}
    from judges.fingerprint import served_models

    from .judge import judge_fingerprint

    listing = served_models(settings.engine.endpoint)
    return {"emobench_m_judge": settings.judge_model, "judge_fingerprint": judge_fingerprint(settings, listing)}


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
    judge_setup=judge_setup,
    judge_ratings="emo_tasks.emobench_m.agreement",
    vlmeval_datasets=("emo_tasks.emobench_m.vlmeval:dataset_class",),
)
