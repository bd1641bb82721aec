"""Images and audio inside judge requests, encoded only when sent.

Why lazy: a judge phase may hold thousands of requests with ten frames each.  A part keeps only its *source*
(a path, raw bytes, a PIL image or a loader) and a cheap identity for the cache key; the base64 payload exists
only while the request is in flight, so peak memory is bounded by the concurrency, not by the batch size.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .filehash import file_digest, file_sha256, hash_files, hash_stats, reset_hash_stats  # noqa: F401 - re-exported

ImageSource = str | Path | bytes | Any  # Any: a PIL.Image.Image, or a zero-argument loader
_JPEG_MAGIC = b"\xff\xd8\xff"


def _sha256(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _to_jpeg(image: Any, max_side: int | None, quality: int) -> bytes:
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"expected a PIL image, got {type(image).__name__}")
    img = image.convert("RGB")
    if max_side and max(img.size) > max_side:
        img.thumbnail((max_side, max_side))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


@dataclass(eq=False)
class ImagePart:
    """An image for an OpenAI `image_url` part, sent as base64 JPEG.

    `source`: a file path, encoded image bytes, a PIL image, or a callable returning one of these.
    `identity`: a stable string naming the content (e.g. "<video sha256>:frame3:1fps"), used for the cache key
    instead of encoding the image; give it when the source is expensive to produce (decoded video frames).
    """

    source: ImageSource
    max_side: int | None = None
    quality: int = 90
    detail: str | None = None
    identity: str | None = None
    _digest: str | None = field(default=None, repr=False)

    kind = "image"

    def _load(self) -> Any:
        src = self.source() if callable(self.source) and not isinstance(self.source, (str, Path)) else self.source
        return src

    def jpeg_bytes(self) -> bytes:
        src = self._load()
        if isinstance(src, (str, Path)):
            path = Path(src)
            if not path.is_file():
                raise FileNotFoundError(f"judge image not found: {path}")
            data = path.read_bytes()
            if data.startswith(_JPEG_MAGIC) and not self.max_side:
                return data
            from PIL import Image

            with Image.open(io.BytesIO(data)) as img:
                return _to_jpeg(img, self.max_side, self.quality)
        if isinstance(src, (bytes, bytearray)):
            data = bytes(src)
            if data.startswith(_JPEG_MAGIC) and not self.max_side:
                return data
            from PIL import Image

            with Image.open(io.BytesIO(data)) as img:
                return _to_jpeg(img, self.max_side, self.quality)
        return _to_jpeg(src, self.max_side, self.quality)

    def digest(self) -> str:
        """Content hash for the cache key; never encodes when an identity or raw bytes make that unnecessary."""
        if self._digest is None:
            params = f"max_side={self.max_side};q={self.quality};detail={self.detail}"
            src = self.source
            if self.identity is not None:
                self._digest = _sha256(f"id:{self.identity};{params}")
            elif isinstance(src, (bytes, bytearray)):
                self._digest = _sha256(_sha256(bytes(src)) + params)
            elif isinstance(src, (str, Path)) and Path(src).is_file():
                self._digest = _sha256(file_sha256(src) + params)
            else:
                self._digest = _sha256(self.jpeg_bytes())
        return self._digest

    def render(self) -> dict[str, Any]:
        url = "data:image/jpeg;base64," + base64.b64encode(self.jpeg_bytes()).decode("ascii")
        image_url: dict[str, Any] = {"url": url}
        if self.detail:
            image_url["detail"] = self.detail
        return {"type": "image_url", "image_url": image_url}

    def summary(self) -> dict[str, Any]:
        return {"type": "image", "sha256": self.digest()}


@dataclass(eq=False)
class AudioPart:
    """Audio for an OpenAI `input_audio` part (`format` "wav" or "mp3").  `source`: path, bytes or loader."""

    source: str | Path | bytes | Callable[[], bytes]
    format: str = "wav"
    identity: str | None = None
    _digest: str | None = field(default=None, repr=False)

    kind = "audio"

    def audio_bytes(self) -> bytes:
        src = self.source
        if callable(src) and not isinstance(src, (str, Path)):
            src = src()
        if isinstance(src, (str, Path)):
            path = Path(src)
            if not path.is_file():
                raise FileNotFoundError(f"judge audio not found: {path}")
            return path.read_bytes()
        return bytes(src)

    def digest(self) -> str:
        if self._digest is None:
            if self.identity is not None:
                self._digest = _sha256(f"id:{self.identity};fmt={self.format}")
            elif isinstance(self.source, (str, Path)) and Path(self.source).is_file():
                self._digest = _sha256(file_sha256(self.source) + self.format)
            else:
                self._digest = _sha256(_sha256(self.audio_bytes()) + self.format)
        return self._digest

    def render(self) -> dict[str, Any]:
        data = base64.b64encode(self.audio_bytes()).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": data, "format": self.format}}

    def summary(self) -> dict[str, Any]:
        return {"type": "audio", "format": self.format, "sha256": self.digest()}


def image_tokens(width: int, height: int, detail: str | None = None) -> int:
    """Input tokens of one image as the OpenAI API counts them for GPT-4o-class models (tile-based pricing).

    detail "low": 85, whatever the size.  "high", "auto" or None (what we send unless a part says otherwise): the
    image is scaled to fit in 2048 x 2048, then so that its shortest side is 768 (never scaled up), and costs
    170 per 512-px tile plus 85.  Examples: 1024 x 1024 -> 765, 2048 x 4096 -> 1105, 320 x 240 -> 255."""
    import math

    if detail is not None and detail not in ("low", "high", "auto"):
        raise ValueError(f"image detail must be low, high or auto, got {detail!r}")
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width} x {height}")
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = int(w * scale), int(h * scale)
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = int(w * scale), int(h * scale)
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return 170 * tiles + 85


def sample_video_frames(path: str | Path, interval_s: float = 1.0, max_frames: int = 10) -> list[Any]:
    """Frames of a video as PIL images: one every `interval_s` seconds, the first `max_frames` only.

    The MME-Emotion judge's rule: frame_interval = int(fps * interval_s) frames (at least 1), keep frame k when
    k % frame_interval == 0, stop after `max_frames` (k counts decoded frames in presentation order).  Decoding
    stops at the last kept frame, and when the stream's keyframes are dense enough to win, each kept frame is
    reached by decoding from the keyframe before it instead of from the start (`_sample_by_keyframes`); either
    way, the frames no other frame refers to (x264's non-reference B-frames) are not decoded unless kept.  The
    frames are the same ones, pixel for pixel (tests/judges/test_frames.py checks every container and codec we
    support).  Raises with the file name when the file is missing or no frame can be decoded.
    """
    import av

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"video not found: {path}")
    frames: list[Any] | None = None
    try:
        if _KEYFRAME_SEEK:
            frames = _sample_by_keyframes(path, interval_s, max_frames, linear_fallback=True)
        if frames is None:
            frames = _sample_linear(path, interval_s, max_frames)
    except (av.error.FFmpegError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot decode video {path}: {exc}") from exc
    if not frames:
        raise ValueError(f"no frame could be decoded from video {path}")
    return frames


#: Reach kept frames from the keyframe before them when that decodes fewer frames (False: always decode from
#: the start; tests and benchmarks switch it to compare).
_KEYFRAME_SEEK = True
#: Take the keyframe route only when it decodes at most this share of the frames the linear route decodes.
_SEEK_WIN_RATIO = 0.7
#: Frames' worth of cost charged per jump (flushing the decoder, restarting its threads).
_JUMP_COST_FRAMES = 2
#: PyAV decoder threading.  "NONE": measured here (benchmarks/mme_full_scale.py), frame threading ("AUTO") costs
#: 15-25 % more CPU per render for lower wall time on idle cores; the judge phase renders many videos at once
#: and is CPU-bound, so one thread per render wins.  The frames are the same either way.
_THREAD_TYPE = "NONE"


def _open_stream(container: Any, path: Path) -> Any:
    if not container.streams.video:
        raise ValueError(f"no video stream in {path}")
    stream = container.streams.video[0]
    stream.thread_type = _THREAD_TYPE
    return stream


def _frame_step(stream: Any, interval_s: float) -> int:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    fps = float(rate) if rate else 0.0
    return max(1, int(fps * interval_s))


def _sample_linear(path: Path, interval_s: float, max_frames: int) -> list[Any]:
    """Decode from the start, keep every step-th frame, stop at the last kept one (the reference route)."""
    import av

    frames: list[Any] = []
    with av.open(str(path)) as container:
        stream = _open_stream(container, path)
        step = _frame_step(stream, interval_s)
        for index, frame in enumerate(container.decode(stream)):
            if index % step == 0:
                frames.append(frame.to_image())
                if len(frames) >= max_frames:
                    break
    return frames


def _sample_by_keyframes(
    path: Path, interval_s: float, max_frames: int, linear_fallback: bool = False
) -> list[Any] | None:
    """The kept frames reached by jumping to the keyframe before each one, or None when that cannot be done
    safely or would not decode clearly fewer frames than the linear route.  With `linear_fallback`, a declined
    jump plan decodes linearly from the packets already read instead (None then only for unusual streams, which
    the caller decodes with `_sample_linear`).

    The packets are demuxed once (cheap: no decoding) to learn every frame's pts and which packets are
    keyframes; kept frame k is the frame with the k-th smallest pts, as in the linear route.  Each jump flushes
    the decoder and feeds it from the keyframe packet on until the frame with the target pts comes out; any
    surprise (a missing or unexpected pts) gives up and returns None, so the result is never a different frame.
    Both ways (the linear one then also finds the kept frames by pts), the decoder skips the frames no other
    frame refers to (`_skip_nonref`) except the kept ones; the frames it does output must come in increasing pts.
    """
    import av

    with av.open(str(path)) as container:
        stream = _open_stream(container, path)
        step = _frame_step(stream, interval_s)
        packets = list(container.demux(stream))
        while packets and not packets[-1].size:  # the demuxer's end-of-stream packets
            packets.pop()
        if not packets or any(not p.size for p in packets):
            return None  # empty packets mid-stream (dropped frames): leave them to the reference route
        codec = stream.codec_context
        targets = _target_pts(packets, step, max_frames)
        keep = set(targets) if targets is not None and _skip_nonref(codec) else None
        plan = _jump_plan(packets, step, max_frames)
        if plan is None and not linear_fallback:
            return None
        if plan is None and keep is not None and targets is not None:
            plan = [(-1 if k else 0, t) for k, t in enumerate(targets)]  # linear, by pts: skipping hides frames
        if plan is None:
            frames: list[Any] = []
            for index, frame in enumerate(_decode_from(codec, packets, 0)):
                if index % step == 0:
                    frames.append(frame.to_image())
                    if len(frames) >= max_frames:
                        break
            return frames
        frames = []
        feed: Any = None
        last: Any = None
        for start, target in plan:
            if start >= 0:
                codec.flush_buffers()
                feed = _decode_from(codec, packets, start, keep)
                last = None
            for frame in feed:
                if frame.pts is None or frame.pts > target or (last is not None and frame.pts <= last):
                    return None
                last = frame.pts
                if frame.pts == target:
                    frames.append(frame.to_image())
                    break
            else:
                return None
        return frames


def _target_pts(packets: list[Any], step: int, max_frames: int) -> list[Any] | None:
    """The kept frames' pts (kept frame k = the frame with the k-th smallest pts), or None when the packets'
    timestamps cannot tell them (missing or repeated pts, or the first packet not the first frame)."""
    pts = [p.pts for p in packets]
    if any(t is None for t in pts) or len(set(pts)) != len(pts):
        return None
    order = sorted(pts)
    if pts[0] != order[0]:
        return None
    return [order[k] for k in range(0, len(order), step)][:max_frames]


def _jump_plan(packets: list[Any], step: int, max_frames: int) -> list[tuple[int, int]] | None:
    """[(packet index to restart decoding from, or -1 to go on; target pts)] per kept frame, or None when the
    stream's timestamps do not allow it or jumping would not decode clearly fewer frames."""
    if len(packets) <= step or not packets[0].is_keyframe:
        return None
    targets = _target_pts(packets, step, max_frames)
    if targets is None:
        return None
    pts = [p.pts for p in packets]
    decode_index = {t: i for i, t in enumerate(pts)}
    keyframes = [i for i, p in enumerate(packets) if p.is_keyframe]
    plan: list[tuple[int, int]] = []
    cost, position = 0, -1
    for target in targets:
        d = decode_index[target]
        # the last keyframe packet before the target (decode order) whose pts is not after it
        key = max(k for k in keyframes if k <= d and pts[k] <= target)
        if key <= position < d:
            cost += d - position
            plan.append((-1, target))
        else:
            cost += d - key + 1 + _JUMP_COST_FRAMES
            plan.append((key, target))
        position = d
    linear_cost = sorted(pts).index(targets[-1]) + 1
    if cost > _SEEK_WIN_RATIO * linear_cost:
        return None
    return plan


#: Let the decoder skip the frames no other frame refers to (False: decode them; tests and benchmarks compare).
_SKIP_NONREF = True
#: Decoders whose non-reference skipping ("NONREF") tests/judges/test_frames.py shows to skip frames and leave every
#: other frame unchanged: H.264 (nal_ref_idc 0: x264's non-reference B-frames), HEVC (sub-layer non-reference
#: pictures), MPEG-4 part 2 (B-frames).  Not VP8/VP9: libvpx's usual streams have no frame that refreshes no
#: reference buffer (nothing to skip), and no test shows the skipping there.
_SKIP_NONREF_CODECS = frozenset({"h264", "hevc", "mpeg4"})


def _skip_nonref(codec: Any) -> bool:
    """Whether to switch `skip_frame` per packet: only with one decoder thread (the setting then applies to
    exactly the packet decoded next) and for the decoders above."""
    return _SKIP_NONREF and _THREAD_TYPE == "NONE" and codec.name in _SKIP_NONREF_CODECS


def _decode_from(codec: Any, packets: list[Any], start: int, keep: set[Any] | None = None) -> Any:
    """The frames decoded from packets[start:] on; with `keep` (pts), packets with another pts are decoded
    with skip_frame "NONREF": a frame no other frame refers to is then not decoded (nor output), the others
    decode exactly as without it."""
    for packet in packets[start:]:
        if keep is not None:
            codec.skip_frame = "DEFAULT" if packet.pts in keep else "NONREF"
        yield from codec.decode(packet)
    if keep is not None:
        codec.skip_frame = "DEFAULT"
    yield from codec.decode(None)


def extract_audio_wav(path: str | Path, sample_rate: int = 16000, max_seconds: float | None = None) -> bytes:
    """The audio track of a video as mono 16-bit PCM WAV bytes (for an audio model's `input_audio` part).

    Raises with the file name when the file is missing or has no audio stream."""
    import wave

    import av
    import numpy as np

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"video not found: {path}")
    chunks = []
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise ValueError(f"no audio track in {path}")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
            total = 0
            limit = None if max_seconds is None else int(max_seconds * sample_rate)
            for frame in container.decode(container.streams.audio[0]):
                for out in resampler.resample(frame):
                    arr = out.to_ndarray().reshape(-1)
                    chunks.append(arr)
                    total += arr.size
                if limit is not None and total >= limit:
                    break
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    except av.error.FFmpegError as exc:
        raise ValueError(f"cannot decode the audio of {path}: {exc}") from exc
    pcm = np.concatenate(chunks).astype("<i2") if chunks else np.zeros(0, dtype="<i2")
    if max_seconds is not None:
        pcm = pcm[: int(max_seconds * sample_rate)]
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm.tobytes())
    return buf.getvalue()


