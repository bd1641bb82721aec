"""`EMO_JUDGE_PRESET=paper|open` (issue 34, item 4): `paper` is today's setup bit for bit, `open` names open-weight
judges with fixed sampling settings, and a preset is never half-applied: a role model variable beside it, or an
unknown name, stops the settings (before any inference) with one line naming both variables, or the names."""

from __future__ import annotations

from pathlib import Path

import pytest

from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.judge import judge_fingerprint, step_request
from emo_tasks.mme_emotion.settings import MMESettings
from emo_tasks.multiemo.judge import build_requests
from emo_tasks.multiemo.settings import MultiEmoSettings
from judges.config import OPEN, PRESETS, JudgeConfigError, model_for_role, sampling_for_role

ENDPOINT = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "EMO_JUDGE": "api"}
RECORD = {"mme_task": "ER-Lab", "row": 0, "answer": "The brows are lowered. Answer: anger"}
PAPER_STEP_KEY = "277c460100ada955a241a45a83c418193eac5d7e3e04e855e9afa344f2392f58"  # test_fingerprint.py


def test_paper_is_todays_setup_bit_for_bit() -> None:
    """Unset or `paper`: the paper's models, temperature 0 alone, the same request keys (so the same cache)."""
    for env in (ENDPOINT, {**ENDPOINT, "EMO_JUDGE_PRESET": "paper"}, {**ENDPOINT, "EMO_JUDGE_PRESET": " Paper "}):
        settings = MMESettings.from_env(env, "sample")
        assert settings.judge_models == {"step": "gpt-4.1-2025-04-14", "judge": "gpt-4o-2024-11-20"}
        assert settings.sampling == ()
        req = step_request(RECORD, settings)
        assert req.cache_key() == PAPER_STEP_KEY and req.payload_params() == {"temperature": 0.0}
        assert MultiEmoSettings.from_env(env, "sample").judge_sampling == ()
    image = {"image_id": "i", "image_path": "x.png"}
    reqs = build_requests([image], [{("i", "anger"): {"score": 50.0, "reason": "r"}}], judge_model="m")
    assert [r.payload_params() for _, r in reqs] == [{"temperature": 0.0}]


def test_open_names_open_weight_judges_with_fixed_sampling() -> None:
    env = {**ENDPOINT, "EMO_JUDGE_PRESET": "open"}
    assert model_for_role("judge", env) == "Qwen/Qwen2.5-VL-72B-Instruct"
    assert model_for_role("step", env) == "Qwen/Qwen2.5-VL-72B-Instruct"  # one server serves both roles
    settings = MMESettings.from_env(env, "sample")
    req = step_request(RECORD, settings)
    assert req.model == "Qwen/Qwen2.5-VL-72B-Instruct"
    assert req.payload_params() == {"temperature": 0.0, "max_tokens": 4096, "seed": 1234}
    assert sampling_for_role("judge", env) == dict(OPEN.sampling["judge"])
    roles = judge_fingerprint(settings, None)["roles"]
    assert roles["judge"] == {"model": "Qwen/Qwen2.5-VL-72B-Instruct", "served": "not reported",
                              "temperature": 0.0, "max_tokens": 4096, "seed": 1234}  # fmt: skip
    multi = MultiEmoSettings.from_env(env, "sample")
    assert multi.judge_model == "Qwen/Qwen2.5-VL-72B-Instruct"
    image = {"image_id": "i", "image_path": "x.png"}
    (_, req), = build_requests([image], [{("i", "anger"): {"score": 50.0, "reason": "r"}}],
                               judge_model=multi.judge_model, sampling=multi.judge_sampling)  # fmt: skip
    assert req.payload_params() == {"temperature": 0.0, "max_tokens": 4096, "seed": 1234}


@pytest.mark.parametrize("variable", ["EMO_JUDGE_MODEL", "EMO_STEP_MODEL", "EMO_AUDIO_MODEL"])
@pytest.mark.parametrize("mode", ["api", "defer", "offline"])
def test_a_role_model_beside_a_preset_is_refused_naming_both(variable: str, mode: str) -> None:
    """Whatever the judge mode: the settings a task is loaded with (before inference) refuse it."""
    env = {**ENDPOINT, "EMO_JUDGE": mode, "EMO_JUDGE_PRESET": "open", variable: "my-model"}
    for build in (lambda: MMESettings.from_env(env, "sample"), lambda: MultiEmoSettings.from_env(env, "sample")):
        with pytest.raises(JudgeConfigError) as info:
            build()
        message = str(info.value)
        assert "\n" not in message
        assert "EMO_JUDGE_PRESET='open'" in message and f"{variable}='my-model'" in message


def test_an_unknown_preset_is_refused_listing_the_names() -> None:
    with pytest.raises(JudgeConfigError, match=r"EMO_JUDGE_PRESET='qwen' is not accepted; use one of: paper, open"):
        MMESettings.from_env({**ENDPOINT, "EMO_JUDGE_PRESET": "qwen"}, "sample")
    assert list(PRESETS) == ["paper", "open"]


def test_the_in_process_hook_refuses_before_loading_anything(tmp_path: Path) -> None:
    """lmms-eval's `process_docs` path (`hooks.load_task`) stops on the settings, before any row or video."""
    env = {**ENDPOINT, "EMO_CACHE_DIR": str(tmp_path), "EMO_JUDGE_PRESET": "paper", "EMO_JUDGE_MODEL": "gpt-4o"}
    with pytest.raises(JudgeConfigError, match="EMO_JUDGE_PRESET='paper' and EMO_JUDGE_MODEL='gpt-4o'"):
        hooks.load_task("mme_emotion/sample/ER-Lab", env)
    assert not (tmp_path / "samples").exists()  # the sample's clips were never generated


def test_live_audio_clues_need_a_model_no_preset_names() -> None:
    """Both presets score with the released clues; live clues under a preset stop naming what to do instead."""
    for name in PRESETS:
        with pytest.raises(JudgeConfigError, match=f"'audio' judge role in EMO_JUDGE_PRESET={name}: unset"):
            MMESettings.from_env({**ENDPOINT, "EMO_JUDGE_PRESET": name, "EMO_MME_AUDIO_CLUES": "live"}, "sample")
