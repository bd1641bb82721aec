"""The EmoBench-M export format, `emo-tasks export RUN_DIR --format emobench-m-official` (the generic part, the
command line, the export folder and provenance.json: `emo_tasks/results/export.py`).

emobench-m-official (Emo-gml/EmoBench-M, `EmoBench-M_eval.py` at 8916147)
-----------------------------------------------------------------------
The input JSON files of the authors' script, one per scenario the run has, as their README's "Quick Start" gives
them:
- `classification/<scenario file>` (e.g. `classification/MELD.json`): `[{"video", "expected_value",
  "predicted_value"}]` -> `python EmoBench-M_eval.py classification --json classification/MELD.json --output ...`;
- `joint/MC-EIU.json`: `[{"modal_path", "expected_emotion", "predicted_emotion", "expected_intent",
  "predicted_intent"}]` -> `... joint --json joint/MC-EIU.json --output ...`;
- `generation/smile.json`: `[{"video", "prediction", "reference"}]` -> `... generation --json ... --output ...`.
`predicted_value` is the label our reader found in the answer, or the answer's own text when it names none (the
project's rule: docs/emobench_m.md).  `summary.json` adds per scenario the authors' numbers as their script prints
them (fractions; `scoring.official_classification` / `official_joint`, checked against their code by the tests)
and the project's (percent, from results.json).

Beside these files every export folder holds `provenance.json`, `summary.json` and `README.md`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from emo_tasks.results.export import ExportError, export_run, finish, model_name_for, not_judged, staged, write_json

from . import scoring
from .protocol import scenarios

if TYPE_CHECKING:
    from emo_tasks.results.export import StrPath

#: Field -> type(s) of every JSON record this format writes (`emo_tasks.results.export.check_schema`).
SCHEMAS: dict[str, dict[str, Any]] = {
    "classification": {"video": str, "expected_value": str, "predicted_value": str},
    "joint": {"modal_path": str, "expected_emotion": str, "predicted_emotion": str, "expected_intent": str,
              "predicted_intent": str},
    "generation": {"video": str, "prediction": str, "reference": str},
}  # fmt: skip
_FOLDER = {scoring.CLASSIFICATION: "classification", scoring.JOINT: "joint", scoring.GENERATION: "generation"}


def _record(rec: dict[str, Any]) -> dict[str, str]:
    kind, video = rec["kind"], str(rec["video"])
    if kind == scoring.CLASSIFICATION:
        return {"video": video, "expected_value": rec["gold"], "predicted_value": rec["predicted"]}
    if kind == scoring.JOINT:
        return {"modal_path": video, "expected_emotion": rec["gold"], "predicted_emotion": rec["predicted"],
                "expected_intent": rec["gold_intent"], "predicted_intent": rec["predicted_intent"]}  # fmt: skip
    return {"video": video, "prediction": rec["answer"], "reference": rec["gold"]}


def official_numbers(kind: str, records: list[dict[str, str]]) -> dict[str, Any] | None:
    """What the authors' script prints for one exported file (fractions); generation: None (BLEU, ROUGE-L and
    BERTScore need nltk, rouge-score and bert-score with its weights: the project's values are in `project`)."""
    if kind == scoring.CLASSIFICATION:
        return scoring.official_classification([(r["expected_value"], r["predicted_value"]) for r in records])
    if kind == scoring.JOINT:
        return scoring.official_joint([(r["expected_emotion"], r["predicted_emotion"], r["expected_intent"],
                                        r["predicted_intent"]) for r in records])  # fmt: skip
    return None


def export_emobench_m_official(
    run_dir: StrPath, out_dir: StrPath, model_name: str | None = None, *, pick: str | None = None, force: bool = False
) -> Path:
    """The authors' input JSON files from a run's sample logs (every EmoBench-M scenario it has); returns the
    export folder."""
    from emo_tasks.datafiles import read_sample_log, sample_log

    from .registry import BENCHMARK, sample_lines

    run = export_run(run_dir, pick)
    by_task = {s.task: s for s in scenarios().values()} | {s.sample_task: s for s in scenarios().values()}
    tasks = [t for t in BENCHMARK.tasks if t in run.results]
    if not tasks:
        raise ExportError(f"{run_dir}: no EmoBench-M task in {run.results_file.name}")
    files: dict[str, list[dict[str, str]]] = {}
    summary_tasks: dict[str, Any] = {}
    for task in tasks:
        if not run.has(task, "n_samples"):
            raise not_judged(run_dir, f"{run.results_file.name} holds no EmoBench-M metrics for {task}")
        log = sample_log(run.path, run.results_file, task)
        if log is None:
            raise ExportError(
                f"{run_dir}: no sample log *_samples_{task}.jsonl (the answers); rerun with --log_samples"
            )
        sc = by_task[task]
        records = [_record(line["accuracy"]) for line in sample_lines(read_sample_log(log)).values()]
        name = f"{_FOLDER[sc.kind]}/{sc.file}"
        files[name] = records
        project = {k.split(",")[0]: v for k, v in (run.results.get(task) or {}).items()
                   if "," in k and "stderr" not in k}  # fmt: skip
        summary_tasks[task] = {"file": name, "kind": sc.kind, "official": official_numbers(sc.kind, records),
                               "project": project}  # fmt: skip
    label = model_name_for(run, model_name)
    summary = {"format": "emobench-m-official", "model_name": label, "tasks": summary_tasks}
    with staged(out_dir, force) as out:
        for name, records in files.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            write_json(out / name, records)
        finish(out, run, "emobench-m-official", label, tasks, summary, sorted(files), _readme(label, summary))
    return Path(out_dir)


def _readme(name: str, summary: dict[str, Any]) -> str:
    lines = [
        f"# EmoBench-M results: {name}",
        "",
        "The input files of the authors' evaluation script (github.com/Emo-gml/EmoBench-M, `EmoBench-M_eval.py`),",
        "one per scenario. Run their script on each, e.g.",
        "`python EmoBench-M_eval.py classification --json classification/MELD.json --output meld.json`.",
        "",
        "| task | file | authors' accuracy (fraction) | project accuracy (%) |",
        "|---|---|---|---|",
    ]
    for task, t in summary["tasks"].items():
        o = t["official"] or {}
        acc = o.get("accuracy", o.get("joint_accuracy"))
        p = t["project"].get("accuracy")
        lines.append(f"| {task} | `{t['file']}` | {'n/a' if acc is None else f'{acc:.4f}'} | "
                     f"{'n/a' if p is None else f'{p:.2f}'} |")  # fmt: skip
    lines += ["", "Provenance: `provenance.json`; every number of both scorers per scenario: `summary.json`."]
    return "\n".join(lines) + "\n"
