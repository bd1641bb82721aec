"""What a results viewer (`emo-tasks view`) shows of each MVEI pair of a run: one `SampleView` per pair, with its
three answers, their decisions (the authors' rule and the strict one) and the majority beside its values.

Why here: the viewer knows no benchmark, and only MVEI knows what its `process_results` record holds.  It reads
what `results.read_samples` reads (the run's own lmms-eval sample log, `datafiles.sample_log`) by the same
functions (`pair_lines`, `sample_values`), so a pair's values are the report's.  lmms-eval 0.7.3 logs no `doc`:
the image is the line's `input_media` (what the model was shown), else the logged doc's image name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from emo_tasks.benchmarks import SampleView
from emo_tasks.datafiles import media_roots as data_media_roots
from emo_tasks.datafiles import read_sample_log, sample_log, sample_log_values

from .registry import pair_lines, sample_values
from .sample import SAMPLE_VERSION
from .settings import HUB_ID

#: What each field of a pair's view means (the viewer shows it beside the field).
FIELD_DOCS = {
    "media": "The image the statement is about.",
    "prompt": "The statement the model judged (Correct or Incorrect), as lmms-eval logged the prompt.",
    "answers": "The model's three answers to the same prompt (sampled three times).",
    "gold": "Whether the statement is correct or incorrect.",
    "verdict": "Whether the majority of the three decisions matches the gold label.",
    "dimension": "What the statement tests: sentiment polarity, emotion interpretation, scene context or "
    "perception subjectivity.",
    "decisions": "Each answer read by the authors' rule: correct, incorrect or give_up.",
    "strict_decisions": "Each answer read by our stricter rule (negated or hedged answers are not Correct); reported "
    "beside the authors' rule, never scored by default.",
    "final": "The majority of the three decisions (the one that is scored).",
}


def media_roots(env: Mapping[str, str]) -> list[Path]:
    """Where MVEI's images may come from besides the run folder (`emo-tasks view` shows no other): the bundled
    sample, EMO_DATA_ROOT/mvei, EMO_MVEI_FILE's folder, the Hub cache's copy of the dataset."""
    return data_media_roots(env, sample=f"mvei-{SAMPLE_VERSION}", folder="mvei", variable="EMO_MVEI_FILE",
                            hub_variable="EMO_MVEI_HUB_ID", hub_default=HUB_ID)  # fmt: skip


def view_samples(run_dir: Path, results_file: Path, task: str) -> list[SampleView]:
    """One view per pair of the task ([] without the run's sample log: the report notes it); a log that cannot be
    read raises DataError naming its line."""
    log = sample_log(run_dir, results_file, task)
    if log is None:
        return []
    rows = read_sample_log(log)
    values = sample_log_values(log, sample_values)  # the report's values of this log
    views = []
    for pair_id, line in pair_lines(rows).items():
        rec, doc = line["acc_total"], line.get("doc") or {}
        media = line.get("input_media") or ([doc["image_name"]] if doc.get("image_name") else [])
        views.append(
            SampleView(
                task=task,
                doc_id=line.get("doc_id"),
                unit=pair_id,
                media=tuple(media),
                prompt=line.get("input"),
                answers=tuple(rec["answers"]),
                gold=rec["label"],
                verdict="correct" if rec["right"] else "incorrect",
                predicted=rec["final"],
                values={m: v[pair_id] for m, v in values.items() if pair_id in v},
                details={k: rec[k] for k in ("dimension", "decisions", "strict_decisions", "final")},
            )
        )
    return views
