"""lmms-eval hooks for EmoBench-M: thin adapters; the label reading and the metrics come from the pure `scoring`.

Each scenario is one task (`dataset_name: emobench_m/<benchmark|sample>/<scenario>`); the model is given the video
file (its audio track included) and the authors' prompt from the data; chat model classes get both as one user
turn (`doc_to_messages`), and lmms-eval's Qwen-Omni chat classes, which never read a video's own track, also get
its audio as a WAV part (`emo_tasks.models.omni`, as MME-Emotion's hooks do).  `process_results`
reads the label (or the emotion and intent, or keeps the generated text) and records the sample as the authors'
input JSON would hold it; `evaluate` computes the task's metrics once for all its aggregations.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loguru import logger

from emo_tasks import subset
from emo_tasks.common import DataError, placeholder_name, row_target, say_if_all_empty
from emo_tasks.datafiles import SOURCES
from emo_tasks.metrics import paired_fields
from emo_tasks.models import omni
from emo_tasks.settings import CommonSettings, environ, refuse_batch_judge, refuse_lmms_flags

from . import scoring
from .data import load_docs
from .protocol import scenario, scenarios
from .run_state import STATE
from .sample import sample_root
from .settings import EmoBenchMSettings

#: The doc fields that identify a sample in `doc_to_target` (portable: no machine's absolute path).
TARGET_FIELDS = ("row_id", "scenario", "video", "prompt", "gold", "gold_intent", "data_source")


def split_name(dataset_name: str) -> tuple[str, str]:
    """(source, scenario key) of `emobench_m/<source>/<scenario>`; a DataError for anything else."""
    parts = dataset_name.split("/")
    if len(parts) != 3 or parts[0] != "emobench_m" or parts[1] not in SOURCES or parts[2] not in scenarios():
        raise DataError(
            f"dataset_name must be emobench_m/<benchmark|sample>/<scenario> with a scenario among "
            f"{', '.join(scenarios())}; got {dataset_name!r}"
        )
    return parts[1], parts[2]


def load_task(dataset_name: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The validated docs of a task's `dataset_name`, in order (doc_id = index), with the settings read from
    `env` (registered for `evaluate`).  A bad setting or row stops here, before any inference."""
    source, key = split_name(dataset_name)
    refuse_batch_judge(env)
    settings = EmoBenchMSettings.from_env(env, source)
    root = sample_root(settings.common.cache_dir) if source == "sample" else settings.root
    assert root is not None
    docs = subset.restrict(dataset_name, load_docs(root, scenario(key), source), subset_unit, env)
    STATE.sources.put(source, settings)
    return docs


def subset_unit(doc: Mapping[str, Any]) -> str:
    """A sample's key in a subset file (`emo_tasks.subset`) and in the report: its row id."""
    return str(doc["row_id"])


def subset_stratum(doc: Mapping[str, Any]) -> str:
    """The category a gate subset is stratified by (`emo-tasks plan-gate`): the gold label."""
    return str(doc["gold"]) if doc["kind"] != scoring.GENERATION else "generation"


def process_docs(dataset: Any) -> Any:
    """Replace lmms-eval's placeholder row with the validated docs (`load_task` with the process environment).
    Before inference, an omni model class that cannot hear the videos' audio is refused (`omni.prepare`)."""
    import datasets

    env = environ()
    name = placeholder_name(dataset, "EmoBench-M")
    refuse_lmms_flags("EmoBench-M")
    omni.prepare(CommonSettings.from_env(env).model_audio)
    return datasets.Dataset.from_list(load_task(name, env))


def doc_to_target(doc: dict[str, Any], model_specific_target_kwargs: Any = None) -> str:
    """The gold answer plus a hash of the sample's portable content (`TARGET_FIELDS`), logged per sample."""
    return row_target(doc["gold"], {key: doc[key] for key in TARGET_FIELDS})


def doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """`[video_path]`: the clip with its audio track, as lmms-eval's video and omni models take it."""
    return [doc["video_path"]]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The authors' prompt from the data.  kwargs: `pre_prompt`, `post_prompt` (text around it)."""
    kw = dict(lmms_eval_specific_kwargs or {})
    return f"{kw.get('pre_prompt', '')}{doc['prompt']}{kw.get('post_prompt', '')}"


def _common(doc: Mapping[str, Any]) -> CommonSettings:
    """The settings the doc's source was loaded with (process_docs registered them); read afresh otherwise."""
    loaded = STATE.sources.get(doc.get("data_source", "benchmark"))
    return loaded.common if loaded is not None else CommonSettings.from_env(environ())


