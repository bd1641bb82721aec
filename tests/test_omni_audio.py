"""MME-Emotion's videos carry sound: lmms-eval's real Qwen-Omni model classes hear it, or the run is refused.

Slow part: tiny random-weight Qwen2.5-Omni and Qwen3-Omni checkpoints are built locally (tests/tools/tiny_omni.py,
once per session each, in a subprocess) and `lmms-eval` runs `mme_emotion_sample_er_lab` (2 rows, real clips with a
tone on their audio track) through tests/tools/run_omni_probe.py, which records what the class hands to the real
processor and to `generate`; the same run also asks `emobench_m_sample_mosi` (2 rows, 2 s clips with a tone), so
EmoBench-M's hooks are checked by the same model load.  The chat classes (`--model qwen2_5_omni`, `--model
qwen3_omni`) must pass one waveform per request, with audio placeholder tokens in the prompt and `input_features`
reaching `generate`; the simple classes (`--force_simple`) must be refused before inference, naming the class and
the chat class to run.
Fast part: the WAV extraction, the route per class, and the transformers behaviour the refusal rests on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import wave
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_omni_refusal, cli_env, env_without_secrets, omni_lm

from emo_tasks.mme_emotion.sample import write_clip
from emo_tasks.models import omni
from emo_tasks.settings import SettingsError

TOOLS = Path(__file__).parent / "tools"
TASK = "mme_emotion_sample_er_lab"
ROWS = 2
CLIP_SECONDS = 3.0
#: EmoBench-M's task in the same lmms-eval run (its bundled sample's clips: 2 s, emobench_m/sample.py)
EBM_TASK, EBM_CLIP_SECONDS = "emobench_m_sample_mosi", 2.0


# ------------------------------------------------------------------------------------------------ fast
def test_the_wav_part_is_the_videos_audio_track(tmp_path: Path) -> None:
    clip = write_clip(tmp_path / "a.mp4", seconds=CLIP_SECONDS)
    wav = omni.extract_wav(str(clip), tmp_path / "cache")
    assert wav is not None and Path(wav).parent == tmp_path / "cache" / "audio"
    with wave.open(wav) as fh:
        assert (fh.getframerate(), fh.getnchannels(), fh.getsampwidth()) == (16000, 1, 2)
        assert abs(fh.getnframes() / 16000 - CLIP_SECONDS) < 0.1
    assert omni.extract_wav(str(clip), tmp_path / "cache") == wav  # made once, reused
    silent = write_clip(tmp_path / "s.mp4", audio=False)
    assert omni.extract_wav(str(silent), tmp_path / "cache") is None


def test_audio_part_only_for_a_chat_class_with_audio_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = str(write_clip(tmp_path / "a.mp4"))
    chat = "lmms_eval.models.chat.qwen2_5_omni"
    for route, has_part in (
        (None, False),
        (omni.AudioRoute(chat, "off"), False),
        (omni.AudioRoute(chat, "part"), True),
    ):
        monkeypatch.setattr(omni, "_route", route)
        assert (omni.audio_part(clip, tmp_path) is not None) is has_part, route


def test_route_per_class() -> None:
    from transformers import Qwen2_5OmniProcessor

    omni_processor = Qwen2_5OmniProcessor.__new__(Qwen2_5OmniProcessor)
    import transformers.processing_utils as processing_utils

    # transformers 5.20 (what Python 3.10 resolves) has no OmniModalProcessorMixin: its processor is not refused
    has_omni_mixin = hasattr(processing_utils, "OmniModalProcessorMixin")
    for name in ("qwen2_5_omni", "qwen3_omni"):
        chat, simple = f"lmms_eval.models.chat.{name}", f"lmms_eval.models.simple.{name}"
        assert omni.route_for(omni_lm(chat), True, None) == omni.AudioRoute(chat, "part")
        assert omni.route_for(omni_lm(chat), False, None) == omni.AudioRoute(chat, "off")
        # a transformers 4.x processor and ffmpeg on PATH: the class reads the track itself
        assert omni.route_for(omni_lm(simple, object()), True, "/usr/bin/ffmpeg") == omni.AudioRoute(simple, "native")
        refusals = [
            (True, object(), None, "ffmpeg"),
            (False, object(), "/usr/bin/ffmpeg", "EMO_MODEL_AUDIO=off cannot"),
        ]
        if has_omni_mixin:  # transformers releases whose Qwen-Omni processors reject the simple classes' call
            refusals.append((True, omni_processor, "/usr/bin/ffmpeg", "use_audio_in_video=True"))
        for audio, processor, ffmpeg, words in refusals:
            with pytest.raises(SettingsError) as err:
                omni.route_for(omni_lm(simple, processor), audio, ffmpeg)
            assert words in str(err.value), err.value
            assert_omni_refusal(str(err.value), name)
    assert omni.route_for(object(), True, None) is None  # any other model: nothing to do


# ------------------------------------------------------------------------------------------------ slow
@pytest.fixture(scope="session")
def tiny_omni(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both tiny checkpoints, each built once per session in a subprocess; the Qwen2.5-Omni processor also goes
    into a Hub cache of the session's own, where lmms-eval's simple class looks for it (tiny_omni.HUB_PROCESSOR)."""
    root = tmp_path_factory.mktemp("tiny_omni")
    env = env_without_secrets()
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = {"hub": root / "hub"}
    for name in ("qwen2_5_omni", "qwen3_omni"):
        out[name] = root / name
        cmd = [sys.executable, str(TOOLS / "tiny_omni.py"), name, str(out[name]), str(out["hub"])]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _run(name: str, simple: bool, tiny: dict[str, Path], work: Path) -> tuple[list[dict[str, Any]], str, list[Path]]:
    probe = work / "probe.jsonl"
    env = cli_env(work / "cache", TRANSFORMERS_OFFLINE="1", HF_HUB_CACHE=str(tiny["hub"]), EMO_JUDGE="offline")
    model_args = f"pretrained={tiny[name]},device=cpu,device_map=auto" + (
        ",attn_implementation=sdpa" if name == "qwen3_omni" else ""  # its default is flash_attention_2
    )
    cmd = [sys.executable, str(TOOLS / "run_omni_probe.py"), str(probe), "--model", name]
    cmd += ["--force_simple"] if simple else []
    cmd += [
        "--model_args",
        model_args,
        "--tasks",
        f"{TASK},{EBM_TASK}",
        "--gen_kwargs",
        "max_new_tokens=4",
        "--batch_size",
        "1",
    ]
    cmd += ["--output_path", str(work / "out")]
    proc = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=540)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    records = [json.loads(line) for line in probe.read_text().splitlines()] if probe.is_file() else []
    return records, log, sorted((work / "out").rglob("*_results.json"))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen2_5_omni", "qwen3_omni"])
