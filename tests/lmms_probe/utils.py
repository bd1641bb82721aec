"""Hooks of a throw-away lmms-eval task that runs its judge phase through `judges` inside a real lmms-eval run."""

from __future__ import annotations

import json
import os
import threading

from emo_tasks.mme_emotion.parsers import parse_scores, score_validator
from emo_tasks.settings import cache_dir
from judges import EngineSettings, JudgeRequest, run_batch, user_message
from judges.lmms_eval_hooks import mean_skip_none, register

register()  # provider + aggregation, as a user's own lmms-eval task would (ours do not need them)
#: A user's task says where its answers are cached (here: emo-tasks' cache folder, EMO_CACHE_DIR).
SETTINGS = EngineSettings.from_env(cache_dir=cache_dir())


def doc_to_visual(doc: dict) -> list:
    return []


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    return doc["question"]


def process_results(doc: dict, results: list[str]) -> dict:
    """Cheap and thread-safe: record the answer; the judge runs once, batched, in the aggregation."""
    return {"judge_recognition": {"doc_id": doc["id"], "answer": results[0], "thread": threading.get_ident()}}


def judge_recognition(items: list[dict]) -> float | None:
    batch = run_batch(
        [
            JudgeRequest(
                [user_message(f"doc {it['doc_id']}: {it['answer']}")],
                role="judge",
                validate=score_validator(1),
                sample_id=str(it["doc_id"]),
            )
            for it in items
        ],
        desc="probe judge",
        settings=SETTINGS,
    )
    values = [parse_scores(r.text).values[-1] if r.ok else None for r in batch]
    with open(os.environ["EMO_PROBE_STATS"], "a") as f:
        f.write(json.dumps(batch.stats.to_dict()) + "\n")
    return mean_skip_none(values)
