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

from emo_tasks.common import say_if_all_empty
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


def test_all_empty_answers_are_said_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert say_if_all_empty("MME-Emotion ER-Lab", ["", "  ", None]) is True
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MME-Emotion ER-Lab: all 3 answers are empty" in err, err
    for answers in (["", "happy"], []):  # one real answer, or no answers at all: nothing said
        assert say_if_all_empty("x", answers) is False
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_an_empty_answering_run_says_so_on_stderr(tmp_path: Path) -> None:
    """A real lmms-eval run whose model answers "" to every request (lmms-eval's `dummy` through
    tests/tools/multirank_dummy.py, whose split mode picks one of the `|`-separated answers per request: both
    empty), on MME-Emotion's and EmoBench-M's samples: one warning line per task on stderr; the run still ends 0."""
    env = cli_env(tmp_path / "cache", EMO_JUDGE="offline", EMO_MULTIRANK_SPLIT="1")
    cmd = [sys.executable, str(TOOLS / "multirank_dummy.py"), "--model", "dummy", "--model_args", "response=|",
           "--tasks", f"{TASK},{EBM_TASK}", "--output_path", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-6000:]
    lines = [line for line in proc.stderr.splitlines() if "answers are empty" in line]
    assert len(lines) == 2, proc.stderr[-6000:]
    assert any(f"MME-Emotion mme_emotion_er_lab [sample]: all {ROWS} answers" in line for line in lines), lines
    assert any(f"EmoBench-M mosi: all {ROWS} answers" in line for line in lines), lines


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
    cmd += ["--output_path", str(work / "out"), "--log_samples"]
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
    # the samples' calls (emo-tasks' probe of `generate` before inference has no audio features)
    generates = [r for r in records if r["kind"] == "generate" and r["input_features"] is not None]
    assert len(calls) == 2 * ROWS and len(generates) == 2 * ROWS, log[-6000:]
    # every call answered (lmms-eval's class turns an error into ""): text, and no all-empty warning
    assert [g.get("error") for g in generates] == [None] * 2 * ROWS, generates
    samples = [json.loads(line) for f in (tmp_path / "out").rglob("*_samples_*.jsonl") for line in f.open()]
    answers = [s["filtered_resps"] for s in samples]
    assert len(answers) == 2 * ROWS and all(str(a).strip("[]' \"") for a in answers), answers
    assert "answers are empty" not in log, log[-6000:]
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


def _loaded(name: str, checkpoint: Path) -> Any:
    """lmms-eval's real chat class `name` holding the tiny checkpoint, loaded as its `__init__` loads it
    (`from_pretrained`, then `disable_talker()`), in this process and on the CPU; its processor from the checkpoint
    (the class's `__init__` would fetch the Qwen2.5-Omni one from the Hub)."""
    import transformers

    lm = omni_lm(f"lmms_eval.models.chat.{name}")
    cls = {"qwen2_5_omni": transformers.Qwen2_5OmniForConditionalGeneration,
           "qwen3_omni": transformers.Qwen3OmniMoeForConditionalGeneration}[name]  # fmt: skip
    lm._model = cls.from_pretrained(checkpoint, dtype="auto", attn_implementation="sdpa").eval()
    lm._model.disable_talker()
    lm.processor = transformers.AutoProcessor.from_pretrained(checkpoint)
    lm._tokenizer = lm.processor.tokenizer
    lm.device_map, lm.use_cache, lm.system_prompt = "cpu", True, "You are Qwen."
    return lm


def _generate(lm: Any, max_new_tokens: int = 2, thinker: bool = True) -> Any:
    """`generate` called as lmms-eval's chat classes call it (chat/qwen2_5_omni.py:58-72), a short text prompt;
    `thinker`: also pass `thinker_max_new_tokens` (lmms-eval does not; without it an unmended model would run the
    thinker's default 1024 tokens)."""
    enc = lm._tokenizer(["Which emotion?"], return_tensors="pt")
    budget = {"thinker_max_new_tokens": max_new_tokens} if thinker else {}
    return lm.model.generate(**enc, return_audio=False, eos_token_id=lm._tokenizer.eos_token_id,
                             pad_token_id=lm._tokenizer.pad_token_id, do_sample=False, temperature=0, top_p=None,
                             num_beams=1, max_new_tokens=max_new_tokens, **budget,
                             use_cache=True, use_audio_in_video=False, thinker_do_sample=False)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen2_5_omni", "qwen3_omni"])
def test_text_only_generate_mends_the_instance_or_refuses(name: str, tiny_omni: dict[str, Path]) -> None:
    """The installed transformers' real `generate`, as lmms-eval calls it: it fails for Qwen2.5-Omni on 5.x (and
    the class would answer ""); `text_only_generate` mends that instance only, once, and it answers token ids."""
    import transformers

    lm = _loaded(name, tiny_omni[name])
    cls_generate = type(lm.model).generate
    try:
        _generate(lm)
        broken = None
    except Exception as exc:  # noqa: BLE001 - what lmms-eval's class catches
        broken = exc
    fails = name == "qwen2_5_omni" and int(transformers.__version__.split(".")[0]) >= 5
    assert (broken is not None) is fails, broken
    done = omni.text_only_generate(lm)
    assert bool(done) is fails, done
    out = _generate(lm)
    prompt = lm._tokenizer(["Which emotion?"], return_tensors="pt").input_ids.shape[1]
    assert out.shape[1] > prompt
    # lmms-eval's call exactly (no thinker_max_new_tokens): its max_new_tokens bounds the thinker (default 1024)
    out = _generate(lm, max_new_tokens=3, thinker=False)
    assert prompt < (out[0] if isinstance(out, tuple) else out).shape[1] <= prompt + 3, out
    assert omni.text_only_generate(lm) is done  # probed once per model instance
    other = _loaded(name, tiny_omni[name])  # another instance, and the class, are untouched
    assert type(other.model).generate is cls_generate and "generate" not in vars(other.model)
    if fails:
        with pytest.raises(Exception, match="talker"):
            _generate(other)


@pytest.mark.slow
def test_a_model_that_cannot_be_mended_is_refused(tiny_omni: dict[str, Path]) -> None:
    """A `generate` failing otherwise (here: the speaker it looks up is gone) cannot be mended: refused before
    inference in one line naming the class, the transformers version and what to do."""
    import transformers

    lm = _loaded("qwen2_5_omni", tiny_omni["qwen2_5_omni"])
    lm.model.speaker_map.clear()
    with pytest.raises(SettingsError) as err:
        omni.text_only_generate(lm)
    line = str(err.value)
    assert "\n" not in line and "`--model qwen2_5_omni`" in line and f"transformers {transformers.__version__}" in line
    assert "Chelsie is not available" in line and "pip install 'transformers<5'" in line, line
