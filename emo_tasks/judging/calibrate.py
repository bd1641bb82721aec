"""`emo-tasks calibrate REF CAND [REF2 CAND2 ...]`: may a candidate judge stand in for the reference judge?

Why: a judge snapshot retires; its successor's numbers only continue a baseline or a leaderboard when they measure
the same thing.  Each pair is one model's answers judged twice, by the reference judge setup (REF) and by the
candidate (CAND), given as the folders `emo-tasks agreement` reads (`RUN/judged/<setup>/`, or a run judged in
process).  Reading, pairing and the statistics are `agreement`'s (`agreement.load_run`, `agreement_report.pool_task`,
`score_difference`, `rating_agreement`): one implementation.  Per benchmark, task and headline metric (MME-Emotion:
Rec-S, Rea-S, CoT-S x100 per sample; EmoBench-M: SMILE's llm_logical, llm_multimodal, llm_total per answer) it
gives

- the shift, candidate - reference, over every paired sample of every pair (pooled), with its seeded paired
  bootstrap 95 % CI, and the same per pair;
- per-sample agreement: Cohen's kappa on the recognition verdicts (the final rating: MME-Emotion's last step,
  EmoBench-M's per-answer total) and the ICC on the step ratings (EmoBench-M: its two dimensions);
- with three or more pairs (models): Kendall's tau-b (`kendall_taus`, pinned to scipy's) between the two judges'
  rankings of the models (each model's mean over its paired samples), with a 95 % percentile CI from a seeded
  bootstrap over each model's samples (resampled alike for both judges; replicates with tied means, where tau is
  undefined, are left out and counted);
- the verdict, by the rule `RULE`: interchangeable within +-T when the shift's CI lies inside [-T, +T] and rests
  on at least `MIN_PAIRED` (30) paired samples; fewer: "too few pairs (n)", not interchangeable (nothing proves
  it: the constant says why 30).

Refused (exit 2, one line naming the folder): a folder that is not one judge setup, REF sides that are not all one
judge identity (`results.calibration.judge_identity` of their summaries) or CAND sides not all another, REF and
CAND of the same identity (nothing to calibrate), a side without a recorded judge, a pair whose two sides judged
different answers, two pairs of the same answers (one model twice), no sample scored in both sides, MultiEmo's
judged variant (its judge scores whole predictions, it has no per-sample ratings for `agreement` to pair), and a
judged run without judge logs (EmoBench-M judged before its LLM scorer wrote them: the message says to rerun
`emo-tasks judge`, whose answer cache makes that free; the identity checks above stand on the logs' summaries).
The file written is `results.calibration`'s document; its extra fields are `pairs`, `agreement`, `ranking` and
`notes`.

Exit codes: 0 every headline interchangeable, 1 one is not, 2 refused, 3 bad argument or unreadable input.
Files in, files out: no network.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from emo_tasks.benchmarks import benchmark_of
from emo_tasks.cliargs import EXIT_BAD_ARGUMENT, EXIT_NOT_COMPARABLE, EXIT_PASS, EXIT_REGRESSION
from emo_tasks.judging.agreement import SCORED, InputError, JudgedRun, judge_ratings, load_run, mixed_setup_reason
from emo_tasks.judging.agreement_report import LEVEL, Pool, pool_task, rating_agreement, score_difference
from emo_tasks.results.calibration import Shift, calibration_document, judge_identity
from emo_tasks.results.judge_shutdown import KEY as SHUTDOWN_KEY
from emo_tasks.results.judge_shutdown import merged
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX, SUMMARY_SUFFIX
from emo_tasks.results.same_judge import group_by_judge, identity_difference
from judges.shutdown import warn_recorded

DEFAULT_TOLERANCE = 1.0  # points: MME-Emotion's scores are x100
ICC_FORM = "ICC(2,1)"  # absolute agreement: a harsher judge disagrees
#: The fewest paired samples a headline's verdict is drawn from.  Why 30: below about 30 the percentile bootstrap
#: CI of a mean is too narrow (it undercovers), and identical ratings give the CI [0, 0] however few they are: with
#: no difference in n paired samples, the 95 % bound on the share of samples the two judges score differently is
#: about 3/n (the rule of three): 100 % from 3 samples, 10 % from 30.  Fewer: "too few pairs (n)", not
#: interchangeable (exit 1), whatever the CI.
MIN_PAIRED = 30
RULE = (
    "interchangeable within ±T: the {pct}% paired bootstrap CI of the shift (candidate - reference) lies inside "
    "[-T, +T], from at least {min_paired} paired samples; fewer: too few pairs (n), not interchangeable; else not "
    "interchangeable: shift S [lo, hi]"
)


class Refused(Exception):
    """Inputs that cannot be calibrated (exit 2); the message names the folder."""


# -------------------------------------------------------------------------------------------------- statistics
def interchangeable(ci_low: float | None, ci_high: float | None, tolerance: float, n: int | None = None) -> bool:
    """The verdict rule: the CI lies inside [-tolerance, +tolerance].  No CI, or fewer than `MIN_PAIRED` paired
    samples `n`: not proven, so not interchangeable."""
    if ci_low is None or ci_high is None or (n is not None and n < MIN_PAIRED):
        return False
    return -tolerance <= ci_low and ci_high <= tolerance


def kendall_taus(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row pair of x and y (shape (rows, items)), nan where undefined (a row whose items all
    tie on one side).  Vectorised so that a bootstrap of 1,000 rankings costs milliseconds (scipy's `kendalltau`,
    the reference the tests pin it to, takes ~0.4 ms a call)."""
    x, y = np.atleast_2d(np.asarray(x, float)), np.atleast_2d(np.asarray(y, float))
    i, j = np.triu_indices(x.shape[1], k=1)
    dx, dy = np.sign(x[:, j] - x[:, i]), np.sign(y[:, j] - y[:, i])
    pairs = len(i)
    denominator = np.sqrt((pairs - (dx == 0).sum(axis=1)) * (pairs - (dy == 0).sum(axis=1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (dx * dy).sum(axis=1) / denominator, np.nan)


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two rankings; None when undefined (fewer than 2 items, a side whose items all tie)."""
    if len(x) < 2:
        return None
    tau = float(kendall_taus(np.asarray([x], float), np.asarray([y], float))[0])
    return None if math.isnan(tau) else tau


def ranking(models: Sequence[tuple[Sequence[float], Sequence[float]]], resamples: int, seed: int) -> dict[str, Any]:
    """Kendall's tau between the reference's and the candidate's ranking of models (`models`: per model its paired
    (reference, candidate) sample values), with a percentile CI from a bootstrap that resamples each model's
    samples (the same rows for both judges)."""
    out: dict[str, Any] = {"n_models": len(models), "tau": None, "ci_low": None, "ci_high": None, "notes": []}
    usable = [(np.asarray(a, float), np.asarray(b, float)) for a, b in models if len(a)]
    if len(usable) < 3:
        out["notes"].append("no ranking: fewer than 3 models with paired samples")
        return out
    out["reference"] = [float(a.mean()) for a, _ in usable]
    out["candidate"] = [float(b.mean()) for _, b in usable]
    out["tau"] = kendall_tau(out["reference"], out["candidate"])
    if out["tau"] is None:
        out["notes"].append("tau undefined: one judge gives every model the same mean")
    rng = np.random.default_rng(seed)
    ref = np.empty((resamples, len(usable)))
    cand = np.empty_like(ref)
    for j, (a, b) in enumerate(usable):
        idx = rng.integers(0, len(a), size=(resamples, len(a)))
        ref[:, j], cand[:, j] = a[idx].mean(axis=1), b[idx].mean(axis=1)
    every = kendall_taus(ref, cand)
    taus = every[~np.isnan(every)]
    if len(taus) < resamples:
        out["notes"].append(f"{resamples - len(taus)} of {resamples} resamples left out: tied means, tau undefined")
    if len(taus):
        half = (1 - LEVEL) / 2 * 100
        out["ci_low"], out["ci_high"] = (float(v) for v in np.percentile(taus, [half, 100 - half]))
    return out


def shift_of(
    benchmark: str, task: str, metric: str, ref: Sequence[float], cand: Sequence[float], tolerance: float,
    resamples: int, seed: int,
) -> tuple[Shift, dict[str, Any]]:  # fmt: skip
    """One headline's shift (`score_difference`: the paired bootstrap `agreement` uses) and its verdict; also the
    full figures (means of both judges, p)."""
    d = score_difference(ref, cand, resamples, seed)
    shift = Shift(
        benchmark=benchmark,
        task=task,
        metric=metric,
        n=d["n"],
        shift=0.0 if d["delta"] is None else d["delta"],
        ci_low=d["ci_low"],
        ci_high=d["ci_high"],
        tolerance=tolerance,
        interchangeable=interchangeable(d["ci_low"], d["ci_high"], tolerance, d["n"]),
    )
    return shift, d


def default_tolerance(ratings: Any, metric: str) -> float:
    """A headline's tolerance without --tolerance: the benchmark's own for it (a judge-ratings module's optional
    `TOLERANCES`: EmoBench-M's ratings are on 0-5 and 0-10 scales, where 1 would be 20 % and 10 %), else
    `DEFAULT_TOLERANCE` (1 point of MME-Emotion's x100 scores)."""
    return float(getattr(ratings, "TOLERANCES", {}).get(metric, DEFAULT_TOLERANCE))


# ------------------------------------------------------------------------------------------------------ input
@dataclass
class Pair:
    """One model's answers judged by both setups, paired per task."""

    ref: JudgedRun
    cand: JudgedRun
    pools: dict[str, Pool] = field(default_factory=dict)


def _one_line(text: object) -> str:
    return str(text).replace("\r", "\\r").replace("\n", "\\n")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _judged_without_ratings(path: str) -> bool:
    """A folder with judged results (a summary in an `emo_tasks_judge/`) but no judge log `agreement` reads:
    MultiEmo's judged variant, whose judge scores whole predictions."""
    return any(p.parent.name == JUDGE_DIR for p in Path(path).rglob(f"*{SUMMARY_SUFFIX}"))


def _has_judge_log(path: str) -> bool:
    """A judge log (`*_judge.jsonl` in an `emo_tasks_judge/`) is at or under `path`: an InputError reading it is
    about that log, not about a judged result without logs."""
    root = Path(path)
    return root.is_dir() and any(p.parent.name == JUDGE_DIR for p in root.rglob(f"*{JUDGE_LOG_SUFFIX}"))


def _rated_without_judge_log(path: str) -> str | None:
    """The title of a benchmark whose judge rated answers in a results file under `path` (its `n_judge_failed` is
    a number) although no judge log of it is there: a run judged before its benchmark wrote judge logs (EmoBench-M's
    LLM scorer before them), or whose logs were removed; None when there is none."""
    for results in sorted(Path(path).rglob("*results.json")):
        try:
            rows = json.loads(results.read_text(encoding="utf-8")).get("results") or {}
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        for task, row in rows.items():
            bench = benchmark_of(task)
            if bench is not None and bench.judge_ratings and isinstance(row, dict) and isinstance(
                row.get("n_judge_failed,none"), int):  # fmt: skip
                return bench.title
    return None


def _load(path: str) -> JudgedRun:
    try:
        return load_run(path)
    except InputError:
        if _has_judge_log(path):  # a log that cannot be read: the error names it (exit 3)
            raise
        titles = " or ".join(r.TITLE for r in judge_ratings())
        if Path(path).is_dir() and _judged_without_ratings(path):
            raise Refused(
                f"{path}: its judged results have no per-sample judge ratings to pair (a judge that scores whole "
                f"predictions cannot be calibrated); calibrate reads the judge logs of {titles}"
            ) from None
        rated = _rated_without_judge_log(path) if Path(path).is_dir() else None
        if rated:
            raise Refused(
                f"{path}: {rated}'s judge rated these answers, but no judge log records the ratings and which "
                f"judge gave them (judged before the logs were written, or removed): rerun `emo-tasks judge RUN` "
                f"with that judge to write them (its answer cache makes that free)"
            ) from None
        raise


def side_identity(run: JudgedRun) -> dict[str, Any]:
    """The judge identity a judged folder records, one value over all its tasks (Refused otherwise)."""
    mixed = mixed_setup_reason(run)
    if mixed:
        raise Refused(f"{mixed}; pass one judged folder (RUN/judged/<one>) per side")
    items = []
    for task, log in run.tasks.items():
        identity = judge_identity(log.summary)
        if not identity.get("judge_models"):
            where = log.summary_file or f"no summary beside {log.log}"
            raise Refused(f"{run.folder}: {task}'s judge is not recorded ({where}); nothing proves which judge it is")
        items.append((identity, task))
    found = group_by_judge(items)  # one rule with compare: "not reported" is not another judge
    if len(found) > 1:
        shown = " vs ".join(f"{_canonical(i)} ({', '.join(t)})" for i, t in found)
        raise Refused(f"{run.folder}: its tasks record more than one judge identity: {shown}")
    return found[0][0]


def _answers_key(run: JudgedRun) -> str:
    """A hash of every scored sample's answer: two pairs with the same one are one model's answers twice."""
    rows = sorted(
        (task, row, _canonical(s.answer))
        for task, log in run.tasks.items()
        for row, s in log.samples.items()
        if s.status == SCORED
    )
    return hashlib.sha256(_canonical(rows).encode()).hexdigest()


def load_pairs(paths: Sequence[str]) -> tuple[list[Pair], dict[str, Any], dict[str, Any]]:
    """The pairs read and checked (`Refused` for what cannot be calibrated), and the reference and candidate
    identities."""
    runs = [_load(p) for p in paths]
    ratings = runs[0].ratings
    pairs = [Pair(runs[i], runs[i + 1]) for i in range(0, len(runs), 2)]
    identities: dict[str, tuple[dict[str, Any], Path]] = {}
    seen_answers: dict[str, Path] = {}
    seen_folders: dict[Path, str] = {}
    for pair in pairs:
        for side, run in (("REF", pair.ref), ("CAND", pair.cand)):
            if run.ratings is not ratings:
                raise Refused(f"{run.folder} holds {run.ratings.TITLE} judge logs, {runs[0].folder} {ratings.TITLE}")
            key = run.folder.resolve()
            if key in seen_folders:
                raise Refused(f"{run.folder} is given twice ({seen_folders[key]}, {side}): one judged folder per side")
            seen_folders[key] = side
            identity = side_identity(run)
            if side in identities and identity_difference(identity, identities[side][0]):
                first = identities[side][1]
                raise Refused(
                    f"{run.folder}: another judge than {first} ({_canonical(identity)} vs "
                    f"{_canonical(identities[side][0])}); every {side} must be judged by one setup"
                )
            identities.setdefault(side, (identity, run.folder))
        for task in sorted(set(pair.ref.tasks) | set(pair.cand.tasks), key=ratings.task_order):
            pool = pool_task(task, pair.ref, pair.cand)
            if pool.counts["n_answer_mismatch"]:
                raise Refused(
                    f"{pair.cand.folder} judged other answers than {pair.ref.folder} ({task}: "
                    f"{pool.counts['n_answer_mismatch']} samples with a different video or answer); a pair is one "
                    "run judged twice"
                )
            pair.pools[task] = pool
        if not any(p.counts["n_paired"] for p in pair.pools.values()):
            raise Refused(f"{pair.ref.folder} and {pair.cand.folder} share no sample scored in both")
        answers = _answers_key(pair.ref)
        if answers in seen_answers:
            raise Refused(f"{pair.ref.folder} and {seen_answers[answers]} judge the same answers: one model twice")
        seen_answers[answers] = pair.ref.folder
    ref, cand = identities["REF"][0], identities["CAND"][0]
    if not identity_difference(ref, cand):
        raise Refused(
            f"{pairs[0].ref.folder} and {pairs[0].cand.folder} record the same judge ({_canonical(ref)}): nothing "
            "to calibrate"
        )
    return pairs, ref, cand


# ---------------------------------------------------------------------------------------------------- document
def calibrate(
    pairs: Sequence[Pair],
    reference: Mapping[str, Any],
    candidate: Mapping[str, Any],
    tolerance: Mapping[str | None, float],
    *,
    resamples: int = 1000,
    seed: int = 0,
    created: str | None = None,
) -> dict[str, Any]:
    """The calibration document (`results.calibration.calibration_document`) of checked pairs."""
    ratings = pairs[0].ref.ratings
    bench = ratings.TITLE
    metrics = list(ratings.SCORES)
    tol = {m: tolerance.get(m, tolerance.get(None, default_tolerance(ratings, m))) for m in metrics}
    tasks = sorted({t for p in pairs for t in p.pools}, key=ratings.task_order)
    units = [(t, ratings.task_title(t), [t]) for t in tasks]
    bench_entry = benchmark_of(tasks[0]) if tasks else None
    for group, leaves in (bench_entry.members if bench_entry else {}).items():  # `compare` gates a group too
        if leaves and all(t in tasks for t in leaves):
            units.append((group, f"{group} (all {len(leaves)} tasks pooled)", list(leaves)))
    shifts: list[Shift] = []
    agreement_rows, ranking_rows, per_pair = [], [], []
    for unit, title, members in units:
        pooled = Pool.of(metrics)
        per_model: list[Pool] = []
        for i, pair in enumerate(pairs):
            mine = Pool.of(metrics)
            for t in members:
                if t in pair.pools:
                    mine.extend(pair.pools[t])
            pooled.extend(mine)
            per_model.append(mine)
            for m in metrics:
                s, _ = shift_of(bench, unit, m, *mine.scores[m], tol[m], resamples, seed)
                per_pair.append({"pair": i, **s.__dict__})
        for m in metrics:
            s, d = shift_of(bench, unit, m, *pooled.scores[m], tol[m], resamples, seed)
            if s.n:
                shifts.append(s)
            if len(pairs) >= 3:
                r = ranking([p.scores[m] for p in per_model], resamples, seed)
                ranking_rows.append({"benchmark": bench, "task": unit, "metric": m, **r})
        agreement_rows.append(
            {
                "benchmark": bench,
                "task": unit,
                "title": title,
                **pooled.counts,
                "recognition": rating_agreement(*pooled.last, icc_form=ICC_FORM),
                "steps": rating_agreement(*pooled.steps, icc_form=ICC_FORM),
            }
        )
    notes = [f"pair {i}: {n}" for i, p in enumerate(pairs) for n in (*p.ref.notes, *p.cand.notes)]
    for i, p in enumerate(pairs):  # agreement's remarks on a task judged on both sides (another alpha, ...)
        shared = [t for t in p.pools if t in p.ref.tasks and t in p.cand.tasks]
        notes += [f"pair {i}: {n}" for t in shared for n in ratings.pair_notes(t, p.ref.tasks[t], p.cand.tasks[t])]
    if len(pairs) < 3:
        notes.append(f"no ranking: {len(pairs)} pair(s); Kendall's tau needs 3 or more models")
    pct = round(LEVEL * 100)
    return calibration_document(
        {"identity": dict(reference), "runs": [str(p.ref.folder) for p in pairs]},
        {"identity": dict(candidate), "runs": [str(p.cand.folder) for p in pairs]},
        shifts,
        tolerance={"default": tolerance.get(None, DEFAULT_TOLERANCE), **{m: v for m, v in tol.items()}},
        rule=RULE.format(pct=pct, min_paired=MIN_PAIRED),
        level=LEVEL,
        created=created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        extra={
            "resamples": resamples,
            "seed": seed,
            "icc_form": ICC_FORM,
            "titles": {"tasks": {u: t for u, t, _ in units}, "metrics": dict(ratings.SCORES)},
            "pairs": [{"reference": str(p.ref.folder), "candidate": str(p.cand.folder)} for p in pairs],
            "pair_shifts": per_pair,
            "agreement": agreement_rows,
            "ranking": ranking_rows,
            "notes": notes,
        },
    )


# ------------------------------------------------------------------------------------------------------ output
def _f(x: float | None, digits: int = 2, sign: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _ci(low: float | None, high: float | None, digits: int = 2) -> str:
    return "n/a" if low is None or high is None else f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


def verdict_line(s: Mapping[str, Any]) -> str:
    """The verdict of one headline in words, as the rule says it."""
    if s["interchangeable"]:
        return f"interchangeable within ±{s['tolerance']:g}"
    if s["n"] < MIN_PAIRED:  # the CI shown too: beside the band it still says which way the judges differ
        return f"too few pairs ({s['n']} < {MIN_PAIRED}): shift {s['shift']:+.2f} {_ci(s['ci_low'], s['ci_high'])}"
    return f"not interchangeable: shift {s['shift']:+.2f} {_ci(s['ci_low'], s['ci_high'])}"


#: A ranking note that counts the resamples it left out ("12 of 300 resamples left out: ..."): one kind, any count.
_COUNTED = re.compile(r"^(?P<k>\d+) of (?P<of>\d+) resamples left out: (?P<why>.*)$")


def _few(names: Sequence[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def statistic_notes(doc: Mapping[str, Any], name: Any) -> list[str]:
    """The agreement's and the ranking's notes, one line per kind (an undefined kappa, ICC, Spearman or tau, the
    resamples left out), with how many tasks or headlines it concerns and the first of them.  Why: a sample run
    printed one line per task and part (19 "undefined" lines), which buried the notes that matter; the file keeps
    each task's notes (`agreement`, `ranking`)."""
    kinds: dict[str, tuple[str, list[str]]] = {}
    for a in doc["agreement"]:
        for part in ("recognition", "steps"):
            for note in a[part]["notes"]:
                kinds.setdefault(f"{part}: {note}", ("task", []))[1].append(a["title"])
    for r in doc["ranking"]:
        headline = " ".join(name(r["task"], r["metric"]))
        for note in r["notes"]:
            counted = _COUNTED.match(note)
            if counted:
                kind = f"ranking: resamples left out: {counted['why']}"
                kinds.setdefault(kind, ("headline", []))[1].append(f"{headline} {counted['k']} of {counted['of']}")
            else:
                kinds.setdefault(f"ranking: {note}", ("headline", []))[1].append(headline)
    return [
        f"{kind} ({len(names)} {unit}{'s' if len(names) != 1 else ''}: {_few(names)})"
        for kind, (unit, names) in kinds.items()
    ]


def render_text(doc: Mapping[str, Any]) -> str:
    """The readable form: the two judges, the rule, the pooled shifts with verdicts, per-pair shifts, agreement,
    ranking, notes and the overall verdict."""
    titles = doc["titles"]

    def name(task: str, metric: str) -> tuple[str, str]:
        return titles["tasks"].get(task, task), titles["metrics"].get(metric, metric)

    out = []
    for side in ("reference", "candidate"):
        out.append(f"{side}: {_canonical(doc[side]['identity'])}")
        out += [f"   {r}" for r in doc[side]["runs"]]
    pct = round(doc["level"] * 100)
    out += ["", f"Rule: {doc['rule']}", ""]
    n_pairs = len(doc["pairs"])
    out.append(f"Shift, candidate - reference, pooled over {n_pairs} pair(s) ({pct}% paired bootstrap CI, "
               f"{doc['resamples']} resamples, seed {doc['seed']})")  # fmt: skip
    rows = [
        [
            *name(s["task"], s["metric"]),
            str(s["n"]),
            _f(s["shift"], sign=True),
            _ci(s["ci_low"], s["ci_high"]),
            f"±{s['tolerance']:g}",
            verdict_line(s),
        ]  # fmt: skip
        for s in doc["shifts"]
    ]
    out += _table(["task", "metric", "n", "shift", f"{pct}% CI", "T", "verdict"], rows)
    if n_pairs > 1:
        out += ["", "Per pair"]
        rows = [
            [
                str(p["pair"]),
                *name(p["task"], p["metric"]),
                str(p["n"]),
                _f(p["shift"], sign=True),
                _ci(p["ci_low"], p["ci_high"]),
            ]  # fmt: skip
            for p in doc["pair_shifts"]
            if p["n"]
        ]
        out += _table(["pair", "task", "metric", "n", "shift", f"{pct}% CI"], rows)
    out += ["", f"Per-sample agreement (pooled; recognition: Cohen's kappa; steps: {doc['icc_form']})"]
    rows = [
        [
            a["title"],
            str(a["n_paired"]),
            str(a["recognition"]["n"]),
            _f(a["recognition"]["cohen_kappa"], 3),
            str(a["steps"]["n"]),
            _f(a["steps"]["icc"], 3),
            _f(a["steps"]["mean_offset"], 3, sign=True),
        ]  # fmt: skip
        for a in doc["agreement"]
    ]
    out += _table(["task", "pairs", "rec n", "kappa", "steps n", "ICC", "offset"], rows)
    if doc["ranking"]:
        out += ["", f"Model ranking, reference vs candidate (Kendall's tau-b, {pct}% bootstrap CI over samples)"]
        rows = [
            [*name(r["task"], r["metric"]), str(r["n_models"]), _f(r["tau"], 3), _ci(r["ci_low"], r["ci_high"], 3)]
            for r in doc["ranking"]
        ]
        out += _table(["task", "metric", "models", "tau", f"{pct}% CI"], rows)
    notes = list(doc["notes"])
    for a in doc["agreement"]:
        left = {k: a[k] for k in ("n_only_a", "n_only_b", "n_not_scored") if a[k]}
        if left:
            notes.append(f"{a['title']}: left out {', '.join(f'{k[2:]} {v}' for k, v in left.items())}")
    notes += statistic_notes(doc, name)
    if notes:
        out += ["", "Notes:"] + [f"  - {n}" for n in dict.fromkeys(notes)]
    bad = [s for s in doc["shifts"] if not s["interchangeable"]]
    out.append("")
    if bad:
        out.append(f"Verdict: not interchangeable ({len(bad)} of {len(doc['shifts'])} headlines):")
        out += [f"  {' '.join(name(s['task'], s['metric']))}: {verdict_line(s)}" for s in bad]
    else:
        tols = sorted({s["tolerance"] for s in doc["shifts"]})
        shown = "/".join(f"{t:g}" for t in tols)
        out.append(f"Verdict: interchangeable within ±{shown} (all {len(doc['shifts'])} headlines)")
    return "\n".join(out) + "\n"


def run_cli(
    paths: Sequence[str],
    *,
    tolerance: Mapping[str | None, float],
    out_path: str,
    resamples: int = 1000,
    seed: int = 0,
    out: Any = None,
    err: Any = None,
) -> int:
    """`emo-tasks calibrate`: print the calibration, write the file; exit 0 / 1 / 2 / 3 (module docstring)."""
    from judges.atomic import atomic_write_text

    out = out or sys.stdout
    err = err or sys.stderr

    def say(message: str) -> None:
        print("emo-tasks calibrate: " + _one_line(message), file=err)

    if len(paths) < 2 or len(paths) % 2:
        say(f"error: give REF CAND pairs (one per model), got {len(paths)} folder(s)")
        return EXIT_BAD_ARGUMENT
    try:
        pairs, ref, cand = load_pairs(paths)
    except Refused as exc:
        say(str(exc))
        return EXIT_NOT_COMPARABLE
    except InputError as exc:
        say(f"error: {exc}")
        return EXIT_BAD_ARGUMENT
    # a judge the results say shuts down: said once per model (calibrating now is what it asks for)
    warn_recorded(merged((log.summary or {}).get(SHUTDOWN_KEY) for p in pairs for side in (p.ref, p.cand)
                         for log in side.tasks.values()))  # fmt: skip
    known = set(pairs[0].ref.ratings.SCORES)
    unknown = sorted(m for m in tolerance if m is not None and m not in known)
    if unknown:
        say(f"error: argument --tolerance: no headline metric {', '.join(unknown)} (one of {', '.join(sorted(known))})")
        return EXIT_BAD_ARGUMENT
    doc = calibrate(pairs, ref, cand, tolerance, resamples=resamples, seed=seed)
    atomic_write_text(Path(out_path), json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    out.write(render_text(doc))
    out.write(f"wrote {out_path}\n")
    return EXIT_PASS if doc["verdict"] == "interchangeable" else EXIT_REGRESSION
