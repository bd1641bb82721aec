"""Judge-vs-judge calibration, the comparison: pair two judged runs' samples, measure how the judges agree, print it.

`emo_tasks.judging.agreement` reads each side (the newest judged result under a path, its per-task judge logs and
the judge setup their summaries record) and documents the command, its exit codes and the JSON schema; this
module is the rest, the same for every benchmark: the pairing (`pool_task`), the statistics (`rating_agreement`,
`score_difference`), the document (`compare_runs`, `no_overlap_reason`), its text form (`render_text`) and the
command's run form (`run_cli`).  Split from the reading so that a change to how a judge log is read and a change
to the figures touch different modules.

Files in, files out: no network.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from emo_tasks.judging.agreement import (
    SCORED,
    InputError,
    JudgedRun,
    JudgeRatings,
    Sample,
    describe_setup,
    judge_setup,
    load_run,
    mixed_setup_reason,
    same_setup,
)
from emo_tasks.results import stats

SCHEMA = "emo-tasks/judge-agreement/1"
LEVEL = 0.95
MIN_PAIRS = 2  # fewer pairs: no correlation, kappa, ICC, bootstrap CI or p-value


# -------------------------------------------------------------------------------------------------- statistics
def rating_agreement(a: Sequence[float], b: Sequence[float], icc_form: str = "ICC(2,1)") -> dict[str, Any]:
    """n, Spearman, Cohen's kappa, ICC and mean offset (B - A) of paired ratings; undefined measures are null with
    a note (constant ratings, fewer than two pairs)."""
    out: dict[str, Any] = {
        "n": len(a),
        "spearman": None,
        "cohen_kappa": None,
        "icc": None,
        "mean_offset": None,
        "notes": [],
    }
    if not a:
        out["notes"].append("no rating pairs")
        return out
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out["mean_offset"] = float(np.mean(y - x))
    if len(a) < MIN_PAIRS:  # one pair: kappa would read 0 (or 1) from a single coin toss
        out["notes"].append(f"spearman, cohen_kappa and icc undefined: fewer than {MIN_PAIRS} rating pairs")
        return out
    measures: dict[str, Callable[[], float]] = {
        "spearman": lambda: stats.spearman(x, y),
        "cohen_kappa": lambda: stats.cohen_kappa(np.round(x, 9).tolist(), np.round(y, 9).tolist()),
        "icc": lambda: stats.icc(np.column_stack([x, y]), icc_form),
    }
    for name, fn in measures.items():
        try:
            out[name] = fn()
        except ValueError as exc:
            out["notes"].append(f"{name} undefined: {exc}")
    return out


def score_difference(a: Sequence[float], b: Sequence[float], resamples: int, seed: int) -> dict[str, Any]:
    """Means of A and B and the seeded paired bootstrap of B - A.  All null without pairs; CI and p null from one
    pair, which the bootstrap would turn into a zero-width CI and a p that looks significant."""
    if not a:
        return {"n": 0, **dict.fromkeys(("a", "b", "delta", "ci_low", "ci_high", "p_value")), "notes": ["no pairs"]}
    out: dict[str, Any] = {
        "n": len(a),
        "a": float(np.mean(a)),
        "b": float(np.mean(b)),
        "delta": float(np.mean(b) - np.mean(a)),
        **dict.fromkeys(("ci_low", "ci_high", "p_value")),
        "notes": [],
    }
    if len(a) < MIN_PAIRS:
        out["notes"].append(f"no CI or p-value: fewer than {MIN_PAIRS} paired samples")
        return out
    r = stats.paired_bootstrap(a, b, n_resamples=resamples, level=LEVEL, seed=seed)
    out.update(n=r.n, delta=r.delta, ci_low=r.low, ci_high=r.high, p_value=r.p_value)
    return out


@dataclass
class Pool:
    """The paired values of one task (or of all tasks, or of several runs: `calibrate` pools its pairs)."""

    scores: dict[str, tuple[list[float], list[float]]]  # sample score -> (A's, B's)
    steps: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    last: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("n_paired", "n_only_a", "n_only_b", "n_not_scored", "n_answer_mismatch", "n_count_mismatch"), 0
        )
    )
    status: dict[str, dict[str, int]] = field(default_factory=lambda: {"a": {}, "b": {}})

    @classmethod
    def of(cls, scores: Sequence[str]) -> Pool:
        return cls(scores={m: ([], []) for m in scores})

    def extend(self, other: Pool) -> None:
        for mine, theirs in ((self.steps, other.steps), (self.last, other.last)):
            mine[0].extend(theirs[0])
            mine[1].extend(theirs[1])
        for m in self.scores:
            self.scores[m][0].extend(other.scores[m][0])
            self.scores[m][1].extend(other.scores[m][1])
        for k, v in other.counts.items():
            self.counts[k] += v
        for side in ("a", "b"):
            for s, v in other.status[side].items():
                self.status[side][s] = self.status[side].get(s, 0) + v


def _same_answer(sa: Sample, sb: Sample) -> bool:
    """Both judged the same answer: every identifying field that both rows record is equal."""
    return all(value == sb.answer[k] for k, value in sa.answer.items() if k in sb.answer)


def pool_task(task: str, a: JudgedRun, b: JudgedRun) -> Pool:
    """One task's samples of A and B paired (scored in both, same answer), the rest counted."""
    pool = Pool.of(list(a.ratings.SCORES))
    samples_a = a.tasks[task].samples if task in a.tasks else {}
    samples_b = b.tasks[task].samples if task in b.tasks else {}
    keys_a = sorted(samples_a)
    keys_b = set(samples_b)
    for side, samples, keys in (("a", samples_a, keys_a), ("b", samples_b, keys_b)):
        for k in keys:
            s = samples[k].status
            pool.status[side][s] = pool.status[side].get(s, 0) + 1
    pool.counts["n_only_a"] = sum(1 for k in keys_a if k not in keys_b)
    pool.counts["n_only_b"] = len(keys_b - set(keys_a))
    for k in keys_a:
        if k not in keys_b:
            continue
        sa, sb = samples_a[k], samples_b[k]
        if sa.status != SCORED or sb.status != SCORED:
            pool.counts["n_not_scored"] += 1
            continue
        if not _same_answer(sa, sb):
            pool.counts["n_answer_mismatch"] += 1
            continue
        pool.counts["n_paired"] += 1
        va, vb = sa.steps, sb.steps
        if len(va) == len(vb):
            pool.steps[0].extend(va)
            pool.steps[1].extend(vb)
        else:
            pool.counts["n_count_mismatch"] += 1
        pool.last[0].append(sa.last)
        pool.last[1].append(sb.last)
        for m, (got_a, got_b) in pool.scores.items():
            ma, mb = sa.scores.get(m), sb.scores.get(m)
            if ma is not None and mb is not None:
                got_a.append(float(ma))
                got_b.append(float(mb))
    return pool


