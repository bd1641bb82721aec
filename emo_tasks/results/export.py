"""`emo-tasks export RUN_DIR --format F --out DIR [--model-name NAME] [--run NAME_OR_PATH] [--force]`: a run in the
file formats the benchmark authors' own scripts read, so a leaderboard submission can be re-scored by them,
unchanged.

This module is the generic part: the command line, the run, the export folder, provenance and the common files.
The formats are the benchmarks' own, each in its benchmark's folder, found through the registry
(`emo_tasks.benchmarks`: `Benchmark.exports`, format name -> "module:function"), in registry order:
mme-official (`emo_tasks/mme_emotion/export.py`), mvei-official (`emo_tasks/mvei/export.py`) and multiemo-table
(`emo_tasks/multiemo/export.py`).  Each format module documents its files in its docstring, lists the fields
and types of the JSON files it writes in its `SCHEMAS` (checked by `check_schema`) and builds its export from the
helpers here (`read_run`, `run_task_log`, `model_name_for`, `staged`, `write_json`, `write_text`, `finish`, ...) and
writes every file through `write_json` or `write_text`, which mask the environment's secrets (`secrets_masker`);
it may add to what `--help` says: `RUN_DIR_HELP` (what its formats need of RUN_DIR) and `REFUSALS` (its own
reasons for exit 2).  This module imports no benchmark module (only the registry, which loads them lazily), so
the format modules can import it: no import circle.

An export never mixes runs: the run is picked by the project's one rule (`reader.load_run`: a folder
holding several runs needs --run), the MME-Emotion judge log of a task is the newest one that is that run's (its
answers and counts), and --out must be new or empty; `--force` replaces an earlier export there by removing
exactly the files its provenance.json lists (and refuses when anything else is in the folder).  The export is
written into a hidden folder beside --out and moved into place once complete.  Exit codes (`exit_codes`): 0
exported; 2 refused (no run, or several and none picked; --out not empty without --force; the run not judged yet;
only another run's judge logs); 3 error (a bad argument, malformed input, a crash), always one line on stderr.

Every export folder holds `provenance.json` (see `provenance`), `summary.json` and `README.md`, plus the format's
files.  Numbers are computed by our reimplementation of the authors' rules (`official_mme_metrics` in
`emo_tasks/mme_emotion/export.py`, `official_mvei_metrics` in `emo_tasks/mvei/export.py`), read back from the
exported files, and stated beside the project's own numbers.

provenance.json (every format)
------------------------------
`{"schema": "emo-tasks-export/1", "format", "generated_by", "emo_tasks_version", "lmms_eval_version", "model",
"model_args", "model_name", "run_dir", "results_file", "date", "tasks": {<lmms-eval task>: {"data_hash",
"n_scored", "n_failed", "prompt_hashes", "judge_models", "api_models", "alpha", "judge_protocol",
"judge_mode", "judge_fingerprint"}}, "metrics": {task: {metric: {value, ci_low, ci_high, n}}}, "files": [str]}`
(`data_hash`: sha256[:16] over the sorted (doc_id, target) of the task's sample log, `report.data_hash`; judge
fields from the benchmark's own summary of the task (`Benchmark.read_samples(...).summary`,
`reader.Run.summaries`: MME's `_summary.json`; `judge_fingerprint`: docs/judges.md#judge-fingerprint, None for
runs made before it was recorded), None for benchmarks that write none; CIs from the report's bootstrap;
`files`: every file the export wrote, relative POSIX paths, provenance.json included, the list `summary.json`
"files" repeats and a later `--force` removes).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from emo_tasks import cliargs
from emo_tasks.benchmarks import export_formats, load_object
from emo_tasks.common import remembering
from emo_tasks.results.redact import Redactor

#: Every export format, in registry order (the `--format` choices).
FORMATS = tuple(export_formats())
SCHEMA = "emo-tasks-export/1"
#: The path arguments of a format's export function (`Benchmark.exports`, `exporter`): (run_dir: StrPath,
#: out_dir: StrPath, model_name: str | None = None, *, pick: str | None = None, force: bool = False) -> Path.
StrPath = str | Path

#: Field -> type(s) of the generic JSON records (each format module has its own `SCHEMAS` for its files).
STR_OR_NONE = (str, type(None))
SCHEMAS: dict[str, dict[str, Any]] = {
    "provenance": {
        "schema": str,
        "format": str,
        "generated_by": str,
        "emo_tasks_version": str,
        "lmms_eval_version": STR_OR_NONE,
        "model": STR_OR_NONE,
        "model_args": STR_OR_NONE,
        "model_name": str,
        "run_dir": str,
        "results_file": str,
        "date": (str, int, float, type(None)),
        "tasks": dict,
        "metrics": dict,
        "files": list,
    },
    "provenance_task": {
        "data_hash": STR_OR_NONE,
        "n_scored": (int, type(None)),
        "n_failed": (int, type(None)),
        "prompt_hashes": (dict, type(None)),
        "judge_models": (dict, list, str, type(None)),
        "api_models": (dict, type(None)),
        "alpha": (int, float, type(None)),
        "judge_protocol": STR_OR_NONE,
        "judge_mode": STR_OR_NONE,
        "judge_fingerprint": (dict, type(None)),
    },
}


def check_schema(record: Any, kind: str, schemas: Mapping[str, Mapping[str, Any]] = SCHEMAS) -> list[str]:
    """What is wrong with one record of `kind` (`schemas`: these generic ones, or a format module's
    `SCHEMAS`): missing or extra fields, wrong types; [] when valid."""
    schema = schemas[kind]
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


class ExportError(Exception):
    """An export that cannot be made (the message says why and what to do): exit 3."""


class ExportRefused(ExportError):
    """An export refused rather than failed (exit 2): the run is not judged yet, the folder holds several runs and
    none was picked, or --out holds something an export must not overwrite."""


EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 2, 3
#: Files every export writes beside its format's own.
COMMON_FILES = ("provenance.json", "summary.json", "README.md")


# ------------------------------------------------------------------------------------------------ helpers
def write_json(path: Path, data: Any) -> Path:
    """`data` as every export writes JSON (indent 2, UTF-8, a final newline), making the folders, with the
    environment's secrets masked in its strings (`secrets_masker`); returns `path`."""
    redact = secrets_masker()
    if redact.values:
        data = redact.data(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_text(path: Path, text: str) -> Path:
    """`text` as every export writes a text file (UTF-8), making the folders, with the environment's secrets
    masked (`secrets_masker`); returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(secrets_masker()(text), encoding="utf-8")
    return path


def secrets_masker() -> Redactor:
    """What every file of an export goes through (`write_json`, `write_text`): the values of the environment's
    secret variables masked, by the rule `emo-tasks view` uses (`emo_tasks.results.redact.Redactor`).  Why: an export
    carries the model's answers and the judge's texts by design, and a model may repeat a key it was given; only
    those values are masked, never text that merely looks like an argument (the answers stay the model's own).
    Without such a variable nothing changes: the files are byte for byte what they were."""
    return Redactor(arguments=False)


def read_run(run_dir: str | Path, pick: str | None = None) -> Any:
    """The run by the project's one run-picking rule (`reader.load_run`): a folder holding several runs
    and no --run is refused, so an export never takes a run nobody chose."""
    from emo_tasks.results.reader import InputError, ReportError, label_runs, load_run

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


def export_run(run_dir: str | Path, pick: str | None = None) -> Any:
    """`read_run` for a leaderboard export: a run on a gate subset (`EMO_SUBSET`) is refused, its numbers are not
    the benchmark's (the viewer and the report read such runs, and say what they are)."""
    from emo_tasks.results.report import subset_summary

    run = read_run(run_dir, pick)
    subsets = subset_summary(run)
    if subsets:
        first = next(iter(subsets.values()))
        raise ExportRefused(
            f"{run_dir}: {len(subsets)} task(s) ran on the gate subset {first['name']!r} (EMO_SUBSET), not every "
            "row: a leaderboard export needs a run on the whole data"
        )
    return run


def not_judged(run_dir: str | Path, what: str) -> ExportRefused:
    """The one message of every format for a run whose answers were saved but not judged yet."""
    return ExportRefused(f"{run_dir}: not judged yet ({what}); run `emo-tasks judge {run_dir}` first, then export it")


def run_task_log(
    run_dir: str | Path, title: str, tasks: tuple[str, ...], metric: str, pick: str | None = None
) -> tuple[Any, str, Path]:
    """The run, which of `tasks` it has, and that task's sample log (the answers); ExportRefused when the task was
    not judged (its results hold no `metric`: a --predict_only run), an ExportError saying what is missing
    otherwise."""
    from emo_tasks.datafiles import sample_log

    run = export_run(run_dir, pick)
    task = next((t for t in tasks if t in run.results), None)
    if task is None:
        raise ExportError(f"{run_dir}: no {title} task ({', '.join(tasks)}) in {run.results_file.name}")
    if not run.has(task, metric):
        raise not_judged(run_dir, f"{run.results_file.name} holds no {title} metrics for {task}: a --predict_only run")
    log = sample_log(run.path, run.results_file, task)
    if log is None:
        raise ExportError(
            f"{run_dir}: no sample log *_samples_{task}.jsonl (the answers); rerun lmms-eval with --log_samples"
        )
    return run, task, log


def model_name_for(run: Any, model_name: str | None) -> str:
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
    """--out must be usable as a folder: not a file, not below a file, no name longer than the file system takes
    (`cliargs.path_problem`, every command's rule), writable.  An ExportError (a bad argument, exit 3) naming the
    problem otherwise."""
    try:
        problem = cliargs.path_problem(out, folder=True)
        if problem:
            raise ExportError(f"--out {out}{problem}")
        ancestor = out
        while not ancestor.exists():
            ancestor = ancestor.parent
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


# ------------------------------------------------------------------------------------------------ provenance
def provenance(
    run: Any, fmt: str, model_name: str, tasks: Iterable[str], resamples: int = 200, files: Iterable[str] = ()
) -> dict[str, Any]:
    """The provenance block of an export (schema in the module docstring); `files`: every file the export wrote,
    relative to its folder (what a later --force export may remove)."""
    from emo_tasks import __version__
    from emo_tasks.results.report import lmms_eval_version, metric_rows

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
            "judge_fingerprint": s.get("judge_fingerprint"),
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


# ------------------------------------------------------------------------------------------------ common end
def finish(
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
    write_json(out / "summary.json", {**summary, "files": listed})
    write_text(out / "README.md", readme)
    write_json(out / "provenance.json", provenance(run, fmt, name, tasks, files=listed))
    on_disk = files_under(out)
    if on_disk != listed:
        raise ExportError(f"internal error: the export wrote {on_disk} but lists {listed}")


# ------------------------------------------------------------------------------------------------ the formats
def exporter(fmt: str) -> Callable[..., Path]:
    """The export function of a format (the registry's "module:function"): (run_dir, out_dir, model_name=None, *,
    pick=None, force=False) -> the path it reports."""
    return load_object(export_formats()[fmt].exports[fmt])


def _format_modules() -> list[ModuleType]:
    """The modules of the export functions, in registry order, each once."""
    modules = (sys.modules[exporter(fmt).__module__] for fmt in FORMATS)
    return list({m.__name__: m for m in modules}.values())


def _format_texts(name: str) -> list[str]:
    """What the format modules add to the `--help` text under `name` (a string or a tuple of strings each)."""
    texts: list[str] = []
    for module in _format_modules():
        value = getattr(module, name, ())
        texts += [value] if isinstance(value, str) else list(value)
    return texts


def exit_codes() -> str:
    """The exit codes as `--help` states them, with the refusals the format modules add (`REFUSALS`)."""
    return (
        "Exit codes: 0 exported; 2 refused (RUN_DIR holds no run, or several and none picked with --run; --out is "
        "not empty and --force was not given, or holds files no export wrote; the run is not judged yet: run "
        "`emo-tasks judge RUN_DIR` first" + "".join(f"; {r}" for r in _format_texts("REFUSALS")) + "); 3 error (a "
        "bad argument: RUN_DIR missing, --out unusable, an empty --model-name; malformed input; a crash). Every "
        "failure is one line on stderr, never a traceback."
    )


def _run_dir_help() -> str:
    """The RUN_DIR help, with what the format modules require of it (`RUN_DIR_HELP`)."""
    needs = "; ".join(_format_texts("RUN_DIR_HELP"))
    return "lmms-eval --output_path folder" + (f" ({needs})" if needs else "")


#: The `export` subcommand's parser class: every command's (`emo_tasks.cliargs.Parser`), a usage error is a bad
#: argument, exit 3 as documented (argparse's own code, 2, means "refused" here).
ExportParser = cliargs.Parser


def add_parser(sub: Any) -> Any:
    """The `export` subcommand's arguments (kept beside the exporters they feed)."""
    x = sub.add_parser(
        "export",
        help="write a run in the benchmark authors' own formats (leaderboard submission)",
        description="Write one run in the benchmark authors' own file formats, into a folder of its own (see "
        "docs/export.md). The run is chosen as every command chooses it; a folder holding several runs needs "
        "--run. The export is written beside --out and moved into place only when complete. " + exit_codes(),
    )
    x.__class__ = ExportParser  # the subparsers action makes a plain ArgumentParser
    x.add_argument("run", metavar="RUN_DIR", help=_run_dir_help())
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
        type=cliargs.text("a part of a results file's path (e.g. a date stamp) or the file"),
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
    code (`exit_codes`), with a one-line message on stderr whenever it is not 0.  `args`: run, format, out,
    model_name, pick, force (the last two optional)."""
    fmt = getattr(args, "format", None)
    if fmt not in FORMATS:
        print(f"emo-tasks export: error: --format must be one of {', '.join(FORMATS)}, got {fmt!r}", file=sys.stderr)
        return EXIT_ERROR
    name, force = getattr(args, "model_name", None), bool(getattr(args, "force", False))
    try:
        if name is not None and not name.strip():
            raise ExportError(f"--model-name {name!r} is empty; give a name or leave the option out")
        out = Path(args.out)
        check_out(out)  # the cheap refusals first: before the run is read
        _check_target(out, force)
        with remembering():  # the run's reading and the format's share each file (common.once)
            path = exporter(fmt)(args.run, out, name, pick=getattr(args, "pick", None), force=force)
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
