"""EmoBench-M's judge log: which judge rated which SMILE answer how, written where MME-Emotion writes its own.

Why: the per-answer ratings in the sample records make the numbers and their confidence intervals, but not
which judge gave them; `emo-tasks agreement` and `emo-tasks calibrate` compare two judges of the same answers and
must prove both (`emo_tasks/emobench_m/agreement.py` reads these files).  Written by the aggregation (`hooks`)
whenever the scorer ran and an output folder is known: in process in lmms-eval (`--output_path`) and in
`emo-tasks judge` (sync and --batch: the judged folder).  Nothing here makes a number.

    <output_path>/emo_tasks_judge/[sample_]emobench_m_<scenario>_<stamp>_judge.jsonl   one row per answer
    <output_path>/emo_tasks_judge/[sample_]emobench_m_<scenario>_<stamp>_summary.json  the judge setup

A row: `task` (the lmms-eval task), `scenario`, `row_id` (the data's id), `video`, `answer`, `gold`, `status`
(`scored`: both dimensions rated; `judge_failed`: a rating failed after retries, counted 0; `empty_answer`: not
asked, rated 0 as the authors do), `ratings` ({dimension: the rating read, null when it failed or was not asked}),
`llm_logical` / `llm_multimodal` / `llm_total` (what the aggregation counted, a failure 0), `failed`, `errors`,
`judge_texts` and `cached` (per dimension).  The summary: benchmark, tasks, data source, judge mode, judge models
per role ({"judge": model}), judge protocol, sampling, fingerprint, endpoint, the models the API reported,
usage, the metrics, the failures, and the shutdown the endpoint announced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import file_stamp
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX, summary_file
from judges import get_engine
from judges.atomic import atomic_write_text

from . import scoring
from .judge import DIMENSIONS, PROTOCOL, Rated, judge_fingerprint
from .protocol import scenario
from .settings import EmoBenchMSettings

BENCHMARK = "EmoBench-M"
SCORED, FAILED, EMPTY = "scored", "judge_failed", "empty_answer"
#: The `usage` fields of the summary, from the scorer's `BatchStats` (MME-Emotion's per agent).
USAGE_FIELDS = ("requests", "unique_requests", "cache_hits", "calls", "prompt_tokens", "completion_tokens")


def task_of(record: Mapping[str, Any]) -> str:
    """The lmms-eval task a record belongs to (`emobench_m[_sample]_<scenario>`)."""
    sc = scenario(str(record["scenario"]))
    return sc.sample_task if record.get("data_source") == "sample" else sc.task


def log_name(records: Sequence[Mapping[str, Any]]) -> str:
    """The judge log's name before its stamp, as MME-Emotion names its own: `[sample_]emobench_m_<scenario>` (the
    scenarios joined by "+" should one aggregation hold several)."""
    source = records[0].get("data_source", "benchmark") if records else "benchmark"
    keys = sorted({str(r["scenario"]) for r in records})
    return ("sample_" if source == "sample" else "") + "+".join(scenario(k).task for k in keys)


def log_row(record: Mapping[str, Any], rated: Mapping[str, Any]) -> dict[str, Any]:
    """One answer's line of the judge log."""
    status = EMPTY if not rated["asked"] else FAILED if rated["failed"] else SCORED
    return {
        "task": task_of(record),
        "scenario": record["scenario"],
        "row_id": str(record["row_id"]),
        "video": record["video"],
        "answer": record["answer"],
        "gold": record["gold"],
        "status": status,
        "ratings": {dim: rated["ratings"].get(dim) for dim in DIMENSIONS},
        "llm_logical": rated["logical"],
        "llm_multimodal": rated["multimodal"],
        "llm_total": rated["logical"] + rated["multimodal"],
        "failed": rated["failed"],
        "errors": list(rated["errors"]),
        "judge_texts": dict(rated["judge_texts"]),
        "cached": dict(rated["cached"]),
    }


def summary(
    items: Sequence[Mapping[str, Any]], rated: Rated, settings: EmoBenchMSettings, metrics: Mapping[str, Any],
    seconds: float,
) -> dict[str, Any]:  # fmt: skip
    """The judge setup and accounting of one task's scoring (the keys `calibrate`'s judge identity reads:
    judge_models, judge_protocol, judge_fingerprint)."""
    from judges.fingerprint import shutdown_dates
    from judges.shutdown import record as shutdown_record

    assert settings.engine is not None
    engine = get_engine(settings.engine)
    failures: dict[str, int] = {}
    for r in rated.rows:
        for error in r["errors"]:
            reason = error.split(": ", 1)[-1]
            failures[reason] = failures.get(reason, 0) + 1
    out: dict[str, Any] = {
        "benchmark": BENCHMARK,
        "tasks": sorted({task_of(r) for r in items}),
        "data_source": items[0].get("data_source", "benchmark") if items else None,
        "judge_mode": settings.judge_mode,
        "judge_protocol": PROTOCOL,
        "judge_models": {"judge": settings.judge_model},
        "judge_sampling": dict(settings.judge_sampling),
        # the judge setup's, as the judge ran (the judge stage's folder name hashes the same one)
        "judge_fingerprint": judge_fingerprint(settings, engine.served()),
        "n_samples": len(items),
        "n_asked": sum(1 for r in rated.rows if r["asked"]),
        "metrics": {k: (None if v is None else (int(v) if isinstance(v, scoring.Count) else float(v)))
                    for k, v in metrics.items() if k.startswith("llm_") or k == "n_judge_failed"},  # fmt: skip
        "judge_failures": dict(sorted(failures.items())),
        "seconds": round(seconds, 3),
        "judge_endpoint": settings.engine.endpoint.host,
        "judge_shutdown": shutdown_record([("judge", settings.judge_model)],
                                          shutdown_dates(engine.endpoint, [settings.judge_model], ask=False)),
    }  # fmt: skip
    stats = rated.stats
    if stats is not None:
        out["api_models"] = {"judge": dict(sorted(stats.api_models.items()))}
        out["usage"] = {"judge": {f: getattr(stats, f) for f in USAGE_FIELDS}}
        out["answer_endpoints"] = {"judge": dict(sorted(stats.endpoints.items()))}
    return out


def write_judge_log(
    output_path: Path, items: Sequence[Mapping[str, Any]], rated: Rated, settings: EmoBenchMSettings,
    metrics: Mapping[str, Any], seconds: float,
) -> Path:  # fmt: skip
    """`<output_path>/emo_tasks_judge/<log_name>_<stamp>_judge.jsonl` and its `_summary.json`, one pair per task
    (the records of one aggregation are one task's); the log's path."""
    from judges.audit import json_text, write_audit_jsonl

    log = Path(output_path) / JUDGE_DIR / f"{log_name(items)}_{file_stamp('%Y%m%dT%H%M%S')}{JUDGE_LOG_SUFFIX}"
    write_audit_jsonl(log, [log_row(r, x) for r, x in zip(items, rated.rows, strict=True)])  # keys redacted
    atomic_write_text(summary_file(log), json_text(summary(items, rated, settings, metrics, seconds), indent=2))
    return log
