"""`emo-tasks export RUN_DIR --format F --out DIR [--model-name NAME] [--run NAME_OR_PATH] [--force]`: a run in the
file formats the benchmark authors' own scripts read, so a leaderboard submission can be re-scored by them,
unchanged.

An export never mixes runs: the run is picked by the project's one rule (`report.load_run`: a folder
holding several runs needs --run), the MME-Emotion judge log of a task is the newest one that is that run's (its
answers and counts), and --out must be new or empty; `--force` replaces an earlier export there by removing
exactly the files its provenance.json lists (and refuses when anything else is in the folder).  The export is
written into a hidden folder beside --out and moved into place once complete.  Exit codes (`EXIT_CODES`): 0
exported; 2 refused (no run, or several and none picked; --out not empty without --force; the run not judged yet;
only another run's judge logs); 3 error (a bad argument, malformed input, a crash), always one line on stderr.

Every export folder holds `provenance.json` (see `provenance`), `summary.json` and `README.md`, plus the format's
files below.  Numbers are computed by our reimplementation of the authors' rules (`official_mme_metrics`,
`official_mvei_metrics`), read back from the exported files, and stated beside the project's own numbers.

mme-official (FunAudioLLM/MME-Emotion; needs a judged run: `emo_tasks_judge/*_judge.jsonl`)
------------------------------------------------------------------------------------------------
- `responses/<Prefix>_<name>.json`: `[{"video_id": str, "ground_truth": str, "model_response": str}]`, the
  input of `extract_step/<Task>/code/extract_step.py` (it reads `model_response`, `video_id`, and drops
  `label_set`: extract_step.py lines 21, 72-73).
- `extract_step/<Task>/results/<Prefix>_<name>_step.json`: the same list plus `"step": str` (the step agent's raw
  answer; extract_step.py line 49 sets `entry['step']`), the input of `eval_cot_gpt4o.py` (lines 169-181 read
  `video_id`, `ground_truth`, `model_response`, `step`).
- `eval_cot/<Task>/results/<Prefix>_<name>_eval.json`: `[{"video_id": str, "ground_truth": str,
  "model_response": str, "step": str | null, "score": str | null}]` as `eval_cot_gpt4o.py` writes it (lines
  200-213; its `input_tokens`/`output_tokens` are not read by any metric script and are left out).  `score` is the
  judge's raw text; a sample our pipeline counted as a judge failure gets `"score": null`, as the official
  pipeline leaves a failed judge call (`raw_response` None, lines 146-149 and 205), which every `cal_metrics.py`
  skips (`parse_score(str(None))` finds no `<score>` block, line 28-29 / 42-44).  Folder names and file-name
  prefixes are those of `eval_cot/Overall/metrics/cal_metrics.py` lines 88-95 (`OFFICIAL_TASKS`).
- `eval_cot/<Task>/metrics/results/<Prefix>_<name>_metrics.txt` and
  `eval_cot/Overall/metrics/results/Overall_<name>_metrics.txt` (the Overall script's own path is
  `/metrics/results/Overall_<name>_metrics.txt`, line 86): the text `cal_metrics.py` writes (`render_metrics`):
  "Model: <name>", "Alpha: %.1f", "=== Overall Metrics ===", "Total Count: n", "Recognition Score: %.1f",
  "Reasoning Score: %.1f", "CoT Score: %.1f", then "Avg Step: %.1f" plus a "=== Category Metrics ===" block
  (single-label tasks: ER-Wild/metrics/cal_metrics.py lines 65-89, with ER-Wild's category renaming lines
  33-42) or "Avg Steps: %.1f" and no categories (FG-ER, ML-ER: FG-ER/metrics/cal_metrics.py lines 69-78;
  Overall: Overall/metrics/cal_metrics.py lines 62-71).  The numbers are the project's: ratings read by
  `:\\s*(\\d+)/(\\d+)` (n/d, d = 0 -> 0) inside the first one-line `<score>...</score>` (FG-ER/metrics/
  cal_metrics.py lines 6-21, the rule of FG-ER, ML-ER and Overall); recognition = last rating, reasoning = mean
  of the others (0 with one step), steps = number of ratings (lines 23-30).  The six single-label per-task
  scripts read only `: (\\d)/1` (ER-Wild/metrics/cal_metrics.py lines 6-8); where that reads a judge text
  differently (`n_rule_differs` > 0) their per-task output is in `summary.json` (`per_task_script`) and the
  README; with n_rule_differs 0 the unchanged per-task script prints the file byte for byte.
- `judge_failures.json`: `[{"task", "video_id", "row", "status", "failed_stage", "failure_reason",
  "judge_text"}]`, the samples written with `"score": null`.
- `summary.json`: `{"format": "mme-official", "model_name", "tasks": {<Task>: {"lmms_eval_task", "n_samples",
  "n_scored", "n_failed", "n_rule_differs", "metrics_file": {rec_s, rea_s, cot_s, avg_step, count},
  "per_task_script": {...same keys...}, "project": {rec_s, rea_s, cot_s, avg_step}, "matches_project": bool}},
  "overall": {"lmms_eval_task", "metrics_file", "project", "matches_project", "complete"}, "files": [...]}`.
  `n_rule_differs`: scored samples whose judge text the task's official rule reads differently from the ratings
  our pipeline used (`:\\s*(\\d+)/(\\d+)`); 0 with a well-behaved judge.

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

multiemo-table
--------------
- `multiemo_images.csv`: one row per image: `image_id, score_<emotion> x8 (EMOTIONS order; empty = no usable
  score), votes_<emotion> x8, n_annotators, original_label, dominant_predicted, dominant_votes` (dominant sets as
  `;`-joined emotion names, `scoring.dominant_set`).
- `multiemo_metrics.md`: the paper-style table (metric | value) from the run's results.json.
- `summary.json`: `{"format": "multiemo-table", "task", "n_images", "metrics": {...}}`.

provenance.json (every format)
------------------------------
`{"schema": "emo-tasks-export/1", "format", "generated_by", "emo_tasks_version", "lmms_eval_version", "model",
"model_args", "model_name", "run_dir", "results_file", "date", "tasks": {<lmms-eval task>: {"data_hash",
"n_scored", "n_failed", "prompt_hashes", "judge_models", "api_models", "alpha", "judge_protocol",
"judge_mode"}}, "metrics": {task: {metric: {value, ci_low, ci_high, n}}}, "files": [str]}` (`data_hash`:
sha256[:16] over the sorted (doc_id, target) of the task's sample log, `report.data_hash`; judge fields from the
MME `_summary.json`, None for other benchmarks; CIs from the report's bootstrap; `files`: every file the export
wrote, relative POSIX paths, provenance.json included, the list `summary.json` "files" repeats and a later
`--force` removes).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

FORMATS = ("mme-official", "mvei-official", "multiemo-table")
SCHEMA = "emo-tasks-export/1"

#: Official task key -> (result file-name prefix, per-task rating rule); the order of the Overall script's list
#: (eval_cot/Overall/metrics/cal_metrics.py lines 88-95).  "digit": `: (\d)/1`; "fraction": `:\s*(\d+)/(\d+)`.
OFFICIAL_TASKS: dict[str, tuple[str, str]] = {
    "ER-Lab": ("ER_Lab", "digit"),
    "ER-Wild": ("ER_SL_Wild", "digit"),
    "ML-ER": ("ML_ER", "fraction"),
    "FG-ER": ("FG_ER", "fraction"),
    "Noise-ER": ("Noise_ER", "digit"),
    "IR": ("IR", "digit"),
    "SA": ("SA", "digit"),
    "FG-SA": ("FG_SA", "digit"),
}
#: ER-Wild's metric script renames these ground truths before grouping (ER-Wild/metrics/cal_metrics.py 33-42).
ER_WILD_CATEGORIES = {
    "angry": "anger",
    "disgusted": "disgust",
    "happy": "happiness",
    "sad": "sadness",
    "surprised": "surprise",
}
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

#: Field -> type(s) of every JSON file the exports write (the schema tests check the files against these).
_STR_OR_NONE = (str, type(None))
SCHEMAS: dict[str, dict[str, Any]] = {
    "mme_response": {"video_id": str, "ground_truth": str, "model_response": str},
    "mme_step": {"video_id": str, "ground_truth": str, "model_response": str, "step": _STR_OR_NONE},
    "mme_eval": {
        "video_id": str,
        "ground_truth": str,
        "model_response": str,
        "step": _STR_OR_NONE,
        "score": _STR_OR_NONE,
    },
    "mme_failure": {
        "task": str,
        "video_id": str,
        "row": int,
        "status": _STR_OR_NONE,
        "failed_stage": _STR_OR_NONE,
        "failure_reason": _STR_OR_NONE,
        "judge_text": _STR_OR_NONE,
    },
    "mvei_record": {
        "image_path": _STR_OR_NONE,
        "prompt": _STR_OR_NONE,
        "ground_truth": str,
        "other_info": dict,
        "generations": list,
    },
    "provenance": {
        "schema": str,
        "format": str,
        "generated_by": str,
        "emo_tasks_version": str,
        "lmms_eval_version": _STR_OR_NONE,
        "model": _STR_OR_NONE,
        "model_args": _STR_OR_NONE,
        "model_name": str,
        "run_dir": str,
        "results_file": str,
        "date": (str, int, float, type(None)),
        "tasks": dict,
        "metrics": dict,
        "files": list,
    },
    "provenance_task": {
        "data_hash": _STR_OR_NONE,
        "n_scored": (int, type(None)),
        "n_failed": (int, type(None)),
        "prompt_hashes": (dict, type(None)),
        "judge_models": (dict, list, str, type(None)),
        "api_models": (dict, type(None)),
        "alpha": (int, float, type(None)),
        "judge_protocol": _STR_OR_NONE,
        "judge_mode": _STR_OR_NONE,
    },
    "mme_summary_task": {
        "lmms_eval_task": str,
        "n_samples": int,
        "n_scored": int,
        "n_failed": int,
        "n_rule_differs": int,
        "metrics_file": dict,
        "per_task_script": dict,
        "project": dict,
        "matches_project": bool,
    },
}


def check_schema(record: Any, kind: str) -> list[str]:
    """What is wrong with one record of `kind` (SCHEMAS): missing or extra fields, wrong types; [] when valid."""
    schema = SCHEMAS[kind]
    if not isinstance(record, dict):
        return [f"{kind}: not an object"]
    problems = [f"{kind}: missing {k}" for k in schema if k not in record]
    problems += [f"{kind}: unexpected {k}" for k in record if k not in schema]
    problems += [
        f"{kind}.{k}: {type(record[k]).__name__}"
        for k, t in schema.items()
        if k in record and (not isinstance(record[k], t) or (t is int and isinstance(record[k], bool)))
    ]
    return problems


_SCORE_BLOCK = re.compile(r"<score>(.*?)</score>")  # no DOTALL: the official scripts' regex
_DIGIT = re.compile(r": (\d)/1")
_FRACTION = re.compile(r":\s*(\d+)/(\d+)")


class ExportError(Exception):
    """An export that cannot be made (the message says why and what to do): exit 3."""


class ExportRefused(ExportError):
    """An export refused rather than failed (exit 2): the run is not judged yet, the folder holds several runs and
    none was picked, or --out holds something an export must not overwrite."""


EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 2, 3
#: Files every export writes beside its format's own.
COMMON_FILES = ("provenance.json", "summary.json", "README.md")
_NAME_MAX = 255  # bytes of one path component (ext4, xfs, btrfs, APFS)


# ------------------------------------------------------------------------------------------------ helpers
def _write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _load(run_dir: str | Path, pick: str | None = None) -> Any:
    """The run by the project's one run-picking rule (`report.load_run`): a folder holding several runs
    and no --run is refused, so an export never takes a run nobody chose."""
    from emo_tasks.report import InputError, ReportError, label_runs, load_run

    if not Path(run_dir).exists():
        raise ExportError(f"{run_dir}: no such run folder")  # a bad argument (3), not a refusal
    try:
        run = load_run(run_dir, pick)
    except InputError as exc:
        raise ExportError(str(exc)) from exc
    except ReportError as exc:
        msg = str(exc)
        if "--base-run" in msg and "--run " not in msg:  # the message names compare's options only
            msg += " (export: --run NAME_OR_PATH)"
        raise ExportRefused(msg) from exc
    label_runs([run])
    return run


def _not_judged(run_dir: str | Path, what: str) -> ExportRefused:
    """The one message of every format for a run whose answers were saved but not judged yet."""
    return ExportRefused(f"{run_dir}: not judged yet ({what}); run `emo-tasks judge {run_dir}` first, then export it")


def _run_task_log(
    run_dir: str | Path, title: str, tasks: tuple[str, ...], metric: str, pick: str | None = None
) -> tuple[Any, str, Path]:
    """The run, which of `tasks` it has, and that task's sample log (the answers); ExportRefused when the task was
    not judged (its results hold no `metric`: a --predict_only run), an ExportError saying what is missing
    otherwise."""
    from emo_tasks.datafiles import sample_log

    run = _load(run_dir, pick)
    task = next((t for t in tasks if t in run.results), None)
    if task is None:
        raise ExportError(f"{run_dir}: no {title} task ({', '.join(tasks)}) in {run.results_file.name}")
    if not run.has(task, metric):
        raise _not_judged(run_dir, f"{run.results_file.name} holds no {title} metrics for {task}: a --predict_only run")
    log = sample_log(run.path, run.results_file, task)
    if log is None:
        raise ExportError(
            f"{run_dir}: no sample log *_samples_{task}.jsonl (the answers); rerun lmms-eval with --log_samples"
        )
    return run, task, log


def _model_name(run: Any, model_name: str | None) -> str:
    """--model-name, or the run's model when it was not given; an empty one is an error, never the default."""
    if model_name is None:
        return _default_name(run)
    if not model_name.strip():
        raise ExportError(f"--model-name {model_name!r} is empty; give a name or leave the option out")
    return model_name


