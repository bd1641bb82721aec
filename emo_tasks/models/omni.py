"""The video's audio for lmms-eval 0.7.3's Qwen-Omni model classes: what each class needs from our hooks.

Why: the benchmarks' videos carry speech and sound, and an omni model must hear them, or be refused, never answer
silently without them.  What lmms-eval 0.7.3 does (read from its code; docs/lmms_eval.md#omni-models-and-the-audio):

- `--model qwen2_5_omni` / `--model qwen3_omni` load the *chat* classes (lmms_eval/models/chat/qwen2_5_omni.py,
  chat/qwen3_omni.py): they read `doc_to_messages` and hard-code `use_audio_in_video = False`, so the video's own
  track is never read; an `audio` part of the messages is (as a file path, by `qwen_omni_utils.process_mm_info`).
  So the hooks add the video's audio as a 16 kHz mono WAV part (`audio_part`), extracted once with PyAV under
  `<cache>/audio/`.
- `--force_simple` loads the *simple* classes (simple/qwen2_5_omni.py, simple/qwen3_omni.py): they read
  `doc_to_visual`, and for a video with an audio track set `use_audio_in_video=True`, decode the track with
  `audioread` (an `ffmpeg` executable on PATH) and hand it to the processor beside the video.  Transformers whose
  Qwen-Omni processors are an `OmniModalProcessorMixin` (5.x) reject that call for every video with sound, and the
  Qwen2.5-Omni class uses only the first visual, so nothing a hook returns gives it video and audio.  Such a run
  is refused before inference (`prepare`), naming the class and what to run instead.

`EMO_MODEL_AUDIO=off` (`CommonSettings.model_audio`) leaves the audio out for the chat classes, on purpose and said
on stderr; the simple classes read the track themselves, so it is refused for them.

Every class calls `model.generate(..., return_audio=False)` and answers "" for a sample whose call raises.  With
transformers 5.x Qwen2.5-Omni's `generate` raises on every call after `disable_talker()` (which every class makes):
`return_audio` is no longer a parameter (5.0: `generation_mode="text"` replaced it, so the False is ignored and it
asks for the talker), and from 5.15 it reads `talker.codec_pad_token` even in text mode.  `text_only_generate`
probes the real `generate` once per model instance before inference and mends that instance only, or refuses; it
also gives lmms-eval's `max_new_tokens` to the thinker, whose `generate` otherwise drops it (`_thinker_budget`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from emo_tasks.settings import SettingsError, lmms_eval_call
from judges.atomic import atomic_path

#: lmms-eval 0.7.3's Qwen-Omni classes (module -> whether it is the chat class)
OMNI_CLASSES = {
    "lmms_eval.models.chat.qwen2_5_omni": True,
    "lmms_eval.models.chat.qwen3_omni": True,
    "lmms_eval.models.simple.qwen2_5_omni": False,
    "lmms_eval.models.simple.qwen3_omni": False,
}
SAMPLE_RATE = 16000  # what the Qwen-Omni feature extractors take


@dataclass(frozen=True)
class AudioRoute:
    """How the model of this process gets a video's audio: `part` (a WAV part in `doc_to_messages`), `native`
    (the class reads the video's track itself) or `off` (EMO_MODEL_AUDIO=off, chat class)."""

    module: str
    mode: str


_route: AudioRoute | None = None
_told: set[str] = set()
_locks_guard = threading.Lock()
_locks: dict[str, threading.Lock] = {}


def model_flag(module: str) -> str:
    """How a user names the class on lmms-eval's command line."""
    name = module.rsplit(".", 1)[-1]
    return f"--model {name}" if OMNI_CLASSES.get(module) else f"--model {name} --force_simple"


def _omni_processor(processor: Any) -> bool:
    """Whether `processor` is a transformers processor that rejects the simple classes' audio call (decoded audio
    together with `use_audio_in_video=True` and no `audio_from_video_indices`)."""
    try:
        from transformers.processing_utils import OmniModalProcessorMixin
    except ImportError:  # transformers 4.x: the call the simple classes make is the one it takes
        return False
    return isinstance(processor, OmniModalProcessorMixin)


def route_for(lm: Any, audio: bool, ffmpeg: str | None) -> AudioRoute | None:
    """The route for the model instance `lm` (None: not a Qwen-Omni class), or SettingsError when it cannot hear
    the audio as asked: one line naming the class and what to run instead.  `audio`: EMO_MODEL_AUDIO; `ffmpeg`:
    the ffmpeg executable on PATH (None: none)."""
    module = type(lm).__module__
    if module not in OMNI_CLASSES:
        return None
    flag = model_flag(module)
    chat = flag.replace(" --force_simple", "")
    if OMNI_CLASSES[module]:
        return AudioRoute(module, "part" if audio else "off")
    if not audio:
        raise SettingsError(
            f"EMO_MODEL_AUDIO=off cannot silence lmms-eval's `{flag}` ({module}): it reads each video's audio track "
            f"itself; run `{chat}` (the chat class) with EMO_MODEL_AUDIO=off"
        )
    if _omni_processor(getattr(lm, "processor", None)):
        import transformers

        raise SettingsError(
            f"lmms-eval's `{flag}` ({module}) would answer without the videos' audio or fail: it hands the processor "
            f"the audio track with use_audio_in_video=True, which transformers {transformers.__version__} rejects; "
            f"run `{chat}` (the chat class: emo-tasks gives it each video's audio as a WAV part), or set "
            "EMO_MODEL_AUDIO=off with it to run without audio"
        )
    if ffmpeg is None:
        raise SettingsError(
            f"lmms-eval's `{flag}` ({module}) reads the videos' audio with audioread, which needs an ffmpeg "
            f"executable on PATH and finds none: install ffmpeg, or run `{chat}` (the chat class: emo-tasks gives "
            "it each video's audio as a WAV part)"
        )
    return AudioRoute(module, "native")


def prepare(audio: bool) -> AudioRoute | None:
    """Called by each video benchmark's `process_docs` (inside lmms-eval, before inference): find the model class
    lmms-eval loaded (`lmms_eval_call`), refuse a run that cannot hear the audio as asked (`route_for`), keep the
    route for `audio_part`, and say once on stderr when the audio is off."""
    global _route
    call = lmms_eval_call()
    lm = call.get("lm") if call is not None else None
    route = route_for(lm, audio, shutil.which("ffmpeg")) if lm is not None else None
    _route = route
    if route is not None:
        text_only_generate(lm)
    if route is not None and route.module not in _told:
        _told.add(route.module)
        if route.mode == "off":
            line = f"emo-tasks: EMO_MODEL_AUDIO=off: `{model_flag(route.module)}` answers without the videos' audio"
            logger.warning(line)
            print(line, file=sys.stderr, flush=True)
        else:
            how = "as a WAV part beside the video" if route.mode == "part" else "from the video (use_audio_in_video)"
            logger.info(f"emo-tasks: `{model_flag(route.module)}` hears each video's audio {how}")
    return route


class _NoTalker:
    """Stands in for the talker `disable_talker()` deleted: transformers 5.15+ read its `codec_pad_token` in
    Qwen2.5-Omni's `generate` even in text mode, where the talker is never run and the value never used."""

    def __init__(self, codec_pad_token: int | None) -> None:
        self.codec_pad_token = codec_pad_token


def _text_mode(model: Any) -> None:
    """This instance's `generate` reads `return_audio=False` (what lmms-eval passes) as `generation_mode="text"`,
    transformers 5.x's spelling of it; an instance attribute, so the class and every other model are untouched."""
    original = model.generate

    @functools.wraps(original)
    def generate(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("return_audio") is False and "generation_mode" not in kwargs:
            del kwargs["return_audio"]
            kwargs["generation_mode"] = "text"
        return original(*args, **kwargs)

    model.generate = generate


def _thinker_budget(model: Any) -> None:
    """This instance's `generate` gives lmms-eval's `max_new_tokens` to the thinker (`thinker_max_new_tokens`).

    Why: Qwen-Omni's `generate` (transformers 4.57 and 5.x alike) sets the thinker's `max_new_tokens` from its own
    `thinker_max_new_tokens` (default 1024) and drops the caller's `max_new_tokens`, so the task's `gen_kwargs` budget
    (EmoBench-M 256, MME-Emotion 1024) and `--gen_kwargs max_new_tokens=N` never reached the model.  A caller that
    names `thinker_max_new_tokens` itself is left alone; an instance attribute, so the class is untouched."""
    original = model.generate

    @functools.wraps(original)
    def generate(*args: Any, **kwargs: Any) -> Any:
        if "max_new_tokens" in kwargs and "thinker_max_new_tokens" not in kwargs:
            kwargs["thinker_max_new_tokens"] = kwargs["max_new_tokens"]
        return original(*args, **kwargs)

    model.generate = generate


def _pad_stand_in(model: Any) -> None:
    talker = getattr(model.config, "talker_config", None)
    model.talker = _NoTalker(getattr(talker, "tts_codec_pad_token_id", None))


#: what is tried, in order, when the probe fails the known way (the error names the talker); each is kept only
#: when the probe that follows gets further
MENDS = (
    ('return_audio=False read as generation_mode="text"', _text_mode),
    ("a stand-in for the deleted talker's codec_pad_token", _pad_stand_in),
)
_probed: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def _probe(model: Any, tokenizer: Any) -> Exception | None:
    """One call of `model.generate` as lmms-eval's Qwen-Omni classes make it (one new token): None when it
    returns token ids, else the exception it raised."""
    enc = tokenizer(["Hi"], return_tensors="pt").to(model.device)
    try:
        out = model.generate(**enc, return_audio=False, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id, do_sample=False, max_new_tokens=1,
                             thinker_max_new_tokens=1, use_audio_in_video=False, thinker_do_sample=False)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - any error here is one lmms-eval would turn into "" answers
        return exc
    seq = out[0] if isinstance(out, tuple) else out
    return None if hasattr(seq, "shape") else TypeError(f"generate returned {type(out).__name__}, not token ids")


def _known(error: Exception | None) -> bool:
    return error is not None and "talker" in str(error)


def text_only_generate(lm: Any) -> list[str]:
    """Make `lm`'s model answer text as lmms-eval calls it, or refuse the run before inference.

    Probes the real `generate` once per model instance; when it fails the known way (transformers 5.x, see the
    module docstring) applies `MENDS` to that instance, one at a time, until the probe passes.  Returns what was
    mended (empty: nothing needed; also for an instance without a loaded model).  SettingsError, one line naming
    the class, the transformers version and what to do, when the probe still fails."""
    model = getattr(lm, "_model", None)
    if model is None or not hasattr(model, "generate"):
        return []
    model = lm.model  # unwrapped, as the classes call it
    if model in _probed:
        return _probed[model]
    tokenizer = getattr(lm, "_tokenizer", None) or lm.processor.tokenizer
    error, done = _probe(model, tokenizer), []
    for what, mend in MENDS:
        if not _known(error):
            break
        mend(model)
        done.append(what)
        error = _probe(model, tokenizer)
    module = type(lm).__module__
    import transformers

    if error is not None:
        why = " ".join(f"{type(error).__name__}: {error}".split())[:200]
        tried = f" (tried: {'; '.join(done)})" if done else ""
        raise SettingsError(
            f"lmms-eval's `{model_flag(module)}` ({module}) would answer \"\" for every sample: its model's generate "
            f"fails with transformers {transformers.__version__}{tried}: {why}; install a transformers release "
            "whose generate takes lmms-eval's call (`pip install 'transformers<5'`: 4.57 honours return_audio=False)"
        )
    _thinker_budget(model)
    if done:
        line = (
            f"emo-tasks: `{model_flag(module)}`: transformers {transformers.__version__}'s generate "
            f"fails as lmms-eval calls it; mended for this model: {'; '.join(done)}"
        )
        logger.warning(line)
        print(line, file=sys.stderr, flush=True)
    _probed[model] = done
    return done


def current_route() -> AudioRoute | None:
    """The route `prepare` found for this process's model (None: no Qwen-Omni class, or outside lmms-eval)."""
    return _route


def audio_part(video: str, cache_dir: Path) -> str | None:
    """The WAV file to add as an `audio` part of `doc_to_messages` for `video`: only when this process's model is
    a Qwen-Omni chat class with the audio on, and the video has an audio track (None otherwise)."""
    if _route is None or _route.mode != "part":
        return None
    return extract_wav(video, cache_dir)


def extract_wav(video: str, cache_dir: Path) -> str | None:
    """`video`'s first audio track as a 16 kHz mono 16-bit WAV under `<cache_dir>/audio/` (made once, reused),
    None when it has no audio track (said once per file)."""
    st = os.stat(video)
    key = hashlib.sha256(f"{os.path.realpath(video)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    target = Path(cache_dir) / "audio" / f"{Path(video).stem}-{key}.wav"
    silent = target.with_suffix(".none")
    if target.is_file():
        return str(target)
    if silent.is_file():
        return None
    with _locks_guard:
        lock = _locks.setdefault(str(target), threading.Lock())
    with lock:
        if not target.is_file() and not silent.is_file():
            if not _write_wav(Path(video), target):
                silent.parent.mkdir(parents=True, exist_ok=True)
                silent.write_text(f"{video} has no audio track\n")
                logger.warning(f"emo-tasks: {video} has no audio track: the model gets its frames only")
    return str(target) if target.is_file() else None


def _write_wav(src: Path, target: Path) -> bool:
    import av

    with av.open(str(src)) as inp:
        if not inp.streams.audio:
            return False
        stream = inp.streams.audio[0]
        resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
        with atomic_path(target, ".wav") as tmp, av.open(str(tmp), "w", format="wav") as out:
            ostream = out.add_stream("pcm_s16le", rate=SAMPLE_RATE)
            ostream.layout = "mono"
            for frame in inp.decode(stream):
                for resampled in resampler.resample(frame):
                    resampled.pts = None
                    for packet in ostream.encode(resampled):
                        out.mux(packet)
            for resampled in resampler.resample(None):
                resampled.pts = None
                for packet in ostream.encode(resampled):
                    out.mux(packet)
            for packet in ostream.encode():
                out.mux(packet)
    return True
