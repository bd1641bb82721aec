"""EmoBench-M in VLMEvalKit: each scenario a video dataset `EmoBenchM_<SCENARIO>` (`EmoBenchM_MELD`, ...,
`EmoBenchM_SMILE`), the bundled sample's `EmoBenchM_sample_<SCENARIO>`, and the groups `EmoBenchM_all` /
`EmoBenchM_sample_all` (every scenario's rows in one dataset: the group's pooled numbers, as `--tasks emobench_m`
gives them).  No name holds `MME`, `video` or another word VLMEvalKit's model wrappers match to rewrite prompts.

The same rows, prompt and row hash as the lmms-eval tasks `emobench_m_<scenario>` (`hooks.load_task`,
`doc_to_text`, `doc_to_target`), and the same scoring: `evaluate` proves every prediction row is the run's (each
row once, every row, the data's target now), then calls the lmms-eval path's own functions on the answers, read
as lmms-eval's default `--reasoning_tags` reads them: `hooks.process_results` per row, `hooks.evaluate` per
scenario (the pure `scoring` and, for SMILE's reasons, the authors' LLM scorer `judge.py` through our judge
engine, with VLMEvalKit's judge flags mapped onto ours), `scoring.group_aggregate` for a group.  The numbers are
written as an lmms-eval-shaped run folder (`emo_tasks.vlmeval.runfolder`) that every `emo-tasks` tool reads.

A model that takes video (`VIDEO_LLM`, `--video-llm` for a `--base-url` model) gets the clip (with its audio
track, if the model reads one); any other model gets frames of it (`emo_tasks.vlmeval.video`: one per second, the
first `nframe`, 10 by default).  The prompt is the authors' either way; which the model got is recorded
(`medium`) and a run on frames says so in its notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, LastResult
from emo_tasks.settings import environ
from emo_tasks.vlmeval.datasets import DatasetNames
from emo_tasks.vlmeval.video import MEDIA

from . import hooks, scoring
from .protocol import scenarios
from .run_state import STATE

PREFIX = "EmoBenchM_"
#: What VLMEvalKit's summary shows, the first that is a number: accuracy; SMILE's LLM scorer total, else BLEU.
PRIMARY = ("accuracy", "llm_total", "bleu")
#: Frames an image model gets by default (one per second, the first ten), as MME-Emotion's.
MAX_FRAMES = 10
FRAMES_NOTE = (
    "the model was given frames of each clip (one per second), not the clip with its audio track; lmms-eval gives "
    "the file (VLMEvalKit: a model with VIDEO_LLM, or --video-llm for a --base-url model)"
)


@cache
def names() -> dict[str, tuple[str, str]]:
    """VLMEvalKit dataset name -> (our lmms-eval task, its dataset_name), for every scenario, benchmark and
    sample."""
    out: dict[str, tuple[str, str]] = {}
    for source, prefix in (("benchmark", PREFIX), ("sample", PREFIX + "sample_")):
        for sc in scenarios().values():
            task = sc.task if source == "benchmark" else sc.sample_task
            out[prefix + sc.key.upper()] = (task, f"emobench_m/{source}/{sc.key}")
    return out


#: VLMEvalKit dataset name -> (the lmms-eval group, its source).
GROUPS = {"EmoBenchM_all": ("emobench_m", "benchmark"), "EmoBenchM_sample_all": ("emobench_m_sample", "sample")}


DATASETS = DatasetNames("EmoBench-M", names, GROUPS)
dataset_names = DATASETS.dataset_names  # the leaves, then the groups
_task = DATASETS.task
members = DATASETS.members  # a group's leaves, or the dataset itself


def _task_docs(dataset: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    return hooks.load_task(_task(dataset)[1], env)


def load_docs(dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The rows, as lmms-eval gets them (a group: its scenarios' rows one after the other).  Loaded with the LLM
    scorer deferred: the rows need no judge, and VLMEvalKit's judge settings are known only when `evaluate`
    runs."""
    env = {**(environ() if env is None else env), "EMO_JUDGE": "defer"}
    return [doc for member in members(dataset) for doc in _task_docs(member, env)]