@dataclass(eq=False)
class VideoFramesPart:
    """A video sent as several `image_url` parts (sampled frames, base64 JPEG), decoded only while in flight.

    `identity` names the content for the cache key (e.g. "<video id>:<size>:<sha256 of the whole file>"), so a
    cached run never decodes the video; without one, the file's sha256 (`file_sha256`, memoised) is used.
    Quality 95 matches OpenCV's `imencode` default used by the official MME-Emotion judge.
    """

    path: str | Path
    interval_s: float = 1.0
    max_frames: int = 10
    max_side: int | None = None
    quality: int = 95
    detail: str | None = None
    identity: str | None = None
    _digest: str | None = field(default=None, repr=False)

    kind = "video_frames"

    def frames_jpeg(self) -> list[bytes]:
        """The kept frames as JPEG bytes: from the frame cache when one is configured and holds them
        (`judges.frames.configure_frame_cache`), else decoded and encoded now (and stored there)."""
        from . import frames as fc

        cache = fc.active_frame_cache()
        key = None
        if cache is not None:
            identity = self.identity if self.identity is not None else "sha256:" + file_sha256(self.path)
            key = fc.frame_cache_key(identity, self.interval_s, self.max_frames, self.max_side, self.quality)
            t0 = fc._now()
            hit = cache.get(key)
            fc._add_stats(cache_read_s=fc._now() - t0)
            if hit is not None:
                fc._add_stats(cache_hits=1)
                return hit
            fc._add_stats(cache_misses=1)
        t0 = fc._now()
        images = sample_video_frames(self.path, self.interval_s, self.max_frames)
        t1 = fc._now()
        data = [_to_jpeg(img, self.max_side, self.quality) for img in images]
        fc._add_stats(decodes=1, decode_s=t1 - t0, encode_s=fc._now() - t1)
        if cache is not None and key is not None:
            cache.put(key, data)
        return data

    def pending(self) -> Any:
        """The render pool's future for this video's frames when they are being rendered now (see
        `judges.frames.prerender`), else None: the engine waits for it outside the concurrency slots."""
        from . import frames as fc

        try:
            return fc.pending_render(fc.part_key(self))
        except OSError:
            return None

    def digest(self) -> str:
        if self._digest is None:
            params = f"interval={self.interval_s};max={self.max_frames};side={self.max_side};q={self.quality}"
            if self.identity is not None:
                self._digest = _sha256(f"id:{self.identity};{params};detail={self.detail}")
            else:
                self._digest = _sha256(file_sha256(self.path) + params + f";detail={self.detail}")
        return self._digest

    def render(self) -> list[dict[str, Any]]:
        parts = []
        for data in self.frames_jpeg():
            image_url: dict[str, Any] = {"url": "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")}
            if self.detail:
                image_url["detail"] = self.detail
            parts.append({"type": "image_url", "image_url": image_url})
        return parts

    def summary(self) -> dict[str, Any]:
        return {"type": "video_frames", "path": str(self.path), "sha256": self.digest()}


