"""`emo-tasks compare BASE_RUN NEW_RUN` and `emo-tasks plan-gate BASE_RUN`: the regression gate for CI and the
subset it needs.

The command line's parser is `emo_tasks.cli`; these are the commands' bodies.  `compare` reads both runs by the
one reader (`reader.load_run`), checks them by the one rule `report --trend` uses too (`comparable`), tests each
metric (`compare`), states what a pass rules out (`power`) and names the largest flips of a regression (`flips`);
its `--view` site is written by the function the command line hands in (the site is a layer above the gate).
`plan-gate` draws the rows (`plan_gate`).  Exit codes (`emo_tasks.cliargs`): 0 pass / written; 1 a significant
drop beyond --max-drop; 2 not comparable, or no plan can be made; 3 a bad argument or an error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from emo_tasks.cliargs import (
    EXIT_BAD_ARGUMENT,
    EXIT_ERROR,
    EXIT_JUDGE_SHUTDOWN,
    EXIT_NOT_COMPARABLE,
    EXIT_PASS,
    EXIT_REGRESSION,
)
from emo_tasks.gate import calibrated, compare
from emo_tasks.results import comparable, reader, report


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def main_compare(args: argparse.Namespace, write_view: Callable[[argparse.Namespace], int]) -> int:
    """Exit 1 on a significant drop beyond --max-drop; 2 when the runs are not comparable (unless --force): data,
    prompts or judges differ, a data hash differs, too many judge failures or too little paired coverage.
    `write_view(args)` writes --view's site (`emo_tasks.site.command.write_compare_view`, handed in by the command
    line): 0 written, else its exit code."""
    base = reader.load_run(args.base, args.base_run)
    new = reader.load_run(args.new, args.new_run)
    near = judge_horizon(base, args, "compare")
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
    carried: dict[tuple[str, str], Any] = {}
    calibration = None
    if args.calibration:  # a gate across a judge change (emo_tasks.gate.calibrated): judges may then differ
        calibration, carried, problem = _calibration(args.calibration, base, new, pairs)
        if problem is not None:
            print(f"emo-tasks compare: {problem}", file=sys.stderr)
            return EXIT_NOT_COMPARABLE
        reasons = [d.line for d in found.setup if d.kind != "judges"]
        reasons += [why for why in carried.values() if isinstance(why, str)]
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
        if not isinstance(carried.get((task, metric), ""), str):
            r = calibrated.across(r, carried[(task, metric)])
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

    if calibration is not None:
        print(*calibrated.header(calibration, base, new, _shared(base, new)), sep="\n")
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
    gated = calibrated.lines(results)
    if gated:
        print(f"delta of a metric gated across the judge change = new - base - the calibrated shift ({len(gated)} "
              f"metric(s), calibration {args.calibration}):", *gated, sep="\n")  # fmt: skip
    _print_failures(failures, out=sys.stdout)
    _print_power(new, results, args.alpha)
    from emo_tasks.common import remembering

    with remembering():  # the flips and the site read each run's files once
        if failed:
            _print_flips(base, new, sorted({t for r in failed for t in reader.leaves(base, r.task)}))
        viewed = write_view(args) if args.view else EXIT_PASS
    if failed:
        names = ", ".join(f"{r.task}:{r.metric}" for r in failed)
        print(f"emo-tasks compare: significant drop in {names}", file=sys.stderr)
        return EXIT_REGRESSION
    return _gated(viewed, near, args, "compare")


def judge_horizon(run: reader.Run, args: argparse.Namespace, command: str) -> bool:
    """Warn when the reference run's judge shuts down within --judge-horizon days (what its judge endpoint
    reported when it judged: `results.judge_shutdown`); whether it does.  Why: a gate whose reference judge is
    gone can no longer judge a new run alike; calibrate a replacement while the old judge answers."""
    from emo_tasks.results.judge_shutdown import describe, run_shutdowns, within

    near = within(run_shutdowns(run), args.judge_horizon)
    for phrase in describe(near):
        print(
            f"emo-tasks {command}: warning: the reference run's judge shuts down within --judge-horizon "
            f"{args.judge_horizon} days: {phrase}. Calibrate a replacement now (emo-tasks calibrate, then gate with "
            "--calibration) and export its verdicts (emo-tasks cache export); "
            "docs/judges.md#before-your-judge-shuts-down",
            file=sys.stderr,
        )
    return bool(near)


def _gated(code: int, near: bool, args: argparse.Namespace, command: str) -> int:
    """`code`, or EXIT_JUDGE_SHUTDOWN (4) when it is a pass, the reference judge shuts down within the horizon and
    --fail-on-judge-shutdown was given (a regression or a refusal keeps its own code)."""
    if code == EXIT_PASS and near and getattr(args, "fail_on_judge_shutdown", False):
        print(f"emo-tasks {command}: failed: --fail-on-judge-shutdown: the reference run's judge shuts down within "
              f"{args.judge_horizon} days (exit {EXIT_JUDGE_SHUTDOWN})", file=sys.stderr)  # fmt: skip
        return EXIT_JUDGE_SHUTDOWN
    return code


def _shared(base: reader.Run, new: reader.Run) -> list[str]:
    """The emo-tasks tasks both runs have: whose judges a calibration must carry."""
    return sorted(t for t in set(base.results) & set(new.results) if report.benchmark_of(t))


def _calibration(
    path: str, base: reader.Run, new: reader.Run, pairs: Sequence[tuple[str, str]]
) -> tuple[Any, dict[tuple[str, str], Any], str | None]:
    """(the calibration, {(task, metric) needing a shift: its `Carried`, or why it has none}, the refusal): the file
    must be readable and carry BASE's judge (its reference) to NEW's (its candidate)."""
    from emo_tasks.results import judge_change
    from emo_tasks.results.calibration import CalibrationError, load_calibration

    try:
        calibration = load_calibration(path)
    except CalibrationError as exc:
        return None, {}, f"--calibration: {exc}"
    why = judge_change.carries(calibration, base, new, _shared(base, new))
    if why is not None:
        return None, {}, why
    carried: dict[tuple[str, str], Any] = {}
    for task, metric in calibrated.needs_shift(base, new, pairs):
        got = judge_change.carried(calibration, task, metric)
        if isinstance(got, str):
            got = (
                f"judges: {task} {metric} cannot be gated across the judge change: {got} (calibrate it, or "
                "leave it out with --metric)"
            )
        carried[(task, metric)] = got
    return calibration, carried, None


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


def _print_failures(failures: dict[str, tuple[int, int] | None], out: Any = None) -> None:
    """One line: each run's judge failures over the compared tasks."""
    parts = [f"{side} {got[0]} of {got[1]}" for side, got in failures.items() if got is not None]
    if parts:
        print("judge failures (judge-failed of judged samples): " + ", ".join(parts), file=out or sys.stderr)


def main_plan_gate(args: argparse.Namespace) -> int:
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
                                   tasks=tasks, seed=args.seed, name=args.name, pick=args.pick,
                                   calibration=args.calibration)  # fmt: skip
    except plan_gate.PlanError as exc:
        print(f"emo-tasks plan-gate: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARABLE
    near = judge_horizon(reader.load_run(plan.base), args, "plan-gate")
    print(plan_gate.render(plan))
    path = plan_gate.write(plan, args.out)
    across = f" --calibration {args.calibration}" if args.calibration else ""
    print(f"\nwrote {path}: run lmms-eval with EMO_SUBSET={path}, then `emo-tasks compare {args.base} NEW_RUN{across}`")
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
    return _gated(EXIT_PASS, near, args, "plan-gate")
