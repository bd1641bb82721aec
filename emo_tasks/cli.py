"""`emo-tasks`: judge / report / compare / agreement over lmms-eval output folders.

    emo-tasks judge RUN_DIR [--run NAME_OR_PATH] [--tasks T,...] [--out DIR] [--partial] [--max-failure-share 0.1]
                    [--judge-model M] [--step-model S] [--audio-model A] [--multiemo-judge]
                    [--dry-run [--price MODEL=IN/OUT ...]]
    emo-tasks export RUN_DIR --format mme-official|mvei-official|multiemo-table --out DIR [--model-name NAME]
                     [--run NAME_OR_PATH] [--force]
    emo-tasks view RUN_DIR... --out DIR [--run NAME_OR_PATH] [--force]
    emo-tasks report RUN_DIR... [--run NAME_OR_PATH] [--format md|csv|json] [--out FILE] [--plot FILE.png]
                     [--resamples N] [--seed S] [--trend [auto|checkpoint|date|given]] [--allow-mixed]
                     [--calibration CALIBRATION.json ...]
    emo-tasks compare BASE_RUN NEW_RUN [--metric M ...] [--max-drop X] [--alpha 0.05] [--force]
                      [--base-run NAME_OR_PATH] [--new-run NAME_OR_PATH]
                      [--max-failure-share 0.1] [--min-coverage 0.9] [--view DIR] [--calibration CALIBRATION.json]
    emo-tasks plan-gate BASE_RUN --detect D [--detect METRIC=D] [--power 0.8] [--alpha 0.05] [--second RUN]
                        [--tasks T,...] [--seed S] [--cost [--price MODEL=IN/OUT]] [--calibration CALIBRATION.json]
                        --out SUBSET.json
    emo-tasks agreement JUDGE_FILE HUMAN_FILE [--icc-form ICC(2,1)] [--format text|json]
    emo-tasks agreement RUN_A RUN_B [--icc-form ICC(2,1)] [--format text|json] [--resamples N] [--seed S]
    emo-tasks calibrate REF CAND [REF2 CAND2 ...] [--tolerance T] [--tolerance METRIC=T] [--out calibration.json]
                        [--resamples N] [--seed S]
    emo-tasks cache export RUN_DIR [--cache DIR] [--out FILE]
    emo-tasks cache import FILE [--cache DIR] [--keep-existing]
    emo-tasks cache list [--cache DIR] [--run RUN_DIR ...] [--json]

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

This module is the parser and the dispatch; each command's body lives in the folder named for what it does:
`judging/command.py` (judge, agreement, calibrate), `judging/cachefile.py` (cache), `results/command.py` (report),
`results/export.py` (export), `gate/command.py` (compare, plan-gate) and `site/command.py` (view, and compare's
--view).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from emo_tasks import cliargs
from emo_tasks.cliargs import EXIT_BAD_ARGUMENT, EXIT_ERROR, EXIT_NOT_COMPARABLE
from emo_tasks.gate import plan_gate
from emo_tasks.judging import dryrun
from emo_tasks.results import reader

_PICK = "a part of a results file's path (e.g. a date stamp) or the file"
_RUN_DIR = "an lmms-eval --output_path folder or a results file"
_CALIBRATION = "a calibration.json (written by `emo-tasks calibrate`)"
_ONE_CALIBRATION = (": one calibration of BASE's judge to NEW's (emo-tasks calibrate on the same answers judged by "
                    "both); a chain of calibrations is drawn by `report --trend` only")  # fmt: skip


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
        "belong to the run's rows, duplicated or missing rows; batches out and no --batch or --batch-cancel, a "
        "damaged batch book, a batch output answering one request twice differently); 3 error (a bad argument, "
        "no run, bad setting, unusable --out, a crash); 4 judged and written, but more than --max-failure-share "
        "of the judgements failed (run it again: only the failures are resent); 5 batches are out, nothing written "
        "yet (--batch: run the same command again).",
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
    j.add_argument("--multiemo-judge", dest="extra_judge", action="store_true",
                   help="also run MultiEmo's LLM-as-a-judge stage")  # fmt: skip
    j.add_argument("--dry-run", action="store_true", help="send nothing: requests, cached, tokens and cost")
    j.add_argument("--price", action="append", default=[], metavar="MODEL=IN/OUT", type=dryrun.price_arg,
                   help="USD per 1M input/output tokens for the cost estimate (repeatable)")  # fmt: skip
    b = j.add_argument_group(
        "batch judging",
        "send the stage's requests through the provider's Batch API (OpenAI, Azure OpenAI: half price, answers "
        "within 24 h) or as files for `vllm run-batch`; the same command resumes after a crash or the next day "
        "(docs/judges.md#judging-in-batches)",
    )
    b.add_argument("--batch", action="store_true",
                   help="judge through the configured API's Files and Batches endpoints, round by round")  # fmt: skip
    b.add_argument("--batch-max-requests", type=cliargs.integer(1), default=None, metavar="N",
                   help="requests per batch file (default 50000, OpenAI's limit)")  # fmt: skip
    b.add_argument("--batch-max-mb", type=cliargs.number(0.001), default=None, metavar="MB",
                   help="megabytes per batch file (default 200, OpenAI's limit)")  # fmt: skip
    b.add_argument("--batch-poll", type=cliargs.number(0), default=60.0, metavar="S",
                   help="seconds before the first poll of a batch's status; the wait grows (default 60)")  # fmt: skip
    b.add_argument("--batch-cancel", action="store_true",
                   help="cancel the batches still out at the provider (what they ran is kept; vLLM request files "
                   "are dropped), then judge the rest (synchronously, or in new batches with --batch)")  # fmt: skip
    b.add_argument("--batch-submit-only", action="store_true",
                   help="submit this round's batches and exit 5; the same command collects later")  # fmt: skip
    b.add_argument("--batch-fallback", choices=("batch", "sync"), default="batch",
                   help="a line that failed in a batch and may be retried: in a new batch (default) or sent "
                   "directly")  # fmt: skip
    b.add_argument("--batch-file", type=cliargs.out_folder("a folder for batch request files"), metavar="DIR",
                   help="write each round's request files here for `vllm run-batch` (exit 5: run them)")  # fmt: skip
    b.add_argument("--batch-results", type=cliargs.existing("a folder of batch output files"), metavar="DIR",
                   help="read `vllm run-batch` output files from DIR and go on with the next round")  # fmt: skip
    b.add_argument("--batch-discount", type=cliargs.number(0, 1, low_open=True), default=0.5, metavar="SHARE",
                   help="--dry-run --batch: the batch price as a share of the usual one (default 0.5)")  # fmt: skip

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

    r.add_argument("--calibration", metavar="CALIBRATION.json", type=cliargs.existing(_CALIBRATION),
                   action="append",
                   help="with --trend: draw the trend across a judge change this calibration carries (the run before "
                   "judged by its reference, the run after by its candidate), marked, values as judged and adjusted "
                   "by the calibrated shift (docs/ci.md). Repeatable for a chain of judge changes (A->B, B->C): "
                   "each change is carried by the one calibration of its two judges, shifts added along the "
                   "chain")  # fmt: skip

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
    c.add_argument("--calibration", metavar="CALIBRATION.json", type=cliargs.existing(_CALIBRATION),
                   action=cliargs.Once, const=_ONE_CALIBRATION,
                   help="gate NEW (judged by a candidate judge) against BASE (judged by the reference judge) across "
                   "the judge change: the calibration's judges must be BASE's and NEW's (else exit 2); each metric's "
                   "calibrated shift is taken out of NEW - BASE and its CI widens the test (docs/ci.md)")  # fmt: skip
    _judge_shutdown_args(c)
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
    _judge_shutdown_args(g)
    g.add_argument("--name", type=cliargs.text("a name for the subset"),
                   help="the subset's name (default from the drop and power)")  # fmt: skip
    g.add_argument("--run", dest="pick", metavar="NAME_OR_PATH", type=cliargs.text(_PICK),
                   help="which results of BASE_RUN (as report's --run)")  # fmt: skip
    g.add_argument("--calibration", metavar="CALIBRATION.json", type=cliargs.existing(_CALIBRATION),
                   action=cliargs.Once, const=_ONE_CALIBRATION,
                   help="plan a gate of candidate-judge runs against this reference-judge BASE_RUN: the calibration's "
                   "CI adds to each metric's variance, so more rows are needed (docs/ci.md)")  # fmt: skip
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

    k = sub.add_parser(
        "calibrate",
        help="may a candidate judge stand in for the reference? shifts, agreement and a verdict per headline",
        description="Each REF CAND pair is one model's answers judged by the reference judge setup and by the "
        "candidate (the folders `agreement` reads: RUN/judged/<setup>/ or a run judged in process); give one pair "
        "per model. Per task and headline metric (MME-Emotion: Rec-S, Rea-S, CoT-S x100): the shift candidate - "
        "reference pooled over the pairs and per pair, with its seeded 95% paired bootstrap CI; Cohen's kappa on "
        "the recognition verdicts and the ICC on the step ratings; with 3 or more pairs, Kendall's tau between the "
        "two judges' model rankings with a bootstrap CI. Rule: interchangeable within ±T when the shift's CI lies "
        "inside [-T, +T] and rests on at least 30 paired samples; fewer: too few pairs (n), not interchangeable; "
        "else not interchangeable: shift S [lo, hi]. Writes --out (the calibration file that "
        "compare, report --trend and plan-gate take with --calibration; docs/judges.md#changing-the-judge). Exit "
        "codes: 0 every headline interchangeable; 1 one is not; 2 refused (a folder mixing judge setups, REF sides "
        "not all one judge or CAND sides not all another, REF and CAND the same judge, a pair judging different "
        "answers, one model twice, MultiEmo's judged variant); 3 a bad argument or unreadable input.",
    )
    k.add_argument("pairs", nargs="+", metavar="REF CAND", type=cliargs.existing("a judged run folder"),
                   help="judged folders, REF CAND for each model")  # fmt: skip
    k.add_argument("--tolerance", action="append", default=[], metavar="T|METRIC=T",
                   type=cliargs.per_metric_arg("tolerance", "1, rec_s=0.5"),
                   help="the largest shift still interchangeable, in the metric's units (default 1 point, EmoBench-M "
                   "1%% of each range; repeat "
                   "METRIC=T per metric, e.g. --tolerance 1 --tolerance cot_s=0.5)")  # fmt: skip
    k.add_argument("--out", default="calibration.json", metavar="calibration.json",
                   type=cliargs.out_file("a file to write the calibration to", parents=True),
                   help="where to write the calibration file (default ./calibration.json)")  # fmt: skip
    k.add_argument("--resamples", type=cliargs.resamples, default=1000, help="bootstrap resamples (default 1000)")
    k.add_argument("--seed", type=cliargs.seed, default=0, help="bootstrap seed (default 0)")
    _cache_parser(sub)
    return p


def _judge_shutdown_args(parser: argparse.ArgumentParser) -> None:
    """The two gates' judge-shutdown options (`compare` and `plan-gate` both read the reference run's judge)."""
    parser.add_argument("--judge-horizon", metavar="DAYS", type=cliargs.integer(0), default=30,
                        help="warn when the reference run's judge shuts down within DAYS days, as its judge endpoint "
                        "reported (shutdown_date; default 30)")  # fmt: skip
    parser.add_argument(
        "--fail-on-judge-shutdown",
        action="store_true",
        help="and then exit 4 instead of 0 (a CI gate never silently left without its judge; docs/ci.md)",
    )


def _cache_parser(sub: Any) -> None:
    """`emo-tasks cache <action>`: the judge answer cache, one subcommand per action (export, import, list)."""
    cache_help = "the judge answer cache folder (default EMO_CACHE_DIR, else the user cache folder + /emo_tasks)"
    cache = sub.add_parser(
        "cache",
        help="the judge answer cache: copy a run's cached judge answers into a file beside it, and back in",
        description="The judge answer cache (judge_cache.sqlite3 in EMO_CACHE_DIR) is the only copy of a retired "
        "judge's verdicts. `export` writes the answers a run's judged results read into one file beside the run; "
        "`import` puts such a file into a cache (on another machine), so `emo-tasks judge` gives the same numbers "
        "sending nothing (docs/judges.md#before-your-judge-shuts-down). Exit codes: 0 done; 2 refused (export: no "
        "judged results, or a re-judge from the cache gives other numbers; import: the cache holds another answer "
        "under a key of the file); 3 error (a bad argument, an unreadable cache, a damaged file).",
    )
    actions = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    e = actions.add_parser(
        "export",
        help="write the cached judge answers a run's judged results read into a file beside the run",
        description="For each judged result under RUN_DIR/judged/ (or the judged folder given), re-judge it from "
        "the cache alone, sending nothing, record the answers it reads, and check its numbers come out equal "
        "(else exit 2); then write those answers to FILE (gzip JSON lines, a digest per line and for the file).",
    )
    e.add_argument("run", metavar="RUN_DIR", type=cliargs.existing("a run folder or a judged folder"),
                   help="the run folder (its judged/ results) or one judged folder RUN_DIR/judged/<setup>")  # fmt: skip
    e.add_argument("--cache", metavar="DIR", type=cliargs.existing("a judge answer cache folder"), help=cache_help)
    e.add_argument("--out", metavar="FILE", type=cliargs.out_file("a file to write the answers to", parents=True),
                   help="where to write (default RUN_DIR/emo_tasks_judge_cache.jsonl.gz)")  # fmt: skip
    i = actions.add_parser(
        "import",
        help="put the answers of an exported file into a judge answer cache",
        description="Check the whole file first (each line's digest, the end line's count and digest: a damaged "
        "line is named, exit 3), then add its answers in one transaction. A key the cache holds with the same "
        "answer is left alone; with another answer it is a conflict: nothing is imported (exit 2) unless "
        "--keep-existing (the cache's answers are kept, the rest imported, each conflict printed).",
    )
    i.add_argument("file", metavar="FILE", type=cliargs.existing("a file written by `emo-tasks cache export`"))
    i.add_argument("--cache", metavar="DIR", type=cliargs.out_folder("a judge answer cache folder"), help=cache_help)
    i.add_argument("--keep-existing", action="store_true",
                   help="on a conflict, keep the cache's own answer and import the rest (exit 0)")  # fmt: skip
    li = actions.add_parser(
        "list",
        help="what the judge cache holds per model and role: verdicts, first and last use, runs, shutdown date",
        description="Per judge model and role: how many verdicts the cache holds, when the first and the last were "
        "stored, and, with --run RUN (repeatable), which of RUN's judged folders they belong to (each re-judged from "
        "the cache alone, sending nothing, as `export` does) and the shutdown date its judge endpoint reported. "
        "Which paid verdicts to export before a judge model shuts down (docs/judges.md#before-your-judge-shuts-down)."
        " Exit codes: 0 listed; 2 a --run folder without judged results; 3 no cache or an unreadable one.",
    )
    li.add_argument("--cache", metavar="DIR", type=cliargs.existing("a judge answer cache folder"), help=cache_help)
    li.add_argument("--run", action="append", default=[], metavar="RUN_DIR",
                    type=cliargs.existing("a run folder or a judged folder"),
                    help="name the verdicts of this run's judged folders (repeatable)")  # fmt: skip
    li.add_argument("--json", action="store_true", help="print the listing as JSON (for scripts)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `emo-tasks` console script; returns the exit code (see the module docstring)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # a bad argument: its line is printed (cliargs.Parser); --help exits as argparse's
        if not exc.code:
            raise
        return EXIT_BAD_ARGUMENT
    if args.command == "judge":
        from emo_tasks.judging.command import main_judge

        return main_judge(args)
    if args.command == "export":
        from emo_tasks.results.export import main_export

        return main_export(args)
    if args.command == "view":
        from .site.command import main_view

        return main_view(args)
    if args.command == "cache" and args.cache_command == "list":
        from emo_tasks.judging.cachelist import main_list

        return main_list(args)
    if args.command == "cache":
        from emo_tasks.judging.cachefile import main_cache

        return main_cache(args)
    try:
        if args.command == "report":
            from emo_tasks.results.command import main_report

            return main_report(args)
        if args.command == "compare":
            from emo_tasks.gate.command import main_compare

            return main_compare(args, _compare_view)
        if args.command == "plan-gate":
            from emo_tasks.gate.command import main_plan_gate

            return main_plan_gate(args)
        if args.command == "calibrate":
            from emo_tasks.judging.command import main_calibrate

            return main_calibrate(args)
        from emo_tasks.judging.command import main_agreement

        return main_agreement(args)
    except reader.InputError as exc:
        print(f"emo-tasks {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except reader.ReportError as exc:
        print(f"emo-tasks {args.command}: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARABLE
    except Exception as exc:  # noqa: BLE001 - a crash must not read as a regression (exit 1) in CI
        print(f"emo-tasks {args.command}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _compare_view(args: argparse.Namespace) -> int:
    """`compare --view DIR`: the site (`emo_tasks.site.command.write_compare_view`), handed to the gate, which is a
    layer below the site; imported only when a site is asked for."""
    from .site.command import write_compare_view

    return write_compare_view(args)
