"""The bundled MME-Emotion sample: two real rows per task (labels, label sets and audio clues from the MIT
release) with short clips generated here, written once in the official layout.

It exists so that `lmms-eval --model dummy --tasks mme_emotion_sample` runs offline on a fresh machine and
exercises the same loader, hooks and judge pipeline as the benchmark.  Its task names say `sample`; its numbers
say nothing about a model.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

from emo_tasks.common import sample_dir
from judges.atomic import atomic_path, atomic_write_text

from .protocol import task_specs

SAMPLE_VERSION = "v1"
SAMPLE_ROWS = Path(__file__).with_name("sample_rows.json")

#: Container -> (video codec, audio codec).  Covers every container of the real data (.mp4, .avi, .mkv).
_CODECS = {".mp4": ("libx264", "aac"), ".avi": ("mpeg4", "libmp3lame"), ".mkv": ("libx264", "aac")}


def write_clip(
    path: str | Path,
    *,
    seconds: float = 3.0,
    fps: int = 8,
    size: tuple[int, int] = (96, 72),
    seed: int = 0,
    audio: bool = True,
) -> Path:
    """Write a short deterministic clip (moving colour pattern, sine tone) in the container its suffix names.

    Written to a temporary name and renamed, so a concurrent reader never sees half a file."""
    import av
    import numpy as np

    path = Path(path)
    vcodec, acodec = _CODECS.get(path.suffix.lower(), ("libx264", "aac"))
    width, height = size
    n_frames = int(round(seconds * fps))
    with atomic_path(path, path.suffix) as tmp:
        with av.open(str(tmp), "w") as container:
            vstream = container.add_stream(vcodec, rate=fps)
            vstream.width, vstream.height, vstream.pix_fmt = width, height, "yuv420p"
            if vcodec == "libx264":
                vstream.options = {"threads": "1", "preset": "ultrafast"}
            astream = None
            if audio:
                astream = container.add_stream(acodec, rate=16000)
                astream.layout = "mono"
            yy, xx = np.mgrid[0:height, 0:width]
            for i in range(n_frames):
                r = (xx * 2 + i * 9 + seed * 31) % 256
                g = (yy * 3 + i * 5 + seed * 17) % 256
                b = np.full_like(r, (seed * 53 + i * 20) % 256)
                img = np.stack([r, g, b], axis=-1).astype(np.uint8)
                frame = av.VideoFrame.from_ndarray(img, format="rgb24")
                for packet in vstream.encode(frame):
                    container.mux(packet)
            for packet in vstream.encode():
                container.mux(packet)
            if astream is not None:
                rate = 16000
                samples = int(seconds * rate)
                t = np.arange(samples) / rate
                tone = (0.2 * np.sin(2 * np.pi * (220 + 40 * seed) * t)).astype(np.float32)
                chunk = astream.frame_size or 1024
                fmt = astream.format.name  # the encoder's native sample format (fltp for aac, s16p/fltp for mp3)
                dtype = {"flt": np.float32, "dbl": np.float64, "s16": np.int16, "s32": np.int32}[fmt.rstrip("p")]
                scale = float(np.iinfo(dtype).max) if np.issubdtype(dtype, np.integer) else 1.0
                for start in range(0, samples, chunk):
                    data = (tone[start : start + chunk] * scale).astype(dtype).reshape(1, -1)
                    aframe = av.AudioFrame.from_ndarray(data, format=fmt, layout="mono")
                    aframe.sample_rate = rate
                    aframe.pts = start
                    aframe.time_base = Fraction(1, rate)
                    for packet in astream.encode(aframe):
                        container.mux(packet)
                for packet in astream.encode():
                    container.mux(packet)
    return path


def sample_rows() -> dict[str, list[dict[str, Any]]]:
    """Task key -> the sample's rows (video_id, label, label_set, audio_clue)."""
    with open(SAMPLE_ROWS, encoding="utf-8") as fh:
        return json.load(fh)


def sample_root(cache_dir: Path) -> Path:
    """The sample in the official layout, generated on first use under `cache_dir` (the emo_tasks cache)."""
    root = sample_dir(f"mme_emotion-{SAMPLE_VERSION}", cache_dir)
    marker = root / ".complete"
    if marker.is_file():
        return root
    rows = sample_rows()
    seed = 0
    for spec in task_specs().values():
        task_rows = rows[spec.key]
        questions = [{k: r[k] for k in ("video_id", "label", "label_set")} for r in task_rows]
        _write_json(root / spec.question_relpath, questions)
        _write_json(
            root / spec.clue_relpath,
            [{"video_id": r["video_id"], "ground_truth": r["label"], "audio_clue": r["audio_clue"]} for r in task_rows],
        )
        for r in task_rows:
            seed += 1
            target = root / r["video_id"]
            if not target.is_file():
                write_clip(target, seed=seed)
    atomic_write_text(marker, f"mme_emotion sample {SAMPLE_VERSION}\n")
    return root


def _write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False))
