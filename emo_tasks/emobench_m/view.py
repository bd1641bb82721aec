"""What a results viewer (`emo-tasks view`) shows of each EmoBench-M sample of a run: its video, prompt, answer, the
label read from it (or the generated reason) beside the gold answer and its values.

Read from the run's own lmms-eval sample log by the same functions as the report (`sample_lines`,
`sample_values`), so a sample's values are the report's.
"""

from __future__ import annotations

from pathlib import Path

from emo_tasks.benchmarks import SampleView
from emo_tasks.datafiles import read_sample_log, sample_log, sample_log_values

from . import scoring
from .registry import sample_lines, sample_values

#: What each field of a sample's view means (the viewer shows it beside the field).
FIELD_DOCS = {
    "media": "The clip (video with its audio track) the model was given.",
    "prompt": "The authors' prompt from the data, as lmms-eval logged it.",
    "answers": "The model's answer.",
    "gold": "The gold label (MC-EIU: emotion_intent; SMILE: the reference reason).",
    "verdict": "correct / incorrect (the label read from the answer against the gold); no_label when the answer "
    "names none (it counts as wrong); generated for SMILE.",
    "llm_scorer": "SMILE, rated by the authors' LLM scorer: logical and multimodal (0-5 each; a failed rating 0, "
    "as the authors count it), their total, whether a rating failed after retries and the judge's errors.",
    "predicted": "The label read from the answer (MC-EIU: emotion_intent), as the authors' input JSON holds it.",
}


def _verdict(unit: scoring.SampleResult) -> str:
    if unit.kind == scoring.GENERATION:
        return "generated"
    if not unit.parsed:
        return "no_label"
    return "correct" if unit.right else "incorrect"


def _llm_details(rec: dict) -> dict:
    """SMILE rated by the LLM scorer: its two ratings, their sum, whether one failed and why (none: not rated)."""
    if rec.get("llm_failed") is None:
        return {}
    keys = ("llm_logical", "llm_multimodal", "llm_total", "llm_failed", "llm_errors")
    return {"llm_scorer": {k.removeprefix("llm_"): rec.get(k) for k in keys}}


def view_samples(run_dir: Path, results_file: Path, task: str) -> list[SampleView]:
    """One view per sample of the task ([] without the run's sample log: the report notes it)."""
    from .hooks import sample_result

    log = sample_log(run_dir, results_file, task)
    if log is None:
        return []
    values = sample_log_values(log, sample_values)
    views = []
    for row_id, line in sample_lines(read_sample_log(log)).items():
        rec = line["accuracy"]
        unit = sample_result(rec)
        joint = unit.kind == scoring.JOINT
        views.append(
            SampleView(
                task=task,
                doc_id=line.get("doc_id"),
                unit=row_id,
                media=tuple(line.get("input_media") or [rec["video"]]),
                prompt=line.get("input"),
                answers=(rec["answer"],),
                gold=f"{unit.gold}_{unit.gold_intent}" if joint else unit.gold,
                verdict=_verdict(unit),
                predicted=None if unit.kind == scoring.GENERATION
                else (f"{unit.predicted}_{unit.predicted_intent}" if joint else unit.predicted),
                values={m: v[row_id] for m, v in values.items() if row_id in v},
                details={"scenario": rec["scenario"], "kind": unit.kind, "label_found": unit.parsed,
                         **_llm_details(rec)},
            )
        )  # fmt: skip
    return views
