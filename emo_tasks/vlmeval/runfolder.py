"""An lmms-eval-shaped run folder written from a VLMEvalKit evaluation: `<stamp>_results.json` and
`<stamp>_samples_<task>.jsonl` as lmms-eval 0.7.3 writes them (the fields our readers use), so every `emo-tasks`
tool reads a VLMEvalKit run as it reads an lmms-eval one.  Why a folder per dataset: a folder holding several
results files needs --run in every tool; one evaluation is one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from emo_tasks import subset
from emo_tasks.common import STAMP_TZ, atomic_write_text, file_stamp
from emo_tasks.results.layout import JUDGED_DIR, REFUSED
from emo_tasks.settings import environ
from emo_tasks.vlmeval.reasoning import LMMS_EVAL_TAGS

#: Where beside VLMEvalKit's prediction file the run folder goes: `<its folder>/emo_tasks/<dataset>/`.
FOLDER = "emo_tasks"


def prompt_config(task: str) -> dict[str, Any]:
    """What lmms-eval records of the task's prompt (`reader.PROMPT_FIELDS`) and its metadata (with the gate subset
    the rows came from, `EMO_SUBSET`), from the task's YAML
    (`common.task_configs`): a VLMEvalKit run asks the task's `doc_to_text` with its default kwargs, as lmms-eval
    does, so `compare` can pair it with an lmms-eval run of the same task.  A `!function` is written as lmms-eval
    writes it ("<function name>", as `compare` reads it without the address)."""
    from emo_tasks.common import FunctionRef, task_configs
    from emo_tasks.results.reader import PROMPT_FIELDS

    conf = task_configs().get(task)
    if conf is None:
        raise ValueError(f"no task YAML for {task} under emo_tasks/")
    out: dict[str, Any] = {"description": "", "num_fewshot": 0}  # lmms-eval's defaults
    for key in (*PROMPT_FIELDS, "metadata"):
        if key in conf:
            value = conf[key]
            out[key] = f"<function {value.rsplit('.', 1)[-1]}>" if isinstance(value, FunctionRef) else value
    rec = subset.record_for(str(conf.get("dataset_name")), environ())  # the rows load_task kept, as lmms-eval's
    if rec is not None:  # patched loader records them (emo_tasks/lmms_patch.py)
        out["metadata"] = {**(out.get("metadata") or {}), subset.RECORD: rec}
    return out


#: VLMEvalKit's `--base-url` model (`LMDeployAPI`) when the run does not say: run.py's --max-tokens default and
#: the class's temperature (`api/lmdeploy.py`).
BASE_URL_DEFAULTS = {"temperature": 0.0, "max_tokens": 2**15}
_FLAGS = (("--limit", int), ("--temperature", float), ("--max-tokens", int), ("--top-p", float), ("--top-k", int),
          ("--repetition-penalty", float), ("--base-url", str), ("--config", str))  # fmt: skip


#: The run's arguments (VLMEvalKit's argparse names) that say what it asked: `work_dir` is there only when the
#: dataset got the whole argument set.
RUN_ARGS = ("work_dir", "limit", "base_url", "config", "video_llm", "temperature", "max_tokens", "top_p", "top_k",
            "repetition_penalty")  # fmt: skip


def run_settings(eval_file: str | Path, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the VLMEvalKit run that wrote `eval_file` was asked: `limit` and the generation settings
    (`generation`), which belong to the model in VLMEvalKit, not to the dataset.

    From the run's own arguments when the dataset was handed them (`args`: VLMEvalKit gives a dataset's constructor
    `vars(args)`, under `python -m vlmeval` and under EvalScope's backend alike), else from the `status.json` beside
    the file (run.py records its argv there; a dataset built from a `--config` entry gets only that entry).  Only
    --base-url models take the command line's generation flags; other models keep their own settings, which the
    run does not say.  Never the argv itself: it holds the model's API key.  `{"known": False}` when neither
    is there."""
    if args is not None and args.get("work_dir") is not None:
        ns = argparse.Namespace(**{k: args.get(k) for k in RUN_ARGS})
    else:
        ns = _status_args(eval_file)
        if ns is None:
            return {"known": False}
    if ns.base_url:
        given = {k: getattr(ns, k) for k in ("temperature", "max_tokens", "top_p", "top_k", "repetition_penalty")}
        given = {k: v for k, v in given.items() if v is not None}
        generation = {"model": "--base-url (VLMEvalKit's LMDeployAPI)", **BASE_URL_DEFAULTS, **given}
    elif ns.config:
        generation = {"model": f"--config {ns.config} (the generation settings are the model's entry there)"}
    else:
        generation = {"model": "a VLMEvalKit model class (its own generation settings, not recorded by the run)"}
    return {"known": True, "limit": ns.limit, "video_llm": bool(ns.video_llm), "generation": generation}


