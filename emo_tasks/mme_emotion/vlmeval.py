"""MME-Emotion in VLMEvalKit: the eight tasks as video datasets `EmoVid_<Task>` (`EmoVid_ER_Lab`, ...,
`EmoVid_IR`) and the bundled sample's `EmoVid_sample_<Task>`.  No name holds `MME` or `video`, which VLMEvalKit's
model wrappers match to rewrite prompts.

The same rows, prompt, row hash and judge as the lmms-eval tasks `mme_emotion_<task>` (`hooks.load_task`,
`doc_to_text`, `doc_to_target`, the judge stage):
- A model that takes video (VLMEvalKit's `VIDEO_LLM`, `--video-llm` for a `--base-url` model) gets the file (the
  .mp4 remux where the container needs one, as in lmms-eval) and the prompt's medium word "video"; any other model
  gets frames and "video frames", as the paper does for image models.  The frames are the judge's sampler's
  (`judges.media.VideoFramesPart`: one per second, the first `nframe`, 10 by default, as the judge sees; `fps`
  sets another rate), named by the video's content hash, so a changed video never shows old frames.
- Which medium the model was asked is written into the prediction file (its `medium` column) by `build_prompt`,
  and `evaluate` reads it back: the prompt recorded is the one asked.
- `evaluate` proves every prediction row is the run's (each row once, every row, the data's target now), writes
  a predict-only run folder and runs the judge stage over it (`emo_tasks.vlmeval.judging`), with VLMEvalKit's
  judge settings mapped onto ours.  `EMO_JUDGE=defer` stops after the folder: `emo-tasks judge FOLDER` later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError
from emo_tasks.settings import environ
from emo_tasks.vlmeval.datasets import DatasetNames
from emo_tasks.vlmeval.video import FRAMES_DIR as FRAMES_DIR
from emo_tasks.vlmeval.video import MEDIA as VIDEO_MEDIA

from . import hooks
from .judge import FRAME_INTERVAL_S, judged_identity
from .judge import MAX_FRAMES as MAX_FRAMES  # the adapter's: frames an image model gets by default
from .scoring import TABLE

PREFIX = "EmoVid_"
PRIMARY = "cot_s"
#: build_prompt's `video_llm` -> the prompt's medium word (the paper's: video models, image models given frames)
MEDIA = VIDEO_MEDIA


@cache
def names() -> dict[str, tuple[str, str]]:
    """VLMEvalKit dataset name -> (our lmms-eval task, its dataset_name), for every MME-Emotion task YAML."""
    from emo_tasks.common import task_configs

    out: dict[str, tuple[str, str]] = {}
    for task, conf in sorted(task_configs().items()):
        name = conf.get("dataset_name")
        if isinstance(name, str) and name.startswith("mme_emotion/") and "group" not in conf:
            _, source, key = name.split("/")
            out[PREFIX + ("sample_" if source == "sample" else "") + key.replace("-", "_")] = (task, name)
    return out


#: VLMEvalKit dataset name -> (the lmms-eval group, its source): all the tasks' rows in one dataset, so that one
#: evaluation gives the benchmark's pooled numbers (the official Overall), as `--tasks mme_emotion_all` does.
GROUPS = {"EmoVid_all": ("mme_emotion_all", "benchmark"), "EmoVid_sample_all": ("mme_emotion_sample", "sample")}


DATASETS = DatasetNames("MME-Emotion", names, GROUPS)
dataset_names = DATASETS.dataset_names  # the leaves, then the groups
_task = DATASETS.task
members = DATASETS.members  # a group's leaves, or the dataset itself


def _task_docs(dataset: str, env: Mapping[str, str] | None) -> list[dict[str, Any]]:
    return hooks.load_task(_task(dataset)[1], {**(environ() if env is None else env), "EMO_JUDGE": "defer"})


def load_docs(dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The rows, as lmms-eval gets them (a group: its tasks' rows one after the other).  Loaded with judging
    deferred: the rows need no judge, and VLMEvalKit's judge settings are known only when `evaluate` runs."""
    return [doc for member in members(dataset) for doc in _task_docs(member, env)]


