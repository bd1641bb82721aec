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
answers, bad settings, a judge model the endpoint does not know: stopped at its first request).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from emo_tasks.benchmarks import all_benchmarks, benchmark_of
from emo_tasks.datafiles import sample_log
from emo_tasks.judging.judged_folder import judge_slug, judged_dir, setup_shutdown  # noqa: F401 - judge_slug re-exported
from emo_tasks.judging.stage_types import (  # noqa: F401 - the stage's names, re-exported for its callers
    DEFAULT_MAX_FAILURE_SHARE,
    EXIT_ERROR,
    EXIT_JUDGE_FAILURES,
    EXIT_OK,
    EXIT_REFUSED,
    MODEL_FLAGS,
    LoggedSample,
    NoAnswers,
    StageError,
    StageRefused,
    TaskPlan,
)
from emo_tasks.results.layout import ANSWERS_SUFFIX, JUDGE_DIR, MARKER
from judges.endpoint import JudgeModelNotFound


# ------------------------------------------------------------------------------------------------ the run
def source_results(run_dir: Path, pick: str | None = None) -> tuple[Path, dict[str, Any]]:
    """The lmms-eval results file to judge and its content, by the rule every command uses
    (`reader.find_results`): the folder's one lmms-eval results file (judged results under `judged/` are ours,
    never a source), or the one `pick` (--run) names; several and none picked is a refusal listing them."""
    from emo_tasks.results import reader

    if run_dir.is_file():
        chosen = run_dir
    elif not run_dir.is_dir():
        raise StageError(f"{run_dir}: no such run folder")
    else:
        lmms, judged = reader.candidates(run_dir)
        if pick:
            try:
                chosen = reader.pick_results(run_dir, pick, sorted(lmms + judged, key=lambda p: (p.name, str(p))))
            except reader.ReportError as exc:
                raise StageRefused(str(exc)) from None
        elif not lmms and (refused := reader.refused_note(run_dir)):
            raise StageRefused(f"{run_dir}: {refused}")
        elif not lmms:
            raise StageError(
                f"{run_dir}: no lmms-eval *_results.json found. Run lmms-eval with --output_path {run_dir} and "
                "--log_samples (or --predict_only) first."
            )
        elif len(lmms) > 1:
            listed = ", ".join(str(f.relative_to(run_dir)) for f in lmms)
            raise StageRefused(
                f"{run_dir} holds {len(lmms)} lmms-eval runs ({listed}); pick one with --run NAME_OR_PATH (a date "
                "stamp or the results file), or write each run to a fresh --output_path"
            )
        else:
            chosen = lmms[0]
    try:
        data = json.loads(chosen.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StageError(f"{chosen}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise StageError(f"{chosen}: not an lmms-eval results file (no JSON object)")
    if MARKER in data:
        raise StageRefused(
            f"{chosen} is a judged result (written by emo-tasks judge); judge the lmms-eval run it was made from: "
            f"{(data.get(MARKER) or {}).get('source_results')}"
        )
    return chosen, data


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


def was_deferred(data: Mapping[str, Any], task: str) -> bool:
    """The run judged nothing of this task in-process (EMO_JUDGE=defer): its results carry the judge counts, null."""
    row = (data.get("results") or {}).get(task) or {}
    return "n_scored,none" in row and row["n_scored,none"] is None


def logged_samples(
    run_dir: Path, results_file: Path, task: str, data: Mapping[str, Any] | None = None
) -> tuple[Path, list[LoggedSample]]:
    """The task's saved answers and the file they came from: the sample log beside the results file with its own
    stamp, else, when the run deferred the task's judging (`data`: its results), the answers file an
    `EMO_JUDGE=defer` run wrote to its folder's `emo_tasks_judge/` when there is exactly one for the task
    (several: refused, they cannot be told apart).  Never another run's file."""
    from emo_tasks.datafiles import read_jsonl_numbered
    from emo_tasks.results.reader import run_root

    path = sample_log(run_dir, results_file, task)
    deferred = path is None
    if deferred and (data is None or was_deferred(data, task)):
        root = run_root(run_dir, results_file)
        found = sorted((root / JUDGE_DIR).glob(f"{_deferred_name(task)}_*{ANSWERS_SUFFIX}"))
        if len(found) > 1:
            raise StageRefused(
                f"{task}: {results_file.name} has no sample log, and {root / JUDGE_DIR} holds "
                f"{len(found)} deferred answer files ({', '.join(f.name for f in found)}): which belongs to this "
                "run cannot be proven; write each EMO_JUDGE=defer run to a fresh --output_path, or rerun with "
                "--log_samples"
            )
        path = found[0] if found else None
    if path is None:
        raise NoAnswers(
            f"{task}: no saved answers for {results_file.name} (no {results_file.name[: -len('results.json')]}"
            f"samples_{task}.jsonl beside it). Run lmms-eval with --log_samples (or --predict_only), or with "
            "EMO_JUDGE=defer and --output_path."
        )
    try:
        rows = read_jsonl_numbered(path)
    except (OSError, ValueError) as exc:
        raise StageError(f"{exc}") from exc
    out = []
    for n, row in rows:
        if not isinstance(row, dict) or "doc_id" not in row or "filtered_resps" not in row:
            raise StageError(f"{path} line {n}: expected doc_id and filtered_resps (an lmms-eval sample log)")
        try:
            doc_id = int(row["doc_id"])
        except (TypeError, ValueError):
            raise StageError(f"{path} line {n}: doc_id {row['doc_id']!r} is not a row number") from None
        missing = [k for k in (("target",) if deferred else ("target", "input")) if not isinstance(row.get(k), str)]
        if missing:
            raise StageRefused(
                f"rows: {task}: {path.name} line {n} (doc_id {doc_id}) has no {' or '.join(missing)}, so the answer "
                "cannot be proven to belong to its row"
            )
        out.append(LoggedSample(doc_id, row["filtered_resps"], row.get("target"), row.get("input"), line=n))
    return path, out


def _deferred_name(task: str) -> str:
    """How a deferred answers file names its task (`sample_mme_emotion_er_lab` for the sample's task)."""
    return "sample_" + task.replace("_sample_", "_", 1) if "_sample_" in task else task


# ------------------------------------------------------------------------------------------------ checks
def current_versions() -> dict[str, Any]:
    """Task name -> `metadata.version` of the task YAMLs installed now."""
    from emo_tasks.common import task_configs

    return {task: (conf.get("metadata") or {}).get("version") for task, conf in task_configs().items()}


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


def _ids(ids: Sequence[int], limit: int = 10) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def check_rows(plan: TaskPlan, n_samples: Mapping[str, Any] | None, partial: bool = False) -> None:
    """Each row exactly once, and every row the run answered: a duplicated doc_id, or fewer answers than the run's
    own `n-samples` (its effective count, which --limit sets), is refused (StageRefused) naming task and doc ids.
    `partial` (--partial) accepts missing rows (recorded in the plan, and in the results, as a partial judgement);
    never duplicates."""
    task = plan.task
    seen: dict[int, int] = {}
    dups: list[str] = []
    for s in plan.samples:
        if s.doc_id in seen:
            dups.append(f"doc_id {s.doc_id} (lines {seen[s.doc_id]} and {s.line})")
        else:
            seen[s.doc_id] = s.line
    where = plan.answers_file.name if plan.answers_file else "the saved answers"
    if dups:
        shown = "; ".join(dups[:5]) + (f"; and {len(dups) - 5} more" if len(dups) > 5 else "")
        raise StageRefused(f"rows: {task}: {where} holds {len(dups)} row(s) twice: {shown}")
    effective = (n_samples or {}).get("effective")
    if not isinstance(effective, int) or isinstance(effective, bool):
        if partial:
            return
        raise StageRefused(
            f"rows: {task}: the run's results file records no n-samples for it, so it cannot be proven that every "
            "row was answered; pass --partial to judge the rows there are (the results then say so)"
        )
    plan.n_expected = effective
    if len(seen) > effective:
        raise StageRefused(f"rows: {task}: {where} holds {len(seen)} rows, the run answered {effective}")
    if len(seen) < effective:
        # lmms-eval answers the first `effective` rows (--limit), so the missing ones are among them
        missing = sorted(set(range(effective)) - set(seen))
        if not partial:
            raise StageRefused(
                f"rows: {task}: {where} holds {len(seen)} of the {effective} rows the run answered (missing doc_id "
                f"{_ids(missing) or '?'}); pass --partial to judge only these (the results then say so)"
            )
        plan.missing = missing


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
    is on (EMO_JUDGE unset, auto, defer or batch -> api; offline stays offline: re-scoring without a judge).
    `batch` is the tasks' refusal of in-process batching (`settings.refuse_batch_judge`); here the flag says how the
    stage sends (`--batch`), so the variable only means "judge"."""
    out = dict(env)
    for name, value in overrides.items():
        if value:
            out[name] = value
    if (out.get("EMO_JUDGE") or "auto").strip().lower() in ("auto", "defer", "batch"):
        out["EMO_JUDGE"] = "api"
    return out


def judge_setup(env: Mapping[str, str], tasks: Sequence[str], extra_judge: bool = False) -> dict[str, Any]:
    """Everything about the judge that can change a number: the mode, what each benchmark of `tasks` says of its
    judge (`Benchmark.judge_setup`: models per role, protocol, ...; `extra_judge`: its optional judge stage was
    asked for) and, when any judge is used, the endpoint host (never a key).  Each benchmark's judge fingerprint
    (`judges.fingerprint`: served models, sampling settings, prompt templates) goes under `judge_fingerprint`,
    by benchmark key.  Recorded in the judged results; what of it was asked for is hashed into the folder name
    (`judged_folder.request_part`), so two requests never share (or overwrite) one folder."""
    from judges.config import EndpointConfig

    mode = (env.get("EMO_JUDGE") or "api").strip().lower()
    setup: dict[str, Any] = {"judge_mode": mode}
    if mode == "offline":
        return setup
    benches = {b.key: b for t in tasks if (b := benchmark_of(t)) is not None}
    fingerprints: dict[str, Any] = {}
    for bench in all_benchmarks():
        if bench.key in benches and bench.judge_setup is not None:
            own = dict(bench.judge_setup(env, extra_judge))
            if own.get("judge_fingerprint") is not None:
                fingerprints[bench.key] = own.pop("judge_fingerprint")
            setup.update(own)
    if fingerprints:  # after what the benchmarks say in words, as the one-line setup reads them
        setup["judge_fingerprint"] = fingerprints
    if len(setup) > 1:
        try:
            setup["endpoint"] = EndpointConfig.from_env(env).host
        except Exception:  # noqa: BLE001 - an unusable endpoint fails later, with its own message
            setup["endpoint"] = None
    return setup


def read_answers(
    run_dir: Path, results_file: Path, data: Mapping[str, Any], task: str, partial: bool = False
) -> TaskPlan:
    """The task's saved answers, read and checked for each row once and every row (`check_rows`): the proof that
    needs no data, settings or endpoint, so it runs for every task before anything else."""
    bench = benchmark_of(task)
    if bench is None or not bench.hooks:
        raise StageError(f"{task}: no judge stage for this task")
    hooks = importlib.import_module(bench.hooks)
    config = (data.get("configs") or {}).get(task) or {}
    if not config.get("dataset_name"):
        raise StageError(f"{results_file}: no dataset_name recorded for {task}")
    answers_file, samples = logged_samples(run_dir, results_file, task, data)
    plan = TaskPlan(task, bench, hooks, config, samples, [], answers_file=answers_file)
    check_rows(plan, (data.get("n-samples") or {}).get(task), partial)
    return plan


def prepare(plan: TaskPlan, data: Mapping[str, Any], env: Mapping[str, str]) -> TaskPlan:
    """Load the task's rows as the run did (a subset run: its recorded subset, `emo_tasks.subset.stage_env`),
    check that every answer maps to the same row and prompt as now, and rebuild the records."""
    from emo_tasks import subset
    from emo_tasks.settings import cache_dir

    name = plan.config["dataset_name"]
    try:  # a subset run's rows are its recorded subset's, whatever EMO_SUBSET says now (a different one: refused)
        env = subset.stage_env(name, plan.config, env, cache_dir(env) / "subsets")
    except subset.SubsetMismatch as exc:
        raise StageRefused(f"data: {plan.task}: {exc}") from None
    plan.docs = list(plan.hooks.load_task(name, env))
    recorded = (plan.config.get("metadata") or {}).get("version")
    check_task(plan, recorded, current_versions().get(plan.task), (data.get("config") or {}).get("model"))
    first_metric = plan.bench.table.names[0]
    for s in plan.samples:
        out = plan.hooks.process_results(plan.docs[s.doc_id], [s.filtered_resps])
        plan.per_metric.append(out)
        plan.records.append(out[first_metric])
    return plan


def keep_units(plan: TaskPlan, keys: Sequence[str]) -> None:
    """Leave in a prepared plan only the answers of the units `keys` names (the benchmark's `subset_unit`)."""
    wanted = set(keys)
    kept = [i for i, s in enumerate(plan.samples) if plan.hooks.subset_unit(plan.docs[s.doc_id]) in wanted]
    plan.samples = [plan.samples[i] for i in kept]
    plan.records = [plan.records[i] for i in kept]
    plan.per_metric = [plan.per_metric[i] for i in kept]


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
    extra_judge: bool = False,
    stream: Any = None,
    run: str | None = None,
    partial: bool = False,
    max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
    keep: Mapping[str, Sequence[str]] | None = None,
    batch: Any = None,
    batch_cancel: float | None = None,
) -> int:
    """The whole stage; returns the exit code (messages go to `stream`, default stderr/stdout).  `keep` (dry runs
    only: `emo-tasks plan-gate` costs a planned subset): dataset_name -> the unit keys to count, the rest of the
    run's answers left out.  `batch_cancel` (--batch-cancel, its --batch-poll): cancel the batches out first."""
    from emo_tasks.settings import environ

    err = sys.stderr if stream is None else stream
    outp = sys.stdout if stream is None else stream
    run_path = Path(run_dir)
    try:
        results_file, data = source_results(run_path, run)
        names = run_tasks(data, tasks)
        if not names:
            raise StageError(f"{results_file}: the run has no emo-tasks task")
        senv = stage_env(environ() if env is None else env, overrides or {})
        if dry_run:  # counting needs models and token counts, not an endpoint: a stand-in when none is set
            from emo_tasks.judging.dryrun import dry_run_env

            senv = dry_run_env(senv, err)
        elif batch is not None and batch.local:  # request files for `vllm run-batch`: nothing is sent anywhere
            from emo_tasks.judging.dryrun import STAND_IN_BASE_URL

            senv = {k: v for k, v in senv.items() if k != "OPENAI_API_URL"}
            senv.update(API_TYPE="openai", OPENAI_BASE_URL=STAND_IN_BASE_URL)
        plans, kept = [], {}
        for t in names:  # every task's answers proven first: each row once, every row
            try:
                plans.append(read_answers(run_path, results_file, data, t, partial))
            except NoAnswers as exc:
                if tasks or not _scored(data, t):
                    raise
                kept[t] = (data.get("results") or {}).get(t) or {}  # scored in-process, answers not saved
                print(f"emo-tasks judge: {t}: keeping the run's own numbers ({exc})", file=err)
        if not plans:
            raise StageError(f"{results_file}: no task of this run saved answers to judge")
        if keep is not None and not dry_run:
            raise StageError("keep= is for dry runs only (a judgement covers every row the run answered)")
        for plan in plans:
            prepare(plan, data, senv)
            if keep is not None:
                keep_units(plan, keep.get(plan.config["dataset_name"], ()))
        for plan in plans:
            if plan.missing:
                print(f"emo-tasks judge: --partial: {plan.task}: judging {len(plan.samples)} of the "
                      f"{plan.n_expected} rows the run answered", file=err)  # fmt: skip
        print(f"emo-tasks judge: {results_file} ({len(names)} tasks, {sum(len(p.samples) for p in plans)} "
              "answers)", file=err)  # fmt: skip
        if dry_run:
            from emo_tasks.judging.dryrun import dry_run_report

            return dry_run_report(plans, prices or {}, outp, extra_judge, batch=batch)
        from judges.fingerprint import forget_assumed

        forget_assumed()  # what another judged folder of this process recorded is not this one's (`settle`)
        setup = judge_setup(senv, names, extra_judge)
        out_dir = Path(out) if out is not None else judged_dir(run_path, setup)
        usable_out(out_dir)
        with _judge_lock(out_dir, err):
            from emo_tasks.judging.judged_folder import settle

            setup = settle(out_dir, setup, senv, lambda: judge_setup(senv, names, extra_judge))

            def judge() -> int:
                return _judge_and_write(
                    plans, kept, data, results_file, out_dir, senv, setup, extra_judge, max_failure_share, err, outp
                )

            from emo_tasks.judging.batching import judge_with_book  # the folder's batch book, even without --batch

            return judge_with_book(judge, out_dir, senv, batch, err, batch_cancel)
    except StageRefused as exc:
        print(f"emo-tasks judge: refused: {exc}", file=err)
        return EXIT_REFUSED
    except StageError as exc:
        print(f"emo-tasks judge: {exc}", file=err)
        return EXIT_ERROR
    except JudgeModelNotFound as exc:  # a retired or unknown judge model: stopped at its first request
        print(f"emo-tasks judge: stopped: {exc}", file=err)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - settings or data errors name their variable, file or row; any crash
        print(f"emo-tasks judge: {type(exc).__name__}: {_one_line(exc)}", file=err)  # is exit 3 in one line
        return EXIT_ERROR


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 2000 else text[:2000] + " ..."


def usable_out(out_dir: Path) -> None:
    """The output folder can be made and written, or a StageError (exit 3) saying why in one line: --out names an
    existing file, a path under a file, a name too long, a folder we may not write."""
    if out_dir.exists() and not out_dir.is_dir():
        raise StageError(f"--out {out_dir}: exists and is not a folder; name a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / f".emo-tasks-write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise StageError(f"output folder {out_dir}: cannot be written ({exc.strerror or exc})") from None


@contextlib.contextmanager
def _judge_lock(out_dir: Path, err: Any) -> Iterator[None]:
    """One `emo-tasks judge` at a time per output folder: a second one on the same run and judge setup waits for
    the first, then finds its answers in the cache, instead of paying for the same calls twice."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(out_dir / ".emo-tasks-judge.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(
            f"emo-tasks judge: another emo-tasks judge is writing {out_dir}; waiting for it to finish (its answers "
            "are cached, so this run then resends only what it could not get)",
            file=err,
            flush=True,
        )
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _judge_and_write(
    plans: Sequence[TaskPlan],
    kept: Mapping[str, Mapping[str, Any]],
    data: Mapping[str, Any],
    results_file: Path,
    out_dir: Path,
    senv: Mapping[str, str],
    setup: Mapping[str, Any],
    extra_judge: bool,
    max_failure_share: float,
    err: Any,
    outp: Any,
) -> int:
    """Judge every plan, write the results, print the report; the exit code (4 when too many judgements failed)."""
    args = SimpleNamespace(output_path=str(out_dir), log_samples=True)
    values: dict[str, dict[str, Any]] = {}
    # every task a benchmark can judge ahead goes through one pipeline, not one task after another
    for hooks in {id(p.hooks): p.hooks for p in plans}.values():
        ahead = getattr(hooks, "judge_ahead", None)
        if ahead is not None:
            ahead([p.records for p in plans if p.hooks is hooks])
    from judges.batch import BatchPending

    waiting: BatchPending | None = None  # a batched stage (`batching`): requests of this pass wait for a batch
    waiting_hooks: set[int] = set()
    for plan in plans:
        if id(plan.hooks) in waiting_hooks:
            continue  # its benchmark's pipeline waits already (it judged all its tasks at once)
        try:
            computed = plan.hooks.evaluate(plan.records, args)  # what lmms-eval reports: the table's metrics
        except BatchPending as exc:
            waiting = exc
            waiting_hooks.add(id(plan.hooks))
            continue
        values[plan.task] = {m.name: computed[m.name] for m in plan.bench.table}
        extra = getattr(plan.hooks, "judge_run_predictions", None)  # a benchmark's optional judge stage
        if extra_judge and extra is not None:
            try:
                judged = extra(plan.records, None, out_dir)
            except BatchPending as exc:  # the other tasks' requests still join this round
                waiting = exc
                continue
            values[plan.task].update({f"judged_{m.name}": judged[m.name] for m in plan.bench.table})
    if waiting is not None:
        raise waiting
    try:
        write_results(out_dir, results_file, data, plans, values, senv, kept, setup)
    except OSError as exc:
        raise StageError(f"output folder {out_dir}: cannot be written ({exc.strerror or exc})") from None
    from emo_tasks.results import reader, report

    run = reader.load_run(out_dir)
    reader.label_runs([run])
    print(report.render_markdown([run], report.build_tables([run])), file=outp)
    print(f"emo-tasks judge: wrote {out_dir}", file=err)
    got = reader.failure_share(run, [p.task for p in plans])
    if got is not None and got[1] and got[0] / got[1] > max_failure_share:
        print(
            f"emo-tasks judge: {got[0]} of {got[1]} judgements failed ({got[0] / got[1]:.0%} > --max-failure-share "
            f"{max_failure_share:g}); the results are written but not fit to report. Fix the judge endpoint and "
            "run the same command again: only the failures are sent again.",
            file=err,
        )
        return EXIT_JUDGE_FAILURES
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
    setup: Mapping[str, Any] | None = None,
) -> Path:
    """The lmms-eval layout `emo-tasks report` reads: results.json and one sample log per task.  `kept`: tasks
    whose numbers the run computed itself (copied as they are)."""
    from emo_tasks.common import file_stamp
    from judges.atomic import atomic_path, atomic_write_text
    from judges.config import EndpointConfig

    stamp = file_stamp()  # lmms-eval's results-file stamp, on its clock: our files sort after the run's
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
    doc["date"] = stamp  # lmms-eval's own form (its results stamp), as the leaderboard JSON promises: a string
    doc[MARKER] = {
        "source_results": str(source),
        "tasks": [p.task for p in plans],
        "judged_at": stamp,
        "judge_models": {r: env.get(v) for r, v in MODEL_FLAGS.items() if env.get(v)},
        "judge_endpoint": endpoint,
        "judge_mode": env.get("EMO_JUDGE"),
        "judge_setup": dict(setup or {}),
        # what the endpoint says of the judge models' shutdown: beside the setup, never in a key or folder name
        "judge_shutdown": setup_shutdown(setup or {}, env, ask=False),
        "answers_files": {p.task: str(p.answers_file) for p in plans if p.answers_file is not None},
    }
    partial = {p.task: {"judged": len(p.samples), "of": p.n_expected, "missing_doc_ids": p.missing}
               for p in plans if p.missing}  # fmt: skip
    if partial:
        doc[MARKER]["partial"] = partial
    results_path = out_dir / f"{stamp}_results.json"
    atomic_write_text(results_path, json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    for plan in plans:
        with atomic_path(out_dir / f"{stamp}_samples_{plan.task}.jsonl") as tmp, open(tmp, "w", encoding="utf-8") as f:
            for s, per_metric in zip(plan.samples, plan.per_metric, strict=True):
                line = {"doc_id": s.doc_id, "target": s.target, "filtered_resps": s.filtered_resps, "input": s.input}
                line.update(per_metric)
                f.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    return results_path