def test_chat_class_hears_the_videos_audio(name: str, tiny_omni: dict[str, Path], tmp_path: Path) -> None:
    records, log, results = _run(name, False, tiny_omni, tmp_path)
    calls = [r for r in records if r["kind"] == "processor"]
    generates = [r for r in records if r["kind"] == "generate"]
    assert len(calls) == 2 * ROWS and len(generates) == 2 * ROWS, log[-6000:]
    seconds = sorted(call["audio_samples"][0] / 16000 for call in calls if call["n_audio"] == 1)
    # the whole track, at 16 kHz: MME-Emotion's two clips and EmoBench-M's two
    assert seconds == pytest.approx([EBM_CLIP_SECONDS] * ROWS + [CLIP_SECONDS] * ROWS, abs=0.1), calls
    for call in calls:
        assert call["caller"] == f"lmms_eval.models.chat.{name}" and call["use_audio_in_video"] is False
        assert call["n_videos"] == 1 and call["n_audio"] == 1, call
        assert call["audio_tokens"] > 0 and call["audio_frames"] > 0 and call["video_tokens"] > 0, call
    for gen in generates:  # the audio features reach the model
        assert gen["input_features"] and gen["input_features"][1] == 128, gen
    assert "hears each video's audio as a WAV part" in log
    assert results, log[-6000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen2_5_omni", "qwen3_omni"])
def test_simple_class_is_refused_before_inference(name: str, tiny_omni: dict[str, Path], tmp_path: Path) -> None:
    """transformers 5.x rejects the simple classes' audio call (see the next test): refused, naming the way out."""
    records, log, results = _run(name, True, tiny_omni, tmp_path)
    assert f"lmms-eval's `--model {name} --force_simple`" in log and f"run `--model {name}` (the chat class" in log
    assert [r for r in records if r["kind"] == "processor"] == [] and results == []


@pytest.mark.slow
def test_transformers_rejects_the_simple_classes_audio_call(tiny_omni: dict[str, Path]) -> None:
    """The call lmms_eval/models/simple/qwen2_5_omni.py:263-265 makes for a video with sound, on the real processor:
    if a transformers release accepts it again, this fails and the refusal (`omni.route_for`) must be lifted."""
    import numpy as np
    from transformers import Qwen2_5OmniProcessor

    processor = Qwen2_5OmniProcessor.from_pretrained(tiny_omni["qwen2_5_omni"])
    assert omni._omni_processor(processor)
    message = [{"role": "user", "content": [{"type": "video", "video": "v.mp4"}, {"type": "text", "text": "hi"}]}]
    text = processor.apply_chat_template(message, add_generation_prompt=True, tokenize=False)
    video = np.zeros((4, 56, 56, 3), dtype=np.uint8)
    with pytest.raises(ValueError):
        processor(text=text, audio=[np.zeros(16000, np.float32)], videos=[video], return_tensors="pt",
                  padding=True, use_audio_in_video=True)  # fmt: skip
