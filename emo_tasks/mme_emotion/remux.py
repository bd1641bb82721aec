"""Hand every lmms-eval model class a video path it recognises as a video.

lmms-eval's simple Qwen2.5-VL class only treats paths ending in .mp4/.avi/.mov as videos and silently drops any
other (MME-Emotion's IR and part of ER-Wild are .mkv), and its chat classes read .webm as audio.  So
`doc_to_visual` gives such videos as a stream-copied .mp4 remux (no re-encoding unless the codecs cannot go into
MP4), made once per file under the emo_tasks cache and reused.  The judge still reads the original file.
`EMO_VIDEO_REMUX=0` hands over the original paths (the caller passes that switch and the cache folder in).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from emo_tasks.common import DataError
from judges.atomic import atomic_path

#: Extensions every lmms-eval video model class accepts as a video.
PORTABLE_EXTENSIONS = (".mp4", ".avi", ".mov")
_locks_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


def remux_dir(cache_dir: Path) -> Path:
    """`<cache dir>/remux`."""
    return Path(cache_dir) / "remux"


def model_ready_path(path: str, cache_dir: Path, enabled: bool = True) -> str:
    """`path` itself when its container is portable (or remuxing is off: `enabled` False, EMO_VIDEO_REMUX=0),
    else the cached .mp4 remux under `cache_dir` (made now if needed)."""
    if Path(path).suffix.lower() in PORTABLE_EXTENSIONS or not enabled:
        return path
    st = os.stat(path)
    key = hashlib.sha256(f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    target = remux_dir(cache_dir) / f"{Path(path).stem}-{key}.mp4"
    if target.is_file():
        return str(target)
    with _locks_guard:
        lock = _locks.setdefault(str(target), threading.Lock())
    with lock:
        if not target.is_file():
            remux_to_mp4(Path(path), target)
    return str(target)


def remux_to_mp4(src: Path, target: Path) -> None:
    """Copy the video and audio streams of `src` into an MP4 at `target` (atomically); re-encode to H.264/AAC only
    when a stream cannot be copied into MP4.  A DataError names the file when neither works."""
    try:
        with atomic_path(target, ".mp4") as tmp:
            try:
                _copy_streams(src, tmp)
            except Exception:  # codec not allowed in MP4, or a container quirk: transcode instead
                _transcode(src, tmp)
    except Exception as exc:
        raise DataError(f"cannot convert video {src} to MP4 for the model: {type(exc).__name__}: {exc}") from exc


def _copy_streams(src: Path, dst: Path) -> None:
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w", format="mp4") as out:
        mapping = {}
        for stream in inp.streams:
            if stream.type in ("video", "audio"):
                mapping[stream.index] = out.add_stream_from_template(stream)
        if not any(s.type == "video" for s in inp.streams):
            raise ValueError("no video stream")
        for packet in inp.demux(*[s for s in inp.streams if s.index in mapping]):
            if packet.dts is None:  # flush packets
                continue
            packet.stream = mapping[packet.stream.index]
            out.mux(packet)


def _transcode(src: Path, dst: Path) -> None:
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w", format="mp4") as out:
        vin = inp.streams.video[0]
        rate = vin.average_rate or vin.guessed_rate or 25
        vout = out.add_stream("libx264", rate=rate)
        vout.width, vout.height, vout.pix_fmt = vin.codec_context.width, vin.codec_context.height, "yuv420p"
        vout.options = {"preset": "veryfast"}
        vout.time_base = vin.time_base  # keep the source timestamps, so the frame rate survives
        ain = inp.streams.audio[0] if inp.streams.audio else None
        aout = out.add_stream("aac", rate=ain.rate or 16000) if ain is not None else None
        resampler = av.AudioResampler(format="fltp", layout="mono", rate=aout.rate) if aout is not None else None
        if aout is not None:
            aout.layout = "mono"
        streams = [vin] + ([ain] if ain is not None else [])
        for packet in inp.demux(*streams):
            for frame in packet.decode():
                if packet.stream.type == "video":
                    converted = frame.reformat(format="yuv420p")
                    converted.pts, converted.time_base = frame.pts, frame.time_base
                    for p in vout.encode(converted):
                        out.mux(p)
                else:
                    for resampled in resampler.resample(frame):
                        resampled.pts = None
                        for p in aout.encode(resampled):
                            out.mux(p)
        for p in vout.encode():
            out.mux(p)
        if aout is not None:
            for p in aout.encode():
                out.mux(p)
