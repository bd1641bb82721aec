"""The judge as a stage of its own: `emo-tasks judge RUN_DIR` judges (and scores) the answers an lmms-eval run saved.

Why: an 8-GPU job should not idle while ~13,000 judge calls run, a judge outage after inference should not cost the
run's metrics, and trying another judge should not mean running the model again.  So the model runs with
`--predict_only --log_samples` (or `EMO_JUDGE=defer`), and this stage runs later, anywhere, with any judge.

It reuses each benchmark's own lmms-eval hooks (`load_task`, `doc_to_target`, `doc_to_text`, `process_results`,
`evaluate`: the function the aggregations call), the same settings and the same judge cache, so a stage run and
an in-process run give the same numbers, and a stage run after a judged run sends nothing.

lmms-eval 0.7.3 drops `doc` from its sample log, so each answer is mapped back to its row by `doc_id` and the
task's data source, and checked before anything is judged: the row's `target` (gold answer + a hash of the row's
portable content, see `emo_tasks.common.row_target`) and the prompt the model saw (`input`) must equal what the
data and prompt templates give now, and the task's version must be the one the run recorded.  Any difference is a
refusal (exit 2) naming it: answers are never judged against the wrong rows.

Output (default `RUN_DIR/judged/<judge models>/`, so results of different judges sit side by side): an lmms-eval
style `<stamp>_results.json` (plus `emo_tasks_judge` provenance), `<stamp>_samples_<task>.jsonl` and the
benchmarks' judge logs and summaries under `emo_tasks_judge/` — the layout `emo-tasks report` and `compare` read.

Exit codes: 0 done; 2 refused (the run and the data, prompts or task versions differ); 3 error (no run, no saved
answers, bad settings).
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from emo_tasks.benchmarks import Benchmark, benchmark_of
from emo_tasks.datafiles import read_jsonl_rows, sample_log

EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 2, 3
JUDGED_DIR = "judged"
#: Marks our own results files, so the stage never takes them for the lmms-eval run it judges.
MARKER = "emo_tasks_judge"
#: --judge-model / --step-model / --audio-model -> the variables the benchmarks' settings read.
MODEL_FLAGS = {"judge_model": "EMO_JUDGE_MODEL", "step_model": "EMO_STEP_MODEL", "audio_model": "EMO_AUDIO_MODEL"}


class StageRefused(Exception):
    """The saved answers do not belong to the data, prompts or task version we have now (exit 2)."""


class StageError(Exception):
    """The run cannot be judged as asked: no run, no saved answers, a bad setting (exit 3)."""


class NoAnswers(StageError):
    """A task of the run saved no answers (run without --log_samples)."""


@dataclass
class LoggedSample:
    """One saved answer: what lmms-eval's sample log (or our deferred answers file) holds per document."""

    doc_id: int
    filtered_resps: Any
    target: str | None = None
    input: str | None = None


@dataclass
class TaskPlan:
    """One task of the run, checked and ready to judge."""

    task: str
    bench: Benchmark
    hooks: Any
    config: dict[str, Any]
    samples: list[LoggedSample]
    docs: list[dict[str, Any]]
    records: list[dict[str, Any]] = field(default_factory=list)
    per_metric: list[dict[str, Any]] = field(default_factory=list)  # process_results output per sample


# ------------------------------------------------------------------------------------------------ the run
def source_results(run_dir: Path) -> Path:
    """The lmms-eval results file to judge: the newest `*_results.json` under run_dir that is not one of ours."""
    if run_dir.is_file():
        return run_dir
    if not run_dir.is_dir():
        raise StageError(f"{run_dir}: no such run folder")
    candidates = []
    for path in sorted(run_dir.rglob("*_results.json"), key=lambda p: (p.name, str(p))):
        if JUDGED_DIR in path.relative_to(run_dir).parts[:-1]:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StageError(f"{path}: not readable JSON ({exc})") from exc
        if MARKER not in data:
            candidates.append(path)
    if not candidates:
        raise StageError(
            f"{run_dir}: no lmms-eval *_results.json found. Run lmms-eval with --output_path {run_dir} and "
            "--log_samples (or --predict_only) first."
        )
    return candidates[-1]


def run_tasks(data: Mapping[str, Any], wanted: Sequence[str] | None) -> list[str]:
    """The run's leaf tasks that one of our benchmarks owns (groups named in `wanted` expand to their tasks)."""
    groups = data.get("group_subtasks") or {}
    leaves = [t for t in sorted(data.get("configs") or {}) if (b := benchmark_of(t)) is not None and t not in b.groups]
    if not wanted:
        return leaves
    chosen: list[str] = []
    for name in wanted:
        members = groups.get(name) or ([name] if name in leaves else [])
        if not members:
            raise StageError(f"--tasks {name}: not a task of this run (it has: {', '.join(leaves) or 'none'})")
        chosen.extend(t for t in members if t in leaves and t not in chosen)
    return chosen


