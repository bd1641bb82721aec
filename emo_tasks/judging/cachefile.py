"""`emo-tasks cache export RUN` / `emo-tasks cache import FILE`: a run's cached judge answers, copied into a file
beside the run and back into any cache.

Why: a dated judge model is shut down one day (docs/judges.md#before-your-judge-shuts-down); after that the
answer cache is the only copy of its verdicts, and `emo-tasks judge` on a cached run still works.  The cache is
one machine's and holds every run's answers; the file holds exactly what one run's judged results read, so a
result can be re-judged on another machine, after the model is gone, sending nothing.

Which answers: the ones a re-judge of each judged folder reads.  For each judged results file under
`RUN/judged/*/` (or the judged folder given), the judge stage runs again in this process, with the folder's own
tasks, judge models and options, against the cache and a stand-in endpoint that cannot be reached (no key, no
request leaves the machine; `dryrun.STAND_IN_BASE_URL`), into a scratch folder.  Every key the cache answers is
recorded (`judges.cache_transfer.recorded_reads`: the keys the engine itself computes).  The scratch results must
equal the folder's results to the bit: then the file is proven to be all a re-judge needs; otherwise the export is
refused (the cache lacks answers the folder used, or the judge settings in the environment now differ).

Exit codes: 0 done; 2 refused (export: no judged folder, a re-judge from the cache gives other numbers; import:
the cache holds another answer under a key of the file, without --keep-existing); 3 error (a bad argument, a file
or cache that cannot be read, a damaged file: the message names the line).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from io import StringIO
from pathlib import Path
from typing import Any

from emo_tasks.judging.stage_types import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, MODEL_FLAGS
from emo_tasks.results.layout import JUDGED_DIR, MARKER
from judges.cache_transfer import TransferError

#: Where `export` writes unless told (--out): beside the run, in RUN (or in the judged folder given).
DEFAULT_NAME = "emo_tasks_judge_cache.jsonl.gz"
#: Conflicts printed one per line (the rest counted).
SHOWN = 5


class Refused(Exception):
    """The export cannot be proven complete, or there is nothing to export (exit 2)."""


def main_cache(args: argparse.Namespace) -> int:
    """`emo-tasks cache export|import` (the module docstring's exit codes; `list` is `cachelist.main_list`)."""
    try:
        if args.cache_command == "export":
            return export_run(Path(args.run), cache_dir_of(args.cache), Path(args.out) if args.out else None)

        return import_file(Path(args.file), cache_dir_of(args.cache), keep_existing=args.keep_existing)
    except Refused as exc:
        print(f"emo-tasks cache {args.cache_command}: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (TransferError, OSError) as exc:
        print(f"emo-tasks cache {args.cache_command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


def cache_dir_of(given: str | None) -> Path:
    """--cache DIR, else emo-tasks' cache folder (EMO_CACHE_DIR, else the user cache folder): the judge's own."""
    from emo_tasks.settings import cache_dir

    return Path(given) if given else cache_dir()


def _secrets() -> tuple[str, ...]:
    from emo_tasks.settings import environ
    from judges.config import env_secrets

    return env_secrets(environ())


# ------------------------------------------------------------------------------------------------ export
def judged_results(target: Path) -> list[Path]:
    """The judged results files (written by `emo-tasks judge`, carrying MARKER) of a judged folder, or of every
    folder under RUN/judged/ of a run folder, by path."""
    folders = [target] if _judged_files(target) else sorted(p for p in (target / JUDGED_DIR).glob("*") if p.is_dir())
    return [f for folder in folders for f in _judged_files(folder)]


def _judged_files(folder: Path) -> list[Path]:
    out = []
    for path in sorted(folder.glob("*_results.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get(MARKER), dict):
            out.append(path)
    return out


def export_run(target: Path, cache: Path, out: Path | None = None, err: Any = None) -> int:
    """Write the answers every judged result of `target` read from `cache` to `out` (default
    `target/DEFAULT_NAME`), after proving a re-judge from them alone gives each result's numbers."""
    from judges.cache_transfer import read_rows, write_file

    err = sys.stderr if err is None else err
    if not target.is_dir():
        raise TransferError(f"{target}: no such folder")
    files = judged_results(target)
    if not files:
        raise Refused(f"{target}: no judged results (RUN/judged/<setup>/*_results.json written by `emo-tasks judge`)."
                      " Judge the run first; a run judged in process: run `emo-tasks judge RUN` once (its answers "
                      "are cached, nothing is sent), then export")  # fmt: skip
    keys: set[str] = set()
    for results_file in files:
        found = replay(results_file, cache)
        print(f"emo-tasks cache export: {results_file.parent.name}: {len(found)} cached answers, a re-judge from "
              "them alone gives its numbers", file=err)  # fmt: skip
        keys |= found
    rows = read_rows(cache, keys)
    out = out if out is not None else target / DEFAULT_NAME
    about = {"judged": [str(f.relative_to(target)) for f in files], "run": target.name, "entries": len(rows)}
    write_file(out, rows, about, secrets=_secrets())
    print(f"emo-tasks cache export: wrote {len(rows)} answers to {out}", file=err)
    return EXIT_OK


def replay(results_file: Path, cache: Path) -> set[str]:
    """Judge again what `results_file` (a judged result) judged, from `cache` alone, into a scratch folder; the
    keys the cache answered.  Refused unless the scratch results equal the file's."""
    from emo_tasks.judging import stage
    from judges.cache_transfer import recorded_reads
    from judges.engine import reset_engine

    data = json.loads(results_file.read_text(encoding="utf-8"))
    marker: Mapping[str, Any] = data[MARKER]
    folder = results_file.parent
    source = Path(str(marker.get("source_results") or ""))
    run_dir = folder.parent.parent if folder.parent.name == JUDGED_DIR else source.parent
    pick = str(source.resolve()) if source.is_file() else source.name
    setup = marker.get("judge_setup") or {}
    overrides = {var: (marker.get("judge_models") or {}).get(flag) for flag, var in MODEL_FLAGS.items()}
    extra = any(k.endswith("_judge") and v for k, v in setup.items())
    where = f"{folder.name}"
    log = StringIO()
    reset_engine()  # engines made for another cache or endpoint are not reused
    try:
        with tempfile.TemporaryDirectory(prefix="emo-cache-export-") as scratch, recorded_reads() as found:
            code = stage.judge_run(
                run_dir,
                tasks=list(marker.get("tasks") or []) or None,
                out=Path(scratch) / "judged",
                overrides=overrides,
                env=_replay_env(cache, marker),
                extra_judge=extra,
                stream=log,
                run=pick,
                partial=bool(marker.get("partial")),
                max_failure_share=1.0,
            )
            again = _judged_files(Path(scratch) / "judged")
            if code != EXIT_OK or len(again) != 1:
                last = " | ".join(x for x in log.getvalue().splitlines() if x.startswith("emo-tasks judge"))[-600:]
                raise Refused(f"{where}: re-judging it from the cache did not finish (exit {code}: {last})")
            replayed = json.loads(again[0].read_text(encoding="utf-8"))
            keys = set(found)
    finally:
        reset_engine()
    diff = _first_difference(data.get("results") or {}, replayed.get("results") or {})
    if diff:
        raise Refused(f"{where}: re-judging it from the cache {cache} alone gives other numbers ({diff}): the cache "
                      "lacks answers this result used (another cache folder? --cache / EMO_CACHE_DIR), or the judge "
                      "settings in the environment now differ from the ones it was judged with (EMO_* variables, "
                      "judge_setup in its results file)")  # fmt: skip
    return keys


def _replay_env(cache: Path, marker: Mapping[str, Any]) -> dict[str, str]:
    """The environment of a replay: the caller's judge settings, the cache asked for, and an endpoint nothing can
    reach (no key: none is needed for cached answers), one try per request."""
    from emo_tasks.judging.dryrun import STAND_IN_BASE_URL
    from emo_tasks.settings import environ
    from judges.config import SECRET_VARIABLES

    env = {k: v for k, v in environ().items() if k not in (*SECRET_VARIABLES, "OPENAI_API_URL", "AZURE_ENDPOINT")}
    env.update(API_TYPE="openai", OPENAI_BASE_URL=STAND_IN_BASE_URL, EMO_JUDGE_MAX_TRIES="1", EMO_PROGRESS="0",
               EMO_CACHE_DIR=str(cache), EMO_JUDGE_CACHE="1")  # fmt: skip
    if marker.get("judge_mode") == "offline":
        env["EMO_JUDGE"] = "offline"
    return env


def _first_difference(want: Mapping[str, Any], got: Mapping[str, Any]) -> str | None:
    """The first task and value where two results blocks differ (compared as JSON text: NaN equals NaN), else None."""
    for task in sorted(set(want) | set(got)):
        a, b = want.get(task) or {}, got.get(task) or {}
        for name in sorted(set(a) | set(b)):
            if json.dumps(a.get(name)) != json.dumps(b.get(name)):
                return f"{task} {name}: {a.get(name)!r} judged, {b.get(name)!r} from the cache"
    return None


# ------------------------------------------------------------------------------------------------ import
def import_file(path: Path, cache: Path, keep_existing: bool = False, err: Any = None) -> int:
    """Check `path` whole, then put its answers into `cache` in one transaction (conflicts: refused, or with
    `keep_existing` the cache's own answers kept)."""
    from judges.cache import JudgeCache
    from judges.cache_transfer import ImportConflict, import_entries, read_file

    err = sys.stderr if err is None else err
    if not path.is_file():
        raise TransferError(f"{path}: no such file")
    checked = read_file(path, secrets=_secrets())
    target = JudgeCache(cache)
    try:
        report = import_entries(target, checked.entries, keep_existing=keep_existing)
    except ImportConflict as exc:
        _print_conflicts(exc.report.conflicts, err)
        raise Refused(f"{path}: {exc}. Keep the cache's answers and import the rest with --keep-existing, or import "
                      "into another --cache folder") from None  # fmt: skip
    finally:
        target.close()
    if report.conflicts:
        _print_conflicts(report.conflicts, err)
        print(f"emo-tasks cache import: kept the cache's own answer for {len(report.conflicts)} key(s) "
              "(--keep-existing)", file=err)  # fmt: skip
    print(f"emo-tasks cache import: {report.added} answers added, {report.same} already there, into "
          f"{target.path}", file=err)  # fmt: skip
    return EXIT_OK


def _print_conflicts(conflicts: list[tuple[str, str, str, str]], err: Any) -> None:
    for key, model, old, new in conflicts[:SHOWN]:
        print(f"emo-tasks cache import: conflict: key {key} ({model}): the cache holds {old[:60]!r}, the file "
              f"{new[:60]!r}", file=err)  # fmt: skip
    if len(conflicts) > SHOWN:
        print(f"emo-tasks cache import: ... and {len(conflicts) - SHOWN} more conflicts", file=err)
