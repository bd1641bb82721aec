"""What every video benchmark's VLMEvalKit dataset needs, whatever it asks: the frames an image model is given in
place of a clip, and the prompts VLMEvalKit kept beside a prediction file.

Why shared: MME-Emotion and EmoBench-M both hand a video model the file and an image model frames from the same
sampler the judge uses (`judges.media.VideoFramesPart`), written once under our cache and named by the video's
content, so a changed video never shows its old frames; one function keeps the two benchmarks' frames alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError

#: build_prompt's `video_llm` -> what the model was given (the clip, or frames of it).
MEDIA = {True: "video", False: "video frames"}
#: Where the frames given to image models go, under our cache dir (`EMO_CACHE_DIR`).
FRAMES_DIR = "vlmeval_frames"
#: One frame per second by default (fps <= 0), as the MME-Emotion judge samples.
FRAME_INTERVAL_S = 1.0


def content_identity(path: str, name: str) -> str:
    """A video's machine-independent content name for the frame cache: `name`, size and the sha256 of the whole
    file (its first 32 hex digits; memoised per process by the file's stat signature)."""
    from judges.filehash import file_digest

    size, digest = file_digest(path)
    return f"{name}:{size}:{digest[:32]}"


def model_frames(video_path: str, identity: str | None, nframe: int, fps: float, root: Path) -> list[str]:
    """The frames an image model is given, as JPEG files under `root/<frame cache key>/` (written once, named by
    `identity`, the video's content, and the sampling): one every 1/fps seconds (fps <= 0: one per second), the
    first `nframe` (<= 0: all).  No frame decoded: a DataError naming the video."""
    from judges.atomic import atomic_write_bytes
    from judges.frames import frame_cache_key
    from judges.media import VideoFramesPart

    interval = 1.0 / fps if fps > 0 else FRAME_INTERVAL_S
    part = VideoFramesPart(
        video_path, interval_s=interval, max_frames=nframe if nframe > 0 else 1_000_000, identity=identity
    )
    folder = root / frame_cache_key(str(part.identity), part.interval_s, part.max_frames, None, part.quality)
    done = folder / "count"
    if done.is_file():
        n = int(done.read_text())
    else:
        frames = part.frames_jpeg()
        for k, data in enumerate(frames):
            atomic_write_bytes(folder / f"{k:04d}.jpg", data)
        n = len(frames)
        atomic_write_bytes(done, str(n).encode())
    if n == 0:
        raise DataError(f"{video_path}: no frame could be decoded for the model")
    return [str(folder / f"{k:04d}.jpg") for k in range(n)]


def kept_structs(eval_file: str | Path, dataset: str) -> dict[Any, Any] | None:
    """The prompts VLMEvalKit kept for `dataset` beside its prediction file (`<model>_<dataset>_*_structs.pkl`,
    written when it builds them; a rerun that retries failed answers sends these instead of building them
    again), or None."""
    import pickle

    folder = Path(eval_file).parent
    found = sorted(folder.glob(f"{folder.name}_{dataset}_*_structs.pkl"), key=lambda p: p.stat().st_mtime)
    if not found:
        return None
    try:
        with open(found[-1], "rb") as f:
            data = pickle.load(f)  # noqa: S301 - VLMEvalKit's own file in the run's folder, as VLMEvalKit reads it
    except (OSError, pickle.UnpicklingError, EOFError):
        return None
    return data if isinstance(data, dict) else None


def medium_of_parts(structs: Mapping[Any, Any]) -> str | None:
    """The one medium every message VLMEvalKit kept gave the model (a `video` part: "video"; `image` parts only:
    "video frames"), else None."""
    found = set()
    for message in structs.values():
        kinds = {m.get("type") for m in message or [] if isinstance(m, Mapping)}
        found.add(MEDIA[True] if "video" in kinds else MEDIA[False] if "image" in kinds else None)
    return found.pop() if len(found) == 1 else None


#: What a video benchmark's adapter module defines for `dataset_class`.
ADAPTER_NAMES = ("MAX_FRAMES", "hooks", "load_docs", "rows_of", "dataset_names", "model_frames", "evaluate_predictions",
                 "prompt_text", "primary_metric")  # fmt: skip


def dataset_class(adapter: Any, class_name: str, doc: str, default: str) -> type:
    """The VLMEvalKit video dataset class of a video benchmark's adapter module (imports vlmeval).

    Why one builder: MME-Emotion's and EmoBench-M's classes did the same things (rows loaded once through the
    lmms-eval hooks, the medium recorded in the prediction table, frames for an image model) and differ only in what
    `adapter` gives: `load_docs`, `rows_of`, `dataset_names`, `model_frames`, `evaluate_predictions` (as
    MME-Emotion's), `MAX_FRAMES`, `prompt_text(doc, medium)` and `primary_metric(metrics)`.  `default`: the dataset
    built when none is named."""
    import threading

    missing = [n for n in ADAPTER_NAMES if not hasattr(adapter, n)]
    if missing:  # a programming error of the adapter, said before VLMEvalKit builds anything
        raise TypeError(f"{adapter.__name__} lacks {', '.join(missing)} (emo_tasks.vlmeval.video.ADAPTER_NAMES)")

    import pandas as pd
    from vlmeval.dataset.video_base import VideoBaseDataset

    from emo_tasks.settings import CommonSettings, environ

    from . import HOST_TYPE
    from .images import read_predictions
    from .runfolder import RUN_ARGS

    def __init__(
        self: Any, dataset: str = default, nframe: int = adapter.MAX_FRAMES, fps: float = -1, pack: bool = False,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        # run.py hands every CLI argument (`vars(args)`) to a video dataset: kept for what the run asked
        self.dataset_name, self.nframe, self.fps, self.pack = dataset, nframe, fps, False
        self.run_args = {k: kwargs.get(k) for k in RUN_ARGS}
        self.docs = adapter.load_docs(dataset)
        self._data = pd.DataFrame(adapter.rows_of(self.docs))  # the rows loaded once: load_task checks every video
        self.videos = list(self._data["video"])
        self.frame_root = str(CommonSettings.from_env(environ()).cache_dir / FRAMES_DIR)
        self.medium = None
        self._lock = threading.Lock()

    def get_data(self: Any) -> Any:
        """The rows, with the medium the model was asked once build_prompt knows it (VLMEvalKit writes this table,
        with the predictions, to the prediction file `evaluate` reads)."""
        with self._lock:
            if self.medium is not None and "medium" not in self._data.columns:
                self._data["medium"] = self.medium
        return self._data

    def set_data(self: Any, value: Any) -> None:
        self._data = value

    def supported_datasets(cls: Any) -> list[str]:
        return adapter.dataset_names()

    def prepare_dataset(self: Any, dataset: str) -> dict[str, str]:
        return {"root": "", "data_file": ""}  # the rows come from load_task (required by the base class)

    def build_prompt(self: Any, line: Any, video_llm: bool) -> list[dict[str, str]]:
        index = int(line if isinstance(line, int) else line["index"])
        doc, medium = self.docs[index], MEDIA[bool(video_llm)]
        with self._lock:
            if self.medium not in (None, medium):
                raise DataError(f"{self.dataset_name}: one run asked with both media ({self.medium}, {medium})")
            self.medium = medium
        text = dict(type="text", value=adapter.prompt_text(doc, medium))
        if video_llm:
            return [dict(type="video", value=adapter.hooks.doc_to_visual(doc)[0]), text]
        frames = adapter.model_frames(doc, self.nframe, self.fps, Path(self.frame_root))
        return [*(dict(type="image", value=p) for p in frames), text]

    def evaluate(self: Any, eval_file: str, **judge_kwargs: Any) -> dict[str, Any]:
        rows = read_predictions(eval_file)
        structs = None if self.medium else kept_structs(eval_file, self.dataset_name)
        return adapter.evaluate_predictions(
            self.dataset_name, rows, eval_file, judge_kwargs, self.medium, structs=structs, run_args=self.run_args
        )

    def report_primary_metric(cls: Any, metrics: dict[str, Any] | None) -> dict[str, float]:
        return adapter.primary_metric(metrics or {})

    body = {
        "__doc__": doc, "__module__": adapter.__name__, "TYPE": HOST_TYPE, "MODALITY": "VIDEO",
        "__init__": __init__, "data": property(get_data, set_data),
        "supported_datasets": classmethod(supported_datasets), "prepare_dataset": prepare_dataset,
        "build_prompt": build_prompt, "evaluate": evaluate, "report_primary_metric": classmethod(report_primary_metric),
    }  # fmt: skip
    return type(class_name, (VideoBaseDataset,), body)