MediaPart = ImagePart | AudioPart | VideoFramesPart
_MEDIA_TYPES = (ImagePart, AudioPart, VideoFramesPart)


def _data_url_digest(url: str) -> str:
    return _sha256(url)


def canonical_part(part: Any) -> Any:
    """A JSON-able stand-in for one content part, with media replaced by content hashes (for the cache key)."""
    if isinstance(part, _MEDIA_TYPES):
        return {"media": part.kind, "sha256": part.digest()}
    if isinstance(part, dict):
        if part.get("type") == "image_url":
            url = part.get("image_url", {}).get("url", "")
            detail = part.get("image_url", {}).get("detail")
            return {"media": "image_url", "sha256": _data_url_digest(url), "detail": detail}
        if part.get("type") == "input_audio":
            audio = part.get("input_audio", {})
            return {"media": "input_audio", "sha256": _sha256(audio.get("data", "")), "format": audio.get("format")}
        return part
    if isinstance(part, str):
        return part
    raise TypeError(f"unsupported message content part: {type(part).__name__}")


def render_part(part: Any) -> Any:
    """The API form of one part (a VideoFramesPart renders to a list of image parts, flattened by the caller)."""
    if isinstance(part, _MEDIA_TYPES):
        return part.render()
    return part


def summarise_part(part: Any, text_chars: int = 300) -> Any:
    """A short, secret-free description of a part for audit logs (text truncated, media as hashes)."""
    if isinstance(part, _MEDIA_TYPES):
        return part.summary()
    if isinstance(part, dict):
        if part.get("type") == "text":
            text = part.get("text", "")
            return {"type": "text", "text": text[:text_chars] + ("…" if len(text) > text_chars else "")}
        return canonical_part(part)
    if isinstance(part, str):
        return part[:text_chars] + ("…" if len(part) > text_chars else "")
    return canonical_part(part)
