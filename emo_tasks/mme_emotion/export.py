"""The MME-Emotion export format, `emo-tasks export RUN_DIR --format mme-official` (the generic part, the command
line, the export folder and provenance.json: `emo_tasks/results/export.py`).

mme-official (FunAudioLLM/MME-Emotion; needs a judged run: `emo_tasks_judge/*_judge.jsonl`)
------------------------------------------------------------------------------------------------
- `responses/<Prefix>_<name>.json`: `[{"video_id": str, "ground_truth": str, "model_response": str}]`, the
  input of `extract_step/<Task>/code/extract_step.py` (it reads `model_response`, `video_id`, and drops
  `label_set`: extract_step.py lines 21, 72-73).
- `extract_step/<Task>/results/<Prefix>_<name>_step.json`: the same list plus `"step": str` (the step agent's raw
  answer; extract_step.py line 49 sets `entry['step']`), the input of `eval_cot_gpt4o.py` (lines 169-181 read
  `video_id`, `ground_truth`, `model_response`, `step`).
- `eval_cot/<Task>/results/<Prefix>_<name>_eval.json`: `[{"video_id": str, "ground_truth": str,
  "model_response": str, "step": str | null, "score": str | null}]` as `eval_cot_gpt4o.py` writes it (lines
  200-213; its `input_tokens`/`output_tokens` are not read by any metric script and are left out).  `score` is the
  judge's raw text; a sample our pipeline counted as a judge failure gets `"score": null`, as the official
  pipeline leaves a failed judge call (`raw_response` None, lines 146-149 and 205), which every `cal_metrics.py`
  skips (`parse_score(str(None))` finds no `<score>` block, line 28-29 / 42-44).  Folder names and file-name
  prefixes are those of `eval_cot/Overall/metrics/cal_metrics.py` lines 88-95 (`OFFICIAL_TASKS`).
- `eval_cot/<Task>/metrics/results/<Prefix>_<name>_metrics.txt` and
  `eval_cot/Overall/metrics/results/Overall_<name>_metrics.txt` (the Overall script's own path is
  `/metrics/results/Overall_<name>_metrics.txt`, line 86): the text `cal_metrics.py` writes (`render_metrics`):
  "Model: <name>", "Alpha: %.1f", "=== Overall Metrics ===", "Total Count: n", "Recognition Score: %.1f",
  "Reasoning Score: %.1f", "CoT Score: %.1f", then "Avg Step: %.1f" plus a "=== Category Metrics ===" block
  (single-label tasks: ER-Wild/metrics/cal_metrics.py lines 65-89, with ER-Wild's category renaming lines
  33-42) or "Avg Steps: %.1f" and no categories (FG-ER, ML-ER: FG-ER/metrics/cal_metrics.py lines 69-78;
  Overall: Overall/metrics/cal_metrics.py lines 62-71).  The numbers are the project's: ratings read by
  `:\\s*(\\d+)/(\\d+)` (n/d, d = 0 -> 0) inside the first one-line `<score>...</score>` (FG-ER/metrics/
  cal_metrics.py lines 6-21, the rule of FG-ER, ML-ER and Overall); recognition = last rating, reasoning = mean
  of the others (0 with one step), steps = number of ratings (lines 23-30).  The six single-label per-task
  scripts read only `: (\\d)/1` (ER-Wild/metrics/cal_metrics.py lines 6-8); where that reads a judge text
  differently (`n_rule_differs` > 0) their per-task output is in `summary.json` (`per_task_script`) and the
  README; with n_rule_differs 0 the unchanged per-task script prints the file byte for byte.
- `judge_failures.json`: `[{"task", "video_id", "row", "status", "failed_stage", "failure_reason",
  "judge_text"}]`, the samples written with `"score": null`.
- `summary.json`: `{"format": "mme-official", "model_name", "tasks": {<Task>: {"lmms_eval_task", "n_samples",
  "n_scored", "n_failed", "n_rule_differs", "metrics_file": {rec_s, rea_s, cot_s, avg_step, count},
  "per_task_script": {...same keys...}, "project": {rec_s, rea_s, cot_s, avg_step}, "matches_project": bool}},
  "overall": {"lmms_eval_task", "metrics_file", "project", "matches_project", "complete"}, "files": [...]}`.
  `n_rule_differs`: scored samples whose judge text the task's official rule reads differently from the ratings
  our pipeline used (`:\\s*(\\d+)/(\\d+)`); 0 with a well-behaved judge.

Beside these files every export folder holds `provenance.json`, `summary.json` and `README.md`
(`emo_tasks/results/export.py`).
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from emo_tasks.results.export import (
    STR_OR_NONE,
    ExportError,
    ExportRefused,
    StrPath,
    export_run,
    finish,
    model_name_for,
    not_judged,
    safe_name,
    staged,
    write_json,
    write_text,
)
from emo_tasks.results.layout import JUDGE_DIR, JUDGE_LOG_SUFFIX

#: What `emo-tasks export --help` says of this format: what RUN_DIR must be, and its own reason to refuse (exit 2).
RUN_DIR_HELP = "judged, for mme-official"
REFUSALS = (
    "the folder holds only another run's MME-Emotion judge logs",
    "a newer MME-Emotion judge log of a task cannot be read while an older one can",
)

#: Official task key -> (result file-name prefix, per-task rating rule); the order of the Overall script's list
#: (eval_cot/Overall/metrics/cal_metrics.py lines 88-95).  "digit": `: (\d)/1`; "fraction": `:\s*(\d+)/(\d+)`.
OFFICIAL_TASKS: dict[str, tuple[str, str]] = {
    "ER-Lab": ("ER_Lab", "digit"),
    "ER-Wild": ("ER_SL_Wild", "digit"),
    "ML-ER": ("ML_ER", "fraction"),
    "FG-ER": ("FG_ER", "fraction"),
    "Noise-ER": ("Noise_ER", "digit"),
    "IR": ("IR", "digit"),
    "SA": ("SA", "digit"),
    "FG-SA": ("FG_SA", "digit"),
}
#: ER-Wild's metric script renames these ground truths before grouping (ER-Wild/metrics/cal_metrics.py 33-42).
ER_WILD_CATEGORIES = {
    "angry": "anger",
    "disgusted": "disgust",
    "happy": "happiness",
    "sad": "sadness",
    "surprised": "surprise",
}

#: Field -> type(s) of every JSON file this format writes (`emo_tasks.results.export.check_schema(record, kind,
#: SCHEMAS)`).
SCHEMAS: dict[str, dict[str, Any]] = {
    "mme_response": {"video_id": str, "ground_truth": str, "model_response": str},
    "mme_step": {"video_id": str, "ground_truth": str, "model_response": str, "step": STR_OR_NONE},
    "mme_eval": {
        "video_id": str,
        "ground_truth": str,
        "model_response": str,
        "step": STR_OR_NONE,
        "score": STR_OR_NONE,
    },
    "mme_failure": {
        "task": str,
        "video_id": str,
        "row": int,
        "status": STR_OR_NONE,
        "failed_stage": STR_OR_NONE,
        "failure_reason": STR_OR_NONE,
        "judge_text": STR_OR_NONE,
    },
    "mme_summary_task": {
        "lmms_eval_task": str,
        "n_samples": int,
        "n_scored": int,
        "n_failed": int,
        "n_rule_differs": int,
        "metrics_file": dict,
        "per_task_script": dict,
        "project": dict,
        "matches_project": bool,
    },
}


_SCORE_BLOCK = re.compile(r"<score>(.*?)</score>")  # no DOTALL: the official scripts' regex
_DIGIT = re.compile(r": (\d)/1")
_FRACTION = re.compile(r":\s*(\d+)/(\d+)")


def official_ratings(text: Any, rule: str) -> list[float] | None:
    """The ratings an official `cal_metrics.py` reads from a `score` value (None: no `<score>` block)."""
    match = _SCORE_BLOCK.search(str(text))
    if not match:
        return None
    if rule == "digit":
        return [float(int(m.group(1))) for m in _DIGIT.finditer(match.group(1))]
    return [0.0 if int(d) == 0 else int(n) / int(d) for n, d in _FRACTION.findall(match.group(1))]


def official_mme_metrics(
    entries: Sequence[Mapping[str, Any]], rule: str, alpha: float, rename: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Our reimplementation of an official `cal_metrics.py` over `_eval.json` entries: totals (fractions, steps)
    and per-category sums, skipping entries without ratings exactly as the scripts do."""

    def empty() -> dict[str, float]:
        return {"acc": 0.0, "reason": 0.0, "step": 0.0, "count": 0}

    total, cats = empty(), {}
    for entry in entries:
        scores = official_ratings(entry.get("score"), rule)
        if not scores:
            continue
        acc = scores[-1]
        reason = sum(scores[:-1]) / len(scores[:-1]) if len(scores) > 1 else 0.0
        cat = str(entry.get("ground_truth"))
        cat = (rename or {}).get(cat, cat)
        for bucket in (total, cats.setdefault(cat, empty())):
            bucket["acc"] += acc
            bucket["reason"] += reason
            bucket["step"] += len(scores)
            bucket["count"] += 1

    def final(b: Mapping[str, float]) -> dict[str, float | int]:
        n = b["count"]
        acc, rea, step = (b["acc"] / n, b["reason"] / n, b["step"] / n) if n else (0.0, 0.0, 0.0)
        return {"count": int(n), "acc": acc, "reason": rea, "cot": alpha * acc + (1 - alpha) * rea, "step": step}

    return {"total": final(total), "categories": {c: final(b) for c, b in sorted(cats.items())}}