def prediction_rows(dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per doc (index: its place in `load_docs`) with its task, video and target (the prompt depends on the
    model: build_prompt)."""
    return rows_of(load_docs(dataset, env))


def rows_of(docs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`prediction_rows` of docs already loaded."""
    return [
        {"index": i, "task": doc["mme_task"], "video": doc["video_id"], "video_path": doc["video_path"],
         "label": doc["label"], "target": hooks.doc_to_target(doc)}
        for i, doc in enumerate(docs)
    ]  # fmt: skip


def model_frames(doc: Mapping[str, Any], nframe: int, fps: float, root: Path) -> list[str]:
    """The frames an image model is given (`emo_tasks.vlmeval.video.model_frames`), named by the content identity
    the judge names the video by: one every 1/fps seconds (fps <= 0: one per second, the judge's rate), the first
    `nframe` (<= 0: all)."""
    from emo_tasks.vlmeval.video import model_frames as frames

    return frames(doc["video_path"], judged_identity(doc), nframe, fps if fps > 0 else 1.0 / FRAME_INTERVAL_S, root)


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
    """VLMEvalKit's predictions of `dataset` -> a predict-only run folder beside them, judged by the judge stage;
    returns the metrics.  The medium the model was asked: the file's `medium` column, else `medium` (what
    build_prompt asked in this process), else what the prompts VLMEvalKit kept (`structs`: its `*_structs.pkl`,
    index -> message) say; none of them: refused.  `run_args`: the run's arguments (`runfolder.run_settings`).
    A refusal leaves no results in the folder (`runfolder.evaluation`); a judge failure keeps the answers there."""
    from emo_tasks.vlmeval.judging import judge_folder
    from emo_tasks.vlmeval.runfolder import evaluation

    env = dict(environ() if env is None else env)
    with evaluation(eval_file, dataset) as folder:
        tasks, shown, failed_total, n_empty = _write_answers(
            dataset, predictions, eval_file, folder, medium, env, structs, run_args
        )
    return {**judge_folder(folder, tasks, shown, env, judge_kwargs), "n_infer_failed": failed_total,
            "n_empty_answers": n_empty}  # fmt: skip


def _write_answers(
    dataset: str,
    predictions: Sequence[Mapping[str, Any]],
    eval_file: str | Path,
    folder: Path,
    medium: str | None,
    env: Mapping[str, str],
    structs: Mapping[Any, Any] | None,
    run_args: Mapping[str, Any] | None,
) -> tuple[list[str], str, int, int]:
    """The proven answers of `evaluate_predictions` written as a predict-only run folder: (its tasks, the task or
    group shown, answers VLMEvalKit could not get, empty answers)."""
    from emo_tasks.vlmeval.images import collect_answers, empty_notes
    from emo_tasks.vlmeval.reasoning import answer_read
    from emo_tasks.vlmeval.runfolder import TaskOutput, prompt_config, run_facts, run_settings, write_tasks

    parts = [(member, *_task(member), _task_docs(member, env)) for member in members(dataset)]
    docs = [doc for *_, task_docs in parts for doc in task_docs]
    asked = run_settings(eval_file, run_args)
    group = GROUPS.get(dataset, (None,))[0]
    # the file's rows proven as one: a refusal names the dataset run, the file's own row and index
    # (VLMEvalKit 0.0.20 asks every row of a video dataset whatever --limit says; a limit is honoured if it did)
    got = collect_answers(1, dataset, predictions, [hooks.doc_to_target(doc) for doc in docs],
                          None if group else asked.get("limit"))  # fmt: skip
    said = {str(p["medium"]) for p in predictions if str(p.get("medium")) in MEDIA.values()}
    if len(said) > 1:
        raise DataError(f"{dataset}: {eval_file} says the model was asked with several media ({sorted(said)})")
    medium = said.pop() if said else medium
    if medium is None and structs:
        medium = medium_of_structs(docs, structs)
    if medium is None:
        raise DataError(
            f"{dataset}: {eval_file} does not say which prompt the model was asked (its `medium` column: video or "
            "video frames, written while VLMEvalKit builds the prompts); run the inference again"
        )
    outputs, limited, start = [], False, 0
    for _member, task, dataset_name, task_docs in parts:
        lines = []
        for doc_id, doc in enumerate(task_docs):
            if start + doc_id not in got.answers or start + doc_id in got.failed:
                continue
            answer, target = got.answers[start + doc_id][0], hooks.doc_to_target(doc)
            lines.append({
                "doc_id": doc_id, "target": target, "input": hooks.doc_to_text(doc, {"medium": medium}),
                # the judge stage reads filtered_resps: the answer as lmms-eval's default --reasoning_tags reads it
                "input_media": [doc["video_path"]], "resps": [[answer]], "filtered_resps": [answer_read(answer)],
            })  # fmt: skip
        config = {"dataset_name": dataset_name, **prompt_config(task)}
        table = dict(config.get("lmms_eval_specific_kwargs") or {})
        # as lmms-eval records it for a model the table does not name: the table, its `default` merged in at the top
        default = {**(table.get("default") or {}), "medium": medium}
        config["lmms_eval_specific_kwargs"] = {**table, "default": default, **default}
        outputs.append(TaskOutput(task, dict.fromkeys(TABLE.names), lines, config, len(task_docs)))
        limited = limited or any(start + i not in got.answers for i in range(len(task_docs)))
        start += len(task_docs)
    tasks = [o.task for o in outputs]
    shown = group or tasks[0]
    facts = run_facts(eval_file, tasks[0], asked)
    host = {
        "dataset": dataset, "task": shown, "n_docs": len(docs), "n_infer_failed": len(got.failed),
        "n_empty_answers": got.n_empty, "medium": medium, **({"limit": asked.get("limit")} if limited else {}),
        **facts, "notes": [*empty_notes(got.n_empty), *facts["notes"]],
    }  # fmt: skip
    write_tasks(folder, outputs, Path(eval_file).parent.name, host, when=Path(eval_file).stat().st_mtime,
                groups={group: tasks} if group else None)  # fmt: skip
    return tasks, shown, len(got.failed), got.n_empty


def medium_of_structs(docs: Sequence[Mapping[str, Any]], structs: Mapping[Any, Any]) -> str | None:
    """The one medium whose prompt every message VLMEvalKit kept (index -> [..., {"type": "text", ...}]) asked,
    else None."""
    found = set()
    for index, message in structs.items():
        texts = [m.get("value") for m in message or [] if isinstance(m, Mapping) and m.get("type") == "text"]
        doc = docs[int(index)] if 0 <= int(index) < len(docs) else None
        if doc is None or not texts:
            return None
        found |= {m for m in MEDIA.values() if hooks.doc_to_text(doc, {"medium": m}) == texts[-1]}
    return found.pop() if len(found) == 1 else None


def prompt_text(doc: dict[str, Any], medium: str) -> str:
    """The prompt of a row for the medium the model is given (the paper's "video" or "video frames")."""
    return hooks.doc_to_text(doc, {"medium": medium})


def primary_metric(metrics: Mapping[str, Any]) -> dict[str, float]:
    value = metrics.get(PRIMARY)
    return {PRIMARY: value} if isinstance(value, int | float) else {}


@cache
def dataset_class() -> type:
    """The VLMEvalKit video dataset class of every `EmoVid_*` name (built on first use: it imports vlmeval)."""
    import sys

    from emo_tasks.vlmeval.video import dataset_class as video_dataset_class

    doc = (
        "MME-Emotion (emo_tasks): the emotion in a video clip, reasoned step by step, scored by the multi-agent judge."
    )
    return video_dataset_class(sys.modules[__name__], "EmoVid", doc, "EmoVid_sample_ER_Lab")