def logged_samples(run_dir: Path, results_file: Path, task: str) -> list[LoggedSample]:
    """The task's saved answers: lmms-eval's sample log, else the answers file an `EMO_JUDGE=defer` run wrote."""
    path = sample_log(run_dir, results_file, task)
    if path is None:
        deferred = sorted(run_dir.rglob(f"*{_deferred_name(task)}_*_answers.jsonl"))
        path = deferred[-1] if deferred else None
    if path is None:
        raise NoAnswers(
            f"{task}: no saved answers in {run_dir} (no *_samples_{task}.jsonl). Run lmms-eval with --log_samples "
            "(or --predict_only), or with EMO_JUDGE=defer and --output_path."
        )
    try:
        rows = read_jsonl_rows(path)
    except (OSError, ValueError) as exc:
        raise StageError(f"{path}: not readable JSON lines ({exc})") from exc
    out = []
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or "doc_id" not in row or "filtered_resps" not in row:
            raise StageError(f"{path} line {n}: expected doc_id and filtered_resps (an lmms-eval sample log)")
        out.append(LoggedSample(int(row["doc_id"]), row["filtered_resps"], row.get("target"), row.get("input")))
    return out


def _deferred_name(task: str) -> str:
    """How a deferred answers file names its task (`sample_mme_emotion_er_lab` for the sample's task)."""
    return "sample_" + task.replace("_sample_", "_", 1) if "_sample_" in task else task