def task_block(task: str, title: str, pool: Pool, icc_form: str, resamples: int, seed: int) -> dict[str, Any]:
    """The JSON `Block` of a pool: counts, step and last-step agreement, the scores' paired bootstrap."""
    return {
        "task": task,
        "title": title,
        "status": {side: dict(sorted(pool.status[side].items())) for side in ("a", "b")},
        **pool.counts,
        "steps": rating_agreement(*pool.steps, icc_form=icc_form),
        "last_step": rating_agreement(*pool.last, icc_form=icc_form),
        "scores": {m: score_difference(*pool.scores[m], resamples, seed) for m in pool.scores},
    }


def _run_doc(run: JudgedRun) -> dict[str, Any]:
    shown = dict.fromkeys(name for log in run.tasks.values() for name in log.shown)
    return {
        "path": str(run.path),
        "results_dir": str(run.folder),
        "candidates": [str(c) for c in run.candidates],
        "logs": {t: str(log.log) for t, log in run.tasks.items()},
        **{name: {t: log.shown.get(name) for t, log in run.tasks.items()} for name in shown},
        "summaries": {t: None if log.summary_file is None else str(log.summary_file) for t, log in run.tasks.items()},
        "setup": judge_setup(run),
    }


def _run_notes(a: JudgedRun, b: JudgedRun) -> list[str]:
    notes = [f"A: {n}" for n in a.notes] + [f"B: {n}" for n in b.notes]
    for task in sorted(set(a.tasks) & set(b.tasks), key=a.ratings.task_order):
        notes += a.ratings.pair_notes(task, a.tasks[task], b.tasks[task])
    return notes


