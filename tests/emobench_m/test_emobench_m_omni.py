"""EmoBench-M's clips carry sound: chat model classes get the video and the prompt as one user turn, and lmms-eval's
Qwen-Omni chat classes also the clip's audio as a WAV part, exactly as MME-Emotion's hooks give it
(`emo_tasks.models.omni`).  Fast: the hooks on the bundled sample's real clips, and `process_docs` run under a real
call stack of lmms-eval's `simple_evaluate` holding an instance of lmms-eval's real model class (no model loaded).
The real classes hearing it: tests/test_omni_audio.py's slow probe run includes an EmoBench-M task."""

from __future__ import annotations

import wave
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_omni_refusal, omni_lm

from emo_tasks.emobench_m import hooks
from emo_tasks.models import omni
from emo_tasks.settings import SettingsError

CHAT = "lmms_eval.models.chat.qwen2_5_omni"
SIMPLE = "lmms_eval.models.simple.qwen2_5_omni"


def _under_lmms_eval(lm: Any, call: Any) -> Any:
    """`call()` from inside a function named `simple_evaluate` of module `lmms_eval.evaluator` holding `lm`: the
    call stack `emo_tasks.settings.lmms_eval_call` reads, as lmms-eval's own evaluator makes it."""
    scope: dict[str, Any] = {"__name__": "lmms_eval.evaluator"}
    exec("def simple_evaluate(lm, call):\n    return call()\n", scope)  # noqa: S102 - a frame with lmms-eval's name
    return scope["simple_evaluate"](lm, call)


def _process_docs(task: str) -> Any:
    import datasets

    return hooks.process_docs(datasets.Dataset.from_list([{"emo_source": f"emobench_m/sample/{task}"}]))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EMO_MODEL_AUDIO", raising=False)
    monkeypatch.setattr(omni, "_route", None)
    return tmp_path / "cache"


@pytest.mark.parametrize("task", ["mosi", "mc_eiu", "smile"])
def test_a_chat_class_gets_video_audio_and_prompt(task: str, env: Path) -> None:
    docs = _under_lmms_eval(omni_lm(CHAT), lambda: _process_docs(task))
    assert omni.current_route() == omni.AudioRoute(CHAT, "part")
    doc = docs[0]
    (turn,) = hooks.doc_to_messages(doc, {"pre_prompt": "P: "})
    assert turn["role"] == "user" and [p["type"] for p in turn["content"]] == ["video", "audio", "text"]
    assert turn["content"][0]["url"] == doc["video_path"]
    assert turn["content"][2]["text"] == hooks.doc_to_text(doc, {"pre_prompt": "P: "}) == "P: " + doc["prompt"]
    wav = turn["content"][1]["url"]
    assert Path(wav).parent == env / "audio"
    with wave.open(wav) as fh:  # the clip's whole track (the sample's clips are 2 s), as the feature extractor takes
        assert (fh.getframerate(), fh.getnchannels()) == (16000, 1) and abs(fh.getnframes() / 16000 - 2.0) < 0.1


def test_no_audio_part_when_off_or_for_other_models(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_MODEL_AUDIO", "off")
    docs = _under_lmms_eval(omni_lm(CHAT), lambda: _process_docs("meld"))
    assert omni.current_route() == omni.AudioRoute(CHAT, "off")
    assert [p["type"] for p in hooks.doc_to_messages(docs[0])[0]["content"]] == ["video", "text"]
    monkeypatch.delenv("EMO_MODEL_AUDIO")
    docs = _under_lmms_eval(object(), lambda: _process_docs("meld"))  # any other model class: nothing added
    assert omni.current_route() is None
    assert [p["type"] for p in hooks.doc_to_messages(docs[0])[0]["content"]] == ["video", "text"]
    assert not (env / "audio").exists()


def test_a_simple_class_that_cannot_hear_is_refused_before_the_data(env: Path) -> None:
    from transformers import Qwen2_5OmniProcessor

    lm = omni_lm(SIMPLE, Qwen2_5OmniProcessor.__new__(Qwen2_5OmniProcessor))
    with pytest.raises(SettingsError) as err:
        _under_lmms_eval(lm, lambda: _process_docs("mosi"))
    assert_omni_refusal(str(err.value), "qwen2_5_omni")
    assert not (env / "samples").exists()  # refused before the sample is even generated
