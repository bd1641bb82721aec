"""`emo-tasks`: judge / report / compare / agreement over lmms-eval output folders.

    emo-tasks judge RUN_DIR [--run NAME_OR_PATH] [--tasks T,...] [--out DIR] [--partial] [--max-failure-share 0.1]
                    [--judge-model M] [--step-model S] [--audio-model A] [--multiemo-judge]
                    [--dry-run [--price MODEL=IN/OUT ...]]
    emo-tasks export RUN_DIR --format mme-official|mvei-official|multiemo-table --out DIR [--model-name NAME]
                     [--run NAME_OR_PATH] [--force]
    emo-tasks view RUN_DIR... --out DIR [--run NAME_OR_PATH] [--force]
    emo-tasks report RUN_DIR... [--run NAME_OR_PATH] [--format md|csv|json] [--out FILE] [--plot FILE.png]
                     [--resamples N] [--seed S] [--trend [auto|checkpoint|date|given]] [--allow-mixed]
    emo-tasks compare BASE_RUN NEW_RUN [--metric M ...] [--max-drop X] [--alpha 0.05] [--force]
                      [--base-run NAME_OR_PATH] [--new-run NAME_OR_PATH]
                      [--max-failure-share 0.1] [--min-coverage 0.9] [--view DIR]
    emo-tasks plan-gate BASE_RUN --detect D [--detect METRIC=D] [--power 0.8] [--alpha 0.05] [--second RUN]
                        [--tasks T,...] [--seed S] [--cost [--price MODEL=IN/OUT]] --out SUBSET.json
    emo-tasks agreement JUDGE_FILE HUMAN_FILE [--icc-form ICC(2,1)] [--format text|json]
    emo-tasks agreement RUN_A RUN_B [--icc-form ICC(2,1)] [--format text|json] [--resamples N] [--seed S]

Exit codes of `report` and `compare` (the regression gate for CI): 0 ok / pass; 1 `compare` found a significant
drop larger than --max-drop; 2 not comparable: no run in a folder or several and none picked, runs that differ in
data (config or data hash of the sample logs), prompts (the medium too), generation settings or judges (--force
compares anyway; `report --trend`: two runs next to each other, unless --allow-mixed), a judge-failure share
above --max-failure-share or a paired coverage below --min-coverage in either run, no overlap; 3 error: malformed
input (a results file that is not lmms-eval's JSON) or a crash - a one-line message, never a traceback.

A bad argument is 3 for every command and every flag (`emo_tasks.cliargs`): argparse's usage errors (2 would read as
"not comparable"), a value out of range (nan, inf, a share outside [0, 1], --alpha outside (0, 1), --resamples 0,
an empty --run, ...), a run folder that does not exist; one line naming the flag, the value and what is accepted.

Agreement input: JSONL, one rating per line, `{"item": "<id>", "rating": <number>}`.  `item` is any string id
(e.g. "<video_id>#step3"); both files must rate on the same scale; ratings are joined on `item`.  Two run
folders instead (judge vs judge: the MME-Emotion judge logs of two judges of the same answers): see
`emo_tasks/judging/agreement.py`; there, 2 = no sample scored in both runs and 3 = unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks import cliargs
from emo_tasks.cliargs import EXIT_BAD_ARGUMENT
from emo_tasks.gate import compare, plan_gate
from emo_tasks.judging import dryrun
from emo_tasks.results import comparable, reader, report

EXIT_PASS, EXIT_REGRESSION, EXIT_NOT_COMPARABLE, EXIT_ERROR = 0, 1, 2, 3

_PICK = "a part of a results file's path (e.g. a date stamp) or the file"
_RUN_DIR = "an lmms-eval --output_path folder or a results file"


def _parser() -> argparse.ArgumentParser:
    p = cliargs.Parser(
        prog="emo-tasks",
        description="Reports and regression checks for emo-tasks runs.",
        epilog="Every command exits 3 on a bad argument (a usage error, a value out of range, a missing run "
        "folder), with one line naming the flag, the value and what is accepted (docs/cli.md#exit-codes).",
    )
    sub = p.add_subparsers(dest="command", required=True)

    j = sub.add_parser(
        "judge",
        help="judge and score the answers an lmms-eval run saved (--predict_only / --log_samples / EMO_JUDGE=defer)",
        description="Run each benchmark's whole post-inference phase (MME-Emotion's step agent, audio clue and "
        "judge; MVEI's majority and metrics; MultiEmo's scoring) over a finished run's saved answers, with the same "
        "settings and cache as an in-process run. Answers are mapped back to their rows and checked first: a run "
        "whose data, prompts or task versions differ from what is installed now is refused (exit 2). Results go to "
        "RUN_DIR/judged/<judge models>-<setup hash>/ (one folder per judge setup) in the layout `emo-tasks report` "
        "reads. Every saved row must be there exactly once, with its target and prompt (--partial accepts missing "
        "rows). Exit codes: 0 done; 2 refused (several runs in the folder and no --run, answers that do not "
        "belong to the run's rows, duplicated or missing rows); 3 error (a bad argument, no run, bad setting, "
        "unusable --out, a crash); 4 judged and written, but more than --max-failure-share of the judgements "
        "failed (run it again: only the failures are resent).",
    )
    j.add_argument("run", metavar="RUN_DIR", help="the lmms-eval --output_path folder")
    j.add_argument("--tasks", type=cliargs.names("a comma-separated list of tasks or groups"),
                   help="comma-separated tasks or groups of the run (default: all of ours)")  # fmt: skip
    j.add_argument("--out", type=cliargs.out_folder("a folder to write the judged results into"),
                   help="where to write (default RUN_DIR/judged/<judge models>-<setup hash>)")  # fmt: skip
    j.add_argument("--run", dest="pick", metavar="NAME_OR_PATH", type=cliargs.text(_PICK),
                   help="the lmms-eval results file to judge when RUN_DIR holds several (a path, or a part of its "
                   "path below RUN_DIR such as a date stamp)")  # fmt: skip
    j.add_argument("--partial", action="store_true",
                   help="judge the saved rows even when some of the rows the run answered are missing (the results "
                   "record which); duplicates are still refused")  # fmt: skip
    j.add_argument("--max-failure-share", type=cliargs.share, default=None, metavar="SHARE",
                   help="exit 4 when more than this share of judgements failed (default 0.1, as compare)")  # fmt: skip
    model = cliargs.text("a model name")
    j.add_argument("--judge-model", type=model, help="multimodal judge model (default EMO_JUDGE_MODEL or the paper's)")
    j.add_argument("--step-model", type=model, help="step agent model (default EMO_STEP_MODEL or the paper's)")
    j.add_argument("--audio-model", type=model, help="audio agent model for live clues (default EMO_AUDIO_MODEL)")
    j.add_argument("--multiemo-judge", action="store_true", help="also run MultiEmo's LLM-as-a-judge stage")
    j.add_argument("--dry-run", action="store_true", help="send nothing: requests, cached, tokens and cost")
    j.add_argument("--price", action="append", default=[], metavar="MODEL=IN/OUT", type=dryrun.price_arg,
                   help="USD per 1M input/output tokens for the cost estimate (repeatable)")  # fmt: skip

    from emo_tasks.results.export import add_parser as add_export_parser

    add_export_parser(sub)

    from .site.command import add_parser as add_view_parser

    add_view_parser(sub)

    r = sub.add_parser("report", help="paper-style tables (with bootstrap CIs) for one or more runs")
    r.add_argument("runs", nargs="+", metavar="RUN_DIR", type=cliargs.existing(_RUN_DIR),
                   help="lmms-eval --output_path folders (or results files)")  # fmt: skip
    r.add_argument("--run", dest="pick", metavar="NAME_OR_PATH", type=cliargs.text(_PICK),
                   help="the results file to use in each RUN_DIR that holds several (a part of its path below "
                   "RUN_DIR: a date stamp or judged/<judge>)")  # fmt: skip
    r.add_argument("--format", choices=("md", "csv", "json"), default="md")
    r.add_argument("--out", type=cliargs.out_file("a file to write the report to"),
                   help="write here instead of stdout")  # fmt: skip
    r.add_argument("--plot", type=cliargs.out_file("a .png file to draw", plot=True),
                   help="also write a PNG with one panel per benchmark (with --trend: per headline "
                   "metric)")  # fmt: skip
    r.add_argument("--resamples", type=cliargs.resamples, default=1000, help="bootstrap resamples (default 1000)")
    r.add_argument("--seed", type=cliargs.seed, default=0)
    r.add_argument("--trend", nargs="?", const="auto", choices=("auto", "checkpoint", "date", "given"),
                   help="order the runs (say one per training checkpoint) and add a Trend section: each headline "
                   "metric per run with its 95%% CI and its change since the first run (JSON: a `trend` list; "
                   "not with csv). ORDER: checkpoint = the last integer after ckpt/checkpoint/step/iter in the "
                   "model args, else in the folder name (else the folder name's only integer); date = the results "
                   "file's date; given = the command line's; auto (the default) = checkpoint when every run has a "
                   "distinct one, else date, else given. A run without a key, or two sharing one, under checkpoint "
                   "or date: exit 2. Runs next to each other that `compare` would call not comparable (data, "
                   "prompts, medium, generation settings, judges): exit 2 naming them, unless --allow-mixed. Put it "
                   "after the RUN_DIRs or give ORDER (emo_tasks/results/trend.py)")  # fmt: skip
    r.add_argument("--allow-mixed", action="store_true",
                   help="with --trend: draw a trend across runs that are not comparable (another judge setup, data "
                   "version, prompt, medium or generation setting) with a break and a note at each change, Δ "
                   "restarting there, instead of exit 2")  # fmt: skip

    c = sub.add_parser("compare", help="paired regression test of NEW_RUN against BASE_RUN")
    c.add_argument("base", metavar="BASE_RUN", type=cliargs.existing(_RUN_DIR))
    c.add_argument("new", metavar="NEW_RUN", type=cliargs.existing(_RUN_DIR))
    c.add_argument("--metric", action="append", default=[], type=cliargs.text("a metric or TASK:METRIC"),
                   help="metric or TASK:METRIC (repeatable)")  # fmt: skip
    c.add_argument("--max-drop", type=cliargs.drop, default=0.0,
                   help="tolerated drop in the metric's units (default 0)")  # fmt: skip
    c.add_argument("--alpha", type=cliargs.alpha, default=0.05, help="significance level (default 0.05)")
    c.add_argument(
        "--force",
        action="store_true",
        help="compare even when data, prompts or judges differ or the thresholds below are passed",
    )
    c.add_argument(
        "--base-run",
        metavar="NAME_OR_PATH",
        type=cliargs.text(_PICK),
        help="the results file to use in BASE_RUN when it holds several (a path, or a part of its path "
        "below BASE_RUN, e.g. a date stamp or judged/<judge>)",
    )
    c.add_argument("--new-run", metavar="NAME_OR_PATH", type=cliargs.text(_PICK), help="the same for NEW_RUN")
    c.add_argument(
        "--max-failure-share",
        type=cliargs.share,
        default=0.1,
        metavar="SHARE",
        help="not comparable (exit 2) when either run's judge-failure share n_judge_failed / (n_scored + "
        "n_judge_failed) is above this (default 0.1)",
    )
    c.add_argument("--min-coverage", type=cliargs.share, default=0.9, metavar="SHARE",
                   help="not comparable (exit 2) when a metric's paired samples are fewer than this share of either "
                   "run's samples of the task (default 0.9)")  # fmt: skip
    c.add_argument("--resamples", type=cliargs.resamples, default=1000)
    c.add_argument("--seed", type=cliargs.seed, default=0)
    c.add_argument("--view", metavar="DIR", type=cliargs.out_folder("a folder for the site (new or empty)"),
                   help="also write `emo-tasks view`'s site over the two runs into DIR (new or empty), with the page "
                   "of the samples that flipped (#compare/r1/r2)")  # fmt: skip

    g = sub.add_parser(
        "plan-gate",
        help="plan a CI gate's subset: the rows compare needs to catch a stated drop with a stated power",
        description="From an accepted (judged) run's per-sample values, compute per headline task how many rows "
        "`emo-tasks compare`'s paired tests need to flag a drop of --detect with probability --power at level "
        "--alpha, draw them at random stratified by task and category (seeded: the same inputs give the same "
        "subset), and write a subset file. Run lmms-eval with EMO_SUBSET=SUBSET.json to answer only those rows; "
        "`emo-tasks compare BASE_RUN SUBSET_RUN` then gates on them. Prints the rows, the expected power per metric, "
        "the share of the full run and, with --cost, the judge calls and cost of the full run and of the subset "
        "(the judge stage's dry run over BASE_RUN's answers, nothing counted as cached). See docs/ci.md. Exit "
        "codes: 0 written; 2 no plan can be made from these runs (a subset or --limit base run, no per-sample "
        "values, a task without a drop to detect); 3 a bad argument (a missing BASE_RUN, a --detect, --power or "
        "--alpha out of range, ...) or an error.",
    )
    g.add_argument("base", metavar="BASE_RUN", type=cliargs.existing(_RUN_DIR),
                   help="the accepted full run (judged), as compare's BASE_RUN")  # fmt: skip
    g.add_argument("--detect", action="append", default=[], metavar="D|METRIC=D", required=True,
                   type=plan_gate.detect_arg,
                   help="the drop to catch, in the metric's units (MME/MVEI points; repeat METRIC=D per metric, e.g. "
                   "--detect 2 --detect srcc=0.02)")  # fmt: skip
    g.add_argument("--power", type=cliargs.power, default=0.8,
                   help="probability of catching that drop, in [0.5, 1) (default 0.8)")  # fmt: skip
    g.add_argument("--alpha", type=cliargs.alpha, default=0.05,
                   help="compare's significance level, in (0, 1) (default 0.05)")  # fmt: skip
    g.add_argument("--second", metavar="RUN", type=cliargs.existing(_RUN_DIR),
                   help="a second run of the same model: its paired spread replaces the conservative independence "
                   "assumption")  # fmt: skip
    g.add_argument("--tasks", type=cliargs.names("a comma-separated list of headline tasks"),
                   help="comma-separated headline tasks of BASE_RUN (default: all)")  # fmt: skip
    g.add_argument("--seed", type=cliargs.integer(), default=0, help="the draw's seed (default 0)")
    g.add_argument("--name", type=cliargs.text("a name for the subset"),
                   help="the subset's name (default from the drop and power)")  # fmt: skip
    g.add_argument("--run", dest="pick", metavar="NAME_OR_PATH", type=cliargs.text(_PICK),
                   help="which results of BASE_RUN (as report's --run)")  # fmt: skip
    g.add_argument("--cost", action="store_true", help="also dry-run the judge over the full run and the subset")
    g.add_argument("--price", action="append", default=[], metavar="MODEL=IN/OUT", type=dryrun.price_arg,
                   help="USD per 1M input/output tokens, for --cost (repeatable)")  # fmt: skip
    g.add_argument("--out", required=True, metavar="SUBSET.json", help="where to write the subset file",
                   type=cliargs.out_file("a file to write the subset to", parents=True))  # fmt: skip

    a = sub.add_parser(
        "agreement",
        help="judge-vs-human (two JSONL files) or judge-vs-judge (two judged run folders) agreement",
        description="Two JSONL rating files: judge-vs-human agreement (Spearman, Cohen's kappa, ICC). Two judged "
        "run folders (e.g. RUN/judged/<A> RUN/judged/<B>): judge-vs-judge calibration on the MME-Emotion judge "
        "logs, per task and overall: per-step and last-step agreement and Rec-S/Rea-S/CoT-S of both judges with "
        "the paired bootstrap CI of B - A (emo_tasks/judging/agreement.py). Run form exit codes: 0 ok, 2 no sample "
        "scored in both runs, 3 unreadable input; a bad argument (a missing file or folder, a bad value) is 3 in "
        "both forms.",
    )
    a.add_argument("judge", metavar="JUDGE_FILE|RUN_A", help="judge ratings (JSONL) or judged run A (folder)")
    a.add_argument("human", metavar="HUMAN_FILE|RUN_B", help="human ratings (JSONL) or judged run B (folder)")
    a.add_argument("--icc-form", default="ICC(2,1)", choices=("ICC(1,1)", "ICC(2,1)", "ICC(3,1)"))
    a.add_argument("--format", choices=("text", "json"), default="text")
    a.add_argument("--resamples", type=cliargs.resamples, default=1000,
                   help="bootstrap resamples, run form (default 1000)")  # fmt: skip
    a.add_argument("--seed", type=cliargs.seed, default=0, help="bootstrap seed, run form (default 0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `emo-tasks` console script; returns the exit code (see the module docstring)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # a bad argument: its line is printed (cliargs.Parser); --help exits as argparse's
        if not exc.code:
            raise
        return EXIT_BAD_ARGUMENT
    if args.command == "judge":
        return cmd_judge(args)
    if args.command == "export":
        from emo_tasks.results.export import main_export

        return main_export(args)
    if args.command == "view":
        from .site.command import main_view

        return main_view(args)
    try:
        if args.command == "report":
            return cmd_report(args)
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "plan-gate":
            return cmd_plan_gate(args)
        return cmd_agreement(args)
    except reader.InputError as exc:
        print(f"emo-tasks {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except reader.ReportError as exc:
        print(f"emo-tasks {args.command}: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARABLE
    except Exception as exc:  # noqa: BLE001 - a crash must not read as a regression (exit 1) in CI
        print(f"emo-tasks {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _emit(text: str, out: str | None) -> None:
    if out:
        Path(out).write_text(text, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def cmd_judge(args: argparse.Namespace) -> int:
    """The judge stage (emo_tasks/judging/stage.py); its exit code: 0 done, 2 refused, 3 error."""
    from emo_tasks.judging import stage
    from emo_tasks.judging.dryrun import parse_prices

    try:
        prices = parse_prices(args.price)
    except stage.StageError as exc:
        print(f"emo-tasks judge: {exc}", file=sys.stderr)
        return stage.EXIT_ERROR
    share = stage.DEFAULT_MAX_FAILURE_SHARE if args.max_failure_share is None else args.max_failure_share
    if not 0.0 <= share <= 1.0:  # also refuses nan
        print(f"emo-tasks judge: --max-failure-share {share:g}: must be a share between 0 and 1", file=sys.stderr)
        return stage.EXIT_ERROR
    overrides = {var: getattr(args, flag) for flag, var in stage.MODEL_FLAGS.items()}
    return stage.judge_run(
        args.run,
        tasks=[t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None,
        out=args.out,
        overrides=overrides,
        dry_run=args.dry_run,
        prices=prices,
        extra_judge=args.multiemo_judge,
        run=args.pick,
        partial=args.partial,
        max_failure_share=share,
    )


def cmd_report(args: argparse.Namespace) -> int:
    """Tables for every run; missing files become notes (exit 0), only an unreadable run is an error."""
    if args.trend and args.format == "csv":
        print("emo-tasks report: --trend is not available with --format csv (use md or json)", file=sys.stderr)
        return EXIT_NOT_COMPARABLE
    runs = [reader.load_run(p, args.pick) for p in args.runs]
    reader.label_runs(runs)
    if args.trend:
        from emo_tasks.results import trend

        ordering = trend.order_runs(runs, args.trend)
        changes, notes = trend.check_comparable(ordering, args.allow_mixed)  # compare's rule: refused, or a break
        runs = ordering.runs
        print(f"emo-tasks report: trend order: {ordering.why}", file=sys.stderr)
        for i, run in enumerate(runs):
            print(f"emo-tasks report: trend {ordering.how} {trend.key_text(ordering, i)}: {run.label}", file=sys.stderr)
        for k, change in enumerate(changes, 1):
            print(f"emo-tasks report: trend break {k} (--allow-mixed) before {trend.run_text(ordering, change.index)}: "
                  f"{change.summary()}", file=sys.stderr)  # fmt: skip
        for note in notes:
            print(f"emo-tasks report: trend note: {note}", file=sys.stderr)
        series = trend.trend_rows(runs, args.resamples, args.seed, [c.index for c in changes])
    for run in runs:
        print(f"emo-tasks report: {run.label}: {reader.describe(run)}", file=sys.stderr)
    if args.format == "md":
        text = report.render_markdown(runs, report.build_tables(runs, args.resamples, args.seed))
        if args.trend:
            text += "\n" + trend.render_trend_markdown(ordering, series, changes)
    elif args.format == "csv":
        text = report.render_csv(runs, args.resamples, args.seed)
        for note in report.missing_notes(runs):
            print(f"note: {note}", file=sys.stderr)
    else:
        doc = report.leaderboard(runs, args.resamples, args.seed)
        if args.trend:
            doc["trend"] = trend.trend_json(ordering, series, changes)
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    _emit(text, args.out)
    if args.plot and args.trend:
        trend.plot_trend(ordering, series, args.plot, changes)
        print(f"wrote {args.plot}", file=sys.stderr)
    elif args.plot:
        report.plot(runs, args.plot, args.resamples, args.seed)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def cmd_plan_gate(args: argparse.Namespace) -> int:
    """Write the subset file and print the plan (`emo_tasks.gate.plan_gate`); 2 when no plan can be made."""
    from emo_tasks.gate import plan_gate
    from emo_tasks.judging.dryrun import parse_prices
    from emo_tasks.judging.stage_types import StageError
    from emo_tasks.settings import environ

    try:  # the parser checked --detect, --power and --alpha (cliargs); a bad one is a bad argument, 3, not 2
        detect = plan_gate.parse_detect(args.detect)
    except plan_gate.PlanError as exc:
        print(f"emo-tasks plan-gate: error: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGUMENT
    try:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
        plan = plan_gate.plan_gate(args.base, detect, power=args.power, alpha=args.alpha, second_dir=args.second,
                                   tasks=tasks, seed=args.seed, name=args.name, pick=args.pick)  # fmt: skip
    except plan_gate.PlanError as exc:
        print(f"emo-tasks plan-gate: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARABLE
    print(plan_gate.render(plan))
    path = plan_gate.write(plan, args.out)
    print(f"\nwrote {path}: run lmms-eval with EMO_SUBSET={path}, then `emo-tasks compare {args.base} NEW_RUN`")
    if args.cost:
        try:
            prices, env = parse_prices(args.price), environ()
            full = plan_gate.dry_run_cost(plan, None, prices, env)
            print("\njudge cost of the full run (dry run over BASE_RUN's answers, nothing cached):", full, sep="\n")
            part = plan_gate.dry_run_cost(plan, plan.rows(), prices, env)
            print("\njudge cost of the subset:", part, sep="\n")
        except StageError as exc:
            print(f"emo-tasks plan-gate: --cost: {exc} (the subset file is written)", file=sys.stderr)
            return EXIT_ERROR
    return EXIT_PASS


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def cmd_compare(args: argparse.Namespace) -> int:
    """Exit 1 on a significant drop beyond --max-drop; 2 when the runs are not comparable (unless --force): data,
    prompts or judges differ, a data hash differs, too many judge failures or too little paired coverage."""
    base = reader.load_run(args.base, args.base_run)
    new = reader.load_run(args.new, args.new_run)
    print(f"base: {reader.describe(base)}\nnew:  {reader.describe(new)}")
    if args.metric:
        pairs, unmatched = compare.select_metrics(base, new, args.metric)
        if unmatched:
            print(f"emo-tasks compare: no metric {', '.join(unmatched)} in both runs", file=sys.stderr)
            return EXIT_NOT_COMPARABLE
    else:
        pairs = compare.default_metrics(base, new)
    tasks = sorted({t for t, _ in pairs})
    # the one rule `report --trend` uses too: data, prompts, medium, generation settings, judges, data hashes
    found = comparable.comparability(base, new, tasks)
    reasons = [d.line for d in found.setup]
    if not args.metric:
        reasons.extend(compare.one_sided_headlines(base, new))
    if not pairs and not reasons:
        reasons.append("data: no metric is present in both runs")
    # judge failures: over the picked metrics' tasks with --metric, else over every task both runs have
    shared = tasks if args.metric else sorted(t for t in set(base.results) & set(new.results) if report.benchmark_of(t))
    reasons.extend(d.line for d in found.data)
    unchecked = found.unchecked
    failures = {side: reader.failure_share(run, shared) for side, run in (("base", base), ("new", new))}
    for side, got in failures.items():
        if got and got[1] and got[0] / got[1] > args.max_failure_share:
            reasons.append(
                f"judge failures: {got[0]} of {got[1]} judged samples failed in the {side} run "
                f"({got[0] / got[1]:.0%} > --max-failure-share {args.max_failure_share:g}); rerun its judge "
                "(`emo-tasks judge` resends only the failures)"
            )
    results, skipped = [], []
    for task, metric in pairs:
        r = compare.compare_metric(base, new, task, metric, args.resamples, args.seed)
        if isinstance(r, str):
            (reasons if r.startswith("data:") else skipped).append(r)
            continue
        results.append(r)
        if r.coverage() < args.min_coverage:
            reasons.append(
                f"coverage: {task} {metric}: {r.n} paired samples of {r.n_base} (base) / {r.n_new} (new) "
                f"({r.coverage():.0%} < --min-coverage {args.min_coverage:g})"
            )
    if not results and skipped:
        reasons.append("data: no metric has per-sample values in both runs (" + "; ".join(skipped) + ")")
        skipped = []
    if unchecked:
        print(
            "note: data identity could not be checked for " + ", ".join(unchecked) + " (run lmms-eval with "
            "--log_samples to record it)",
            file=sys.stderr,
        )
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    if reasons and not args.force:
        print("emo-tasks compare: the runs are not comparable (use --force to compare anyway):", file=sys.stderr)
        for reason in reasons:
            print(f"  - {reason}", file=sys.stderr)
        _print_failures(failures)
        return EXIT_NOT_COMPARABLE
    for reason in reasons:
        print(f"warning (--force): {reason}", file=sys.stderr)
    for s in skipped:
        print(f"skipped: {s}", file=sys.stderr)

    header = ["task", "metric", "base", "new", "delta", "95% CI", "p", "n paired (base/new)", "test", "verdict"]
    rows, failed = [], []
    for r in results:
        regression = compare.is_regression(r, args.alpha, args.max_drop)
        significant = r.p_value < args.alpha
        verdict = (
            "REGRESSION"
            if regression
            else ("better" if significant and r.drop < 0 else ("drop <= max-drop" if significant else "n.s."))
        )
        if regression:
            failed.append(r)
        rows.append(
            [
                r.task,
                r.metric,
                _fmt(r.base),
                _fmt(r.new),
                f"{r.delta:+.3f}",
                f"[{r.low:+.3f}, {r.high:+.3f}]",
                f"{r.p_value:.4f}",
                f"{r.n} ({r.n_base}/{r.n_new})",
                r.method,
                verdict,
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(
        f"\ndelta = new - base; lower-is-better metrics: "
        f"{', '.join(sorted(report.lower_is_better()))}; alpha {args.alpha}, max drop {args.max_drop}"
    )
    _print_failures(failures, out=sys.stdout)
    _print_power(new, results, args.alpha)
    from emo_tasks.common import remembering

    with remembering():  # the flips and the site read each run's files once
        if failed:
            _print_flips(base, new, sorted({t for r in failed for t in reader.leaves(base, r.task)}))
        viewed = _write_view(args) if args.view else EXIT_PASS
    if failed:
        names = ", ".join(f"{r.task}:{r.metric}" for r in failed)
        print(f"emo-tasks compare: significant drop in {names}", file=sys.stderr)
        return EXIT_REGRESSION
    return viewed


def _print_power(new: reader.Run, results: Sequence[compare.Comparison], alpha: float) -> None:
    """What a pass means, on every verdict: the drop each test would have caught with probability 0.8 (from its
    rows' observed paired spread); for a run on a planned subset, what was planned and the power these rows reach
    for each planned drop (from their observed paired spread, not the plan's estimate), said plainly when it is
    below the power the plan asked for: a pass then does not rule out that drop with that power."""
    lines = []
    for r in results:
        mdd = r.detectable_drop(0.8, alpha)
        if mdd == 0:
            lines.append(f"  {r.task} {r.metric}: nothing to state (all {r.n} paired samples hold one value in both "
                         "runs: no spread)")  # fmt: skip
        elif mdd is not None:
            lines.append(f"  {r.task} {r.metric}: a drop of {mdd:.3g} or more, with probability 0.80 "
                         f"({r.n} paired samples and their spread)")  # fmt: skip
    if lines:
        print(f"\npower: a pass rules out, at alpha {alpha:g}:", *lines, sep="\n")
    plans: dict[str, dict[str, Any]] = {}
    for task in sorted(new.results):
        rec = new.subset(task)
        if rec is not None and isinstance(rec.get("plan"), dict) and rec["plan"]:
            plans.setdefault(str(rec.get("name")), rec["plan"])
    short = []
    for name, plan in plans.items():
        given = plan.get("detect") if isinstance(plan.get("detect"), dict) else {}
        detect = {m: d for m, d in given.items() if isinstance(d, (int, float))}
        asked, planned_alpha = plan.get("power"), plan.get("alpha")
        asked = asked if isinstance(asked, (int, float)) else None
        expected = plan.get("expected_power") if isinstance(plan.get("expected_power"), dict) else {}
        expected = {k: v for k, v in expected.items() if isinstance(v, (int, float))}
        print(f"planned (subset {name!r}, `emo-tasks plan-gate`): to catch a drop of "
              + ", ".join(f"{d:g} in {m}" for m, d in sorted(detect.items()))
              + (f" with power {asked:g}" if asked is not None else "")
              + (f" at alpha {planned_alpha:g}" if isinstance(planned_alpha, (int, float)) else "")
              + (" (expected when planned, from the base run's spread: "
                 + ", ".join(f"{k} {v:.2f}" for k, v in sorted(expected.items())) + ")"
                 if expected else ""))  # fmt: skip
        reached = []
        for r in results:
            on_it = any((new.subset(t) or {}).get("name") == name for t in reader.leaves(new, r.task))
            if not on_it or r.metric not in detect:
                continue
            d, got = detect[r.metric], r.power_for(detect[r.metric], alpha)
            if got is None:
                reached.append(f"  {r.task} {r.metric}: no power to state for a drop of {d:g} (no spread in its "
                               f"{r.n} paired samples)")  # fmt: skip
                continue
            line = f"  {r.task} {r.metric}: power {got:.2f} to catch a drop of {d:g}"
            if asked is not None and got < asked:
                line += f": BELOW the {asked:g} asked; a pass does not rule out a drop of {d:g} with that power"
                mdd = r.detectable_drop(asked, alpha) if 0.5 <= asked < 1 else None
                line += f" (with power {asked:g} it rules out {mdd:.3g} or more)" if mdd else ""
                short.append(f"{r.task} {r.metric} ({got:.2f} < {asked:g})")
            reached.append(line)
        if reached:
            print(f"power these rows reach for the planned drops, at alpha {alpha:g} (from their observed paired "
                  "spread):", *reached, sep="\n")  # fmt: skip
    if short:
        print(f"emo-tasks compare: the subset's rows reach less power than planned for {', '.join(short)}: a pass "
              "there is weaker evidence than the plan asked for", file=sys.stderr)  # fmt: skip


#: How many flipped samples `compare` names when it exits 1.
N_FLIPS = 10


def _print_flips(base: reader.Run, new: reader.Run, tasks: Sequence[str]) -> None:
    """The largest flips of the regressed tasks (`emo_tasks.gate.flips`, as the view's comparison page lists them)."""
    from emo_tasks.gate.flips import run_flips

    try:
        flips = run_flips(base, new, tasks)
    except Exception as exc:  # noqa: BLE001 - the gate's verdict stands without its examples
        print(f"note: the flipped samples could not be listed ({type(exc).__name__}: {exc})", file=sys.stderr)
        return
    if not flips:
        print("\nno sample flipped (the drop is spread over many samples: see --view)")
        return
    print(f"\n{min(N_FLIPS, len(flips))} largest flips of {len(flips)} (correct -> not correct, or a headline "
          "per-sample value to 0):")  # fmt: skip
    for f in flips[:N_FLIPS]:
        doc = f"doc {f['doc_id']}" if f["doc_id"] is not None else "unit"
        print(f"  {f['task']}  {doc}: {f['what']}")


def _write_view(args: argparse.Namespace) -> int:
    """`--view DIR`: the site over BASE and NEW (`emo-tasks view`); 0 written, else view's own exit code."""
    from emo_tasks.results.export import ExportError, ExportRefused

    from .site.command import EXIT_OK, build_site

    try:
        summary = build_site([args.base, args.new], args.view, picks=[args.base_run, args.new_run],
                             resamples=args.resamples, seed=args.seed)  # fmt: skip
    except (ExportError, ExportRefused) as exc:
        print(f"emo-tasks compare: --view: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_NOT_COMPARABLE if isinstance(exc, ExportRefused) else EXIT_ERROR
    print(summary["line"].replace("index.html", "index.html#compare/r1/r2"), file=sys.stderr)
    return EXIT_OK


def _print_failures(failures: dict[str, tuple[int, int] | None], out: Any = None) -> None:
    """One line: each run's judge failures over the compared tasks."""
    parts = [f"{side} {got[0]} of {got[1]}" for side, got in failures.items() if got is not None]
    if parts:
        print("judge failures (judge-failed of judged samples): " + ", ".join(parts), file=out or sys.stderr)


def _read_ratings(path: str) -> dict[str, float]:
    """item -> rating; a malformed line or a repeated item is an error naming the line."""
    out: dict[str, float] = {}
    if not Path(path).exists():  # a bad argument (exit 3), as a missing run folder is in the run form
        raise reader.InputError(f"{path}: no such file")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise reader.ReportError(f"{path}: {exc}") from exc
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            item, rating = str(obj["item"]), float(obj["rating"])
        except (ValueError, KeyError, TypeError) as exc:
            raise reader.ReportError(f'{path}:{i}: expected {{"item": "<id>", "rating": <number>}} ({exc})') from exc
        if not math.isfinite(rating):
            raise reader.ReportError(f"{path}:{i}: rating must be a finite number")
        if item in out:
            raise reader.ReportError(f"{path}:{i}: item {item!r} is rated twice")
        out[item] = rating
    return out


def _measure(fn: Any, *a: Any) -> float | str:
    try:
        return fn(*a)
    except ValueError as exc:
        return f"undefined ({exc})"


def cmd_agreement(args: argparse.Namespace) -> int:
    """Spearman, Cohen's kappa and ICC on the items both files rate; exit 2 when they share none.  Two run folders:
    judge-vs-judge calibration (`emo_tasks.judging.agreement`; exit 2 no shared scored sample, 3 unreadable input)."""
    import numpy as np

    from emo_tasks.judging import agreement, agreement_report
    from emo_tasks.results import stats

    if agreement.is_run_form(args.judge, args.human):
        return agreement_report.run_cli(
            args.judge,
            args.human,
            icc_form=args.icc_form,
            fmt=args.format,
            resamples=args.resamples,
            seed=args.seed,
        )
    judge, human = _read_ratings(args.judge), _read_ratings(args.human)
    items = [k for k in judge if k in human]
    only_judge = len(judge) - len(items)
    only_human = len(human) - len(items)
    if not items:
        print(
            f"emo-tasks agreement: no item is rated in both files ({len(judge)} judge, {len(human)} human items)",
            file=sys.stderr,
        )
        return 2
    x = [judge[k] for k in items]
    y = [human[k] for k in items]
    try:
        a = stats.agreement(x, y, icc_form=args.icc_form)
        values: dict[str, float | str] = {"spearman": a.spearman, "cohen_kappa": a.cohen_kappa, "icc": a.icc}
    except ValueError:  # one measure undefined: report the others
        values = {
            "spearman": _measure(stats.spearman, x, y),
            "cohen_kappa": _measure(stats.cohen_kappa, np.round(x, 9).tolist(), np.round(y, 9).tolist()),
            "icc": _measure(stats.icc, np.column_stack([x, y]), args.icc_form),
        }
    doc = {
        "n": len(items),
        **values,
        "icc_form": args.icc_form,
        "missing": {"only_in_judge": only_judge, "only_in_human": only_human},
        "judge_file": args.judge,
        "human_file": args.human,
    }
    if args.format == "json":
        print(json.dumps(doc, indent=2))
    else:

        def f(v: float | str) -> str:
            return v if isinstance(v, str) else f"{v:.4f}"

        print(f"n (items in both)   {len(items)}")
        print(f"Spearman's rho      {f(values['spearman'])}")
        print(f"Cohen's kappa       {f(values['cohen_kappa'])}")
        print(f"{args.icc_form:<19} {f(values['icc'])}")
        print(f"missing             {only_judge} only in judge file, {only_human} only in human file")
    return 0