# ------------------------------------------------------------------------------------------------ checks
def current_versions() -> dict[str, Any]:
    """Task name -> `metadata.version` of the task YAMLs installed now."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    root = Path(__file__).parent
    versions: dict[str, Any] = {}
    for path in sorted(root.glob("*/*.yaml")):
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}
        if not isinstance(doc.get("task"), str):
            continue
        meta = doc.get("metadata")
        if meta is None and doc.get("include"):
            base = yaml.load((path.parent / doc["include"]).read_text(encoding="utf-8"), Loader=_Loader) or {}
            meta = base.get("metadata")
        versions[doc["task"]] = (meta or {}).get("version")
    return versions


def model_kwargs(recorded: Mapping[str, Any] | None, model: str | None) -> dict[str, Any] | None:
    """The `lmms_eval_specific_kwargs` lmms-eval handed to `doc_to_text` for `--model <model>` (its own rule: the
    model's entry, else the table updated with `default`, else with `dataset`)."""
    if recorded is None:
        return None
    if model and model in recorded:
        return dict(recorded[model])
    for key in ("default", "dataset"):
        if key in recorded:
            return {**recorded, **(recorded.get(key) or {})}
    return dict(recorded)


def check_task(plan: TaskPlan, recorded_version: Any, version_now: Any, model: str | None = None) -> None:
    """Refuse (StageRefused) unless every saved answer maps to the same row and prompt as now."""
    task = plan.task
    if recorded_version != version_now:
        raise StageRefused(
            f"task version: {task} was run as version {recorded_version!r}, the installed one is {version_now!r}"
        )
    kwargs = model_kwargs(plan.config.get("lmms_eval_specific_kwargs"), model)
    n_docs = len(plan.docs)
    data_diffs, prompt_diffs, first = 0, 0, ""
    for s in plan.samples:
        if not 0 <= s.doc_id < n_docs:
            raise StageRefused(f"data: {task} doc_id {s.doc_id} was answered, but the data has {n_docs} rows now")
        doc = plan.docs[s.doc_id]
        if s.target is not None and s.target != (now := plan.hooks.doc_to_target(doc)):
            data_diffs += 1
            first = first or f"doc_id {s.doc_id}: the run recorded target {s.target!r}, the data gives {now!r}"
        elif isinstance(s.input, str) and s.input != (prompt := plan.hooks.doc_to_text(doc, kwargs)):
            prompt_diffs += 1
            first = first or f"doc_id {s.doc_id}: the model was asked {s.input[:80]!r}..., now {prompt[:80]!r}..."
    if data_diffs:
        raise StageRefused(f"data: {task}: {data_diffs} of {len(plan.samples)} answers belong to other rows ({first})")
    if prompt_diffs:
        raise StageRefused(f"prompts: {task}: {prompt_diffs} of {len(plan.samples)} prompts differ ({first})")


# ------------------------------------------------------------------------------------------------ the stage
def stage_env(env: Mapping[str, str], overrides: Mapping[str, str | None]) -> dict[str, str]:
    """The environment the benchmarks' settings are built from: the caller's, the model flags, and a judge that
    is on (EMO_JUDGE unset, auto or defer -> api; offline stays offline: re-scoring without a judge)."""
    out = dict(env)
    for name, value in overrides.items():
        if value:
            out[name] = value
    if (out.get("EMO_JUDGE") or "auto").strip().lower() in ("auto", "defer"):
        out["EMO_JUDGE"] = "api"
    return out


def judge_slug(env: Mapping[str, str], tasks: Sequence[str]) -> str:
    """The folder name of one judge's results: the judge models (or `offline` / `no-judge`)."""
    from judges.config import model_for_role

    if (env.get("EMO_JUDGE") or "").strip().lower() == "offline":
        return "offline"
    if not any(benchmark_of(t) is not None and benchmark_of(t).key == "mme" for t in tasks):
        return "no-judge"
    parts = [f"judge={model_for_role('judge', env)}", f"step={model_for_role('step', env)}"]
    if (env.get("EMO_MME_AUDIO_CLUES") or "").strip().lower() == "live":
        parts.append(f"audio={model_for_role('audio', env)}")
    return re.sub(r"[^A-Za-z0-9._=,+-]+", "_", ",".join(parts))


def prepare(run_dir: Path, results_file: Path, data: Mapping[str, Any], task: str, env: Mapping[str, str]) -> TaskPlan:
    """Load the task's rows as the run did, read its saved answers, check them, and rebuild the records."""
    bench = benchmark_of(task)
    if bench is None or not bench.hooks:
        raise StageError(f"{task}: no judge stage for this task")
    hooks = importlib.import_module(bench.hooks)
    config = (data.get("configs") or {}).get(task) or {}
    if not config.get("dataset_name"):
        raise StageError(f"{results_file}: no dataset_name recorded for {task}")
    samples = logged_samples(run_dir, results_file, task)
    docs = list(hooks.load_task(config["dataset_name"], env))
    plan = TaskPlan(task, bench, hooks, config, samples, docs)
    recorded = (config.get("metadata") or {}).get("version")
    check_task(plan, recorded, current_versions().get(task), (data.get("config") or {}).get("model"))
    first_metric = bench.table.names[0]
    for s in samples:
        out = hooks.process_results(docs[s.doc_id], [s.filtered_resps])
        plan.per_metric.append(out)
        plan.records.append(out[first_metric])
    return plan


def _stamp() -> str:
    """lmms-eval's results-file stamp (its clock: UTC+8), so our files sort after the run's."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.now(ZoneInfo("Asia/Singapore")).strftime("%Y%m%d_%H%M%S")


def _jsonable(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def judge_run(
    run_dir: str | Path,
    *,
    tasks: Sequence[str] | None = None,
    out: str | Path | None = None,
    overrides: Mapping[str, str | None] | None = None,
    env: Mapping[str, str] | None = None,
    dry_run: bool = False,
    prices: Mapping[str, tuple[float, float]] | None = None,
    multiemo_judge: bool = False,
    stream: Any = None,
) -> int:
    """The whole stage; returns the exit code (messages go to `stream`, default stderr/stdout)."""
    from emo_tasks.settings import environ

    err = sys.stderr if stream is None else stream
    outp = sys.stdout if stream is None else stream
    run_path = Path(run_dir)
    try:
        results_file = source_results(run_path)
        data = json.loads(results_file.read_text(encoding="utf-8"))
        names = run_tasks(data, tasks)
        if not names:
            raise StageError(f"{results_file}: the run has no emo-tasks task")
        senv = stage_env(environ() if env is None else env, overrides or {})
        plans, kept = [], {}
        for t in names:
            try:
                plans.append(prepare(run_path, results_file, data, t, senv))
            except NoAnswers as exc:
                if tasks or not _scored(data, t):
                    raise
                kept[t] = (data.get("results") or {}).get(t) or {}  # scored in-process, answers not saved
                print(f"emo-tasks judge: {t}: keeping the run's own numbers ({exc})", file=err)
        if not plans:
            raise StageError(f"{results_file}: no task of this run saved answers to judge")
    except StageRefused as exc:
        print(f"emo-tasks judge: refused: {exc}", file=err)
        return EXIT_REFUSED
    except StageError as exc:
        print(f"emo-tasks judge: {exc}", file=err)
        return EXIT_ERROR
    except Exception as exc:  # settings or data errors name their variable, file or row
        print(f"emo-tasks judge: {type(exc).__name__}: {exc}", file=err)
        return EXIT_ERROR
    print(f"emo-tasks judge: {results_file} ({len(names)} tasks, {sum(len(p.samples) for p in plans)} answers)",
          file=err)  # fmt: skip
    if dry_run:
        from emo_tasks.dryrun import dry_run_report

        return dry_run_report(plans, prices or {}, outp, multiemo_judge)
    out_dir = Path(out) if out is not None else run_path / JUDGED_DIR / judge_slug(senv, names)
    out_dir.mkdir(parents=True, exist_ok=True)
    args = SimpleNamespace(output_path=str(out_dir), log_samples=True)
    values: dict[str, dict[str, Any]] = {}
    try:
        # every task a benchmark can judge ahead goes through one pipeline, not one task after another
        for hooks in {id(p.hooks): p.hooks for p in plans}.values():
            ahead = getattr(hooks, "judge_ahead", None)
            if ahead is not None:
                ahead([p.records for p in plans if p.hooks is hooks])
        for plan in plans:
            computed = plan.hooks.evaluate(plan.records, args)  # what lmms-eval reports: the table's metrics
            values[plan.task] = {m.name: computed[m.name] for m in plan.bench.table}
            if multiemo_judge and plan.bench.key == "multiemo":
                judged = plan.hooks.judge_run_predictions(plan.records, None, out_dir)
                values[plan.task].update({f"judged_{m.name}": judged[m.name] for m in plan.bench.table})
    except Exception as exc:
        print(f"emo-tasks judge: {type(exc).__name__}: {exc}", file=err)
        return EXIT_ERROR
    write_results(out_dir, results_file, data, plans, values, senv, kept)
    from emo_tasks import report

    run = report.load_run(out_dir)
    report.label_runs([run])
    print(report.render_markdown([run], report.build_tables([run])), file=outp)
    print(f"emo-tasks judge: wrote {out_dir}", file=err)
    return EXIT_OK


def _scored(data: Mapping[str, Any], task: str) -> bool:
    """The run itself computed this task's metrics (not a --predict_only "bypass")."""
    row = (data.get("results") or {}).get(task) or {}
    return any(k.endswith(",none") and not k.startswith("bypass") and "_stderr" not in k for k in row)


def group_values(data: Mapping[str, Any], plans: Sequence[TaskPlan], values: Mapping[str, Mapping[str, Any]]) -> dict:
    """Each group of the run whose tasks were all judged, pooled the way the benchmark's groups pool."""
    sizes = {p.task: len(p.samples) for p in plans}
    out: dict[str, dict[str, Any]] = {}
    for group, members in (data.get("group_subtasks") or {}).items():
        bench = benchmark_of(group)
        if not members or bench is None or bench.group_aggregate is None or any(m not in values for m in members):
            continue
        out[group] = {
            m.name: bench.group_aggregate([values[t].get(m.name) for t in members], [sizes[t] for t in members])
            for m in bench.table
        }
    return out


def write_results(
    out_dir: Path,
    source: Path,
    data: Mapping[str, Any],
    plans: Sequence[TaskPlan],
    values: Mapping[str, Mapping[str, Any]],
    env: Mapping[str, str],
    kept: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """The lmms-eval layout `emo-tasks report` reads: results.json and one sample log per task.  `kept`: tasks
    whose numbers the run computed itself (copied as they are)."""
    from judges.atomic import atomic_path, atomic_write_text
    from judges.config import EndpointConfig

    stamp = _stamp()
    results: dict[str, dict[str, Any]] = {}
    for task, vals in {**values, **group_values(data, plans, values)}.items():
        row: dict[str, Any] = {"alias": task}
        for name, v in vals.items():
            row[f"{name},none"] = _jsonable(v)
            row[f"{name}_stderr,none"] = "N/A"
        results[task] = row
    for task, row in (kept or {}).items():
        results[task] = dict(row)
    try:
        endpoint: str | None = EndpointConfig.from_env(env).host
    except Exception:  # noqa: BLE001 - provenance only
        endpoint = None
    doc = {k: v for k, v in data.items() if k not in ("results", "date", "start_time", "end_time")}
    doc["results"] = results
    doc["date"] = time.time()
    doc[MARKER] = {
        "source_results": str(source),
        "tasks": [p.task for p in plans],
        "judged_at": stamp,
        "judge_models": {r: env.get(v) for r, v in MODEL_FLAGS.items() if env.get(v)},
        "judge_endpoint": endpoint,
        "judge_mode": env.get("EMO_JUDGE"),
    }
    results_path = out_dir / f"{stamp}_results.json"
    atomic_write_text(results_path, json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    for plan in plans:
        with atomic_path(out_dir / f"{stamp}_samples_{plan.task}.jsonl") as tmp, open(tmp, "w", encoding="utf-8") as f:
            for s, per_metric in zip(plan.samples, plan.per_metric, strict=True):
                line = {"doc_id": s.doc_id, "target": s.target, "filtered_resps": s.filtered_resps, "input": s.input}
                line.update(per_metric)
                f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    return results_path
