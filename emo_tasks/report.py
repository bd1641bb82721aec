"""Read lmms-eval output folders back: paper-style tables with bootstrap CIs, leaderboard JSON, plots, and the
paired regression gate behind `emo-tasks compare`.

Why a separate reader: lmms-eval's results.json only holds the aggregate numbers; their uncertainty and any paired
comparison need the per-sample values, which live in lmms-eval's sample logs (`--log_samples`) and in our own
judge logs (`<output_path>/emo_tasks_judge/`).  Everything here is files in, files out, no network.

Per-sample values (the unit every CI and paired test resamples):
- MME-Emotion (key: task, row), from `emo_tasks_judge/[sample_]<task>_<stamp>_judge.jsonl`:
  rec_s = 100*recognition (status scored or offline), rea_s = 100*reasoning (scored), cot_s = alpha*rec +
  (1-alpha)*rea (scored), rec_s_strict = 100*strict_recognition, avg_step = n_steps (scored), avg_token = o200k
  tokens of the answer.  The group (`mme_emotion_all` / `mme_emotion_sample`) pools its tasks' samples.
- MVEI (key: pair_id), from `<date>_samples_<task>.jsonl`: acc_* = 100*right, positive_ratio = 100*(final ==
  correct), give_up_ratio = 100*(final == give_up).
- MultiEmo (key: image_id), from `<date>_samples_<task>.jsonl`: each image's 8 records regrouped and scored alone
  with `multiemo.scoring.score_images` (precisions x100, the 8 distribution metrics; undefined values skipped).

Leaderboard JSON (`emo-tasks report --format json`), schema "emo-tasks/leaderboard/1":

    {"schema": "emo-tasks/leaderboard/1",
     "generated_by": "emo-tasks <version>",
     "runs": [{
        "label": str,                 # model + model_args, or the folder name when that is ambiguous
        "run_dir": str,
        "model": str | null, "model_args": str | null,
        "emo_tasks_version": str,     # the emo-tasks that wrote the report (runs do not record theirs)
        "lmms_eval_version": str | null, "date": str | null,
        "data_source": {task: "benchmark" | "sample"},
        "judge_models": {task: {role: model}} | null,    # MME-Emotion judge summaries; null offline
        "judge_protocol": {task: str | null},
        "prompt_hashes": {task: {name: sha256[:16]}},
        "sample_counts": {task: int},                     # lmms-eval's n-samples (effective)
        "judge_failures": {task: {"<stage>:<reason>": count}},
        "metrics": {task: {metric: {"value": float | null,   # results.json's number
                                    "ci_low": float | null, "ci_high": float | null,  # 95 % percentile bootstrap
                                    "n": int | null}}},       # per-sample values behind the CI
        "notes": [str]}]}             # what is missing and how to get it

A value of null means the run did not produce the metric (see notes); ci_* are null without per-sample files.
Version 1 is additive-only: new keys may appear, existing keys keep their meaning.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.multiemo.scoring import DISTRIBUTION_METRICS
from emo_tasks.multiemo.scoring import LOWER_IS_BETTER as MULTIEMO_LOWER_IS_BETTER
from emo_tasks.mvei.scoring import DIMENSIONS as MVEI_DIMENSIONS

SCHEMA = "emo-tasks/leaderboard/1"

MME_METRICS = ("avg_step", "avg_token", "rec_s", "rea_s", "cot_s")
MME_TITLES = {"avg_step": "Avg Step", "avg_token": "Avg Token", "rec_s": "Rec-S", "rea_s": "Rea-S", "cot_s": "CoT-S"}
MVEI_METRICS = tuple("acc_" + d.replace(" ", "_") for d in MVEI_DIMENSIONS) + (
    "acc_total",
    "positive_ratio",
    "give_up_ratio",
)
MULTIEMO_METRICS = ("precision_ours", "precision_original", "precision_single", *DISTRIBUTION_METRICS)
#: Metrics where a rise is a regression (everything else: higher is better).
LOWER_IS_BETTER = frozenset({m for m, lower in MULTIEMO_LOWER_IS_BETTER.items() if lower} | {"give_up_ratio"})
#: Metrics on a 0-100 scale whose per-sample values are 0/100 outcomes: McNemar applies to value/100.
PERCENT_METRICS = frozenset({"rec_s", "rea_s", "cot_s", "rec_s_strict", *MVEI_METRICS, *MULTIEMO_METRICS[:3]})
#: What `compare` tests when no --metric is given: quality scores at benchmark level.
COMPARE_DEFAULT = {
    "mme": ("rec_s", "rea_s", "cot_s"),
    "mvei": ("acc_total",),
    "multiemo": MULTIEMO_METRICS,
}
BENCHMARKS = {"mme": "MME-Emotion", "mvei": "MVEI", "multiemo": "MultiEmo-Bench"}
MME_GROUPS = ("mme_emotion_all", "mme_emotion_sample")
#: Task-config fields that change what the model is asked (a difference means the prompts differ).
PROMPT_FIELDS = ("doc_to_text", "doc_to_messages", "lmms_eval_specific_kwargs", "description", "num_fewshot")


class ReportError(Exception):
    """A run folder that cannot be read at all (no results.json)."""


# ------------------------------------------------------------------------------------------------ loading
@dataclass
class Run:
    """One lmms-eval output folder: aggregate results plus whatever per-sample values could be found."""

    path: Path
    results_file: Path
    data: dict[str, Any]
    label: str = ""
    #: task -> metric -> {sample key: value}
    samples: dict[str, dict[str, dict[Any, float]]] = field(default_factory=dict)
    #: task -> MME judge summary
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        return self.data.get("results") or {}

    @property
    def configs(self) -> dict[str, dict[str, Any]]:
        return self.data.get("configs") or {}

    @property
    def model(self) -> str | None:
        return (self.data.get("config") or {}).get("model")

    @property
    def model_args(self) -> str | None:
        return (self.data.get("config") or {}).get("model_args")

    def value(self, task: str, metric: str) -> float | None:
        """results.json's number (None when absent, null or not a number)."""
        v = self.results.get(task, {}).get(f"{metric},none")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
            return None
        return float(v)

    def has(self, task: str, metric: str) -> bool:
        return f"{metric},none" in self.results.get(task, {})


