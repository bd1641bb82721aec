"""lmms-eval hooks for MME-Emotion: thin adapters from a row to the host and back.

- `process_docs` loads and validates the task's rows (the YAML's `dataset_name` says which task and source).
- `doc_to_visual` / `doc_to_text` / `doc_to_messages` build the model's input.
- `process_results` only records the answer (cheap, thread-safe: lmms-eval calls it from 4 threads).
- The aggregation functions run the judge once per task (rank 0) through `judges/`, memoised so that the eight
  metrics share one judge phase, then score with the pure `scoring` module.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loguru import logger

from emo_tasks.common import LastResult, placeholder_name

from . import scoring
from .data import DataError, benchmark_root, check_videos_exist, load_task_docs, probe_video
from .judge import clue_mode, judge_mode, judge_outcomes, judge_protocol, offline_outcomes
from .protocol import model_prompt, prompt_hashes, spec_for
from .remux import model_ready_path

METRICS = ("rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step", "avg_token", "n_scored", "n_judge_failed")


# ------------------------------------------------------------------------------------------------------- docs
#: Every loaded doc by (source, task key, row): process_docs runs on every rank, so the aggregation (rank 0) can
#: look rows up here and `process_results` records stay small in lmms-eval's sample logs.
_docs_lock = threading.Lock()
_docs: dict[tuple[str, str, int], dict[str, Any]] = {}


def parse_source(name: str) -> tuple[str, str]:
    """`dataset_name: mme_emotion/<source>/<Task>` -> (source, task key)."""
    parts = str(name).split("/")
    if len(parts) != 3 or parts[0] != "mme_emotion" or parts[1] not in ("benchmark", "sample"):
        raise DataError(f"dataset_name must be mme_emotion/<benchmark|sample>/<Task>, got {name!r}")
    spec_for(parts[2])
    return parts[1], parts[2]


def process_docs(dataset: Any) -> Any:
    """Replace lmms-eval's placeholder row with the task's validated rows (see `emo_tasks/lmms_patch.py`)."""
    import datasets

    source, key = parse_source(placeholder_name(dataset, "MME-Emotion"))
    spec = spec_for(key)
    judge_mode(source)  # fail fast, before inference, when no judge is configured for a real run
    if source == "sample":
        from .sample import sample_root

        root = sample_root()
    else:
        root = benchmark_root()
    docs = load_task_docs(spec, root, source=source, need_clues=clue_mode() != "live")
    check_videos_exist(docs, spec.task)
    with _docs_lock:
        for doc in docs:
            _docs[(source, doc["mme_task"], doc["row"])] = doc
    return datasets.Dataset.from_list(docs)


def lookup_doc(record: dict[str, Any]) -> dict[str, Any]:
    """The full doc behind a `process_results` record (registered by process_docs in this process)."""
    key = (record.get("data_source", "benchmark"), record["mme_task"], int(record["row"]))
    with _docs_lock:
        doc = _docs.get(key)
    if doc is None:
        raise KeyError(f"MME-Emotion doc {key} was not loaded in this process (process_docs did not run?)")
    return doc


def doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """`[video_path]`: what lmms-eval's video models (and omni models reading the audio track) take.

    The file is probed (opened, one frame decoded) first, so a corrupt video fails here naming the file.  Containers
    that some model classes do not take as video (.mkv, .webm, ...) are handed over as a cached .mp4 remux
    (see remux.py)."""
    probe_video(doc["video_path"])
    return [model_ready_path(doc["video_path"])]


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
    return {metric: record for metric in METRICS}


# ------------------------------------------------------------------------------------------------ aggregation
_memo = LastResult()  # the eight metric aggregations of a task share one judge phase


def _alpha() -> float:
    value = float(os.environ.get("EMO_MME_ALPHA", scoring.DEFAULT_ALPHA))
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"EMO_MME_ALPHA must be in [0, 1], got {value}")
    return value


def evaluate(items: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """Judge and score one task's records once (memoised on their content); returns metrics + outcomes."""
    if not items:
        return {"metrics": dict.fromkeys(METRICS), "outcomes": []}
    key = (
        tuple((r["mme_task"], r["row"], r["video_id"], r["answer"]) for r in items),
        os.environ.get("EMO_JUDGE"),
        os.environ.get("EMO_MME_JUDGE_PROTOCOL"),
        os.environ.get("EMO_MME_AUDIO_CLUES"),
        os.environ.get("EMO_MME_ALPHA"),
    )
    return _memo.get(key, lambda: _evaluate(list(items), args))