def _status_args(eval_file: str | Path) -> argparse.Namespace | None:
    try:
        argv = json.loads((Path(eval_file).parent / "status.json").read_text(encoding="utf-8"))["argv"]
        assert isinstance(argv, list)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        return None
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag, kind in _FLAGS:
        parser.add_argument(flag, type=kind, default=None)
    parser.add_argument("--video-llm", action="store_true")
    try:
        ns, _ = parser.parse_known_args([str(a) for a in argv[1:]])
    except (SystemExit, ValueError):
        return None
    return ns


def generation_notes(task: str, generation: Mapping[str, Any]) -> list[str]:
    """What the run's known generation settings change against the task's (its YAML's `generation_kwargs`, the
    protocol's): one line each, for the results and the report."""
    from emo_tasks.common import task_configs

    want = (task_configs().get(task) or {}).get("generation_kwargs") or {}
    notes = []
    for ours, theirs in (("temperature", "temperature"), ("max_tokens", "max_new_tokens"), ("top_p", "top_p")):
        if ours in generation and theirs in want and float(generation[ours]) != float(want[theirs]):
            notes.append(
                f"generation: {ours} {generation[ours]} where the task asks {theirs} {want[theirs]} (VLMEvalKit "
                "leaves it to the model: pass --" + ours.replace("_", "-") + " to match)"
            )
    return notes


def run_facts(eval_file: str | Path, task: str, asked: Mapping[str, Any]) -> dict[str, Any]:
    """What the results say of the VLMEvalKit run behind `eval_file` (`asked`: its `run_settings`): the prediction
    file, the generation settings known, and a note for each that differs from `task`'s."""
    generation = asked.get("generation")
    return {
        "prediction_file": str(Path(eval_file).resolve()),
        "generation": generation,
        "notes": generation_notes(task, generation or {}),
    }


def run_dir(eval_file: str | Path, dataset: str) -> Path:
    return Path(eval_file).resolve().parent / FOLDER / dataset


def run_stamp(when: float | None = None) -> str:
    """The date stamp a run's files are named by: of `when` (the prediction file's mtime), else now; on lmms-eval's
    clock, as every name emo-tasks stamps (`emo_tasks.common.file_stamp`)."""
    return file_stamp(when=when)


@contextmanager
def evaluation(eval_file: str | Path, dataset: str) -> Iterator[Path]:
    """One evaluation of VLMEvalKit's prediction file `eval_file` of `dataset`; yields the run folder to write.

    Why: a refused evaluation must leave no number that any tool could take for this run's.  VLMEvalKit keeps the
    dataset's previous metrics in its run summary (`status.json`) when `evaluate` raises, and our run folder held
    the previous prediction file's run: the old number looked current.  So, first, the summary's metrics of
    `dataset` are cleared (`forget_summary`) and the folder's runs of other prediction files removed (whatever
    happens next, they are not this file's); then, if the body raises, every run in the folder goes too (its
    results, sample logs and `judged/`) and `REFUSED` says why, which every `emo-tasks` command names (exit 2).
    Removed rather than marked stale: a results file left in place is one a tool we do not control (a script
    globbing `*_results.json`) would still take.  Nothing paid for is lost: the judge's answers stay in its cache."""
    folder = run_dir(eval_file, dataset)
    forget_summary(eval_file, dataset)
    if folder.is_dir():
        _forget_other_runs(folder, run_stamp(Path(eval_file).stat().st_mtime))
    try:
        yield folder
    except Exception as exc:
        _forget_other_runs(folder, None)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        record = {
            "dataset": dataset,
            "prediction_file": str(Path(eval_file).resolve()),
            "refused_at": datetime.now(STAMP_TZ).isoformat(timespec="seconds"),
            "reason": reason,
        }
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / REFUSED, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        raise