# ------------------------------------------------------------------------------------------------ the export folder
#: Why --out gets this care: an export is zipped and sent as is, so a file of an earlier export left beside the
#: new one (another model name, another task set) would be submitted with it, and a half-written export would be
#: taken for a whole one.  So: a non-empty --out is refused unless --force, --force removes only the files an
#: earlier export listed (provenance.json / summary.json "files"), and every export is written into a hidden
#: folder beside --out and moved into place only once complete.


def _posix_rel(name: Any) -> str | None:
    """A listed file name as a relative path inside the export folder; None for anything that would leave it."""
    if not isinstance(name, str) or not name or "\\" in name:
        return None
    p = PurePosixPath(name)
    if p.is_absolute() or any(part in ("", ".", "..") for part in p.parts) or str(p) != name:
        return None
    return name


def files_under(folder: Path) -> list[str]:
    """Every entry of `folder` that is not a directory (files, symlinks), as sorted relative POSIX paths."""
    found = []
    for top, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            found.append(Path(top, name).relative_to(folder).as_posix())
    return sorted(found)


def previous_export_files(out: Path) -> list[str] | None:
    """The files an earlier export in `out` says it wrote (provenance.json "files", else summary.json "files",
    which older exports have), only those inside `out`; None when neither file is a readable listing."""
    for name in ("provenance.json", "summary.json"):
        try:
            listed = json.loads((out / name).read_text(encoding="utf-8")).get("files")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if isinstance(listed, list):
            return sorted({r for r in map(_posix_rel, listed) if r is not None})
    return None


