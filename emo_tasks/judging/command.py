"""`emo-tasks judge RUN_DIR`, `emo-tasks agreement A B` and `emo-tasks calibrate REF CAND ...`: judging a saved run,
how far a judge agrees, and whether a candidate judge may replace the reference (`calibrate.run_cli`: 0
interchangeable, 1 not, 2 refused, 3 a bad argument or unreadable input).

The command line's parser is `emo_tasks.cli`; these are the commands' bodies.  `judge` runs the judge stage
(`stage.judge_run`; exit 0 done, 2 refused, 3 error, 4 too many judge failures).  `agreement` has two forms: two
judged run folders (judge vs judge, `agreement_report.run_cli`: 0 ok, 2 no shared scored sample, 3 unreadable
input) or two JSONL rating files (judge vs human, here: 0 ok, 2 no shared item; `emo_tasks.cli.main` turns a
malformed line into 2 and a missing file into 3).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from emo_tasks.results import reader


def main_judge(args: argparse.Namespace) -> int:
    """The judge stage (emo_tasks/judging/stage.py); its exit code: 0 done, 2 refused (also: batches out and no
    --batch, a damaged batch book), 3 error, 4 too many judge failures, 5 batches out (--batch)."""
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
    try:
        batch = batch_options(args)
        cancel = getattr(args, "batch_cancel", False)
        if cancel and args.dry_run:
            raise ValueError("--batch-cancel cancels batches at the provider; --dry-run sends nothing")
    except ValueError as exc:
        print(f"emo-tasks judge: {exc}", file=sys.stderr)
        return stage.EXIT_ERROR
    return stage.judge_run(
        args.run,
        tasks=[t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None,
        out=args.out,
        overrides=overrides,
        dry_run=args.dry_run,
        prices=prices,
        extra_judge=args.extra_judge,  # --multiemo-judge (its dest in cli.py)
        run=args.pick,
        partial=args.partial,
        max_failure_share=share,
        batch=batch,
        batch_cancel=args.batch_poll if cancel else None,
    )


def batch_options(args: argparse.Namespace) -> Any:
    """The --batch-* flags as `judges.batch_files.BatchOptions`, or None without --batch / --batch-file /
    --batch-results; a --batch-* flag without them is an error (it would silently do nothing)."""
    from judges.batch_files import BYTES_PER_MB, DEFAULT_MAX_MB, DEFAULT_MAX_REQUESTS, BatchLimits, BatchOptions

    batching = bool(getattr(args, "batch", False) or getattr(args, "batch_file", None)
                    or getattr(args, "batch_results", None))  # fmt: skip
    if not batching:
        given = [flag for flag, value in (
            ("--batch-max-requests", getattr(args, "batch_max_requests", None)),
            ("--batch-max-mb", getattr(args, "batch_max_mb", None)),
            ("--batch-submit-only", getattr(args, "batch_submit_only", False)),
            ("--batch-fallback sync", getattr(args, "batch_fallback", "batch") == "sync"),
        ) if value]  # fmt: skip
        if given:
            raise ValueError(f"{given[0]} needs --batch (or --batch-file / --batch-results)")
        return None
    if (args.batch_file or args.batch_results) and args.batch_fallback == "sync":
        raise ValueError("--batch-fallback sync sends requests to the judge endpoint; with --batch-file / "
                         "--batch-results nothing is sent (a failed line goes into the next round's file)")  # fmt: skip
    max_requests = args.batch_max_requests or DEFAULT_MAX_REQUESTS
    max_mb = args.batch_max_mb or DEFAULT_MAX_MB
    return BatchOptions(
        limits=BatchLimits(max_requests=max_requests, max_bytes=max(1024, int(max_mb * BYTES_PER_MB))),
        poll_s=args.batch_poll,
        submit_only=args.batch_submit_only,
        fallback=args.batch_fallback,
        file_dir=args.batch_file or args.batch_results,
        results_dir=args.batch_results,
        discount=args.batch_discount,
    )


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


def main_agreement(args: argparse.Namespace) -> int:
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


def main_calibrate(args: argparse.Namespace) -> int:
    """`emo-tasks calibrate REF CAND [REF2 CAND2 ...]` (`emo_tasks.judging.calibrate`): 0 interchangeable, 1 not,
    2 refused, 3 a bad argument or unreadable input."""
    from emo_tasks import cliargs
    from emo_tasks.judging import calibrate

    try:
        tolerance = cliargs.per_metric(args.tolerance, "tolerance")
    except ValueError as exc:  # checked as parsed (cliargs.per_metric_arg); kept for callers without the parser
        print(f"emo-tasks calibrate: error: argument --tolerance: {exc}", file=sys.stderr)
        return cliargs.EXIT_BAD_ARGUMENT
    return calibrate.run_cli(args.pairs, tolerance=tolerance, out_path=args.out, resamples=args.resamples,
                             seed=args.seed)  # fmt: skip
