"""`emo-tasks view RUN [RUN ...] --out DIR [--run NAME_OR_PATH] [--force]`: write the results browser.

The runs are picked by the project's one rule (`reader.load_run`, as `report` and `export` pick them); the site is
built by `build_site` (the modules of this package, in the order its docstring gives) and written into a hidden
folder beside --out, then moved into place.  Exit codes: 0 written; 2 refused (a RUN holds no run, or several and
none was picked with --run; --out not empty without --force, or holding files no site wrote); 3 error (a bad
argument: a RUN that does not exist, an unusable --out; malformed input; a crash), always one line on stderr,
never a traceback.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from emo_tasks import cliargs
from emo_tasks.benchmarks import sample_views
from emo_tasks.common import remembering
from emo_tasks.results import reader
from emo_tasks.results.export import ExportError, ExportParser, ExportRefused, check_out, read_run
from emo_tasks.results.reader import label_runs
from emo_tasks.results.report import build_tables, run_notes

from . import media, model
from .files import MARKER, Redactor, check_target, staged, write_marker, write_script

EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 2, 3
ASSETS = Path(__file__).with_name("assets")
PAGE_FILES = ("index.html", "app.js", "style.css")


HELP = "write a static results browser (overview, per-task and per-sample pages) over one or more runs"
DESCRIPTION = (
    "Write a static site over one or more lmms-eval output folders: the report's tables with their 95 % CIs (one "
    "row per run, each number linking to its samples), a page per task (filters, scores by category) and a page "
    "per sample (#<task>/<doc id>: media, prompt, answers, the judge's evidence); with several runs, a page per pair "
    "(#compare/r1/r2: the samples that flipped, or where two judges of the same answers disagree most, with "
    "`emo-tasks agreement`'s figures). It opens from disk "
    "(DIR/index.html), offline. The runs are chosen as every command chooses them; a folder holding several runs "
    "needs --run. Exit codes: 0 written; 2 refused (no run in a RUN, or several and none picked; a newer judge log "
    "of a task unreadable beside an older one; --out not empty without --force, or holding files no site wrote); "
    "3 error (a RUN that does not exist, an unusable --out, malformed input, a crash), one line on stderr (see "
    "docs/view.md)."
)


def add_parser(sub: Any) -> Any:
    """The `view` subcommand's arguments (a usage error exits 3, as export's)."""
    v = sub.add_parser("view", help=HELP, description=DESCRIPTION)
    v.__class__ = ExportParser  # usage errors exit 3 (argparse's own 2 means "refused" here)
    v.add_argument("runs", nargs="+", metavar="RUN", help="lmms-eval --output_path folders (or results files)")
    v.add_argument("--out", required=True, metavar="DIR", help="folder to write the site into (new or empty)")
    v.add_argument("--run", dest="pick", metavar="NAME_OR_PATH", default=None,
                   type=cliargs.text("a part of a results file's path (e.g. a date stamp) or the file"),
                   help="the results file to use in each RUN that holds several (a part of its path below RUN: "
                   "a date stamp or judged/<judge>)")  # fmt: skip
    v.add_argument("--force", action="store_true",
                   help=f"replace the earlier site in --out: removes only the files its {MARKER} lists, and "
                   "refuses when --out holds any other file")  # fmt: skip
    return v


def main_view(args: Any) -> int:
    """The exit code (module docstring); a one-line summary on stdout when written, one line on stderr if not."""
    try:
        summary = build_site(args.runs, args.out, pick=args.pick, force=bool(args.force))
    except Exception as exc:  # noqa: BLE001 - malformed input or a crash too: one line, never a traceback
        refused = isinstance(exc, ExportRefused)
        known = isinstance(exc, ExportError)
        text = " ".join(str(exc).split()) if known else f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        print(f"emo-tasks view: {'refused' if refused else 'error'}: {text}", file=sys.stderr)
        return EXIT_REFUSED if refused else EXIT_ERROR
    print(summary["line"])
    if summary["notice"]:
        print(summary["notice"], file=sys.stderr)
    return EXIT_OK


def write_compare_view(args: Any) -> int:
    """`emo-tasks compare --view DIR`: the site over BASE and NEW, opened at their comparison page; 0 written, else
    view's own exit code (2 refused, 3 error), one line on stderr.  `args`: compare's (base, new, view, base_run,
    new_run, resamples, seed).  The command line hands it to `emo_tasks.gate.command.main_compare`: the gate is a
    layer below the site."""
    try:
        summary = build_site([args.base, args.new], args.view, picks=[args.base_run, args.new_run],
                             resamples=args.resamples, seed=args.seed)  # fmt: skip
    except (ExportError, ExportRefused) as exc:
        print(f"emo-tasks compare: --view: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_REFUSED if isinstance(exc, ExportRefused) else EXIT_ERROR
    print(summary["line"].replace("index.html", "index.html#compare/r1/r2"), file=sys.stderr)
    if summary["notice"]:
        print(summary["notice"], file=sys.stderr)
    return EXIT_OK


def build_site(
    run_paths: Sequence[str | Path],
    out: str | Path,
    pick: str | None = None,
    force: bool = False,
    resamples: int = 1000,
    seed: int = 0,
    env: Mapping[str, str] | None = None,
    picks: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """Write the site of `run_paths` into `out`; returns the counts and the summary line.  Raises ExportRefused
    (exit 2: no run in a folder or several, --out taken) or ExportError (exit 3: a bad argument, malformed input).
    `picks`: one --run per RUN (`compare --view` picks each side on its own), else `pick` for all."""
    start = time.monotonic()
    out = Path(out)
    check_out(out)  # the cheap refusals first: before any run is read
    check_target(out, force)
    picks = list(picks) if picks is not None else [pick] * len(run_paths)
    with remembering():  # the report's reading and the viewers' share each file (common.once)
        return _build(run_paths, out, picks, force, resamples, seed, env, start)


def _build(
    run_paths: Sequence[str | Path],
    out: Path,
    picks: Sequence[str | None],
    force: bool,
    resamples: int,
    seed: int,
    env: Mapping[str, str] | None,
    start: float,
) -> dict[str, Any]:
    from emo_tasks import __version__
    from emo_tasks.settings import cache_dir

    runs = [
        read_run(p, k) for p, k in zip(run_paths, picks, strict=True)
    ]  # no such folder: ExportError; none or several: ExportRefused
    label_runs(runs)
    redact = Redactor(env)
    for run in runs:  # labels carry model_args: the tables, the chart and every page show them
        run.label = redact(run.label)
    tasks = model.site_tasks(runs)
    by_run = {model.run_id(i): run for i, run in enumerate(runs)}
    image_file = functools.cache(media.image_file)  # each entry looked up once: for the thumbnails, then the pages
    allowed = _allowed_media(tasks, by_run, env)
    outside: dict[str, set[Path]] = {rid: set() for rid in by_run}  # per run: the image files not placed
    views: dict[str, list[Any]] = {}
    with (
        staged(out, force) as stage,
        media.Thumbnailer(stage / "media", cache_dir(env) / media.THUMB_CACHE) as thumbnailer,
    ):
        for ts in tasks:  # each task's thumbnails start as soon as its samples are read
            if ts.group:
                continue
            views[ts.id] = _views(by_run[ts.run], ts)
            run_dir, ok = by_run[ts.run].path, allowed[ts.id]
            files = [f for v in views[ts.id] for e in v.media if (f := image_file(e, run_dir)) is not None]
            outside[ts.run].update(f for f in files if not ok(f))
            thumbnailer.add(f for f in files if ok(f))
        tables = build_tables(runs, resamples, seed)  # meanwhile
        thumbs = thumbnailer.names()
        size = _write_tasks(stage, tasks, views, by_run, thumbs, redact, image_file, allowed)
        n_outside = sum(len(files) for files in outside.values())
        overview = {
            "generated_by": f"emo-tasks {__version__}",
            "generated_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "runs": [
                {**model.run_data(i, run), "media_not_shown": len(outside[model.run_id(i)])}
                for i, run in enumerate(runs)
            ],
            "media_not_shown": n_outside,
            "benchmarks": [
                model.benchmark_data(b, tables, runs, [ts.id for ts in tasks if ts.bench.key == b.key])
                for b in {ts.bench.key: ts.bench for ts in tasks}.values()
            ],
            "tasks": {ts.id: ts.meta for ts in tasks},
        }
        overview["comparisons"] = []
        for pair in _comparisons(runs, tasks, resamples, seed):
            name = f"{pair['a']}-{pair['b']}"
            size += write_script(stage / "data" / "compare" / f"{name}.js", f"compare/{name}", pair, redact)
            overview["comparisons"].append({
                "a": pair["a"], "b": pair["b"], "judges": pair["judges"], "file": f"data/compare/{name}.js",
                "n_flips": sum(t["n_flips"] for t in pair["tasks"]),
                "n_changed": sum(t["n_changed"] for t in pair["tasks"]),
            })  # fmt: skip
        size += write_script(stage / "data" / "site.js", "site", overview, redact)
        for name in PAGE_FILES:
            shutil.copyfile(ASSETS / name, stage / name)
            size += (stage / name).stat().st_size
        size += sum((stage / "media" / n).stat().st_size for n in {n for n in thumbs.values() if n})
        files = write_marker(stage, f"emo-tasks {__version__}", [str(r.results_file) for r in runs])
    n_samples = sum(len(ts.records) for ts in tasks)
    n_thumbs = len({n for n in thumbs.values() if n})
    line = (
        f"emo-tasks view: wrote {out / 'index.html'}: {len(runs)} run(s), {len(tasks)} task page(s), "
        f"{n_samples} samples, {n_thumbs} thumbnails; {len(files)} files, {size / 1e6:.1f} MB in "
        f"{time.monotonic() - start:.1f} s"
    )
    files_word = "media file" if n_outside == 1 else "media files"
    notice = (
        f"emo-tasks view: {n_outside} {files_word} not shown: outside the run folder and the benchmark's data "
        "(docs/view.md: What a site may contain)"
        if n_outside
        else None
    )
    return {"runs": len(runs), "tasks": len(tasks), "samples": n_samples, "thumbnails": n_thumbs,
            "files": len(files), "bytes": size, "line": line, "not_shown": n_outside, "notice": notice}  # fmt: skip


def _allowed_media(tasks: list[model.TaskSamples], by_run: dict, env: Mapping[str, str] | None) -> dict[str, Any]:
    """Per leaf task id, where its media may come from (`media.Allowed`): its run folder (RUN for a result judged
    into RUN/judged/<judge>/) and its benchmark's data folders (`model.media_roots`).  A run folder is untrusted
    input: nothing else of this machine goes into a site (docs/view.md, "What a site may contain")."""
    from emo_tasks.settings import environ

    env = environ() if env is None else env
    roots = {ts.bench.key: model.media_roots(ts.bench, env) for ts in tasks if not ts.group}
    by_pair = {
        (ts.run, ts.bench.key): media.Allowed([by_run[ts.run].path, reader.judged_source(by_run[ts.run].path),
                                               *roots[ts.bench.key]])
        for ts in tasks if not ts.group
    }  # fmt: skip
    return {ts.id: by_pair[(ts.run, ts.bench.key)] for ts in tasks if not ts.group}


def _comparisons(runs: Sequence[Any], tasks: list[model.TaskSamples], resamples: int, seed: int) -> list[dict]:
    """A comparison page per pair of runs sharing a task: two judges of the same answers (both judged from one
    results file) get the judges' page with `emo-tasks agreement`'s figures; any other pair the runs' page."""
    out = []
    for i, j in [(x, y) for x in range(len(runs)) for y in range(x + 1, len(runs))]:
        src = model.judged_source(runs[i])
        judges = src is not None and src == model.judged_source(runs[j])
        pair = model.comparison(model.run_id(i), model.run_id(j), tasks, judges)
        if not pair["tasks"]:
            continue
        if judges:
            pair["agreement"], pair["agreement_error"] = _agreement(runs[i], runs[j], resamples, seed)
        out.append(pair)
    return out