def _few(names: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def files_to_replace(out: Path) -> list[str]:
    """What --force may remove from `out`: the files of an earlier export there.  ExportRefused when `out` holds
    any file no export listed (naming a few): --force replaces an export, never someone's other files."""
    present = files_under(out)
    if not present:
        return []
    listed = previous_export_files(out)
    if listed is None:
        raise ExportRefused(
            f"--out {out} holds files no export wrote ({_few(present)}) and no export listing (provenance.json); "
            "--force only replaces an earlier export: choose an empty or new folder"
        )
    others = [f for f in present if f not in set(listed)]
    if others:
        raise ExportRefused(
            f"--out {out} holds files no export wrote ({_few(others)}); --force only replaces an earlier export: "
            "move them away or choose an empty or new folder"
        )
    return present


def remove_listed(out: Path, files: Iterable[str]) -> list[str]:
    """Delete exactly the listed files of `out` (names that would leave it are ignored) and the folders their
    removal leaves empty, never `out` itself; returns what was removed."""
    removed = []
    for rel in sorted({r for r in map(_posix_rel, files) if r is not None}):
        path = out / rel
        if not (path.is_symlink() or path.is_file()):
            continue
        path.unlink()
        removed.append(rel)
        parent = path.parent
        while parent != out and out in parent.parents:
            try:
                parent.rmdir()
            except OSError:  # not empty: something else is still in it
                break
            parent = parent.parent
    return removed


def check_out(out: Path) -> None:
    """--out must be usable as a folder: not a file, not below a file, no name longer than the file system takes,
    writable.  An ExportError (a bad argument, exit 3) naming the problem otherwise."""
    for part in out.parts:
        if len(os.fsencode(part)) > _NAME_MAX:
            raise ExportError(f"--out {out}: the name {part[:32]}... is longer than {_NAME_MAX} bytes")
    try:
        if out.exists() and not out.is_dir():
            raise ExportError(f"--out {out} is an existing file; name a folder")
        ancestor = out
        while not ancestor.exists():
            if ancestor.is_symlink():
                raise ExportError(f"--out {out}: {ancestor} is a broken symbolic link")
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise ExportError(f"--out {out}: {ancestor} is a file, not a folder")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise ExportError(f"--out {out}: {ancestor} is not writable")
    except OSError as exc:
        raise ExportError(f"--out {out}: {exc.strerror or exc}") from exc


def _check_target(out: Path, force: bool) -> None:
    """Refuse (exit 2) a non-empty --out without --force, and with --force one holding files no export wrote."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not force:
        raise ExportRefused(
            f"--out {out} is not empty; use --force to replace the earlier export in it, or choose a new folder"
        )
    files_to_replace(out)


@contextlib.contextmanager
def staged(out_dir: str | Path, force: bool = False) -> Iterator[Path]:
    """A hidden folder beside `out_dir` to write the export into; on success the export replaces `out_dir` (the
    earlier export there, with --force), on any failure it is deleted with the folders made for it and `out_dir`
    is left as it was."""
    out = Path(out_dir)
    check_out(out)
    if out.is_symlink():  # a link to a folder: the export goes into that folder, the link stays
        out = out.resolve()
    _check_target(out, force)
    made = []
    parent = out.parent
    while not parent.exists():
        made.append(parent)
        parent = parent.parent
    stage: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            candidate = out.parent / f".emo-export-{secrets.token_hex(4)}"
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            stage = candidate
            break
        if stage is None:
            raise ExportError(f"--out {out}: no staging folder could be made beside it")
        yield stage
        _commit(stage, out, force)
    except OSError as exc:
        raise ExportError(f"--out {out}: {exc.strerror or exc} ({exc.filename or out})") from exc
    finally:
        if stage is not None and stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
        if not out.exists():
            for folder in made:  # innermost first
                try:
                    folder.rmdir()
                except OSError:
                    break


def _commit(stage: Path, out: Path, force: bool) -> None:
    """Move a complete export into `out`: one rename when `out` is new or empty (the export appears whole), else,
    after removing the earlier export (--force, checked again now), file by file."""
    written = files_under(stage)
    if out.is_dir() and any(out.iterdir()):
        _check_target(out, force)
        remove_listed(out, files_to_replace(out))
    if not out.exists() or not any(out.iterdir()):
        os.replace(stage, out)
        return
    for rel in written:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage / rel, out / rel)


def safe_name(model_name: str) -> str:
    """A model name usable in a file name (the official files embed it: `ER_Lab_<name>_eval.json`)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", model_name.strip()).strip("_")
    if not name:
        raise ExportError(f"--model-name {model_name!r} has no character usable in a file name")
    return name


def _default_name(run: Any) -> str:
    args = run.model_args or ""
    for key in ("model_version", "pretrained", "model"):
        m = re.search(rf"(?:^|,){key}=([^,]+)", args)
        if m:
            return m.group(1).rsplit("/", 1)[-1]
    return run.model or "model"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


# ------------------------------------------------------------------------------------------------ provenance
def provenance(
    run: Any, fmt: str, model_name: str, tasks: Iterable[str], resamples: int = 200, files: Iterable[str] = ()
) -> dict[str, Any]:
    """The provenance block of an export (schema in the module docstring); `files`: every file the export wrote,
    relative to its folder (what a later --force export may remove)."""
    from emo_tasks import __version__
    from emo_tasks.report import lmms_eval_version, metric_rows

    tasks = list(tasks)
    per_task: dict[str, Any] = {}
    for task in tasks:
        s = run.summaries.get(task) or {}
        n_scored, n_failed = run.value(task, "n_scored"), run.value(task, "n_judge_failed")
        if n_scored is None and s.get("metrics"):
            n_scored, n_failed = s["metrics"].get("n_scored"), s["metrics"].get("n_judge_failed")
        per_task[task] = {
            "data_hash": run.data_hashes.get(task),
            "n_scored": None if n_scored is None else int(n_scored),
            "n_failed": None if n_failed is None else int(n_failed),
            "prompt_hashes": s.get("prompt_hashes"),
            "judge_models": s.get("judge_models"),
            "api_models": s.get("api_models"),
            "alpha": s.get("alpha"),
            "judge_protocol": s.get("judge_protocol"),
            "judge_mode": s.get("judge_mode"),
        }
    metrics: dict[str, dict[str, Any]] = {}
    try:
        for rec in metric_rows([run], resamples, 0):
            if rec["task"] in per_task:
                metrics.setdefault(rec["task"], {})[rec["metric"]] = {
                    k: rec.get(k) for k in ("value", "ci_low", "ci_high", "n")
                }
    except Exception as exc:  # noqa: BLE001 - CIs are extra; their absence is stated, not fatal
        metrics = {"error": f"bootstrap CIs unavailable: {exc!r}"}  # type: ignore[dict-item]
    return {
        "schema": SCHEMA,
        "format": fmt,
        "generated_by": f"emo-tasks {__version__}",
        "emo_tasks_version": __version__,
        "lmms_eval_version": lmms_eval_version(run),
        "model": run.model,
        "model_args": run.model_args,
        "model_name": model_name,
        "run_dir": str(run.path),
        "results_file": str(run.results_file),
        "date": run.data.get("date"),
        "tasks": per_task,
        "metrics": metrics,
        "files": sorted(files),
    }


# ------------------------------------------------------------------------------------------------ MME-Emotion
def official_ratings(text: Any, rule: str) -> list[float] | None:
    """The ratings an official `cal_metrics.py` reads from a `score` value (None: no `<score>` block)."""
    match = _SCORE_BLOCK.search(str(text))
    if not match:
        return None
    if rule == "digit":
        return [float(int(m.group(1))) for m in _DIGIT.finditer(match.group(1))]
    return [0.0 if int(d) == 0 else int(n) / int(d) for n, d in _FRACTION.findall(match.group(1))]


def official_mme_metrics(
    entries: Sequence[Mapping[str, Any]], rule: str, alpha: float, rename: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Our reimplementation of an official `cal_metrics.py` over `_eval.json` entries: totals (fractions, steps)
    and per-category sums, skipping entries without ratings exactly as the scripts do."""

    def empty() -> dict[str, float]:
        return {"acc": 0.0, "reason": 0.0, "step": 0.0, "count": 0}

    total, cats = empty(), {}
    for entry in entries:
        scores = official_ratings(entry.get("score"), rule)
        if not scores:
            continue
        acc = scores[-1]
        reason = sum(scores[:-1]) / len(scores[:-1]) if len(scores) > 1 else 0.0
        cat = str(entry.get("ground_truth"))
        cat = (rename or {}).get(cat, cat)
        for bucket in (total, cats.setdefault(cat, empty())):
            bucket["acc"] += acc
            bucket["reason"] += reason
            bucket["step"] += len(scores)
            bucket["count"] += 1

    def final(b: Mapping[str, float]) -> dict[str, float | int]:
        n = b["count"]
        acc, rea, step = (b["acc"] / n, b["reason"] / n, b["step"] / n) if n else (0.0, 0.0, 0.0)
        return {"count": int(n), "acc": acc, "reason": rea, "cot": alpha * acc + (1 - alpha) * rea, "step": step}

    return {"total": final(total), "categories": {c: final(b) for c, b in sorted(cats.items())}}


def render_metrics(model_name: str, alpha: float, stats: Mapping[str, Any], categories: bool) -> str:
    """The metrics text file exactly as the official scripts write it (layouts in the module docstring)."""
    t = stats["total"]
    out = io.StringIO()
    out.write(f"Model: {model_name}\n")
    out.write(f"Alpha: {alpha:.1f}\n\n")
    out.write("=== Overall Metrics ===\n")
    out.write(f"Total Count: {t['count']}\n")
    out.write(f"Recognition Score: {100 * t['acc']:.1f}\n")
    out.write(f"Reasoning Score: {100 * t['reason']:.1f}\n")
    out.write(f"CoT Score: {100 * t['cot']:.1f}\n")
    if not categories:
        out.write(f"Avg Steps: {t['step']:.1f}\n\n")
        return out.getvalue()
    out.write(f"Avg Step: {t['step']:.1f}\n\n")
    out.write("=== Category Metrics ===\n")
    for cat, c in stats["categories"].items():
        out.write(f"Category: {cat}\n")
        out.write(f"  Recognition Score: {100 * c['acc']:.1f}\n")
        out.write(f"  Reasoning Score: {100 * c['reason']:.1f}\n")
        out.write(f"  CoT Score: {100 * c['cot']:.1f}\n")
        out.write(f"  Avg Step: {c['step']:.1f}\n")
        out.write("-" * 40 + "\n")
    return out.getvalue()


_METRIC_LINE = re.compile(r"^(Total Count|Recognition Score|Reasoning Score|CoT Score|Avg Steps?): (\S+)$")


def read_metrics_text(text: str) -> dict[str, float]:
    """The overall block of an official metrics file: {count, rec_s, rea_s, cot_s, avg_step} (our reader)."""
    keys = {"Total Count": "count", "Recognition Score": "rec_s", "Reasoning Score": "rea_s", "CoT Score": "cot_s"}
    out: dict[str, float] = {}
    for line in text.split("=== Category Metrics ===")[0].splitlines():
        m = _METRIC_LINE.match(line)
        if m:
            out[keys.get(m.group(1), "avg_step")] = float(m.group(2))
    return out


def _pct(stats: Mapping[str, Any]) -> dict[str, float | int]:
    t = stats["total"]
    return {
        "rec_s": round(100 * t["acc"], 1),
        "rea_s": round(100 * t["reason"], 1),
        "cot_s": round(100 * t["cot"], 1),
        "avg_step": round(t["step"], 1),
        "count": t["count"],
    }


def _project(run: Any, task: str) -> dict[str, float | None]:
    """The run's own numbers for a task or group (results.json)."""
    return {k: run.value(task, k) for k in ("rec_s", "rea_s", "cot_s", "avg_step")}


def _matches(official: Mapping[str, Any], project: Mapping[str, Any]) -> bool:
    """Same numbers at the official files' printed precision (one decimal)."""
    return all(project[k] is not None and f"{official[k]:.1f}" == f"{project[k]:.1f}" for k in project)


def _mme_rows(run: Any) -> dict[str, tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """Official key -> (lmms-eval leaf task, its judge-log rows in row order, its summary).  The log of a task is
    the newest one of the run's emo_tasks_judge/ that is this run's (`results.not_this_runs`); ExportRefused when the
    folder holds judge logs of the task and none is."""
    from emo_tasks.mme_emotion.results import TITLES, all_judge_logs, not_this_runs, task_rows

    logs = all_judge_logs(run.path)
    found: dict[str, tuple[str, list[dict[str, Any]], dict[str, Any]]] = {}
    for task in run.results:
        if task not in TITLES or task not in logs:
            continue
        key = TITLES[task]
        chosen, why_not = None, []
        for log in logs[task]:
            try:
                rows = sorted(task_rows(log, task), key=lambda r: int(r["row"]))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                if log == logs[task][0]:  # the newest log unreadable: an error, as before
                    raise ExportError(f"{log}: not a readable MME-Emotion judge log ({exc})") from exc
                continue
            reason = not_this_runs(run.results_file, task, rows)
            if reason is None:
                chosen = (log, rows)
                break
            why_not.append(f"{log.name}: {reason}")
        if chosen is None:
            raise ExportRefused(
                f"{run.path}: no judge log of {task} is of this run ({run.results_file.name}), they are of another "
                f"run: {'; '.join(why_not[:2])}; export the run they belong to (--run), or judge this run "
                "(`emo-tasks judge`) and export its judged results"
            )
        log, rows = chosen
        summary_file = log.with_name(log.name[: -len("_judge.jsonl")] + "_summary.json")
        summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.exists() else {}
        if key in found:
            raise ExportError(
                f"{run.path}: both {found[key][0]} and {task} are MME-Emotion {key}; export one run at a time"
            )
        found[key] = (task, rows, summary)
    return found


def _rule_differs(row: Mapping[str, Any], rule: str) -> bool:
    ours = [0.0 if int(d) == 0 else int(n) / int(d) for n, d in row.get("ratings") or []]
    return official_ratings(row.get("judge_text"), rule) != ours


def export_mme_official(
    run_dir: str | Path,
    out_dir: str | Path,
    model_name: str | None = None,
    *,
    pick: str | None = None,
    force: bool = False,
) -> Path:
    """The official MME-Emotion tree of a judged run (formats in the module docstring); returns `out_dir`.
    `pick`: the results file to use when RUN_DIR holds several (--run); `force`: replace an earlier export."""
    from emo_tasks.mme_emotion.results import GROUPS, TITLES

    run = _load(run_dir, pick)
    mme_tasks = [t for t in run.results if t in TITLES]
    if not mme_tasks:
        raise ExportError(f"{run_dir}: no MME-Emotion task in {run.results_file.name}")
    found = _mme_rows(run)
    if not found:
        raise _not_judged(run_dir, "no MME-Emotion judge log, emo_tasks_judge/*_judge.jsonl, for its tasks")
    modes = {key: s.get("judge_mode") for key, (_t, _r, s) in found.items()}
    if not any(r.get("status") == "scored" for _t, rows, _s in found.values() for r in rows):
        if all(r.get("status") == "offline" for _t, rows, _s in found.values() for r in rows):
            raise _not_judged(run_dir, f"no sample was scored by a judge: judge mode {modes}")
        raise ExportError(f"{run_dir}: no sample was scored by a judge (judge mode {modes}); nothing to submit")
    name = _model_name(run, model_name)
    stem = safe_name(name)
    alphas = {float(s.get("alpha", 0.5)) for _t, _r, s in found.values()}
    if len(alphas) != 1:
        raise ExportError(f"{run_dir}: the tasks were judged with different alphas {sorted(alphas)}")
    alpha = alphas.pop()
    with staged(out_dir, force) as out:
        _write_mme(out, run, name, stem, alpha, found, GROUPS)
    return Path(out_dir)


def _write_mme(out: Path, run: Any, name: str, stem: str, alpha: float, found: Mapping[str, Any], groups: Any) -> None:
    """Write the MME-Emotion tree into `out` (the staging folder)."""
    files: list[str] = []
    failures: list[dict[str, Any]] = []
    tasks: dict[str, Any] = {}
    pooled: list[dict[str, Any]] = []
    for key, (prefix, rule) in OFFICIAL_TASKS.items():
        if key not in found:
            continue
        task, rows, _summary = found[key]
        responses = [
            {"video_id": r["video_id"], "ground_truth": r["label"], "model_response": r["answer"]} for r in rows
        ]
        steps = [{**resp, "step": r.get("step_text")} for resp, r in zip(responses, rows, strict=True)]
        entries = []
        n_differs = 0
        for step, r in zip(steps, rows, strict=True):
            scored = r.get("status") == "scored"
            entries.append({**step, "score": r.get("judge_text") if scored else None})
            if scored:
                n_differs += _rule_differs(r, rule)
            else:
                failures.append(
                    {
                        "task": key,
                        "video_id": r["video_id"],
                        "row": int(r["row"]),
                        "status": r.get("status"),
                        "failed_stage": r.get("failed_stage"),
                        "failure_reason": r.get("failure_reason"),
                        "judge_text": r.get("judge_text"),
                    }
                )
        pooled.extend(entries)
        written = {
            out / "responses" / f"{prefix}_{stem}.json": responses,
            out / "extract_step" / key / "results" / f"{prefix}_{stem}_step.json": steps,
            out / "eval_cot" / key / "results" / f"{prefix}_{stem}_eval.json": entries,
        }
        for path, data in written.items():
            files.append(_write_json(path, data).relative_to(out).as_posix())
        rename = ER_WILD_CATEGORIES if key == "ER-Wild" else None
        stats = official_mme_metrics(entries, "fraction", alpha, rename)  # the project's rule: its numbers
        script = official_mme_metrics(entries, rule, alpha, rename)  # what the unchanged per-task script prints
        metrics_file = out / "eval_cot" / key / "metrics" / "results" / f"{prefix}_{stem}_metrics.txt"
        metrics_file.parent.mkdir(parents=True, exist_ok=True)
        metrics_file.write_text(render_metrics(name, alpha, stats, categories=rule == "digit"), encoding="utf-8")
        files.append(metrics_file.relative_to(out).as_posix())
        official, project = _pct(stats), _project(run, task)
        tasks[key] = {
            "lmms_eval_task": task,
            "n_samples": len(rows),
            "n_scored": sum(r.get("status") == "scored" for r in rows),
            "n_failed": sum(r.get("status") != "scored" for r in rows),
            "n_rule_differs": n_differs,
            "metrics_file": official,
            "per_task_script": _pct(script),
            "project": project,
            "matches_project": _matches(official, project),
        }
    overall_stats = official_mme_metrics(pooled, "fraction", alpha)
    overall_file = out / "eval_cot" / "Overall" / "metrics" / "results" / f"Overall_{stem}_metrics.txt"
    overall_file.parent.mkdir(parents=True, exist_ok=True)
    overall_file.write_text(render_metrics(name, alpha, overall_stats, categories=False), encoding="utf-8")
    files.append(overall_file.relative_to(out).as_posix())
    group = next((g for g in groups if g in run.results), None)
    overall_project = _project(run, group) if group else None
    overall = {
        "lmms_eval_task": group,
        "metrics_file": _pct(overall_stats),
        "project": overall_project,
        "matches_project": bool(overall_project) and _matches(_pct(overall_stats), overall_project),
        "complete": len(tasks) == len(OFFICIAL_TASKS),
    }
    files.append(_write_json(out / "judge_failures.json", failures).relative_to(out).as_posix())
    summary = {"format": "mme-official", "model_name": name, "alpha": alpha, "tasks": tasks, "overall": overall}
    leaf = [t for t, _r, _s in found.values()]
    _finish(out, run, "mme-official", name, leaf, summary, files, _mme_readme(name, summary, len(failures)))


def _f(x: Any) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _mme_readme(name: str, summary: Mapping[str, Any], n_failures: int) -> str:
    lines = [
        f"# MME-Emotion submission: {name}",
        "",
        "Files in the shapes of the official scripts (github.com/FunAudioLLM/MME-Emotion): per task",
        "`eval_cot/<Task>/results/<Prefix>_<name>_eval.json` (input of `eval_cot/<Task>/metrics/cal_metrics.py`),",
        "the earlier stages (`responses/`, `extract_step/<Task>/results/`), and per task and Overall the metrics text",
        "those scripts write (`eval_cot/*/metrics/results/*_metrics.txt`), computed by our reimplementation of them.",
        f"Alpha {summary['alpha']:.1f}. Provenance (model, versions, data hashes, judge models, prompt hashes):",
        "`provenance.json`.",
        "",
        "| Task | n | scored | judge failures | n_rule_differs | Rec-S | Rea-S | CoT-S | Avg Step "
        "| project (Rec/Rea/CoT/Step) | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, t in summary["tasks"].items():
        o, p = t["metrics_file"], t["project"]
        lines.append(
            f"| {key} | {t['n_samples']} | {t['n_scored']} | {t['n_failed']} | {t['n_rule_differs']} "
            f"| {_f(o['rec_s'])} | {_f(o['rea_s'])} | {_f(o['cot_s'])} | {_f(o['avg_step'])} "
            f"| {_f(p['rec_s'])}/{_f(p['rea_s'])}/"
            f"{_f(p['cot_s'])}/{_f(p['avg_step'])} | {'yes' if t['matches_project'] else 'NO'} |"
        )
    o, p = summary["overall"]["metrics_file"], summary["overall"]["project"] or {}
    lines.append(
        f"| Overall | | | {n_failures} | | {_f(o['rec_s'])} | {_f(o['rea_s'])} | {_f(o['cot_s'])} | "
        f"{_f(o['avg_step'])} | {_f(p.get('rec_s'))}/{_f(p.get('rea_s'))}/{_f(p.get('cot_s'))}/"
        f"{_f(p.get('avg_step'))} | {'yes' if summary['overall']['matches_project'] else 'NO'} |"
    )
    differs = {k: t["n_rule_differs"] for k, t in summary["tasks"].items() if t["n_rule_differs"]}
    lines += [
        "",
        "## Rule differences",
        "",
        "The official per-task scripts of the six single-label tasks read only `: d/1` ratings; FG-ER, ML-ER and",
        "Overall (and this project) read `:\\s*n/d`. `n_rule_differs` counts the scored samples whose judge text",
        "the task's official rule reads differently from the ratings the project used.",
        (
            "All counts are 0: the official per-task scripts, run unchanged on the `_eval.json` files, print the"
            " numbers above."
            if not differs
            else "Non-zero: "
            + ", ".join(f"{k} {n}" for k, n in differs.items())
            + ". The metrics files state the project's numbers (the `:\\s*n/d` rule, as FG-ER, ML-ER and Overall);"
            " the official per-task script of these tasks would print: "
            + "; ".join(
                f"{k} Rec {_f(t['per_task_script']['rec_s'])} / Rea {_f(t['per_task_script']['rea_s'])} / CoT "
                f"{_f(t['per_task_script']['cot_s'])} / Step {_f(t['per_task_script']['avg_step'])} "
                f"(count {t['per_task_script']['count']})"
                for k, t in summary["tasks"].items()
                if t["n_rule_differs"]
            )
            + " (`summary.json` `per_task_script`)."
        ),
        "",
        "## Judge failures",
        "",
        f'{n_failures} sample(s) our pipeline counted as judge failures are written with `"score": null`, as the',
        "official pipeline leaves a failed judge call, so the official scripts skip them too; they are listed in",
        "`judge_failures.json`.",
        "",
        "## Submitting to a leaderboard",
        "",
        "MME-Emotion takes results by e-mail (fzhang@link.cuhk.edu.hk, per the official README). Send this folder",
        "(zipped). The maintainers can re-score it unchanged:",
        "",
        "```",
        "python eval_cot/<Task>/metrics/cal_metrics.py \\",
        "    --input_json eval_cot/<Task>/results/<Prefix>_<name>_eval.json \\",
        f"    --output_txt <Task>_metrics.txt --model_name {name} --alpha {summary['alpha']:.1f}",
        "```",
        "",
        "and compare with the metrics files here; `provenance.json` says how the run was made.",
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ MVEI
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
    run_dir: str | Path,
    out_dir: str | Path,
    model_name: str | None = None,
    *,
    pick: str | None = None,
    force: bool = False,
) -> Path:
    """EmObserver's `Std_MVEI_results.json` from a run's sample log; returns the file's path.  `pick`, `force`:
    as `export_mme_official`."""
    from emo_tasks.datafiles import read_jsonl_rows

    run, task, log = _run_task_log(run_dir, "MVEI", ("mvei", "mvei_sample"), "acc_total", pick)
    name = _model_name(run, model_name)
    docs = _mvei_docs(run, task)
    notes = [] if docs else ["the run's data could not be loaded now: image_path and prompt are null"]
    data: dict[str, Any] = {}
    for line in sorted(read_jsonl_rows(log), key=lambda r: int(r.get("doc_id", 0))):
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
        _write_json(out / MVEI_FILE, data)
        _finish(out, run, "mvei-official", name, [task], summary, [MVEI_FILE], _mvei_readme(name, summary))
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


# ------------------------------------------------------------------------------------------------ MultiEmo
def export_multiemo_table(
    run_dir: str | Path,
    out_dir: str | Path,
    model_name: str | None = None,
    *,
    pick: str | None = None,
    force: bool = False,
) -> Path:
    """Per-image CSV (8 predicted scores, votes, dominant sets) and the paper-style metrics table; returns the
    CSV's path.  `pick`, `force`: as `export_mme_official`."""
    from emo_tasks.datafiles import read_jsonl_rows
    from emo_tasks.multiemo import scoring
    from emo_tasks.multiemo.results import reference_images

    run, task, log = _run_task_log(run_dir, "MultiEmo-Bench", ("multiemo", "multiemo_sample"), "precision_ours", pick)
    name = _model_name(run, model_name)
    images: dict[str, dict[str, Any]] = {}
    ref: dict[str, dict[str, Any]] | None = None
    for line in read_jsonl_rows(log):
        rec = line.get("precision_ours") or {}
        if "image_id" not in rec:
            raise ExportError(f"{log}: line doc_id {line.get('doc_id')} has no MultiEmo record")
        doc = line.get("doc")
        if not doc or "votes" not in doc:
            if ref is None:
                try:
                    ref = reference_images(rec.get("data_source", "benchmark"))
                except Exception as exc:  # noqa: BLE001
                    raise ExportError(
                        f"the run's MultiEmo data cannot be loaded now ({exc}); it holds the votes"
                    ) from exc
            doc = ref.get(rec["image_id"])
            if doc is None:
                raise ExportError(f"image {rec['image_id']!r} of the run is not in the MultiEmo data loaded now")
        img = images.setdefault(rec["image_id"], {"doc": doc, "scores": {}})
        img["scores"][rec["emotion"]] = rec.get("predicted_score")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    emotions = scoring.EMOTIONS
    writer.writerow(
        ["image_id", *(f"score_{e}" for e in emotions), *(f"votes_{e}" for e in emotions), "n_annotators",
         "original_label", "dominant_predicted", "dominant_votes"]
    )  # fmt: skip
    for image_id in sorted(images):
        img = images[image_id]
        scores = [img["scores"].get(e) for e in emotions]
        votes = list(img["doc"]["votes"])
        pred = (
            ""
            if any(s is None for s in scores)
            else ";".join(emotions[i] for i in sorted(scoring.dominant_set(scores)))
        )
        gold = "" if not any(votes) else ";".join(emotions[i] for i in sorted(scoring.dominant_set(votes)))
        writer.writerow(
            [image_id, *("" if s is None else s for s in scores), *votes, img["doc"]["n_annotators"],
             img["doc"]["original_label"], pred, gold]
        )  # fmt: skip
    metrics = {m.name: run.value(task, m.name) for m in scoring.TABLE.metrics}
    table = ["| metric | value |", "|---|---|"]
    for m in scoring.TABLE.metrics:
        v = metrics[m.name]
        table.append(f"| {getattr(m, 'title', None) or m.name} | {'n/a' if v is None else f'{v:.4g}'} |")
    md = f"# MultiEmo-Bench: {name} ({task})\n\n" + "\n".join(table) + "\n"
    summary = {
        "format": "multiemo-table",
        "model_name": name,
        "task": task,
        "n_images": len(images),
        "metrics": metrics,
    }
    readme = md + (
        "\n`multiemo_images.csv`: per image the 8 predicted scores, the human votes and the dominant sets.\n"
        "Provenance: `provenance.json`.\n\n## Submitting to a leaderboard\n\nMultiEmo-Bench has no submission "
        "script: send both files and `provenance.json` for a comparison with the paper's table.\n"
    )
    files = ["multiemo_images.csv", "multiemo_metrics.md"]
    with staged(out_dir, force) as out:
        (out / files[0]).write_text(buf.getvalue(), encoding="utf-8")
        (out / files[1]).write_text(md, encoding="utf-8")
        _finish(out, run, "multiemo-table", name, [task], summary, files, readme)
    return Path(out_dir) / files[0]


# ------------------------------------------------------------------------------------------------ common end
def _finish(
    out: Path,
    run: Any,
    fmt: str,
    name: str,
    tasks: Sequence[str],
    summary: dict[str, Any],
    files: list[str],
    readme: str,
) -> None:
    """Write summary.json, README.md and provenance.json, which lists every file of the export (relative paths):
    the list a later `--force` export removes.  The list is checked against the folder, so a file an exporter
    wrote and forgot to list fails here, before the export is moved into place."""
    listed = sorted({*files, *COMMON_FILES})
    _write_json(out / "summary.json", {**summary, "files": listed})
    (out / "README.md").write_text(readme, encoding="utf-8")
    _write_json(out / "provenance.json", provenance(run, fmt, name, tasks, files=listed))
    on_disk = files_under(out)
    if on_disk != listed:
        raise ExportError(f"internal error: the export wrote {on_disk} but lists {listed}")


EXPORTERS = {
    "mme-official": export_mme_official,
    "mvei-official": export_mvei_official,
    "multiemo-table": export_multiemo_table,
}

EXIT_CODES = (
    "Exit codes: 0 exported; 2 refused (RUN_DIR holds no run, or several and none picked with --run; --out is not "
    "empty and --force was not given, or holds files no export wrote; the run is not judged yet: run `emo-tasks "
    "judge RUN_DIR` first; the folder holds only another run's MME-Emotion judge logs); 3 error (a bad argument: "
    "RUN_DIR missing, --out unusable, an empty --model-name; malformed input; a crash). Every failure is one line "
    "on stderr, never a traceback."
)


class _ExportParser(argparse.ArgumentParser):
    """The `export` subcommand's parser: a usage error is a bad argument, exit 3 as documented (argparse's own
    code, 2, means "refused" here), and unknown arguments are its usage errors too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {_one_line(message)} (see --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def add_parser(sub: Any) -> Any:
    """The `export` subcommand's arguments (kept beside the exporters they feed)."""
    x = sub.add_parser(
        "export",
        help="write a run in the benchmark authors' own formats (leaderboard submission)",
        description="Write one run in the benchmark authors' own file formats, into a folder of its own (see "
        "docs/export.md). The run is chosen as every command chooses it; a folder holding several runs needs "
        "--run. The export is written beside --out and moved into place only when complete. " + EXIT_CODES,
    )
    x.__class__ = _ExportParser  # the subparsers action makes a plain ArgumentParser
    x.add_argument("run", metavar="RUN_DIR", help="lmms-eval --output_path folder (judged, for mme-official)")
    x.add_argument("--format", required=True, choices=FORMATS)
    x.add_argument("--out", required=True, metavar="DIR", help="folder to write the export into (new or empty)")
    x.add_argument(
        "--model-name",
        dest="model_name",
        default=None,
        help="name in the file names and metrics files (default: the model_version/pretrained of the run)",
    )
    x.add_argument(
        "--run",
        dest="pick",
        metavar="NAME_OR_PATH",
        default=None,
        help="the results file to export when RUN_DIR holds several (a path, or a part of its path below RUN_DIR, "
        "e.g. a date stamp or judged/<judge>)",
    )
    x.add_argument(
        "--force",
        action="store_true",
        help="replace the earlier export in --out: removes only the files its provenance.json lists, and refuses "
        "when --out holds any other file",
    )
    return x


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main_export(args: Any) -> int:
    """`emo-tasks export RUN_DIR --format F --out DIR [--model-name NAME] [--run NAME_OR_PATH] [--force]`: the exit
    code (EXIT_CODES), with a one-line message on stderr whenever it is not 0.  `args`: run, format, out,
    model_name, pick, force (the last two optional)."""
    fmt = getattr(args, "format", None)
    if fmt not in EXPORTERS:
        print(f"emo-tasks export: error: --format must be one of {', '.join(FORMATS)}, got {fmt!r}", file=sys.stderr)
        return EXIT_ERROR
    name, force = getattr(args, "model_name", None), bool(getattr(args, "force", False))
    try:
        if name is not None and not name.strip():
            raise ExportError(f"--model-name {name!r} is empty; give a name or leave the option out")
        out = Path(args.out)
        check_out(out)  # the cheap refusals first: before the run is read
        _check_target(out, force)
        path = EXPORTERS[fmt](args.run, out, name, pick=getattr(args, "pick", None), force=force)
    except ExportRefused as exc:
        print(f"emo-tasks export: refused: {_one_line(exc)}", file=sys.stderr)
        return EXIT_REFUSED
    except ExportError as exc:
        print(f"emo-tasks export: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - malformed input or a crash: a message, never a traceback
        print(f"emo-tasks export: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    print(f"exported {fmt} to {path}")
    return EXIT_OK