def forget_summary(eval_file: str | Path, dataset: str) -> None:
    """Clear `dataset`'s metrics in VLMEvalKit's run summary (the `status.json` beside `eval_file`), with its own
    function: VLMEvalKit writes them again when `evaluate` returns, and keeps the old ones when it raises."""
    status = Path(eval_file).parent / "status.json"
    if not status.is_file():
        return
    try:
        from vlmeval.smp.status_report import load_run_status, upsert_dataset_status
    except ImportError:  # another VLMEvalKit: no summary of this kind
        return
    try:
        data = load_run_status(status.parent)
        entry = (data.get("datasets") or {}).get(dataset)
        if isinstance(entry, dict) and entry.get("metrics"):
            model = data.get("model_name") or status.parent.name
            upsert_dataset_status(status.parent, model_name=model, dataset_name=dataset, metrics_source=None)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        print(f"emo-tasks: {status}: could not clear {dataset}'s previous metrics ({exc})", file=sys.stderr)


@dataclass(frozen=True)
class TaskOutput:
    """One task's part of a run folder: its metrics, sample-log lines, config (as lmms-eval records it) and how
    many docs it has (`n_original`, when more than were answered)."""

    task: str
    metrics: Mapping[str, Any]
    lines: Sequence[Mapping[str, Any]]
    config: Mapping[str, Any]
    n_original: int | None = None


def write_run(
    folder: Path,
    task: str,
    metrics: Mapping[str, Any],
    lines: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any],
    model: str,
    host: Mapping[str, Any],
    when: float | None = None,
    n_original: int | None = None,
) -> Path:
    """`write_tasks` for one task."""
    return write_tasks(folder, [TaskOutput(task, metrics, lines, config, n_original)], model, host, when)


def write_tasks(
    folder: Path,
    tasks: Sequence[TaskOutput],
    model: str,
    host: Mapping[str, Any],
    when: float | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    group_metrics: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write the results file and a sample log per task into `folder`; returns the results file.  `host`: what the
    results say of the host run (VLMEvalKit's files, the generation settings known, flags).  `when`: the time the
    files are named by (the prediction file's mtime: evaluating the same predictions again rewrites the same run
    instead of adding a second one to the folder); now when not given.  A run of other predictions in the folder
    (VLMEvalKit has replaced its prediction file since) is removed with what was judged of it: one folder, one
    run, so no tool needs --run.  `groups`: group -> its tasks (lmms-eval's `group_subtasks`), each with the
    metric names of its tasks, not computed here (the judge stage pools them), unless `group_metrics` (group ->
    its metrics, as the benchmark's group aggregation gives them: a benchmark scored without a judge stage) has
    them."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = run_stamp(when)
    _forget_other_runs(folder, stamp)
    (folder / REFUSED).unlink(missing_ok=True)
    rows = {t.task: {"alias": t.task, **{f"{k},none": v for k, v in t.metrics.items()}} for t in tasks}
    for group in groups or {}:
        given = (group_metrics or {}).get(group)
        rows[group] = {"alias": group, **(dict.fromkeys(f"{k},none" for k in tasks[0].metrics) if given is None
                                          else {f"{k},none": v for k, v in given.items()})}  # fmt: skip
    results = {
        "results": rows,
        "configs": {t.task: {"task": t.task, **t.config} for t in tasks},
        "versions": {t.task: (t.config.get("metadata") or {}).get("version") for t in tasks},
        "n-samples": {
            t.task: {"original": max(len(t.lines), t.n_original or 0), "effective": len(t.lines)} for t in tasks
        },
        **({"group_subtasks": {g: list(m) for g, m in groups.items()}} if groups else {}),
        "config": {"model": "vlmevalkit", "model_args": f"model={model}"},
        "date": stamp,
        # the answers were read as lmms-eval's default --reasoning_tags reads them (`reasoning.answer_read`)
        "emo_tasks_vlmeval": {**host, "reasoning_tags": LMMS_EVAL_TAGS},
    }
    for t in tasks:
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in t.lines)
        atomic_write_text(folder / f"{stamp}_samples_{t.task}.jsonl", text)
    out = folder / f"{stamp}_results.json"
    atomic_write_text(out, json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return out


def _forget_other_runs(folder: Path, stamp: str | None) -> None:
    """Remove the folder's runs of other stamps than `stamp` (None: every run) and what `emo-tasks judge` made of
    them (`judged/`)."""

    def other(path: Path) -> bool:
        return stamp is None or not path.name.startswith(stamp + "_")

    old = [p for p in folder.glob("*_results.json") if other(p)]
    samples = [p for p in folder.glob("*_samples_*.jsonl") if other(p)]
    if not old and not (stamp is None and (samples or (folder / JUDGED_DIR).exists())):
        return
    for path in [*samples, *old]:
        path.unlink()
    shutil.rmtree(folder / JUDGED_DIR, ignore_errors=True)
