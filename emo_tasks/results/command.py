"""`emo-tasks report RUN_DIR... [--trend]`: the report's tables (and a trend) for one or more runs.

The command line's parser is `emo_tasks.cli`; this is the command's body.  The runs are read by the one reader
(`reader.load_run`), the tables drawn by `report`, a `--trend` ordered and checked by `trend`.  Exit codes as
`compare`'s (`emo_tasks.cliargs`): 0 written; 2 not comparable (`--trend` over runs `compare` would refuse, unless
--allow-mixed; --trend with csv); `emo_tasks.cli.main` turns an unreadable run into 3 and a refusal into 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from emo_tasks.cliargs import EXIT_NOT_COMPARABLE
from emo_tasks.results import reader, report


def _emit(text: str, out: str | None) -> None:
    if out:
        Path(out).write_text(text, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def main_report(args: argparse.Namespace) -> int:
    """Tables for every run; missing files become notes (exit 0), only an unreadable run is an error."""
    if args.trend and args.format == "csv":
        print("emo-tasks report: --trend is not available with --format csv (use md or json)", file=sys.stderr)
        return EXIT_NOT_COMPARABLE
    calibrations = []
    if getattr(args, "calibration", None):
        if not args.trend:
            print("emo-tasks report: --calibration draws a --trend across a judge change; give --trend",
                  file=sys.stderr)  # fmt: skip
            return EXIT_NOT_COMPARABLE
        from emo_tasks.results.calibration import CalibrationError, load_calibration

        try:  # several: a chain of judge changes, each carried by its own (trend.carry)
            calibrations = [load_calibration(path) for path in args.calibration]
        except CalibrationError as exc:
            print(f"emo-tasks report: --calibration: {exc}", file=sys.stderr)
            return EXIT_NOT_COMPARABLE
    runs = [reader.load_run(p, args.pick) for p in args.runs]
    reader.label_runs(runs)
    if args.trend:
        from emo_tasks.results import trend

        ordering = trend.order_runs(runs, args.trend)
        # compare's rule: refused, or a break; a judge change the calibration carries is marked instead
        changes, notes = trend.check_comparable(ordering, args.allow_mixed, calibrations)
        runs = ordering.runs
        print(f"emo-tasks report: trend order: {ordering.why}", file=sys.stderr)
        for i, run in enumerate(runs):
            print(f"emo-tasks report: trend {ordering.how} {trend.key_text(ordering, i)}: {run.label}", file=sys.stderr)
        for k, change in enumerate([c for c in changes if c.is_break], 1):
            print(f"emo-tasks report: trend break {k} (--allow-mixed) before {trend.run_text(ordering, change.index)}: "
                  f"{change.summary()}", file=sys.stderr)  # fmt: skip
        for change in (c for c in changes if not c.is_break):
            print(f"emo-tasks report: trend judge change before {trend.run_text(ordering, change.index)}, carried by "
                  f"{change.calibration.path}: {change.summary()}", file=sys.stderr)  # type: ignore[union-attr]  # fmt: skip
        for note in notes:
            print(f"emo-tasks report: trend note: {note}", file=sys.stderr)
        series = trend.trend_rows(runs, args.resamples, args.seed, [c.index for c in changes if c.is_break],
                                  [c for c in changes if not c.is_break])  # fmt: skip
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