def _agreement(a: Any, b: Any, resamples: int, seed: int) -> tuple[dict | None, str | None]:
    """`emo-tasks agreement`'s document for two judged results (None and the reason when it has none)."""
    from emo_tasks.judging import agreement, agreement_report

    try:
        ja, jb = (agreement.load_run(reader.run_root(r.path, r.results_file)) for r in (a, b))
        doc = agreement_report.compare_runs(ja, jb, resamples=resamples, seed=seed)
    except (reader.ReportError, ValueError, OSError) as exc:  # unreadable logs (agreement's InputError), a refusal
        return None, " ".join(str(exc).split())
    return doc, agreement_report.no_overlap_reason(doc)


def _views(run: Any, ts: model.TaskSamples) -> list[Any]:
    """The benchmark's views of one leaf task (`benchmarks.sample_views`); a failure names the task and the file."""
    try:
        return sample_views(run.path, run.results_file, ts.task)
    except Exception as exc:
        raise ExportError(
            f"{run.results_file}: the samples of {ts.task} could not be read ({type(exc).__name__}: {exc})"
        ) from exc


def _write_tasks(
    stage: Path,
    tasks: list[model.TaskSamples],
    views: dict,
    by_run: dict,
    thumbs: dict,
    redact: Redactor,
    image_file: Any = media.image_file,
    allowed: Mapping[str, Any] | None = None,
) -> int:
    """Each leaf task's records in chunk files and every task's meta (a group's from its leaves' records)."""
    size = 0
    by_id = {ts.id: ts for ts in tasks}
    notes = {rid: run_notes(run) for rid, run in by_run.items()}
    for ts in tasks:
        if ts.group:
            continue
        run = by_run[ts.run]
        task_views = views[ts.id]
        ok = allowed.get(ts.id) if allowed is not None else None
        entries = [model.media_entries(v, run.path, thumbs, image_file, ok) for v in task_views]
        ts.records = model.records(task_views, entries)
        for n, chunk in enumerate(ts.chunks()):
            size += write_script(stage / ts.folder / f"{n}.js", f"{ts.id}#{n}", chunk, redact)
    for ts in tasks:
        recs = [r for leaf in ts.leaves if leaf in by_id for r in by_id[leaf].records] if ts.group else ts.records
        ts.meta = model.task_meta(ts, recs, notes[ts.run])
    return size
