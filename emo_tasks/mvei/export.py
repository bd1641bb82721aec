"""The MVEI export format, `emo-tasks export RUN_DIR --format mvei-official` (the generic part, the command line,
the export folder and provenance.json: `emo_tasks/results/export.py`).

mvei-official (wdqqdw/EmObserver)
---------------------------------
- `Std_MVEI_results.json` (the name `infer_and_eval.py` line 479 gives it): `{id: {"image_path": str, "prompt":
  str, "ground_truth": "correct" | "incorrect", "other_info": {"statement_meta": {"class": <dimension>}},
  "generations": [str, str, str]}}` (format: evaluate/metrics_calculators/mvei.py lines 4-5; read at lines
  123-134).  The authors' evaluator scores only `generations[0]` (line 125).  `image_path` is the image's name
  relative to the data file (portable), `prompt` the statement, as in their standard file.
- `summary.json`: `{"format": "mvei-official", "model_name", "task", "n_pairs", "official_first_generation":
  {acc_total, acc_<dimension>..., positive_ratio, give_up_ratio} (fractions, as their evaluator returns),
  "project_majority": {metric: value} (percent, from results.json)}`.

Beside these files every export folder holds `provenance.json`, `summary.json` and `README.md`
(`emo_tasks/results/export.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emo_tasks.results.export import STR_OR_NONE, ExportError, finish, model_name_for, run_task_log, staged, write_json

if TYPE_CHECKING:
    from emo_tasks.results.export import StrPath

MVEI_FILE = "Std_MVEI_results.json"
MVEI_KEYS = (
    "acc_total",
    "acc_sentiment_polarity",
    "acc_emotion_interpretation",
    "acc_scene_context",
    "acc_perception_subjectivity",
    "positive_ratio",
    "give_up_ratio",
)

#: Field -> type(s) of every JSON file this format writes (`emo_tasks.results.export.check_schema(record, kind,
#: SCHEMAS)`).
SCHEMAS: dict[str, dict[str, Any]] = {
    "mvei_record": {
        "image_path": STR_OR_NONE,
        "prompt": STR_OR_NONE,
        "ground_truth": str,
        "other_info": dict,
        "generations": list,
    },
}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def official_mvei_metrics(data: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The authors' evaluator's numbers (fractions) over an inference-output JSON: `generations[0]` parsed by
    their rule (our reimplementation, `mvei.scoring.parse_official`), per class and overall."""
    from emo_tasks.mvei.scoring import CORRECT, GIVE_UP, INCORRECT, parse_official

    per_class = {"sentiment polarity": [0, 0], "emotion interpretation": [0, 0], "scene context": [0, 0]}
    per_class["perception subjectivity"] = [0, 0]
    right = n_a = n_c = total = 0
    for rec in data.values():
        gens = rec.get("generations") or []
        choice = parse_official(gens[0] if gens else "")
        gt = str(rec.get("ground_truth") or "").strip().lower()
        ok = (choice == CORRECT and gt == "correct") or (choice == INCORRECT and gt == "incorrect")
        cls = ((rec.get("other_info") or {}).get("statement_meta") or {}).get("class")
        if cls in per_class:
            per_class[cls][1] += 1
            per_class[cls][0] += ok
        total += 1
        right += ok
        n_a += choice == CORRECT
        n_c += choice == GIVE_UP

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    out = {"acc_total": ratio(right, total)}
    for cls, (a, b) in per_class.items():
        out["acc_" + cls.replace(" ", "_")] = ratio(a, b)
    out["positive_ratio"], out["give_up_ratio"] = ratio(n_a, total), ratio(n_c, total)
    return {k: out[k] for k in MVEI_KEYS}


def _mvei_docs(run: Any, task: str) -> dict[int, dict[str, Any]]:
    """doc_id -> the doc the run used (rebuilt by `mvei.hooks.load_task`); {} when the data is not available."""
    from emo_tasks.mvei.hooks import load_task
    from emo_tasks.settings import environ

    name = str(
        (run.configs.get(task) or {}).get("dataset_name") or ("mvei/sample" if "sample" in task else "mvei/benchmark")
    )
    try:
        return dict(enumerate(load_task(name, environ())))
    except Exception:  # noqa: BLE001 - the export stays scorable from the sample log alone
        return {}


