"""lmms-eval hooks for MultiEmo-Bench: one request per (image, emotion); the aggregation regroups each image's
eight answers and scores them with the pure `scoring` module.

The judge stage (`emo-tasks judge RUN_DIR`) re-scores a `--predict_only --log_samples` run with the same hooks:
`load_task` (the docs, in process_docs' order: doc_id = index; it also registers the votes `evaluate` reads),
`doc_to_target` and `doc_to_text` (to check that each logged answer belongs to the same row and prompt),
`process_results(doc, [filtered_resps])` and `evaluate(records, args)`.  The main task needs no judge, so the
stage is the in-process scoring over the logged answers and both give the same numbers.  The optional
LLM-as-a-judge second stage over one run's answers is `judge_stage.judge_run_predictions`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from emo_tasks import subset
from emo_tasks.common import atomic_write_text, file_stamp, load_yaml, placeholder_name, row_target
from emo_tasks.datafiles import dataset_source
from emo_tasks.images import load_image
from emo_tasks.metrics import paired_fields
from emo_tasks.results.layout import JUDGE_DIR, SUMMARY_SUFFIX
from emo_tasks.settings import environ, refuse_batch_judge, refuse_lmms_flags, refuse_power_analysis

from . import scoring
from .data import EMOTIONS, VOTE_KEYS, data_file, image_result, load_images
from .run_state import STATE, Loaded, loaded  # noqa: F401 - `loaded` is part of the hooks' interface
from .settings import MultiEmoSettings

PROTOCOL_FILE = Path(__file__).with_name("protocol.yml")


#: `lmms-eval --power-analysis` on MultiEmo-Bench: lmms-eval prints it and skips the task
POWER_ANALYSIS_MESSAGE = (
    "MultiEmo-Bench: lmms-eval's power analysis would count 8 documents per image as independent 0/1 scores, but "
    "the unit is the image and the metrics are not per-document 0/1; plan with `emo-tasks plan-gate`"
)


def load_task(dataset_name: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Eight docs per image (one per emotion, in EMOTIONS order) of a task's `dataset_name` ("multiemo/benchmark"
    | "multiemo/sample"), in order (doc_id = index), with the settings read from `env`; the settings and the
    images (their votes) are registered for `evaluate` and the judge stage.

    A bad setting or row stops here (SettingsError / DataError naming it), before any inference."""
    source = dataset_source(dataset_name, "multiemo")
    refuse_batch_judge(env)  # before the settings: their error would not name the two-stage flow
    settings = MultiEmoSettings.from_env(env, source)
    images = subset.restrict(dataset_name, load_images(data_file(settings)), subset_unit, env)
    STATE.sources.put(source, Loaded(settings, {img["image_id"]: img for img in images}))
    # (lmms-eval 0.7.3 drops `doc` from its sample log: `emo-tasks report` reads the votes from the data file; the
    # row fields here are what `doc_to_target` identifies the row by)
    return [
        {
            "image_id": img["image_id"],
            "emotion": emotion,
            "image_path": img["image_path"],
            "data_source": source,
            "image_name": img["image_name"],
            "votes": list(img["votes"]),
            "votes_none": img["votes_none"],
            "n_annotators": img["n_annotators"],
            "original_label": img["original_label"],
            "source": img["source"],
        }
        for img in images
        for emotion in EMOTIONS
    ]


def subset_unit(doc: Mapping[str, Any]) -> str:
    """An image's key in a subset file (`emo_tasks.subset`): its image_id, as report pairs runs."""
    return str(doc["image_id"])


def subset_stratum(doc: Mapping[str, Any]) -> str:
    """The category a gate subset is stratified by (`emo-tasks plan-gate`): the image's original label."""
    return str(doc["original_label"])


def process_docs(dataset: Any) -> Any:
    """Replace the placeholder row (`dataset_name: multiemo/<benchmark|sample>`) with 8 docs per image
    (`load_task` with the process environment)."""
    import datasets

    refuse_lmms_flags("MultiEmo-Bench")  # before inference: flags that would give wrong numbers
    refuse_power_analysis(POWER_ANALYSIS_MESSAGE)  # its unit is the image, not the document
    return datasets.Dataset.from_list(load_task(placeholder_name(dataset, "MultiEmo"), environ()))


def doc_to_target(doc: dict[str, Any]) -> str:
    """The emotion plus a hash of the row's portable content (image id, emotion, votes, n_annotators, original
    label, source, data source, image name; `emo_tasks.common.row_target`): lmms-eval logs it per sample even with
    --predict_only, so the judge stage can prove an answer is mapped back to the same row (a changed vote changes
    it; another copy of the data does not)."""
    row = {
        "image_id": doc["image_id"],
        "emotion": doc["emotion"],
        "votes": dict(zip(VOTE_KEYS, [*doc["votes"], doc["votes_none"]], strict=True)),
        "n_annotators": doc["n_annotators"],
        "original_label": doc["original_label"],
        "source": doc["source"],
        "data_source": doc["data_source"],
        "image_name": doc["image_name"],
    }
    return row_target(doc["emotion"], row)


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """`[PIL.Image]` (RGB); a DataError naming the file when it cannot be read."""
    return [load_image(doc["image_path"], "MultiEmo-Bench")]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The per-emotion question. kwargs: `prompt` (a template with {emotion}), `pre_prompt`, `post_prompt`."""
    kw = dict(lmms_eval_specific_kwargs or {})
    text = (kw.get("prompt") or load_yaml(str(PROTOCOL_FILE))["template"]).format(emotion=doc["emotion"])
    return f"{kw.get('pre_prompt', '')}{text}{kw.get('post_prompt', '')}"


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Parse the score (cheap, thread-safe); a missing or out-of-range score is recorded as such, never as 0."""
    answer = results[0] if results else ""
    answer = "" if answer is None else str(answer)
    parsed = scoring.parse_score(answer)
    record = {
        "image_id": doc["image_id"],
        "emotion": doc["emotion"],
        "answer": answer,
        # not "score": lmms-eval's CLT stderr reads a record's "score" key as a 0/1 outcome
        "predicted_score": parsed.score,
        "reason": parsed.reason,
        "parse_status": parsed.status,
        "data_source": doc.get("data_source", "benchmark"),
        # no per-row value for lmms-eval's --baseline: the unit is the image (8 rows), see docs/ci.md
        **paired_fields(scoring.TABLE, None),
    }
    return {metric: record for metric in scoring.TABLE.names}


