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
