"""lmms-eval hooks for MME-Emotion: thin adapters from a row to the host and back.

- `process_docs` reads and checks the settings (`MMESettings.from_env`: a bad value stops the run here, before
  inference), loads and validates the task's rows (the YAML's `dataset_name` says which task and source), and
  registers both for the aggregation.
- `doc_to_visual` / `doc_to_text` / `doc_to_messages` build the model's input.
- `process_results` only records the answer (cheap, thread-safe: lmms-eval calls it from 4 threads).
- `evaluate` (behind every `agg_<metric>`, see utils.py) runs the judge once per task (rank 0) through `judges/`,
  memoised on (settings, records) so that the eight metrics share one judge phase, then scores with the pure
  `scoring` module and writes the per-sample judge log.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from emo_tasks.common import LastResult, placeholder_name
from emo_tasks.settings import CommonSettings, environ
from judges.atomic import atomic_write_text

from . import scoring
from .data import DataError, benchmark_root, check_videos_exist, load_task_docs, probe_video
from .judge import Judgement, judge_samples
from .protocol import model_prompt, prompt_hashes, spec_for
from .remux import model_ready_path
from .sample import sample_root
from .scoring import TABLE, SampleResult
from .settings import MMESettings


# ------------------------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class LoadedTask:
    """One task as `process_docs` loaded it: the settings it was checked with and its docs by row."""

    settings: MMESettings
    docs: Mapping[int, dict[str, Any]]


class TaskRegistry:
    """(source, task key) -> LoadedTask.  process_docs runs on every rank before inference, so the aggregation
    (rank 0) finds the settings and the full rows here, and `process_results` records stay small in lmms-eval's
    sample logs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, str], LoadedTask] = {}

    def register(self, source: str, key: str, settings: MMESettings, docs: Sequence[dict[str, Any]]) -> None:
        with self._lock:
            self._tasks[(source, key)] = LoadedTask(settings, {int(d["row"]): d for d in docs})

    def find(self, source: str, key: str) -> LoadedTask | None:
        with self._lock:
            return self._tasks.get((source, key))

    def get(self, source: str, key: str) -> LoadedTask:
        loaded = self.find(source, key)
        if loaded is None:
            raise KeyError(
                f"MME-Emotion task {(source, key)} was not loaded in this process (process_docs did not run?)"
            )
        return loaded


registry = TaskRegistry()


def parse_source(name: str) -> tuple[str, str]:
    """`dataset_name: mme_emotion/<source>/<Task>` -> (source, task key)."""
    parts = str(name).split("/")
    if len(parts) != 3 or parts[0] != "mme_emotion" or parts[1] not in ("benchmark", "sample"):
        raise DataError(f"dataset_name must be mme_emotion/<benchmark|sample>/<Task>, got {name!r}")
    spec_for(parts[2])
    return parts[1], parts[2]


def process_docs(dataset: Any) -> Any:
    """Check the settings, then replace lmms-eval's placeholder row with the task's validated rows (see
    `emo_tasks/lmms_patch.py`)."""
    import datasets

    source, key = parse_source(placeholder_name(dataset, "MME-Emotion"))
    spec = spec_for(key)
    # fail fast, before inference: a malformed value, or no judge configured for a real run
    settings = MMESettings.from_env(environ(), source)
    if source == "sample":
        root = sample_root(settings.common.cache_dir)
    else:
        root = benchmark_root(settings.common.data_root, settings.hub_id)
    docs = load_task_docs(spec, root, source=source, need_clues=settings.audio_clues != "live")
    check_videos_exist(docs, spec.task)
    registry.register(source, spec.key, settings, docs)
    return datasets.Dataset.from_list(docs)


def _record_key(record: Mapping[str, Any]) -> tuple[str, str]:
    return record.get("data_source", "benchmark"), record["mme_task"]


def lookup_doc(record: dict[str, Any]) -> dict[str, Any]:
    """The full doc behind a `process_results` record (registered by process_docs in this process)."""
    loaded = registry.get(*_record_key(record))
    doc = loaded.docs.get(int(record["row"]))
    if doc is None:
        key = (*_record_key(record), int(record["row"]))
        raise KeyError(f"MME-Emotion doc {key} was not loaded in this process (process_docs did not run?)")
    return doc


