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

import threading
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError
from emo_tasks.settings import environ
from emo_tasks.vlmeval.video import FRAMES_DIR as FRAMES_DIR
from emo_tasks.vlmeval.video import MEDIA as VIDEO_MEDIA

from . import hooks
from .judge import FRAME_INTERVAL_S, MAX_FRAMES, judged_identity
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


def dataset_names() -> list[str]:
    """Every MME-Emotion dataset name VLMEvalKit gets: the tasks, then the groups."""
    return [*names(), *GROUPS]


def _task(dataset: str) -> tuple[str, str]:
    if dataset not in names():
        raise DataError(f"{dataset}: not an MME-Emotion dataset of emo_tasks (known: {', '.join(dataset_names())})")
    return names()[dataset]


def members(dataset: str) -> list[str]:
    """The task datasets a dataset is made of: a group's tasks of its source (in the registry's order), or itself."""
    if dataset in GROUPS:
        source = GROUPS[dataset][1]
        return [n for n, (_, name) in names().items() if name.split("/")[1] == source]
    _task(dataset)
    return [dataset]


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


@cache
def dataset_class() -> type:
    """The VLMEvalKit video dataset class of every `EmoVid_*` name (built on first use: it imports vlmeval)."""
    import pandas as pd
    from vlmeval.dataset.video_base import VideoBaseDataset

    from emo_tasks.settings import CommonSettings
    from emo_tasks.vlmeval import HOST_TYPE
    from emo_tasks.vlmeval.images import read_predictions
    from emo_tasks.vlmeval.runfolder import RUN_ARGS
    from emo_tasks.vlmeval.video import kept_structs

    class EmoVid(VideoBaseDataset):
        """MME-Emotion (emo_tasks): the emotion in a video clip, reasoned step by step, scored by the multi-agent
        judge."""

        TYPE = HOST_TYPE
        MODALITY = "VIDEO"

        def __init__(
            self, dataset: str = "EmoVid_sample_ER_Lab", nframe: int = MAX_FRAMES, fps: float = -1, pack: bool = False,
            **kwargs: Any,
        ) -> None:  # fmt: skip
            # run.py hands every CLI argument (`vars(args)`) to a video dataset: kept for what the run asked
            self.dataset_name, self.nframe, self.fps, self.pack = dataset, nframe, fps, False
            self.run_args = {k: kwargs.get(k) for k in RUN_ARGS}
            self.docs = load_docs(dataset)
            self._data = pd.DataFrame(rows_of(self.docs))  # the rows loaded once: load_task checks every video
            self.videos = list(self._data["video"])
            self.frame_root = str(CommonSettings.from_env(environ()).cache_dir / FRAMES_DIR)
            self.medium: str | None = None
            self._lock = threading.Lock()

        @property
        def data(self) -> Any:
            """The rows, with the medium the model was asked once build_prompt knows it (VLMEvalKit writes this
            table, with the predictions, to the prediction file `evaluate` reads)."""
            with self._lock:
                if self.medium is not None and "medium" not in self._data.columns:
                    self._data["medium"] = self.medium
            return self._data

        @data.setter
        def data(self, value: Any) -> None:
            self._data = value

        @classmethod
        def supported_datasets(cls) -> list[str]:
            return dataset_names()

        def prepare_dataset(self, dataset: str) -> dict[str, str]:
            return {"root": "", "data_file": ""}  # the rows come from load_task (required by the base class)

        def build_prompt(self, line: Any, video_llm: bool) -> list[dict[str, str]]:
            index = int(line if isinstance(line, int) else line["index"])
            doc, medium = self.docs[index], MEDIA[bool(video_llm)]
            with self._lock:
                if self.medium not in (None, medium):
                    raise DataError(f"{self.dataset_name}: one run asked with both media ({self.medium}, {medium})")
                self.medium = medium
            text = dict(type="text", value=hooks.doc_to_text(doc, {"medium": medium}))
            if video_llm:
                return [dict(type="video", value=hooks.doc_to_visual(doc)[0]), text]
            frames = model_frames(doc, self.nframe, self.fps, Path(self.frame_root))
            return [*(dict(type="image", value=p) for p in frames), text]

        def evaluate(self, eval_file: str, **judge_kwargs: Any) -> dict[str, Any]:
            rows = read_predictions(eval_file)
            structs = None if self.medium else kept_structs(eval_file, self.dataset_name)
            return evaluate_predictions(
                self.dataset_name, rows, eval_file, judge_kwargs, self.medium, structs=structs, run_args=self.run_args
            )

        @classmethod
        def report_primary_metric(cls, metrics: dict[str, Any] | None) -> dict[str, float]:
            value = (metrics or {}).get(PRIMARY)
            return {PRIMARY: value} if isinstance(value, int | float) else {}

    return EmoVid