def render_metrics(model_name: str, alpha: float, stats: Mapping[str, Any], categories: bool) -> str:
    """The metrics text file exactly as the official scripts write it (layouts in the module docstring)."""
    t = stats["total"]
    out = io.StringIO()
    out.write(f"Model: {model_name}\n")
    out.write(f"Alpha: {alpha:.1f}\n\n")
    out.write("=== Overall Metrics ===\n")
    out.write(f"Total Count: {t['count']}\n")
    out.write(f"Recognition Score: {100 * t['acc']:.1f}\n")
    out.write(f"Reasoning Score: {100 * t['reason']:.1f}\n")
    out.write(f"CoT Score: {100 * t['cot']:.1f}\n")
    if not categories:
        out.write(f"Avg Steps: {t['step']:.1f}\n\n")
        return out.getvalue()
    out.write(f"Avg Step: {t['step']:.1f}\n\n")
    out.write("=== Category Metrics ===\n")
    for cat, c in stats["categories"].items():
        out.write(f"Category: {cat}\n")
        out.write(f"  Recognition Score: {100 * c['acc']:.1f}\n")
        out.write(f"  Reasoning Score: {100 * c['reason']:.1f}\n")
        out.write(f"  CoT Score: {100 * c['cot']:.1f}\n")
        out.write(f"  Avg Step: {c['step']:.1f}\n")
        out.write("-" * 40 + "\n")
    return out.getvalue()