# --------------------------------------------------------------------------------------------- model input
def _common(doc: Mapping[str, Any]) -> CommonSettings:
    """The settings of the doc's task (process_docs registered them); read afresh for a doc from elsewhere."""
    loaded = registry.find(doc.get("data_source", "benchmark"), doc.get("mme_task", ""))
    return loaded.settings.common if loaded is not None else CommonSettings.from_env(environ())


def doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """`[video_path]`: what lmms-eval's video models (and omni models reading the audio track) take.

    The file is probed (opened, one frame decoded) first, so a corrupt video fails here naming the file.  Containers
    that some model classes do not take as video (.mkv, .webm, ...) are handed over as a cached .mp4 remux
    (see remux.py)."""
    probe_video(doc["video_path"])
    common = _common(doc)
    return [model_ready_path(doc["video_path"], common.cache_dir, common.video_remux)]


def _kwargs(lmms_eval_specific_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    return dict(lmms_eval_specific_kwargs or {})


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The closed-set prompt. kwargs: `medium` (video | audio | video frames), `prompt` (a replacement
    template), `pre_prompt` / `post_prompt` (text around it)."""
    kw = _kwargs(lmms_eval_specific_kwargs)
    text = model_prompt(spec_for(doc["mme_task"]), doc["label_set"], kw.get("medium") or "video", kw.get("prompt"))
    return f"{kw.get('pre_prompt', '')}{text}{kw.get('post_prompt', '')}"


def doc_to_messages(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """Chat models: one user turn, the video first, then the prompt (audio-only models get the same file as
    audio)."""
    kw = _kwargs(lmms_eval_specific_kwargs)
    media_type = "audio" if kw.get("medium") == "audio" else "video"
    video = doc_to_visual(doc)[0]
    return [
        {
            "role": "user",
            "content": [{"type": media_type, "url": video}, {"type": "text", "text": doc_to_text(doc, kw)}],
        }
    ]


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Record the answer with what the judge will need; no network, no shared state."""
    answer = results[0] if results else ""
    if not isinstance(answer, str):
        answer = "" if answer is None else str(answer)
    record = {
        "mme_task": doc["mme_task"],
        "row": int(doc["row"]),
        "video_id": doc["video_id"],
        "label": doc["label"],
        "data_source": doc.get("data_source", "benchmark"),
        "answer": answer,
    }
    return {metric: record for metric in TABLE.names}


# ------------------------------------------------------------------------------------------------ aggregation
@dataclass
class TaskResult:
    """One judge-and-score pass over a task's records."""

    metrics: dict[str, Any]
    samples: list[SampleResult] = field(default_factory=list)
    judgements: list[Judgement | None] = field(default_factory=list)
    summary: dict[str, Any] | None = None


_memo = LastResult()  # the eight metric aggregations of a task share one judge phase


def settings_for(records: Sequence[Mapping[str, Any]]) -> MMESettings:
    """The settings process_docs checked for the records' task (the first task's, should records mix tasks)."""
    source, key = min({_record_key(r) for r in records})
    return registry.get(source, key).settings


def evaluate(items: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """Every metric of one task's records: judged and scored once, memoised on (settings, records' content)."""
    return evaluate_task(items, args).metrics


def evaluate_task(items: Sequence[dict[str, Any]], args: Any = None) -> TaskResult:
    """`evaluate` with the per-sample results, judgements and the summary."""
    if not items:
        return TaskResult(dict.fromkeys(TABLE.names))
    settings = settings_for(items)
    key = (settings, tuple((r["mme_task"], r["row"], r["video_id"], r["answer"]) for r in items))
    return _memo.get(key, lambda: _evaluate(list(items), settings, args))


def _evaluate(records: list[dict[str, Any]], settings: MMESettings, args: Any) -> TaskResult:
    started = time.perf_counter()
    items = [{**lookup_doc(r), **r} for r in records]
    tasks = sorted({r["mme_task"] for r in items})
    source = items[0].get("data_source", "benchmark")
    mode = settings.judge_mode
    label = ",".join(spec_for(t).task for t in tasks) + (" [sample]" if source == "sample" else "")
    judgements: list[Judgement | None]
    if mode == "offline":
        logger.warning(
            f"{label}: EMO_JUDGE=offline (or no judge configured for the sample): recognition by label matching, "
            "reasoning not available. Not comparable with the paper."
        )
        judgements = [None] * len(items)
    else:
        judgements = list(judge_samples(items, settings, desc=label))
    samples = [
        scoring.score_sample(spec_for(item["mme_task"]), item, j) for item, j in zip(items, judgements, strict=True)
    ]
    from emo_tasks.tokens import TokenizerUnavailable, count_tokens

    try:
        token_counts: list[int] | None = count_tokens(r["answer"] for r in items)
    except TokenizerUnavailable as exc:
        logger.warning(f"{label}: avg_token not available: {exc}")
        token_counts = None
    metrics = scoring.task_metrics(samples, settings, token_counts)
    failures = scoring.failure_counts((j.failed_stage, j.failure_reason) for j in judgements if j and not j.ok)
    api = mode == "api"
    summary = {
        "benchmark": "MME-Emotion",
        "tasks": [spec_for(t).task for t in tasks],
        "data_source": source,
        "judge_mode": mode,
        "judge_protocol": settings.judge_protocol if api else None,
        "audio_clues": settings.audio_clues if api else None,
        "judge_models": settings.judge_models if api else None,
        "alpha": settings.alpha,
        "prompt_hashes": prompt_hashes(),
        "n_samples": len(items),
        "metrics": {k: (None if v is None else (int(v) if isinstance(v, scoring.Count) else float(v)))
                    for k, v in metrics.items()},
        "judge_failures": failures,
        "per_category": scoring.category_breakdown(samples, settings),
        "seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip
    _report(label, summary)
    rows = [log_row(item, j, s) for item, j, s in zip(items, judgements, samples, strict=True)]
    _write_logs(args, tasks, source, summary, rows)
    return TaskResult(metrics, samples, judgements, summary)


def log_row(item: Mapping[str, Any], judgement: Judgement | None, result: SampleResult) -> dict[str, Any]:
    """One line of the per-sample judge log (the fields `results.read_samples` and readers of the log use)."""
    j = judgement
    return {
        "task": item["mme_task"],
        "row": int(item["row"]),
        "video_id": item["video_id"],
        "label": item["label"],
        "answer": item["answer"],
        "status": result.status,
        "failed_stage": j.failed_stage if j else None,
        "failure_reason": j.failure_reason if j else None,
        "failure_detail": j.failure_detail if j else None,
        "audio_clue": j.audio_clue if j else item.get("audio_clue"),
        "step_text": j.step_text if j else None,
        "steps": list(j.steps) if j else [],
        "judge_text": j.judge_text if j else None,
        "ratings": [[n, d] for n, d in j.ratings] if j else [],
        "recognition": result.recognition,
        "reasoning": result.reasoning,
        "n_steps": result.n_steps,
        "strict_recognition": result.strict_recognition,
        "predicted_labels": list(result.predicted_labels),
        "cached": dict(j.cached) if j else {},
    }


def _report(label: str, summary: dict[str, Any]) -> None:
    m = summary["metrics"]

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    logger.info(
        f"{label}: Rec-S {f(m['rec_s'])}, Rea-S {f(m['rea_s'])}, CoT-S {f(m['cot_s'])}, Avg Step {f(m['avg_step'])}, "
        f"scored {m['n_scored']}/{summary['n_samples']}, judge failures {m['n_judge_failed']} "
        f"{summary['judge_failures'] or ''} (judge: {summary['judge_mode']})"
    )


def _write_logs(
    args: Any, tasks: list[str], source: str, summary: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> None:
    """With --output_path: `<output_path>/emo_tasks_judge/<task>_<time>_judge.jsonl` (one line per sample: answer,
    steps, ratings, raw judge text, failure reason) and `..._summary.json`."""
    output_path = getattr(args, "output_path", None) if args is not None else None
    if not output_path:
        return
    from judges.audit import write_audit_jsonl

    folder = Path(output_path) / "emo_tasks_judge"
    name = ("sample_" if source == "sample" else "") + "+".join(spec_for(t).task for t in tasks)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    write_audit_jsonl(folder / f"{name}_{stamp}_judge.jsonl", rows)
    atomic_write_text(folder / f"{name}_{stamp}_summary.json", json.dumps(summary, indent=2, ensure_ascii=False))
