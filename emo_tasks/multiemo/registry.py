"""MultiEmo-Bench as the generic tools (report, compare, export) see it: its metric table, its task names, and
its per-sample values read back from a run.

Per-sample unit: an image (key: image_id).  Its 8 records in lmms-eval's sample log (`<date>_samples_<task>.jsonl`,
written with `--log_samples`) are regrouped and the image scored alone (`scoring.score_sample`: precisions x100,
the 8 distribution metrics; undefined values are left out).  lmms-eval 0.7.3 drops `doc` from its sample log, so
the votes come from the data the run used: the bundled sample, or the benchmark file the environment names now.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from emo_tasks.benchmarks import Benchmark
from emo_tasks.common import DataError, once
from emo_tasks.datafiles import sample_log_reader
from emo_tasks.settings import environ

from . import scoring
from .data import data_file, image_result, load_images
from .settings import MultiEmoSettings

#: source ("benchmark" | "sample") -> {image_id: loaded image row}
Reference = Callable[[str], dict[str, dict[str, Any]]]


def reference_images(source: str) -> dict[str, dict[str, Any]]:
    """image_id -> image row from the data a run of `source` used: the bundled sample, or the benchmark data the
    environment names (settings read from it now, so a bad value is an error naming it); read once per
    `common.remembering()` block."""
    settings = MultiEmoSettings.from_env(environ(), source)
    path = data_file(settings)
    return once("multiemo-images", path, lambda: {img["image_id"]: img for img in load_images(path)})


def images_of(rows: list[dict[str, Any]], reference: Reference = reference_images) -> dict[str, dict[str, Any]]:
    """image_id -> {"doc": its data row (the votes), "scores": {emotion: predicted_score}, "lines": its sample-log
    lines} from a task's sample-log lines.  The votes: the line's `doc` when it holds them, else
    `reference(<the first such record's data_source>)`, read once.  An (image_id, emotion) on two lines is a
    DataError naming both: each row counts once, and no line silently overwrites another's score."""
    images: dict[str, dict[str, Any]] = {}
    loaded: dict[str, dict[str, Any]] | None = None
    for line in rows:
        rec = line["precision_ours"]
        doc = line.get("doc")
        if not doc or "votes" not in doc:
            if loaded is None:
                loaded = reference(rec.get("data_source", "benchmark"))
            doc = loaded[rec["image_id"]]
        img = images.setdefault(rec["image_id"], {"doc": doc, "scores": {}, "lines": []})
        if rec["emotion"] in img["scores"]:
            raise DataError(
                f"image_id {rec['image_id']!r}, emotion {rec['emotion']!r} is on two lines of the sample log; each "
                "(image, emotion) is logged once"
            )
        img["scores"][rec["emotion"]] = rec["predicted_score"]
        img["lines"].append(line)
    return images


def image_values(images: dict[str, dict[str, Any]]) -> dict[str, dict[Any, float]]:
    """{metric: {image_id: value}}: each image of `images_of` scored alone (`scoring.score_sample`)."""
    units = {
        image_id: scoring.score_sample(
            image_result({**img["doc"], "image_id": image_id}, [img["scores"].get(e) for e in scoring.EMOTIONS])
        )
        for image_id, img in images.items()
    }
    return scoring.TABLE.per_sample_values(units)


def sample_values(rows: list[dict[str, Any]], reference: Reference = reference_images) -> dict[str, dict[Any, float]]:
    """{metric: {image_id: value}} from a task's sample-log lines (`images_of`, `image_values`)."""
    return image_values(images_of(rows, reference))


def judge_setup(env: Mapping[str, str], extra_judge: bool = False) -> dict[str, Any]:
    """MultiEmo-Bench is scored without a judge; its optional LLM-as-a-judge stage (`--multiemo-judge`) adds the
    judge model (for the judge stage's folder name and results)."""
    if not extra_judge:
        return {}
    from judges.fingerprint import served_models

    from .judge import judge_fingerprint
    from .settings import MultiEmoSettings

    settings = MultiEmoSettings.from_env(env, "sample")  # the judge's values; the data are not needed here
    # the judge is about to run: the endpoint is asked what it serves (once per process)
    fingerprint = judge_fingerprint(settings, served_models(settings.engine.endpoint))
    return {"multiemo_judge": settings.judge_model, "judge_fingerprint": fingerprint}


BENCHMARK = Benchmark(
    key="multiemo",
    title="MultiEmo-Bench",
    table=scoring.TABLE,
    tasks=("multiemo", "multiemo_sample"),
    read_samples=sample_log_reader(sample_values),
    plot_ylabel="precision (%)",
    hooks="emo_tasks.multiemo.hooks",
    exports={"multiemo-table": "emo_tasks.multiemo.export:export_multiemo_table"},
    judge_setup=judge_setup,
    view_samples="emo_tasks.multiemo.view:view_samples",
    vlmeval_datasets=("emo_tasks.multiemo.vlmeval:dataset_class",),
)