def _evaluate(records: list[dict[str, Any]], args: Any) -> dict[str, Any]:
    started = time.perf_counter()
    items = [{**lookup_doc(r), **r} for r in records]
    tasks = sorted({r["mme_task"] for r in items})
    source = items[0].get("data_source", "benchmark")
    mode = judge_mode(source)
    label = ",".join(spec_for(t).task for t in tasks) + (" [sample]" if source == "sample" else "")
    if mode == "offline":
        logger.warning(
            f"{label}: EMO_JUDGE=offline (or no judge configured for the sample): recognition by label matching, "
            "reasoning not available. Not comparable with the paper."
        )
        outcomes = offline_outcomes(items)
    else:
        outcomes = judge_outcomes(items, desc=label)
    alpha = _alpha()
    scored = [o.score for o in outcomes if o.score is not None]
    from emo_tasks.tokens import TokenizerUnavailable, count_tokens

    try:
        avg_token = scoring.micro_mean(count_tokens(r["answer"] for r in items))
    except TokenizerUnavailable as exc:
        logger.warning(f"{label}: avg_token not available: {exc}")
        avg_token = None
    n_failed = sum(1 for o in outcomes if o.status == "judge_failed")
    if mode == "offline":
        rec = scoring.micro_mean((o.recognition for o in outcomes), 100.0)
        strict = scoring.micro_mean((o.strict_recognition for o in outcomes), 100.0)
        metrics = {
            "rec_s": rec,
            "rea_s": None,
            "cot_s": None,
            "rec_s_strict": strict,
            "avg_step": None,
            "avg_token": avg_token,
            "n_scored": scoring.Count(len(outcomes)),
            "n_judge_failed": scoring.Count(0),
        }
    else:
        agg = scoring.aggregate(scored, alpha)
        strict = scoring.micro_mean(
            (o.strict_recognition for o in outcomes if o.status == "scored" and o.strict_recognition is not None),
            100.0,
        )
        metrics = {
            "rec_s": agg.rec_s,
            "rea_s": agg.rea_s,
            "cot_s": agg.cot_s,
            "rec_s_strict": strict,
            "avg_step": agg.avg_step,
            "avg_token": avg_token,
            "n_scored": scoring.Count(agg.n_scored),
            "n_judge_failed": scoring.Count(n_failed),
        }
    categories = (
        scoring.per_category([(o.label, o.score) for o in outcomes if o.score is not None], alpha)
        if mode != "offline"
        else {}
    )
    summary = {
        "benchmark": "MME-Emotion",
        "tasks": [spec_for(t).task for t in tasks],
        "data_source": source,
        "judge_mode": mode,
        "judge_protocol": judge_protocol() if mode == "api" else None,
        "audio_clues": clue_mode() if mode == "api" else None,
        "judge_models": _judge_models() if mode == "api" else None,
        "alpha": alpha,
        "prompt_hashes": prompt_hashes(),
        "n_samples": len(items),
        "metrics": {k: (None if v is None else (int(v) if isinstance(v, scoring.Count) else float(v)))
                    for k, v in metrics.items()},
        "judge_failures": _failure_counts(outcomes),
        "per_category": categories,
        "seconds": round(time.perf_counter() - started, 3),
    }  # fmt: skip
    _report(label, summary)
    _write_logs(args, tasks, source, summary, outcomes)
    return {"metrics": metrics, "outcomes": outcomes, "summary": summary}


def _judge_models() -> dict[str, str]:
    from judges.config import model_for_role

    models = {"step": model_for_role("step"), "judge": model_for_role("judge")}
    if clue_mode() == "live":
        models["audio"] = model_for_role("audio")
    return models


def _failure_counts(outcomes: Sequence[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in outcomes:
        if o.status == "judge_failed":
            k = f"{o.failed_stage}:{o.failure_reason}"
            counts[k] = counts.get(k, 0) + 1
    return counts


def _report(label: str, summary: dict[str, Any]) -> None:
    m = summary["metrics"]

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    logger.info(
        f"{label}: Rec-S {f(m['rec_s'])}, Rea-S {f(m['rea_s'])}, CoT-S {f(m['cot_s'])}, Avg Step {f(m['avg_step'])}, "
        f"scored {m['n_scored']}/{summary['n_samples']}, judge failures {m['n_judge_failed']} "
        f"{summary['judge_failures'] or ''} (judge: {summary['judge_mode']})"
    )


def _write_logs(args: Any, tasks: list[str], source: str, summary: dict[str, Any], outcomes: Sequence[Any]) -> None:
    """With --output_path: `<output_path>/emo_tasks_judge/<task>_<time>.jsonl` (one line per sample: answer,
    steps, ratings, raw judge text, failure reason) and `..._summary.json`."""
    output_path = getattr(args, "output_path", None) if args is not None else None
    if not output_path:
        return
    from judges.audit import write_audit_jsonl

    folder = Path(output_path) / "emo_tasks_judge"
    folder.mkdir(parents=True, exist_ok=True)
    name = ("sample_" if source == "sample" else "") + "+".join(spec_for(t).task for t in tasks)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    write_audit_jsonl(folder / f"{name}_{stamp}_judge.jsonl", (o.to_dict() for o in outcomes))
    (folder / f"{name}_{stamp}_summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))


def _aggregation(name: str, doc: str) -> Any:
    """An lmms-eval aggregation for one metric; all eight share one judge phase through `evaluate`'s memo.
    (lmms-eval passes `args`, the CLI namespace, to aggregations that accept it: we read --output_path.)"""

    def aggregate(items: Sequence[dict[str, Any]], args: Any = None) -> Any:
        return evaluate(items, args)["metrics"][name]

    aggregate.__name__ = aggregate.__qualname__ = f"agg_{name}"
    aggregate.__doc__ = doc
    return aggregate


agg_rec_s = _aggregation("rec_s", "Rec-S: mean recognition x100 over scored samples.")
agg_rea_s = _aggregation("rea_s", "Rea-S: mean reasoning x100 over scored samples (None offline).")
agg_cot_s = _aggregation("cot_s", "CoT-S = alpha*Rec-S + (1-alpha)*Rea-S (None offline).")
agg_rec_s_strict = _aggregation("rec_s_strict", "C/max(K, P) on ML-ER/FG-ER; equal to Rec-S elsewhere.")
agg_avg_step = _aggregation("avg_step", "Mean number of rated steps over scored samples (None offline).")
agg_avg_token = _aggregation("avg_token", "Mean answer length in o200k_base tokens over all samples.")
agg_n_scored = _aggregation("n_scored", "Samples with a usable judgement (all samples offline).")
agg_n_judge_failed = _aggregation(
    "n_judge_failed", "Samples whose step agent, audio agent or judge failed after retries (counted, not scored)."
)

group_aggregate = scoring.group_aggregate