def benchmark_of(task: str) -> str | None:
    """'mme' / 'mvei' / 'multiemo' for one of our task or group names, else None."""
    if task.startswith("mme_emotion"):
        return "mme"
    if task in ("mvei", "mvei_sample"):
        return "mvei"
    if task in ("multiemo", "multiemo_sample"):
        return "multiemo"
    return None


def find_results(run_dir: Path) -> Path:
    """The newest `<date>_results.json` under run_dir (lmms-eval nests it in a model folder)."""
    if run_dir.is_file():
        return run_dir
    found = sorted(run_dir.rglob("*results.json"), key=lambda p: (p.name, str(p)))
    if not found:
        raise ReportError(f"{run_dir}: no *_results.json found (was lmms-eval run with --output_path {run_dir}?)")
    return found[-1]


def load_run(run_dir: str | Path) -> Run:
    """Read one run folder; missing per-sample files become notes, never errors."""
    path = Path(run_dir)
    if not path.exists():
        raise ReportError(f"{path}: no such run folder")
    results_file = find_results(path)
    try:
        data = json.loads(results_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{results_file}: not readable JSON ({exc})") from exc
    run = Run(path=path if path.is_dir() else path.parent, results_file=results_file, data=data)
    tasks = set(run.results)
    if any(benchmark_of(t) == "mme" for t in tasks):
        _load_mme(run)
    for task in sorted(tasks):
        bench = benchmark_of(task)
        if bench in ("mvei", "multiemo"):
            _load_lmms_samples(run, task, bench)
    return run


def _sample_log(run: Run, task: str) -> Path | None:
    """`<date>_samples_<task>.jsonl` next to results.json (same date preferred), else anywhere in the run."""
    stem = run.results_file.name[: -len("results.json")]
    same = run.results_file.parent / f"{stem}samples_{task}.jsonl"
    if same.exists():
        return same
    found = sorted(run.path.rglob(f"*_samples_{task}.jsonl"))
    return found[-1] if found else None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def _load_lmms_samples(run: Run, task: str, bench: str) -> None:
    log = _sample_log(run, task)
    if log is None:
        run.notes.append(
            f"{task}: no per-sample log (*_samples_{task}.jsonl), so no confidence intervals; rerun lmms-eval with "
            "--log_samples --output_path DIR to get them"
        )
        return
    try:
        rows = _read_jsonl(log)
        values = _mvei_values(rows) if bench == "mvei" else _multiemo_values(rows)
    except Exception as exc:  # noqa: BLE001 - a bad or unmatched log costs the CIs, not the report
        run.notes.append(f"{task}: could not read per-sample values from {log.name} ({exc!r}); no CIs")
        return
    run.samples[task] = values


def _mvei_values(rows: Sequence[dict[str, Any]]) -> dict[str, dict[Any, float]]:
    out: dict[str, dict[Any, float]] = {m: {} for m in MVEI_METRICS}
    for line in rows:
        rec = line["acc_total"]
        key = rec["pair_id"]
        right = 100.0 if rec["right"] else 0.0
        out["acc_total"][key] = right
        out["acc_" + rec["dimension"].replace(" ", "_")][key] = right
        out["positive_ratio"][key] = 100.0 if rec["final"] == "correct" else 0.0
        out["give_up_ratio"][key] = 100.0 if rec["final"] == "give_up" else 0.0
    return {m: v for m, v in out.items() if v}


def _multiemo_values(rows: Sequence[dict[str, Any]]) -> dict[str, dict[Any, float]]:
    from emo_tasks.multiemo import scoring

    images: dict[str, dict[str, Any]] = {}
    reference: dict[str, dict[str, Any]] | None = None
    for line in rows:
        rec = line["precision_ours"]
        doc = line.get("doc")
        if not doc or "votes" not in doc:  # lmms-eval 0.7.3 drops `doc` from the sample log: read the data file
            if reference is None:
                reference = _multiemo_reference(rec.get("data_source", "benchmark"))
            doc = reference[rec["image_id"]]
        img = images.setdefault(rec["image_id"], {"doc": doc, "scores": {}})
        img["scores"][rec["emotion"]] = rec["predicted_score"]
    out: dict[str, dict[Any, float]] = {m: {} for m in MULTIEMO_METRICS}
    for image_id, img in images.items():
        doc = img["doc"]
        result = scoring.ImageResult(
            image_id=image_id,
            votes=tuple(doc["votes"]),
            n_annotators=doc["n_annotators"],
            original_label=doc["original_label"],
            scores=tuple(img["scores"].get(e) for e in scoring.EMOTIONS),
        )
        per_image = scoring.score_images([result])
        for m in MULTIEMO_METRICS:
            v = per_image.get(m)
            if v is not None:
                out[m][image_id] = float(v)
    return out


def _multiemo_reference(source: str) -> dict[str, dict[str, Any]]:
    """image_id -> votes row from the data the run used (the bundled sample, or the configured benchmark file)."""
    from emo_tasks.multiemo.data import data_file, load_images

    if source == "sample":
        from emo_tasks.multiemo.sample import sample_file

        path = sample_file()
    else:
        path = data_file()
    return {img["image_id"]: img for img in load_images(path)}


_JUDGE_FILE = re.compile(r"^(?P<sample>sample_)?(?P<tasks>mme_emotion_.+?)_(?P<stamp>\d{8}T\d{6})_judge\.jsonl$")


def _load_mme(run: Run) -> None:
    """Per-sample MME-Emotion values from our judge logs (the newest log per task wins)."""
    folder = run.path / "emo_tasks_judge"
    logs = sorted(folder.glob("*_judge.jsonl")) if folder.is_dir() else []
    newest: dict[str, Path] = {}
    for log in logs:
        m = _JUDGE_FILE.match(log.name)
        if not m:
            continue
        for t in m.group("tasks").split("+"):
            name = t.replace("mme_emotion_", "mme_emotion_sample_", 1) if m.group("sample") else t
            if name not in newest or log.name > newest[name].name:
                newest[name] = log
    tasks = [t for t in run.results if benchmark_of(t) == "mme" and t not in MME_GROUPS]
    for task in sorted(tasks):
        log = newest.get(task)
        if log is None:
            run.notes.append(
                f"{task}: no MME-Emotion judge log (emo_tasks_judge/*{task.replace('_sample', '')}*_judge.jsonl), "
                "so no confidence intervals; rerun lmms-eval with --output_path DIR (the judge writes it there)"
            )
            continue
        summary_file = log.with_name(log.name[: -len("_judge.jsonl")] + "_summary.json")
        summary: dict[str, Any] = {}
        if summary_file.exists():
            try:
                summary = json.loads(summary_file.read_text(encoding="utf-8"))
            except ValueError:
                run.notes.append(f"{task}: {summary_file.name} is not valid JSON")
        run.summaries[task] = summary
        try:
            rows = _read_jsonl(log)
        except (OSError, ValueError) as exc:
            run.notes.append(f"{task}: could not read {log.name} ({exc}); no CIs")
            continue
        from emo_tasks.mme_emotion.protocol import spec_for

        base = task.replace("mme_emotion_sample_", "mme_emotion_", 1)
        mine = [r for r in rows if spec_for(r["task"]).task == base]
        run.samples[task] = _mme_values(mine, task, float(summary.get("alpha", 0.5)), run)


def _mme_values(rows: Sequence[dict[str, Any]], task: str, alpha: float, run: Run) -> dict[str, dict[Any, float]]:
    out: dict[str, dict[Any, float]] = {m: {} for m in ("rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step")}
    for r in rows:
        key = (task, int(r["row"]))
        status = r.get("status")
        if status in ("scored", "offline") and r.get("recognition") is not None:
            out["rec_s"][key] = 100.0 * r["recognition"]
            if r.get("strict_recognition") is not None:
                out["rec_s_strict"][key] = 100.0 * r["strict_recognition"]
        if status == "scored" and r.get("recognition") is not None:
            rea = 100.0 * (r.get("reasoning") or 0.0)
            out["rea_s"][key] = rea
            out["cot_s"][key] = alpha * out["rec_s"][key] + (1 - alpha) * rea
            out["avg_step"][key] = float(r.get("n_steps") or 0)
    try:
        from emo_tasks.tokens import count_tokens

        counts = count_tokens([r.get("answer") or "" for r in rows])
        out["avg_token"] = {(task, int(r["row"])): float(c) for r, c in zip(rows, counts, strict=True)}
    except Exception as exc:  # noqa: BLE001 - a missing tokenizer must not stop the report
        run.notes.append(f"{task}: avg_token per sample not available ({exc})")
    return {m: v for m, v in out.items() if v}


def group_samples(run: Run, group: str) -> dict[str, dict[Any, float]]:
    """A group's per-sample values: its tasks' samples pooled (keys carry the task, so they do not collide)."""
    sample = group == "mme_emotion_sample"
    pooled: dict[str, dict[Any, float]] = {}
    for task, metrics in run.samples.items():
        if benchmark_of(task) != "mme" or task in MME_GROUPS or task.startswith("mme_emotion_sample_") != sample:
            continue
        for m, vals in metrics.items():
            pooled.setdefault(m, {}).update(vals)
    return pooled


def label_runs(runs: Sequence[Run]) -> None:
    """model + model_args; the folder name when two runs would share a label (or nothing identifies the model)."""
    base = [f"{r.model or '?'}" + (f" ({r.model_args})" if r.model_args else "") for r in runs]
    for run, label in zip(runs, base, strict=True):
        ambiguous = base.count(label) > 1 or run.model is None
        run.label = run.path.name if ambiguous else label
    names = [r.label for r in runs]
    for i, run in enumerate(runs):
        if names.count(run.label) > 1:
            run.label = f"{run.label} [{i + 1}]"


def samples_for(run: Run, task: str) -> dict[str, dict[Any, float]]:
    if task in MME_GROUPS:
        return group_samples(run, task)
    return run.samples.get(task, {})


# ------------------------------------------------------------------------------------------------ cells
@dataclass
class Cell:
    """One reported number: results.json's value with a bootstrap CI from the per-sample values."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None

    def text(self, digits: int = 2) -> str:
        if self.value is None:
            return "n/a"
        s = f"{self.value:.{digits}f}"
        if self.ci_low is not None and self.ci_high is not None:
            s += f" [{self.ci_low:.{digits}f}, {self.ci_high:.{digits}f}]"
        return s

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


def cell(run: Run, task: str, metric: str, resamples: int, seed: int) -> Cell:
    """results.json's value and, when per-sample values exist, their 95 % percentile-bootstrap CI."""
    from emo_tasks import stats

    value = run.value(task, metric)
    c = Cell(value)
    if value is None:
        return c
    vals = samples_for(run, task).get(metric)
    if vals:
        ci = stats.bootstrap_ci(list(vals.values()), n_resamples=resamples, seed=seed)
        c.ci_low, c.ci_high, c.n = ci.low, ci.high, ci.n
    return c


# ------------------------------------------------------------------------------------------------ report
@dataclass
class Table:
    """One rendered table: a title, column names, rows of (label, cells) and rows' identity for CSV."""

    benchmark: str
    title: str
    columns: list[str]
    rows: list[tuple[str, list[Cell]]]
    #: per column: (task, metric) per row index -> used by CSV/JSON
    keys: list[list[tuple[str, str] | None]]


def _mme_columns(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """(column name, task-suffix) in the paper's order; suffix '' is the overall group."""
    from emo_tasks.mme_emotion.protocol import task_specs

    present = set()
    for run in runs:
        present.update(t for t in run.results if benchmark_of(t) == "mme")
    cols = []
    for spec in task_specs().values():
        suffix = spec.task[len("mme_emotion_") :]
        if f"mme_emotion_{suffix}" in present or f"mme_emotion_sample_{suffix}" in present:
            cols.append((spec.key, suffix))
    cols.append(("Overall", ""))
    return cols


def _mme_task(run: Run, suffix: str) -> str | None:
    """The run's task name for an MME column (benchmark or sample flavour), None if the run lacks it."""
    names = (
        ["mme_emotion_all", "mme_emotion_sample"]
        if not suffix
        else [f"mme_emotion_{suffix}", f"mme_emotion_sample_{suffix}"]
    )
    for name in names:
        if name in run.results:
            return name
    return None


def build_tables(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> list[Table]:
    """Every benchmark table (MME-Emotion: one table per metric, tasks as columns; MVEI; MultiEmo)."""
    tables: list[Table] = []
    present = {benchmark_of(t) for r in runs for t in r.results}
    if "mme" in present:
        cols = _mme_columns(runs)
        for metric in MME_METRICS:
            rows, keys = [], []
            for run in runs:
                cells, row_keys = [], []
                for _name, suffix in cols:
                    task = _mme_task(run, suffix)
                    if task is None:
                        cells.append(Cell(None))
                        row_keys.append(None)
                    else:
                        cells.append(cell(run, task, metric, resamples, seed))
                        row_keys.append((task, metric))
                rows.append((run.label, cells))
                keys.append(row_keys)
            tables.append(Table("mme", f"MME-Emotion — {MME_TITLES[metric]}", [c for c, _ in cols], rows, keys))
    for bench, metrics, tasks in (
        ("mvei", MVEI_METRICS, ("mvei", "mvei_sample")),
        ("multiemo", MULTIEMO_METRICS, ("multiemo", "multiemo_sample")),
    ):
        if bench not in present:
            continue
        rows, keys = [], []
        for run in runs:
            task = next((t for t in tasks if t in run.results), None)
            rows.append(
                (run.label, [Cell(None) if task is None else cell(run, task, m, resamples, seed) for m in metrics])
            )
            keys.append([None if task is None else (task, m) for m in metrics])
        tables.append(Table(bench, BENCHMARKS[bench], list(metrics), rows, keys))
    return tables


def missing_notes(runs: Sequence[Run]) -> list[str]:
    """What is absent, one line per (run, problem), tasks sharing a problem listed together; plus loader notes."""
    present = {benchmark_of(t) for r in runs for t in r.results} - {None}
    expected = {"mme": MME_METRICS, "mvei": MVEI_METRICS, "multiemo": MULTIEMO_METRICS}
    lines = []
    for run in runs:
        mine = {benchmark_of(t) for t in run.results}
        for bench in sorted(present):
            if bench not in mine:
                lines.append(f"{run.label}: no {BENCHMARKS[bench]} results in {run.results_file}")
                continue
            problems: dict[str, list[str]] = {}
            for task in sorted(t for t in run.results if benchmark_of(t) == bench):
                for m in expected[bench]:
                    if not run.has(task, m):
                        problems.setdefault(f"no {m} in {run.results_file.name}", []).append(task)
                    elif run.value(task, m) is None:
                        why = " (offline judge mode: no reasoning score)" if m in ("rea_s", "cot_s", "avg_step") else ""
                        problems.setdefault(f"{m} is null in {run.results_file.name}{why}", []).append(task)
            for problem, tasks in problems.items():
                lines.append(f"{run.label}: {', '.join(tasks)}: {problem}")
        lines.extend(f"{run.label}: {n}" for n in run.notes)
    return lines


def render_markdown(runs: Sequence[Run], tables: Sequence[Table]) -> str:
    out = ["# emo-tasks report", ""]
    out.append("Values are lmms-eval's; brackets: 95 % percentile-bootstrap CI over per-sample values.")
    out.append("")
    for t in tables:
        out.append(f"## {t.title}")
        out.append("")
        out.append("| Run | " + " | ".join(t.columns) + " |")
        out.append("|---|" + "---|" * len(t.columns))
        digits = 4 if t.benchmark == "multiemo" else 2
        for label, cells in t.rows:
            shown = [c.text(digits if t.benchmark != "multiemo" or i >= 3 else 2) for i, c in enumerate(cells)]
            out.append(f"| {label.replace('|', '/')} | " + " | ".join(shown) + " |")
        out.append("")
    notes = missing_notes(runs)
    if notes:
        out.append("## Missing")
        out.append("")
        out.extend(f"- {n}" for n in notes)
        out.append("")
    out.append("## Runs")
    out.append("")
    for run in runs:
        out.append(f"- {run.label}: {run.results_file}")
    return "\n".join(out) + "\n"


def metric_rows(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One record per (run, benchmark, task, metric): what the CSV and the JSON `metrics` hold."""
    records = []
    for run in runs:
        for task in sorted(run.results):
            bench = benchmark_of(task)
            if bench is None:
                continue
            metrics = {"mme": MME_METRICS + ("rec_s_strict",), "mvei": MVEI_METRICS, "multiemo": MULTIEMO_METRICS}
            for m in metrics[bench]:
                if not run.has(task, m):
                    continue
                c = cell(run, task, m, resamples, seed)
                records.append(
                    {"run": run.label, "benchmark": BENCHMARKS[bench], "task": task, "metric": m, **c.as_dict()}
                )
    return records


def render_csv(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=["run", "benchmark", "task", "metric", "value", "ci_low", "ci_high", "n"], lineterminator="\n"
    )
    writer.writeheader()
    for rec in metric_rows(runs, resamples, seed):
        writer.writerow({k: ("" if v is None else v) for k, v in rec.items()})
    return buf.getvalue()


def _by_task(run: Run, key: str) -> dict[str, Any]:
    return {task: s.get(key) for task, s in sorted(run.summaries.items())}


def leaderboard(runs: Sequence[Run], resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """The versioned submission document (schema in the module docstring)."""
    from emo_tasks import __version__

    out_runs = []
    records = metric_rows(runs, resamples, seed)
    for run in runs:
        metrics: dict[str, dict[str, Any]] = {}
        for rec in records:
            if rec["run"] == run.label:
                metrics.setdefault(rec["task"], {})[rec["metric"]] = {
                    k: rec[k] for k in ("value", "ci_low", "ci_high", "n")
                }
        data_source = {}
        for task, cfg in sorted(run.configs.items()):
            name = str(cfg.get("dataset_name") or "")
            if benchmark_of(task):
                data_source[task] = "sample" if "/sample" in name else "benchmark"
        judge_models = _by_task(run, "judge_models")
        counts = {
            t: (v.get("effective") if isinstance(v, dict) else v)
            for t, v in sorted((run.data.get("n-samples") or {}).items())
        }
        out_runs.append(
            {
                "label": run.label,
                "run_dir": str(run.path),
                "model": run.model,
                "model_args": run.model_args,
                "emo_tasks_version": __version__,
                "lmms_eval_version": run.data.get("lmms_eval_version"),
                "date": run.data.get("date"),
                "data_source": data_source,
                "judge_models": judge_models if any(judge_models.values()) else None,
                "judge_protocol": _by_task(run, "judge_protocol"),
                "prompt_hashes": _by_task(run, "prompt_hashes"),
                "sample_counts": counts,
                "judge_failures": _by_task(run, "judge_failures"),
                "metrics": metrics,
                "notes": [n.split(": ", 1)[1] for n in missing_notes([run])],
            }
        )
    return {"schema": SCHEMA, "generated_by": f"emo-tasks {__version__}", "runs": out_runs}


def plot(runs: Sequence[Run], path: str | Path, resamples: int = 1000, seed: int = 0) -> None:
    """One PNG, one panel per benchmark present: grouped bars (metric x run) with CI error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = []
    present = {benchmark_of(t) for r in runs for t in r.results}
    if "mme" in present:
        panels.append(("MME-Emotion (overall)", ("rec_s", "rea_s", "cot_s"), MME_GROUPS, "score (0-100)"))
    if "mvei" in present:
        panels.append(("MVEI", MVEI_METRICS[:5], ("mvei", "mvei_sample"), "accuracy (%)"))
    if "multiemo" in present:
        panels.append(("MultiEmo-Bench", MULTIEMO_METRICS[:3], ("multiemo", "multiemo_sample"), "precision (%)"))
    if not panels:
        panels.append(("no emo-tasks results", (), (), ""))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    width = 0.8 / max(1, len(runs))
    for ax, (title, metrics, tasks, ylabel) in zip(axes[0], panels, strict=True):
        x = np.arange(len(metrics))
        for i, run in enumerate(runs):
            task = next((t for t in tasks if t in run.results), None)
            cells = [cell(run, task, m, resamples, seed) if task else Cell(None) for m in metrics]
            heights = [c.value if c.value is not None else 0.0 for c in cells]
            err = np.array(
                [
                    [
                        max(0.0, c.value - c.ci_low) if c.ci_low is not None and c.value is not None else 0.0
                        for c in cells
                    ],
                    [
                        max(0.0, c.ci_high - c.value) if c.ci_high is not None and c.value is not None else 0.0
                        for c in cells
                    ],
                ]
            )
            positions = x + (i - (len(runs) - 1) / 2) * width
            ax.bar(positions, heights, width, yerr=err, capsize=3, label=run.label)
            for pos, c in zip(positions, cells, strict=True):
                if c.value is None:  # not available: say so instead of drawing a zero
                    ax.text(pos, 1, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_title(title)
        ax.set_xticks(x)
        ax.set_xticklabels(
            [MME_TITLES.get(m, m.replace("acc_", "").replace("_", " ")) for m in metrics], rotation=30, ha="right"
        )
        ax.set_ylabel(ylabel)
        ax.set_xlabel("metric")
        ax.set_ylim(0, 105)
    fig.suptitle("emo-tasks: bars = value, whiskers = 95 % bootstrap CI, n/a = not available")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:  # one legend under the panels, so long run labels never cover the bars
        fig.legend(handles, labels, loc="lower center", ncol=1 if len(runs) > 2 else len(runs), fontsize=8)
    fig.tight_layout(rect=(0, 0.04 + 0.04 * len(runs) if len(runs) > 2 else 0.1, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ compare
@dataclass
class Comparison:
    task: str
    metric: str
    base: float | None
    new: float | None
    delta: float
    low: float
    high: float
    p_value: float
    n: int
    method: str
    drop: float  # in the metric's units, positive = worse (orientation applied)


def mismatches(base: Run, new: Run) -> list[str]:
    """Reasons why the two runs are not comparable: data, prompts or judges differ (empty list: comparable)."""
    reasons = []
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    if not shared:
        reasons.append("data: the runs share no emo-tasks task")
    for task in shared:
        bc, nc = base.configs.get(task, {}), new.configs.get(task, {})
        if bc.get("dataset_name") != nc.get("dataset_name"):
            reasons.append(f"data: {task} dataset_name {bc.get('dataset_name')!r} vs {nc.get('dataset_name')!r}")
        for f in PROMPT_FIELDS:
            if _stable(bc.get(f)) != _stable(nc.get(f)):
                reasons.append(f"prompts: {task} config field {f} differs")
        bs, ns = base.summaries.get(task), new.summaries.get(task)
        if bs is not None and ns is not None:
            for key, kind in (
                ("data_source", "data"),
                ("prompt_hashes", "prompts"),
                ("judge_models", "judges"),
                ("judge_protocol", "judges"),
                ("judge_mode", "judges"),
                ("alpha", "judges"),
            ):
                if bs.get(key) != ns.get(key):
                    reasons.append(f"{kind}: {task} {key} {bs.get(key)!r} vs {ns.get(key)!r}")
    if (base.data.get("system_instruction") or None) != (new.data.get("system_instruction") or None):
        reasons.append("prompts: system_instruction differs")
    return reasons


def _stable(value: Any) -> str:
    """A config value without the memory addresses lmms-eval leaves in function reprs ('<function f at 0x..>')."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", json.dumps(value, sort_keys=True, default=str))


def default_metrics(base: Run, new: Run) -> list[tuple[str, str]]:
    """Benchmark-level quality metrics present (non-null) in both runs."""
    pairs = []
    for task in sorted(set(base.results) & set(new.results)):
        bench = benchmark_of(task)
        if bench is None or (bench == "mme" and task not in MME_GROUPS):
            continue
        for m in COMPARE_DEFAULT[bench]:
            if base.value(task, m) is not None and new.value(task, m) is not None:
                pairs.append((task, m))
    return pairs


def select_metrics(base: Run, new: Run, wanted: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """--metric M (any task with it) or TASK:M; returns the pairs and what matched nothing."""
    pairs, unmatched = [], []
    shared = sorted(t for t in set(base.results) & set(new.results) if benchmark_of(t))
    for w in wanted:
        task_part, _, metric = w.rpartition(":")
        found = [
            (t, metric)
            for t in shared
            if (not task_part or t == task_part) and base.has(t, metric) and new.has(t, metric)
        ]
        if not task_part and any(t in MME_GROUPS for t, _ in found):
            found = [(t, m) for t, m in found if benchmark_of(t) != "mme" or t in MME_GROUPS]
        if found:
            pairs.extend(p for p in found if p not in pairs)
        else:
            unmatched.append(w)
    return pairs, unmatched


def compare_metric(
    base: Run, new: Run, task: str, metric: str, resamples: int = 1000, seed: int = 0
) -> Comparison | str:
    """Paired test on the samples both runs share; a string says why it could not be done."""
    from emo_tasks import stats

    bv = samples_for(base, task).get(metric)
    nv = samples_for(new, task).get(metric)
    if not bv or not nv:
        side = "base" if not bv else "new"
        return f"{task} {metric}: no per-sample values in the {side} run (see `emo-tasks report` notes)"
    keys = [k for k in bv if k in nv]
    if not keys:
        return f"data: {task} {metric}: the runs share no sample (keys do not overlap)"
    b = [bv[k] for k in keys]
    n = [nv[k] for k in keys]
    scale = 100.0 if metric in PERCENT_METRICS else 1.0
    b01, n01 = [x / scale for x in b], [x / scale for x in n]
    if scale == 100.0 and stats.is_binary(b01) and stats.is_binary(n01):
        r = stats.mcnemar_exact(b01, n01, n_resamples=resamples, seed=seed)
        delta, low, high = r.delta * scale, r.low * scale, r.high * scale
    else:
        r = stats.paired_bootstrap(b, n, n_resamples=resamples, seed=seed)
        delta, low, high = r.delta, r.low, r.high
    drop = delta if metric in LOWER_IS_BETTER else -delta
    return Comparison(
        task,
        metric,
        base.value(task, metric),
        new.value(task, metric),
        delta,
        low,
        high,
        r.p_value,
        r.n,
        r.method,
        drop,
    )