def rows_of(docs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One prediction row per doc (index: its place in the dataset) with its prompt, video and target."""
    return [
        {"index": i, "scenario": doc["scenario"], "row_id": doc["row_id"], "video": doc["video"],
         "video_path": doc["video_path"], "question": hooks.doc_to_text(dict(doc)),
         "target": hooks.doc_to_target(dict(doc))}
        for i, doc in enumerate(docs)
    ]  # fmt: skip


def prediction_rows(dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """`rows_of` the dataset's docs."""
    return rows_of(load_docs(dataset, env))


def model_frames(doc: Mapping[str, Any], nframe: int, fps: float, root: Path) -> list[str]:
    """The frames an image model is given of a row's clip (`emo_tasks.vlmeval.video.model_frames`), named by the
    clip's content."""
    from emo_tasks.vlmeval.video import content_identity
    from emo_tasks.vlmeval.video import model_frames as frames

    path = str(doc["video_path"])
    return frames(path, content_identity(path, str(doc["video"])), nframe, fps, root)


@dataclass(frozen=True)
class Scored:
    """What `score_predictions` gives: per scenario task its metrics, sample-log lines and doc count; the group's
    metrics (a group dataset); what VLMEvalKit could not answer and the empty answers."""

    tasks: dict[str, dict[str, Any]]
    lines: dict[str, list[dict[str, Any]]]
    n_docs: dict[str, int]
    group: dict[str, Any] | None
    n_infer_failed: int
    n_empty: int
    limited: bool


def score_predictions(
    dataset: str,
    predictions: Sequence[Mapping[str, Any]],
    env: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> Scored:
    """VLMEvalKit's prediction rows of `dataset` scored by the lmms-eval path's functions (module docstring), with
    the judge settings of `env` (SMILE's LLM scorer).  A row that is not the run's: a DataError naming the
    dataset, the file's row and its index (`images.collect_answers`)."""
    from emo_tasks.vlmeval.images import collect_answers
    from emo_tasks.vlmeval.reasoning import answer_read

    env = dict(environ() if env is None else env)
    parts = [(member, _task(member)[0], _task_docs(member, env)) for member in members(dataset)]
    docs = [doc for *_, task_docs in parts for doc in task_docs]
    group = GROUPS.get(dataset, (None,))[0]
    got = collect_answers(1, dataset, predictions, [hooks.doc_to_target(doc) for doc in docs],
                          None if group else limit)  # fmt: skip
    metrics: dict[str, dict[str, Any]] = {}
    lines: dict[str, list[dict[str, Any]]] = {}
    n_docs: dict[str, int] = {}
    start, limited = 0, False
    for _member, task, task_docs in parts:
        task_lines, records = [], []
        for doc_id, doc in enumerate(task_docs):
            index = start + doc_id
            if index not in got.answers or index in got.failed:
                continue
            answer = got.answers[index][0]
            read = answer_read(answer)  # as lmms-eval's default --reasoning_tags hands it to process_results
            record = hooks.process_results(doc, [read])
            records.append(record[scoring.TABLE.names[0]])
            task_lines.append({
                "doc_id": doc_id, "target": hooks.doc_to_target(doc), "input": hooks.doc_to_text(doc),
                "input_media": hooks.doc_to_visual(doc), "resps": [[answer]], "filtered_resps": [read], **record,
            })  # fmt: skip
        # a fresh pass: `evaluate` memoises its last result for lmms-eval's one-aggregation-per-metric calls, and a
        # memo hit (the same answers evaluated again in this process) would not write SMILE's per-answer ratings
        # into these records, which the sample log holds
        STATE.memo = LastResult()
        metrics[task] = hooks.evaluate(records)
        lines[task], n_docs[task] = task_lines, len(task_docs)
        limited = limited or any(start + i not in got.answers for i in range(len(task_docs)))
        start += len(task_docs)
    group_metrics = None
    if group:
        sizes = [len(lines[t]) for t in metrics]
        group_metrics = {
            name: scoring.group_aggregate([m[name] for m in metrics.values()], sizes) for name in scoring.TABLE.names
        }
    return Scored(metrics, lines, n_docs, group_metrics, len(got.failed), got.n_empty, limited)


def plain(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics as JSON and VLMEvalKit's summary hold them: a count an int, a mean a float, N/A None."""
    return {k: None if v is None else int(v) if isinstance(v, int) else float(v) for k, v in metrics.items()}


def evaluate_predictions(
    dataset: str,
    predictions: Sequence[Mapping[str, Any]],
    eval_file: str | Path,
    judge_kwargs: Mapping[str, Any],
    medium: str | None = None,
    env: Mapping[str, str] | None = None,
    structs: Mapping[Any, Any] | None = None,
    run_args: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """VLMEvalKit's predictions of `dataset` -> an lmms-eval-shaped run folder beside them; returns the metrics of
    the dataset (its scenario's, or the group's).  `judge_kwargs`: VLMEvalKit's judge settings, mapped onto ours
    (`emo_tasks.vlmeval.judging.judge_env`) for SMILE's LLM scorer.  What the model was given (the clip or frames):
    the file's `medium` column, else `medium` (what build_prompt gave in this process), else what the prompts
    VLMEvalKit kept say (`structs`); else not known (the prompt is the same either way).  A refusal leaves no
    results in the folder (`runfolder.evaluation`)."""
    from emo_tasks.vlmeval.images import empty_notes
    from emo_tasks.vlmeval.judging import judge_env
    from emo_tasks.vlmeval.runfolder import (
        TaskOutput,
        evaluation,
        prompt_config,
        run_facts,
        run_settings,
        write_tasks,
    )
    from emo_tasks.vlmeval.video import medium_of_parts

    env = judge_env(environ() if env is None else env, judge_kwargs)
    with evaluation(eval_file, dataset) as folder:
        asked = run_settings(eval_file, run_args)
        scored = score_predictions(dataset, predictions, env, asked.get("limit"))
        said = {str(p["medium"]) for p in predictions if str(p.get("medium")) in MEDIA.values()}
        if len(said) > 1:
            raise DataError(f"{dataset}: {eval_file} says the model was given several media ({sorted(said)})")
        medium = said.pop() if said else medium
        if medium is None and structs:
            medium = medium_of_parts(structs)
        outputs = [
            TaskOutput(task, plain(m), scored.lines[task], {"dataset_name": _name_of(task), **prompt_config(task)},
                       scored.n_docs[task])
            for task, m in scored.tasks.items()
        ]  # fmt: skip
        tasks = list(scored.tasks)
        group = GROUPS.get(dataset, (None,))[0]
        shown = group or tasks[0]
        facts = run_facts(eval_file, tasks[0], asked)
        notes = [*empty_notes(scored.n_empty), *([FRAMES_NOTE] if medium == MEDIA[False] else []), *facts["notes"]]
        host = {
            "dataset": dataset, "task": shown, "n_docs": sum(scored.n_docs.values()),
            "n_infer_failed": scored.n_infer_failed, "n_empty_answers": scored.n_empty, "medium": medium,
            **({"limit": asked.get("limit")} if scored.limited else {}), **facts, "notes": notes,
        }  # fmt: skip
        group_metrics = {group: plain(scored.group)} if group and scored.group is not None else None
        write_tasks(folder, outputs, Path(eval_file).parent.name, host, when=Path(eval_file).stat().st_mtime,
                    groups={group: tasks} if group else None, group_metrics=group_metrics)  # fmt: skip
    shown_metrics = plain(scored.group if group and scored.group is not None else scored.tasks[tasks[0]])
    return {**shown_metrics, "n_infer_failed": scored.n_infer_failed, "n_empty_answers": scored.n_empty}


def _name_of(task: str) -> str:
    return next(name for t, name in names().values() if t == task)


def prompt_text(doc: dict[str, Any], medium: str) -> str:
    """The authors' prompt of a row, the same for the clip and its frames."""
    return hooks.doc_to_text(doc)


def primary_metric(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The first of `PRIMARY` that is a number."""
    for name in PRIMARY:
        value = metrics.get(name)
        if isinstance(value, int | float):
            return {name: value}
    return {}


@cache
def dataset_class() -> type:
    """The VLMEvalKit video dataset class of every `EmoBenchM_*` name (built on first use: it imports vlmeval)."""
    import sys

    from emo_tasks.vlmeval.video import dataset_class as video_dataset_class

    doc = ("EmoBench-M (emo_tasks): emotional intelligence in video clips with their audio, 13 scenarios, scored by "
           "the authors' rules (and their LLM scorer for SMILE's reasons).")  # fmt: skip
    return video_dataset_class(sys.modules[__name__], "EmoBenchM", doc, "EmoBenchM_sample_MELD")