def export_mvei_official(
    run_dir: StrPath, out_dir: StrPath, model_name: str | None = None, *, pick: str | None = None, force: bool = False
) -> Path:
    """EmObserver's `Std_MVEI_results.json` from a run's sample log; returns the file's path.  `pick`: the results
    file to use when RUN_DIR holds several (--run); `force`: replace an earlier export."""
    from emo_tasks.datafiles import read_sample_log

    run, task, log = run_task_log(run_dir, "MVEI", ("mvei", "mvei_sample"), "acc_total", pick)
    name = model_name_for(run, model_name)
    docs = _mvei_docs(run, task)
    notes = [] if docs else ["the run's data could not be loaded now: image_path and prompt are null"]
    data: dict[str, Any] = {}
    for line in sorted(read_sample_log(log), key=lambda r: int(r.get("doc_id", 0))):
        rec = line.get("acc_total") or {}
        if "pair_id" not in rec:
            raise ExportError(f"{log}: line doc_id {line.get('doc_id')} has no MVEI record under 'acc_total'")
        gens = line.get("filtered_resps")
        gens = list(gens[0]) if gens and isinstance(gens[0], list) else list(gens or rec.get("answers") or [])
        doc = docs.get(int(line.get("doc_id", -1)))
        if doc is not None and doc["pair_id"] != rec["pair_id"]:
            doc, notes = None, notes or [f"the data loaded now does not match the run's (pair {rec['pair_id']})"]
        data[str(rec["pair_id"])] = {
            "image_path": doc["image_name"] if doc else None,
            "prompt": doc["statement"] if doc else None,
            "ground_truth": rec["label"],
            "other_info": {"statement_meta": {"class": rec["dimension"]}},
            "generations": ["" if g is None else str(g) for g in gens],
        }
    official = official_mvei_metrics(data)
    project = {k: _num(v) for k, v in (run.results.get(task) or {}).items() if "," in k and "stderr" not in k}
    project = {k.split(",")[0]: v for k, v in project.items()}
    summary = {
        "format": "mvei-official",
        "model_name": name,
        "task": task,
        "n_pairs": len(data),
        "n_generations": sorted({len(r["generations"]) for r in data.values()}),
        "official_first_generation": official,
        "project_majority": project,
        "notes": notes,
    }
    with staged(out_dir, force) as out:
        write_json(out / MVEI_FILE, data)
        finish(out, run, "mvei-official", name, [task], summary, [MVEI_FILE], _mvei_readme(name, summary))
    return Path(out_dir) / MVEI_FILE


def _mvei_readme(name: str, summary: Mapping[str, Any]) -> str:
    o, p = summary["official_first_generation"], summary["project_majority"]
    lines = [
        f"# MVEI submission: {name}",
        "",
        f"`{MVEI_FILE}` is the inference output EmObserver's evaluator reads unchanged",
        "(github.com/wdqqdw/EmObserver, `evaluate/metrics_calculators/mvei.py`): `{id: {image_path, prompt,",
        "ground_truth, other_info, generations}}` with all three generations in the order they were asked.",
        "Their evaluator scores only `generations[0]`; the project scores the majority of the three.",
        "",
        "| metric | authors' evaluator, first generation (%) | project, 3-query majority (%) |",
        "|---|---|---|",
    ]
    for k in MVEI_KEYS:
        lines.append(f"| {k} | {100 * o[k]:.2f} | {'n/a' if p.get(k) is None else f'{p[k]:.2f}'} |")
    lines += [
        "",
        "The first column is computed by our reimplementation of the authors' rule (`parse_choice` on",
        "`extract_answer_str(generations[0])`); running their evaluator on the file gives the same numbers (as",
        "fractions). Provenance: `provenance.json`.",
        *([""] + [f"Note: {n}." for n in summary["notes"]] if summary["notes"] else []),
        "",
        "## Submitting to a leaderboard",
        "",
        f"Send `{MVEI_FILE}` with `provenance.json`. The authors re-score it with",
        '`python -c "from evaluate.metrics_calculators.mvei import MVEIEvaluator as E; '
        f"print(E().evaluate('{MVEI_FILE}'))\"`.",
    ]
    return "\n".join(lines) + "\n"