def compare_runs(
    a: JudgedRun, b: JudgedRun, *, icc_form: str = "ICC(2,1)", resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """The JSON document of the module docstring for two loaded runs of one benchmark."""
    if icc_form not in stats.ICC_FORMS:
        raise ValueError(f"unknown ICC form {icc_form!r}")
    if a.ratings is not b.ratings:
        raise ValueError(f"A holds {a.ratings.TITLE} judge logs, B {b.ratings.TITLE} ones")
    ratings = a.ratings
    tasks = sorted(set(a.tasks) | set(b.tasks), key=ratings.task_order)
    overall = Pool.of(list(ratings.SCORES))
    blocks = []
    for task in tasks:
        pool = pool_task(task, a, b)
        overall.extend(pool)
        blocks.append(task_block(task, ratings.task_title(task), pool, icc_form, resamples, seed))
    runs = {"a": _run_doc(a), "b": _run_doc(b)}
    return {
        "schema": SCHEMA,
        "icc_form": icc_form,
        "resamples": resamples,
        "seed": seed,
        "level": LEVEL,
        "runs": runs,
        "tasks": blocks,
        "overall": task_block("overall", "Overall", overall, icc_form, resamples, seed),
        "notes": _run_notes(a, b),
        "same_setup": same_setup(runs["a"]["setup"], runs["b"]["setup"], list(ratings.SETUP_FIELDS)),
    }


def no_overlap_reason(doc: Mapping[str, Any]) -> str | None:
    """Why the runs share no scored sample (None when they share some)."""
    o = doc["overall"]
    if o["n_paired"]:
        return None
    tasks_a, tasks_b = set(doc["runs"]["a"]["logs"]), set(doc["runs"]["b"]["logs"])
    scored_a, scored_b = o["status"]["a"].get("scored", 0), o["status"]["b"].get("scored", 0)
    if not tasks_a & tasks_b:
        return f"no task is judged in both runs (A: {', '.join(sorted(tasks_a))}; B: {', '.join(sorted(tasks_b))})"
    if not scored_a or not scored_b:
        side = "A" if not scored_a else "B"
        st = o["status"]["a" if side == "A" else "b"]
        return f"run {side} has no scored sample ({', '.join(f'{k} {v}' for k, v in st.items()) or 'no rows'})"
    shared = o["n_not_scored"] + o["n_answer_mismatch"]
    if not shared:
        return "the runs judged no common sample (task, row): they are not judgements of the same answers"
    parts = []
    if o["n_not_scored"]:
        parts.append(f"{o['n_not_scored']} not scored in one of the runs (judge_failed / offline)")
    if o["n_answer_mismatch"]:
        parts.append(f"{o['n_answer_mismatch']} with a different video or answer")
    return f"of the {shared} samples judged in both runs, " + " and ".join(parts)


# ------------------------------------------------------------------------------------------------------ output
def _f(x: float | None, digits: int = 3, sign: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def _models(run: Mapping[str, Any]) -> str:
    seen: list[str] = []
    missing = 0
    for models in run["judge_models"].values():
        if not models:
            missing += 1
            continue
        text = ", ".join(f"{role} {m}" for role, m in models.items()) if isinstance(models, dict) else str(models)
        if text not in seen:
            seen.append(text)
    if missing:
        seen.append(f"not recorded for {missing} task{'s' if missing > 1 else ''}")
    return "; ".join(seen)


def render_text(doc: Mapping[str, Any], ratings: JudgeRatings) -> str:
    """The readable form: run headers, the rating-agreement table, the score table, notes, logs used (`ratings`:
    the benchmark's, for the titles of its setup fields and sample scores)."""
    form = doc["icc_form"]
    blocks = [*doc["tasks"], doc["overall"]]
    out = []
    for side in ("a", "b"):
        run = doc["runs"][side]
        st = doc["overall"]["status"][side]
        counts = ", ".join(f"{k} {v}" for k, v in st.items()) or "no rows"
        out.append(f"{side.upper()}: {run['results_dir']}  (samples: {counts})")
        setup = describe_setup(run["setup"], ratings.SETUP_FIELDS)
        if "judge_models" in run["setup"]["differs"]:
            setup = f"{setup} (judge models by task: {_models(run)})"
        out.append(f"   judge setup: {setup}")
    if doc.get("same_setup"):
        out.append("   A and B record the same judge setup: the differences below are the judge's nondeterminism")
    out.append("")
    out.append(f"Rating agreement, B vs A (step values num/den; offset = mean B - A; {form})")
    header = ["task", "pairs", "count-mismatch", "steps n", "rho", "kappa", "ICC", "offset"]
    header += ["last n", "rho", "kappa", "ICC", "offset"]
    rows = []
    for blk in blocks:
        row = [blk["title"], str(blk["n_paired"]), str(blk["n_count_mismatch"])]
        for part in ("steps", "last_step"):
            ag = blk[part]
            row += [str(ag["n"]), _f(ag["spearman"]), _f(ag["cohen_kappa"]), _f(ag["icc"])]
            row.append(_f(ag["mean_offset"], sign=True))
        rows.append(row)
    out += _table(header, rows)
    out.append("")
    pct = round(doc["level"] * 100)
    out.append(
        f"Scores x100 over the paired samples (B - A, {pct}% paired bootstrap CI, "
        f"{doc['resamples']} resamples, seed {doc['seed']})"
    )
    rows = []
    for blk in blocks:
        for m, title in ratings.SCORES.items():
            s = blk["scores"][m]
            ci = "n/a" if s["ci_low"] is None else f"[{s['ci_low']:+.2f}, {s['ci_high']:+.2f}]"
            rows.append(
                [
                    blk["title"],
                    title,
                    str(s["n"]),
                    _f(s["a"], 2),
                    _f(s["b"], 2),
                    _f(s["delta"], 2, sign=True),
                    ci,
                    _f(s["p_value"], 4),
                ]
            )
    out += _table(["task", "metric", "n", "A", "B", "B - A", f"{pct}% CI", "p"], rows)
    notes = list(doc["notes"])
    for blk in blocks:
        left = [
            f"{blk['n_only_a']} only in A" if blk["n_only_a"] else "",
            f"{blk['n_only_b']} only in B" if blk["n_only_b"] else "",
            f"{blk['n_not_scored']} not scored in A or B" if blk["n_not_scored"] else "",
            f"{blk['n_answer_mismatch']} with different answers" if blk["n_answer_mismatch"] else "",
        ]
        if blk["task"] != "overall" and any(left):
            notes.append(f"{blk['title']}: left out: " + ", ".join(p for p in left if p))
        for part, name in (("steps", "steps"), ("last_step", "last step")):
            notes += [f"{blk['title']} {name}: {n}" for n in blk[part]["notes"] if blk[part]["n"]]
        score_notes = [n for s in blk["scores"].values() if s["n"] for n in s.get("notes", [])]
        notes += [f"{blk['title']} scores: {n}" for n in dict.fromkeys(score_notes)]
    if notes:
        out += ["", "Notes:"] + [f"  - {n}" for n in notes]
    out += ["", "Judge logs used:"]
    for side in ("a", "b"):
        for task, log in doc["runs"][side]["logs"].items():
            out.append(f"  {side.upper()} {task}: {log}")
    return "\n".join(out) + "\n"


def run_cli(
    path_a: str,
    path_b: str,
    *,
    icc_form: str = "ICC(2,1)",
    fmt: str = "text",
    resamples: int = 1000,
    seed: int = 0,
    out: Any = None,
    err: Any = None,
) -> int:
    """`emo-tasks agreement RUN_A RUN_B`: print the report; exit 0, 2 (no shared scored sample, the same result
    twice, a side mixing judge setups, two benchmarks) or 3 (unreadable input), each refusal or error one line on
    stderr."""
    out = out or sys.stdout
    err = err or sys.stderr

    def say(message: str) -> None:  # one line, whatever a path or an exception message holds
        print("emo-tasks agreement: " + message.replace("\r", "\\r").replace("\n", "\\n"), file=err)

    try:
        if resamples < 1:
            raise InputError(f"--resamples must be at least 1, got {resamples}")
        if not (Path(path_a).is_dir() and Path(path_b).is_dir()):
            bad = path_b if Path(path_a).is_dir() else path_a
            if not Path(bad).exists():
                raise InputError(f"{bad}: no such directory")
            raise InputError(
                f"{bad}: not a run folder; give two judged run folders (judge vs judge) or two JSONL rating "
                "files (judge vs human)"
            )
        runs = [load_run(path_a), load_run(path_b)]
    except InputError as exc:
        say(f"error: {exc}")
        return 3
    if runs[0].folder.resolve() == runs[1].folder.resolve():
        say(
            f"A and B are the same judged result, {runs[0].folder}; nothing to compare "
            "(pass the two judges' folders, e.g. RUN/judged/<A> RUN/judged/<B>)"
        )
        return 2
    ratings = runs[0].ratings
    if runs[1].ratings is not ratings:
        say(f"A holds {ratings.TITLE} judge logs, B {runs[1].ratings.TITLE} ones; nothing to compare")
        return 2
    for side, run in zip("AB", runs, strict=True):
        if len(run.candidates) > 1:
            others = ", ".join(str(c) for c in run.candidates[1:])
            say(f"{side}: {len(run.candidates)} judged results under {run.path}; using the newest, {run.folder} "
                f"(not: {others})")  # fmt: skip
    for side, run in zip("AB", runs, strict=True):
        mixed = mixed_setup_reason(run)
        if mixed:
            say(f"{side}: {mixed}; pass one judged folder per side (RUN/judged/<one>), not one holding several "
                "judges' logs")  # fmt: skip
            return 2
    doc = compare_runs(*runs, icc_form=icc_form, resamples=resamples, seed=seed)
    if doc["same_setup"]:
        setup = describe_setup(doc["runs"]["a"]["setup"], ratings.SETUP_FIELDS)
        say(
            f"warning: A and B record the same judge setup ({setup}): the comparison measures nothing but that "
            "judge's nondeterminism"
        )
    reason = no_overlap_reason(doc)
    if reason:
        say(f"the runs share no sample scored in both: {reason}")
        return 2
    if fmt == "json":
        out.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(render_text(doc, ratings))
    return 0