_METRIC_LINE = re.compile(r"^(Total Count|Recognition Score|Reasoning Score|CoT Score|Avg Steps?): (\S+)$")


def read_metrics_text(text: str) -> dict[str, float]:
    """The overall block of an official metrics file: {count, rec_s, rea_s, cot_s, avg_step} (our reader)."""
    keys = {"Total Count": "count", "Recognition Score": "rec_s", "Reasoning Score": "rea_s", "CoT Score": "cot_s"}
    out: dict[str, float] = {}
    for line in text.split("=== Category Metrics ===")[0].splitlines():
        m = _METRIC_LINE.match(line)
        if m:
            out[keys.get(m.group(1), "avg_step")] = float(m.group(2))
    return out


def _pct(stats: Mapping[str, Any]) -> dict[str, float | int]:
    t = stats["total"]
    return {
        "rec_s": round(100 * t["acc"], 1),
        "rea_s": round(100 * t["reason"], 1),
        "cot_s": round(100 * t["cot"], 1),
        "avg_step": round(t["step"], 1),
        "count": t["count"],
    }


def _project(run: Any, task: str) -> dict[str, float | None]:
    """The run's own numbers for a task or group (results.json)."""
    return {k: run.value(task, k) for k in ("rec_s", "rea_s", "cot_s", "avg_step")}