def doc_to_messages(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """Chat models: one user turn, the video first, then the prompt (`doc_to_text`).  The Qwen-Omni chat classes
    also get the video's audio as a WAV part after the video (`omni.audio_part`; EMO_MODEL_AUDIO=off: none)."""
    content: list[dict[str, Any]] = [{"type": "video", "url": doc["video_path"]}]
    wav = omni.audio_part(doc["video_path"], _common(doc).cache_dir)
    if wav is not None:
        content.append({"type": "audio", "url": wav})
    content.append({"type": "text", "text": doc_to_text(doc, lmms_eval_specific_kwargs)})
    return [{"role": "user", "content": content}]


def _answer(results: Sequence[Any]) -> str:
    first = results[0] if results else ""
    first = first[0] if isinstance(first, (list, tuple)) and first else first
    return "" if first is None else str(first)


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Score one answer (`scoring.score_sample`) and record it for every metric."""
    answer = _answer(results)
    unit = scoring.score_sample(doc["kind"], answer, doc["gold"], doc["labels"], doc["intents"], doc["gold_intent"])
    record = {
        "row_id": doc["row_id"],
        "scenario": doc["scenario"],
        "video": doc["video"],
        "answer": answer,
        **sample_record(unit),
        "data_source": doc.get("data_source", "benchmark"),
        **paired_fields(scoring.TABLE, scoring.TABLE.paired.per_sample(unit)),  # type: ignore[union-attr]
    }
    return {metric: record for metric in scoring.TABLE.names}


def sample_record(unit: scoring.SampleResult) -> dict[str, Any]:
    """The fields of a `SampleResult` as logged (the inverse of `sample_result`)."""
    return {"kind": unit.kind, "gold": unit.gold, "predicted": unit.predicted, "parsed": unit.parsed,
            "gold_intent": unit.gold_intent, "predicted_intent": unit.predicted_intent, "bleu": unit.bleu,
            "rouge_l": unit.rouge_l, "bert_score": unit.bert_score, "llm_logical": unit.llm_logical,
            "llm_multimodal": unit.llm_multimodal, "llm_total": unit.llm_total,
            "llm_failed": unit.llm_failed}  # fmt: skip


def sample_result(record: Mapping[str, Any]) -> scoring.SampleResult:
    """A logged `process_results` record as the sample's per-sample unit (a record logged before the LLM ratings
    were recorded has none: not rated)."""
    return scoring.SampleResult(**{f.name: record.get(f.name) for f in dataclasses.fields(scoring.SampleResult)})


def evaluate(items: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """The task's metrics, computed once for all its metric aggregations (keyed by the settings and records); a
    generation task (SMILE) adds the authors' LLM scorer's ratings when a judge is configured (`judge.py`)."""
    settings = tuple(STATE.sources.get(s) for s in sorted({r.get("data_source", "benchmark") for r in items}))
    key = (settings, tuple((r["scenario"], r["row_id"], r["answer"]) for r in items))
    return STATE.memo.get(key, lambda: _metrics(items, settings[0] if settings else None, args))


def _metrics(items: Sequence[dict[str, Any]], settings: EmoBenchMSettings | None, args: Any = None) -> dict[str, Any]:
    say_if_all_empty(f"EmoBench-M {items[0]['scenario'] if items else ''}", [r["answer"] for r in items])
    out = scoring.task_metrics([sample_result(r) for r in items])
    if not items or items[0]["kind"] != scoring.GENERATION:
        return out
    mode = settings.judge_mode if settings is not None else "offline"
    if mode != "api" or settings is None:
        why = "judging deferred (EMO_JUDGE=defer)" if mode == "defer" else "no LLM judge configured"
        line = (
            f"emo-tasks: EmoBench-M {items[0]['scenario']}: {why}: the LLM scorer's metrics (llm_logical, "
            "llm_multimodal, llm_total) are N/A; run `emo-tasks judge RUN_DIR` with a judge endpoint to add them"
        )
        logger.warning(line)
        print(line, file=sys.stderr, flush=True)
        return out
    from . import judge

    started = time.perf_counter()
    rated = judge.rate(list(items), settings)
    judge.record_ratings(items, rated.rows)  # per answer in the records lmms-eval and the judge stage log
    for name, value in judge.aggregate(rated.rows).items():
        out[name] = scoring.Count(value) if name == "n_judge_failed" else scoring.Pooled(float(value[0]), value[1])
    output_path = getattr(args, "output_path", None) if args is not None else None
    if output_path:  # the judge log `agreement` and `calibrate` read: which judge rated which answer how
        from .judge_log import write_judge_log

        write_judge_log(Path(output_path), items, rated, settings, out, time.perf_counter() - started)
    return out
