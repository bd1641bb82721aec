"""What a results viewer (`emo-tasks view`) shows of each MultiEmo-Bench image of a run: one `SampleView` per
image (its 8 sample-log lines, one per emotion), with the 8 answers, the predicted scores beside the human votes
and both dominant sets, beside its values.

Why here: the viewer knows no benchmark, and only MultiEmo-Bench knows that 8 lines make one image and where its
votes are.  It reads what `results.read_samples` reads (the run's own lmms-eval sample log, `datafiles.sample_log`,
and the votes from the data when the log has no `doc`) by the same functions (`images_of`, `image_values`), so an
image's values are the report's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from emo_tasks.benchmarks import SampleView
from emo_tasks.datafiles import media_roots as data_media_roots
from emo_tasks.datafiles import read_sample_log, sample_log, sample_log_values

from .registry import images_of, sample_values
from .sample import SAMPLE_VERSION
from .scoring import EMOTIONS, dominant_set

#: What each field of an image's view means (the viewer shows it beside the field).
FIELD_DOCS = {
    "media": "The image the model rated.",
    "answers": "The model's 8 answers, one per emotion in this order: " + ", ".join(EMOTIONS) + ".",
    "scores": "The model's score per emotion (0-100; none where its answer had no usable score).",
    "votes": "How many of the annotators chose each emotion (out of n_annotators).",
    "n_annotators": "How many people annotated the image.",
    "original_label": "The image's label in the source dataset.",
    "parse_status": "Per emotion, whether a score could be read from the answer.",
    "dominant_predicted": "The emotion(s) with the model's highest score (ties kept); none if a score is missing.",
    "dominant_votes": "The emotion(s) most annotators chose (ties kept); the precisions compare the two sets.",
}


def _dominant(values: Sequence[float], defined: bool) -> list[str] | None:
    """The dominant emotions (ties kept, `scoring.dominant_set`), None when not `defined`: predicted scores with a
    missing one, votes that are all "none of the above" (no dominant emotion)."""
    return [EMOTIONS[i] for i in sorted(dominant_set(values))] if defined else None


def media_roots(env: Mapping[str, str]) -> list[Path]:
    """Where MultiEmo-Bench's images may come from besides the run folder (`emo-tasks view` shows no other): the
    bundled sample, EMO_DATA_ROOT/multiemo, EMO_MULTIEMO_FILE's folder, the Hub cache's copy of
    EMO_MULTIEMO_HUB_ID."""
    return data_media_roots(env, sample=f"multiemo-{SAMPLE_VERSION}", folder="multiemo",
                            variable="EMO_MULTIEMO_FILE", hub_variable="EMO_MULTIEMO_HUB_ID",
                            hub_default=None)  # fmt: skip


def view_samples(run_dir: Path, results_file: Path, task: str) -> list[SampleView]:
    """One view per image of the task ([] without the run's sample log: the report notes it); a log that cannot be
    read, or an image the data loaded now lacks, raises."""
    log = sample_log(run_dir, results_file, task)
    if log is None:
        return []
    images = images_of(read_sample_log(log))
    values = sample_log_values(log, sample_values)  # the report's values of this log (scored once per command)
    views = []
    for image_id, img in images.items():
        records = {line["precision_ours"]["emotion"]: line["precision_ours"] for line in img["lines"]}
        scores = [img["scores"].get(e) for e in EMOTIONS]
        doc, first = img["doc"], img["lines"][0]
        media = [doc["image_path"]] if doc.get("image_path") else first.get("input_media") or []
        views.append(
            SampleView(
                task=task,
                doc_id=min((ln["doc_id"] for ln in img["lines"] if "doc_id" in ln), default=None),
                unit=image_id,
                media=tuple(media),
                answers=tuple((records.get(e) or {}).get("answer", "") for e in EMOTIONS),
                values={m: v[image_id] for m, v in values.items() if image_id in v},
                details={
                    "scores": dict(zip(EMOTIONS, scores, strict=True)),
                    "votes": dict(zip(EMOTIONS, doc["votes"], strict=True)),
                    "n_annotators": doc["n_annotators"],
                    "original_label": doc.get("original_label"),
                    "parse_status": {e: r.get("parse_status") for e, r in records.items()},
                    "dominant_predicted": _dominant(scores, None not in scores),
                    "dominant_votes": _dominant(doc["votes"], any(doc["votes"])),
                },
            )
        )
    return views
