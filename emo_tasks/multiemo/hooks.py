"""lmms-eval hooks for MultiEmo-Bench: one request per (image, emotion); the aggregation regroups each image's
eight answers and scores them with the pure `scoring` module."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, LastResult, load_yaml, placeholder_name

from . import scoring
from .data import EMOTIONS, data_file, load_images

PROTOCOL_FILE = Path(__file__).with_name("protocol.yml")
METRICS = (
    "precision_ours",
    "precision_original",
    "precision_single",
    *scoring.DISTRIBUTION_METRICS,
    "n_images",
    "n_images_incomplete",
    "n_parse_failed",
    "n_srcc_undefined",
    "n_plcc_undefined",
)

#: Every loaded image by (source, image_id): process_docs runs on every rank, so the aggregation (rank 0) can look
#: the votes up here and `process_results` records stay small.
_images_lock = threading.Lock()
_images: dict[tuple[str, str], dict[str, Any]] = {}


def protocol() -> dict[str, Any]:
    """The prompt template (protocol.yml), parsed once."""
    return load_yaml(str(PROTOCOL_FILE))


def process_docs(dataset: Any) -> Any:
    """Replace the placeholder row (`dataset_name: multiemo/<benchmark|sample>`) with 8 docs per image."""
    import datasets

    name = placeholder_name(dataset, "MultiEmo")
    if name == "multiemo/sample":
        from .sample import sample_file

        source, path = "sample", sample_file()
    elif name == "multiemo/benchmark":
        source, path = "benchmark", data_file()
    else:
        raise DataError(f"dataset_name must be multiemo/benchmark or multiemo/sample, got {name!r}")
    images = load_images(path)
    with _images_lock:
        for img in images:
            _images[(source, img["image_id"])] = img
    # (lmms-eval 0.7.3 drops `doc` from its sample log: `emo-tasks report` reads the votes from the data file)
    docs = [
        {"image_id": img["image_id"], "emotion": emotion, "image_path": img["image_path"], "data_source": source}
        for img in images
        for emotion in EMOTIONS
    ]
    return datasets.Dataset.from_list(docs)


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """`[PIL.Image]` (RGB); a DataError naming the file when it cannot be read."""
    from emo_tasks.mvei.data import load_image

    return [load_image(doc["image_path"])]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The per-emotion question. kwargs: `prompt` (a template with {emotion}), `pre_prompt`, `post_prompt`."""
    kw = dict(lmms_eval_specific_kwargs or {})
    text = (kw.get("prompt") or protocol()["template"]).format(emotion=doc["emotion"])
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
    }
    return {metric: record for metric in METRICS}


def image_results(records: Sequence[dict[str, Any]]) -> list[scoring.ImageResult]:
    """Regroup the per-(image, emotion) records into one ImageResult per image (None = no usable score)."""
    by_image: dict[tuple[str, str], dict[str, float | None]] = {}
    for r in records:
        by_image.setdefault((r.get("data_source", "benchmark"), r["image_id"]), {})[r["emotion"]] = r["predicted_score"]
    out = []
    with _images_lock:
        for key, scores in by_image.items():
            img = _images.get(key)
            if img is None:
                raise KeyError(f"MultiEmo image {key} was not loaded in this process (process_docs did not run?)")
            out.append(image_result(img, [scores.get(e) for e in EMOTIONS]))
    return out


def image_result(img: dict[str, Any], scores: Sequence[float | None]) -> scoring.ImageResult:
    """One loaded image row (data.load_images) with its 8 predicted scores (None = no usable score)."""
    return scoring.ImageResult(
        image_id=img["image_id"],
        votes=tuple(img["votes"]),
        n_annotators=img["n_annotators"],
        original_label=img["original_label"],
        scores=tuple(scores),
    )


_memo = LastResult()


def evaluate(records: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """Scores for one task's records, computed once for all its metrics."""

    def compute() -> dict[str, Any]:
        started = time.perf_counter()
        scores = dict(scoring.score_images(image_results(records)))
        scores["n_parse_failed"] = sum(1 for r in records if r["parse_status"] != "parsed")
        _report(records, scores, args, time.perf_counter() - started)
        return scores

    return _memo.get(tuple((r["image_id"], r["emotion"], r["answer"]) for r in records), compute)


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

        folder = Path(output_path) / "emo_tasks_judge"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        prefix = "sample_multiemo" if source == "sample" else "multiemo"
        rows = (
            {"image_id": r["image_id"], "emotion": r["emotion"], "score": r["predicted_score"], "reason": r["reason"],
             "parse_status": r["parse_status"], "answer": r["answer"]}
            for r in records
        )  # fmt: skip
        write_audit_jsonl(folder / f"{prefix}_{stamp}_predictions.jsonl", rows)
        (folder / f"{prefix}_{stamp}_summary.json").write_text(json.dumps(scores, indent=2))


def _aggregation(name: str) -> Any:
    def aggregate(items: Sequence[dict[str, Any]], args: Any = None) -> Any:
        return evaluate(items, args)[name]

    aggregate.__name__ = aggregate.__qualname__ = f"agg_{name}"
    aggregate.__doc__ = f"MultiEmo-Bench `{name}` (see the README's metric table)."
    return aggregate


agg_precision_ours = _aggregation("precision_ours")
agg_precision_original = _aggregation("precision_original")
agg_precision_single = _aggregation("precision_single")
agg_cheb = _aggregation("cheb")
agg_canberra = _aggregation("canberra")
agg_wasserstein = _aggregation("wasserstein")
agg_kl = _aggregation("kl")
agg_js = _aggregation("js")
agg_cosine = _aggregation("cosine")
agg_srcc = _aggregation("srcc")
agg_plcc = _aggregation("plcc")
agg_n_images = _aggregation("n_images")
agg_n_images_incomplete = _aggregation("n_images_incomplete")
agg_n_parse_failed = _aggregation("n_parse_failed")
agg_n_srcc_undefined = _aggregation("n_srcc_undefined")
agg_n_plcc_undefined = _aggregation("n_plcc_undefined")