def image_results(records: Sequence[dict[str, Any]]) -> list[scoring.ImageResult]:
    """Regroup the per-(image, emotion) records into one ImageResult per image (None = no usable score), with the
    votes process_docs loaded for the records' source."""
    by_image: dict[tuple[str, str], dict[str, float | None]] = {}
    failed: dict[tuple[str, str], int] = {}
    for r in records:
        key = (r.get("data_source", "benchmark"), r["image_id"])
        by_image.setdefault(key, {})[r["emotion"]] = r["predicted_score"]
        failed[key] = failed.get(key, 0) + (r["parse_status"] != "parsed")
    out = []
    for key, scores in by_image.items():
        source = STATE.sources.get(key[0])
        img = None if source is None else source.images.get(key[1])
        if img is None:
            raise KeyError(f"MultiEmo image {key} was not loaded in this process (process_docs did not run?)")
        out.append(image_result(img, [scores.get(e) for e in EMOTIONS], failed[key]))
    return out


def evaluate(records: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """Scores for one task's records, computed once for all its metrics (keyed by the settings the records'
    sources were loaded with and the records' content)."""
    sources = [STATE.sources.get(s) for s in sorted({r.get("data_source", "benchmark") for r in records})]
    settings = tuple(None if x is None else x.settings for x in sources)

    def compute() -> dict[str, Any]:
        started = time.perf_counter()
        scores = scoring.task_metrics(image_results(records), settings[0] if len(settings) == 1 else None)
        _report(records, scores, args, time.perf_counter() - started)
        return scores

    return STATE.memo.get((settings, tuple((r["image_id"], r["emotion"], r["answer"]) for r in records)), compute)


def _report(records: Sequence[dict[str, Any]], scores: dict[str, Any], args: Any, seconds: float) -> None:
    from loguru import logger

    source = records[0].get("data_source", "benchmark") if records else "benchmark"
    label = "multiemo" + (" [sample]" if source == "sample" else "")
    shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in scores.items())
    logger.info(f"{label}: {shown} ({seconds:.2f}s)")
    failures = [r for r in records if r["parse_status"] != "parsed"]
    if failures:
        logger.warning(
            f"{label}: {len(failures)} answers without a usable 0-100 score (their images are left out and counted "
            f"in n_images_incomplete), e.g. {failures[0]['image_id']}/{failures[0]['emotion']}: "
            f"{failures[0]['answer'][:120]!r}"
        )
    output_path = getattr(args, "output_path", None) if args is not None else None
    if output_path:
        from judges.audit import write_audit_jsonl

        folder = Path(output_path) / JUDGE_DIR
        folder.mkdir(parents=True, exist_ok=True)
        stamp = file_stamp("%Y%m%dT%H%M%S")
        prefix = "sample_multiemo" if source == "sample" else "multiemo"
        rows = (
            {"image_id": r["image_id"], "emotion": r["emotion"], "score": r["predicted_score"], "reason": r["reason"],
             "parse_status": r["parse_status"], "answer": r["answer"]}
            for r in records
        )  # fmt: skip
        write_audit_jsonl(folder / f"{prefix}_{stamp}_predictions.jsonl", rows)
        atomic_write_text(folder / f"{prefix}_{stamp}{SUMMARY_SUFFIX}", json.dumps(scores, indent=2))


# ------------------------------------------------------------------------------------------------ judge stage
def judge_run_predictions(records: Sequence[dict[str, Any]], settings: MultiEmoSettings | None, out_dir: Any) -> Any:
    """The optional LLM-as-a-judge second stage over this run's answers (`emo-tasks judge --multiemo-judge`):
    `judge_stage.judge_run_predictions`; returns the judged metrics (the judge's scores, not the model's)."""
    from .judge import judge_run_predictions as judge

    return judge(records, settings, out_dir)


def judge_plan(
    records: Sequence[dict[str, Any]], settings: MultiEmoSettings | None = None, engine: Any = None, lines: bool = False
) -> Any:
    """The dry run of `judge_run_predictions` (`judge_stage.plan`): one dict for its agent, "multiemo_judge".
    (Not named `plan`: the main task sends nothing, so a dry run of the stage without --multiemo-judge lists no
    MultiEmo-Bench agent.)  `lines`: also each request's line in a batch judging (`batch_lines`, all in round 1)."""
    from .judge import plan

    return plan(records, settings, engine, lines=lines)