def _matches(official: Mapping[str, Any], project: Mapping[str, Any]) -> bool:
    """Same numbers at the official files' printed precision (one decimal)."""
    return all(project[k] is not None and f"{official[k]:.1f}" == f"{project[k]:.1f}" for k in project)


def _mme_rows(run: Any) -> dict[str, tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """Official key -> (lmms-eval leaf task, its judge-log rows in row order, its summary).  The log of a task is
    the run's own by the rule every command uses (`registry.own_judge_log`): the newest one of the run's
    emo_tasks_judge/ that is this run's.  ExportRefused when the folder holds judge logs of the task and none is
    (or a newer one cannot be read while an older one would be taken, `reader.JudgeLogRefused`); ExportError when
    the only logs that could be the run's cannot be read."""
    from emo_tasks.mme_emotion.registry import TITLES, own_judge_log
    from emo_tasks.results.reader import JudgeLogRefused

    found: dict[str, tuple[str, list[dict[str, Any]], dict[str, Any]]] = {}
    for task in run.results:
        if task not in TITLES:
            continue
        key = TITLES[task]
        try:
            pick = own_judge_log(run.path, run.results_file, task)
        except JudgeLogRefused as exc:
            raise ExportRefused(str(exc)) from exc
        if pick.log is None or pick.content is None:
            if pick.unreadable:
                log, exc = pick.unreadable[0]
                raise ExportError(f"{log}: not a readable MME-Emotion judge log ({exc})") from exc
            if pick.others:
                why_not = "; ".join(f"{log.name}: {reason}" for log, reason in pick.others[:2])
                raise ExportRefused(
                    f"{run.path}: no judge log of {task} is of this run ({run.results_file.name}), they are of "
                    f"another run: {why_not}; export the run they belong to (--run), or judge this run "
                    "(`emo-tasks judge`) and export its judged results"
                )
            continue  # no judge log of the task
        rows = sorted(pick.content, key=lambda r: int(r["row"]))
        if key in found:
            raise ExportError(
                f"{run.path}: both {found[key][0]} and {task} are MME-Emotion {key}; export one run at a time"
            )
        found[key] = (task, rows, pick.summary or {})
    return found


def _rule_differs(row: Mapping[str, Any], rule: str) -> bool:
    ours = [0.0 if int(d) == 0 else int(n) / int(d) for n, d in row.get("ratings") or []]
    return official_ratings(row.get("judge_text"), rule) != ours


def export_mme_official(
    run_dir: StrPath, out_dir: StrPath, model_name: str | None = None, *, pick: str | None = None, force: bool = False
) -> Path:
    """The official MME-Emotion tree of a judged run (formats in the module docstring); returns `out_dir`.
    `pick`: the results file to use when RUN_DIR holds several (--run); `force`: replace an earlier export."""
    from emo_tasks.mme_emotion.registry import GROUPS, TITLES

    run = export_run(run_dir, pick)
    mme_tasks = [t for t in run.results if t in TITLES]
    if not mme_tasks:
        raise ExportError(f"{run_dir}: no MME-Emotion task in {run.results_file.name}")
    found = _mme_rows(run)
    if not found:
        raise not_judged(run_dir, f"no MME-Emotion judge log, {JUDGE_DIR}/*{JUDGE_LOG_SUFFIX}, for its tasks")
    modes = {key: s.get("judge_mode") for key, (_t, _r, s) in found.items()}
    if not any(r.get("status") == "scored" for _t, rows, _s in found.values() for r in rows):
        if all(r.get("status") == "offline" for _t, rows, _s in found.values() for r in rows):
            raise not_judged(run_dir, f"no sample was scored by a judge: judge mode {modes}")
        raise ExportError(f"{run_dir}: no sample was scored by a judge (judge mode {modes}); nothing to submit")
    name = model_name_for(run, model_name)
    stem = safe_name(name)
    alphas = {float(s.get("alpha", 0.5)) for _t, _r, s in found.values()}
    if len(alphas) != 1:
        raise ExportError(f"{run_dir}: the tasks were judged with different alphas {sorted(alphas)}")
    alpha = alphas.pop()
    with staged(out_dir, force) as out:
        _write_mme(out, run, name, stem, alpha, found, GROUPS)
    return Path(out_dir)


def _write_mme(out: Path, run: Any, name: str, stem: str, alpha: float, found: Mapping[str, Any], groups: Any) -> None:
    """Write the MME-Emotion tree into `out` (the staging folder)."""
    files: list[str] = []
    failures: list[dict[str, Any]] = []
    tasks: dict[str, Any] = {}
    pooled: list[dict[str, Any]] = []
    for key, (prefix, rule) in OFFICIAL_TASKS.items():
        if key not in found:
            continue
        task, rows, _summary = found[key]
        responses = [
            {"video_id": r["video_id"], "ground_truth": r["label"], "model_response": r["answer"]} for r in rows
        ]
        steps = [{**resp, "step": r.get("step_text")} for resp, r in zip(responses, rows, strict=True)]
        entries = []
        n_differs = 0
        for step, r in zip(steps, rows, strict=True):
            scored = r.get("status") == "scored"
            entries.append({**step, "score": r.get("judge_text") if scored else None})
            if scored:
                n_differs += _rule_differs(r, rule)
            else:
                failures.append(
                    {
                        "task": key,
                        "video_id": r["video_id"],
                        "row": int(r["row"]),
                        "status": r.get("status"),
                        "failed_stage": r.get("failed_stage"),
                        "failure_reason": r.get("failure_reason"),
                        "judge_text": r.get("judge_text"),
                    }
                )
        pooled.extend(entries)
        written = {
            out / "responses" / f"{prefix}_{stem}.json": responses,
            out / "extract_step" / key / "results" / f"{prefix}_{stem}_step.json": steps,
            out / "eval_cot" / key / "results" / f"{prefix}_{stem}_eval.json": entries,
        }
        for path, data in written.items():
            files.append(write_json(path, data).relative_to(out).as_posix())
        rename = ER_WILD_CATEGORIES if key == "ER-Wild" else None
        stats = official_mme_metrics(entries, "fraction", alpha, rename)  # the project's rule: its numbers
        script = official_mme_metrics(entries, rule, alpha, rename)  # what the unchanged per-task script prints
        metrics_file = out / "eval_cot" / key / "metrics" / "results" / f"{prefix}_{stem}_metrics.txt"
        write_text(metrics_file, render_metrics(name, alpha, stats, categories=rule == "digit"))
        files.append(metrics_file.relative_to(out).as_posix())
        official, project = _pct(stats), _project(run, task)
        tasks[key] = {
            "lmms_eval_task": task,
            "n_samples": len(rows),
            "n_scored": sum(r.get("status") == "scored" for r in rows),
            "n_failed": sum(r.get("status") != "scored" for r in rows),
            "n_rule_differs": n_differs,
            "metrics_file": official,
            "per_task_script": _pct(script),
            "project": project,
            "matches_project": _matches(official, project),
        }
    overall_stats = official_mme_metrics(pooled, "fraction", alpha)
    overall_file = out / "eval_cot" / "Overall" / "metrics" / "results" / f"Overall_{stem}_metrics.txt"
    write_text(overall_file, render_metrics(name, alpha, overall_stats, categories=False))
    files.append(overall_file.relative_to(out).as_posix())
    group = next((g for g in groups if g in run.results), None)
    overall_project = _project(run, group) if group else None
    overall = {
        "lmms_eval_task": group,
        "metrics_file": _pct(overall_stats),
        "project": overall_project,
        "matches_project": bool(overall_project) and _matches(_pct(overall_stats), overall_project),
        "complete": len(tasks) == len(OFFICIAL_TASKS),
    }
    files.append(write_json(out / "judge_failures.json", failures).relative_to(out).as_posix())
    summary = {"format": "mme-official", "model_name": name, "alpha": alpha, "tasks": tasks, "overall": overall}
    leaf = [t for t, _r, _s in found.values()]
    finish(out, run, "mme-official", name, leaf, summary, files, _mme_readme(name, summary, len(failures)))


def _f(x: Any) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _mme_readme(name: str, summary: Mapping[str, Any], n_failures: int) -> str:
    lines = [
        f"# MME-Emotion submission: {name}",
        "",
        "Files in the shapes of the official scripts (github.com/FunAudioLLM/MME-Emotion): per task",
        "`eval_cot/<Task>/results/<Prefix>_<name>_eval.json` (input of `eval_cot/<Task>/metrics/cal_metrics.py`),",
        "the earlier stages (`responses/`, `extract_step/<Task>/results/`), and per task and Overall the metrics text",
        "those scripts write (`eval_cot/*/metrics/results/*_metrics.txt`), computed by our reimplementation of them.",
        f"Alpha {summary['alpha']:.1f}. Provenance (model, versions, data hashes, judge models, prompt hashes):",
        "`provenance.json`.",
        "",
        "| Task | n | scored | judge failures | n_rule_differs | Rec-S | Rea-S | CoT-S | Avg Step "
        "| project (Rec/Rea/CoT/Step) | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, t in summary["tasks"].items():
        o, p = t["metrics_file"], t["project"]
        lines.append(
            f"| {key} | {t['n_samples']} | {t['n_scored']} | {t['n_failed']} | {t['n_rule_differs']} "
            f"| {_f(o['rec_s'])} | {_f(o['rea_s'])} | {_f(o['cot_s'])} | {_f(o['avg_step'])} "
            f"| {_f(p['rec_s'])}/{_f(p['rea_s'])}/"
            f"{_f(p['cot_s'])}/{_f(p['avg_step'])} | {'yes' if t['matches_project'] else 'NO'} |"
        )
    o, p = summary["overall"]["metrics_file"], summary["overall"]["project"] or {}
    lines.append(
        f"| Overall | | | {n_failures} | | {_f(o['rec_s'])} | {_f(o['rea_s'])} | {_f(o['cot_s'])} | "
        f"{_f(o['avg_step'])} | {_f(p.get('rec_s'))}/{_f(p.get('rea_s'))}/{_f(p.get('cot_s'))}/"
        f"{_f(p.get('avg_step'))} | {'yes' if summary['overall']['matches_project'] else 'NO'} |"
    )
    differs = {k: t["n_rule_differs"] for k, t in summary["tasks"].items() if t["n_rule_differs"]}
    lines += [
        "",
        "## Rule differences",
        "",
        "The official per-task scripts of the six single-label tasks read only `: d/1` ratings; FG-ER, ML-ER and",
        "Overall (and this project) read `:\\s*n/d`. `n_rule_differs` counts the scored samples whose judge text",
        "the task's official rule reads differently from the ratings the project used.",
        (
            "All counts are 0: the official per-task scripts, run unchanged on the `_eval.json` files, print the"
            " numbers above."
            if not differs
            else "Non-zero: "
            + ", ".join(f"{k} {n}" for k, n in differs.items())
            + ". The metrics files state the project's numbers (the `:\\s*n/d` rule, as FG-ER, ML-ER and Overall);"
            " the official per-task script of these tasks would print: "
            + "; ".join(
                f"{k} Rec {_f(t['per_task_script']['rec_s'])} / Rea {_f(t['per_task_script']['rea_s'])} / CoT "
                f"{_f(t['per_task_script']['cot_s'])} / Step {_f(t['per_task_script']['avg_step'])} "
                f"(count {t['per_task_script']['count']})"
                for k, t in summary["tasks"].items()
                if t["n_rule_differs"]
            )
            + " (`summary.json` `per_task_script`)."
        ),
        "",
        "## Judge failures",
        "",
        f'{n_failures} sample(s) our pipeline counted as judge failures are written with `"score": null`, as the',
        "official pipeline leaves a failed judge call, so the official scripts skip them too; they are listed in",
        "`judge_failures.json`.",
        "",
        "## Submitting to a leaderboard",
        "",
        "MME-Emotion takes results by e-mail (fzhang@link.cuhk.edu.hk, per the official README). Send this folder",
        "(zipped). The maintainers can re-score it unchanged:",
        "",
        "```",
        "python eval_cot/<Task>/metrics/cal_metrics.py \\",
        "    --input_json eval_cot/<Task>/results/<Prefix>_<name>_eval.json \\",
        f"    --output_txt <Task>_metrics.txt --model_name {name} --alpha {summary['alpha']:.1f}",
        "```",
        "",
        "and compare with the metrics files here; `provenance.json` says how the run was made.",
    ]
    return "\n".join(lines) + "\n"
