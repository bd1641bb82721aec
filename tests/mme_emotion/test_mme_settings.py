"""MME-Emotion's settings: every variable read and checked once, a typo named and never turned into offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from emo_tasks.mme_emotion.settings import MMESettings
from emo_tasks.settings import SettingsError
from judges.config import JudgeConfigError

KEY = "sk-mme-settings-0000000000000000"
LOOPBACK = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": KEY}


def env(tmp_path: Path, **values: str) -> dict[str, str]:
    return {"EMO_CACHE_DIR": str(tmp_path / "cache"), **values}


def test_defaults_without_a_judge(tmp_path: Path) -> None:
    s = MMESettings.from_env(env(tmp_path), "sample")
    assert (s.source, s.judge_mode, s.judge_protocol, s.audio_clues, s.alpha) == (
        "sample", "offline", "guarded", "released", 0.5,
    )  # fmt: skip
    assert s.models == () and s.judge_models == {}
    assert s.hub_id == "Karl28/MME-Emotion" and s.common.data_root is None and s.common.video_remux
    assert s.engine.cache_path == tmp_path / "cache" == s.common.cache_dir


def test_api_mode_resolves_models_and_engine(tmp_path: Path) -> None:
    s = MMESettings.from_env(
        env(tmp_path, **LOOPBACK, EMO_JUDGE_MODEL="j", EMO_MME_ALPHA="0.3", EMO_JUDGE_CONCURRENCY="4",
            EMO_MME_JUDGE_PROTOCOL="Official", EMO_MME_HUB_ID="me/copy", EMO_DATA_ROOT=str(tmp_path),
            EMO_VIDEO_REMUX="off", EMO_JUDGE_CACHE="0"),
        "benchmark",
    )  # fmt: skip
    assert (s.judge_mode, s.judge_protocol, s.alpha) == ("api", "official", 0.3)
    assert s.judge_models == {"step": "gpt-4.1-2025-04-14", "judge": "j"}
    assert s.model("judge") == "j"
    assert s.engine.endpoint.concurrency == 4 and s.engine.endpoint.base_url == "http://127.0.0.1:9/v1"
    assert s.engine.cache_path is None
    assert (s.hub_id, s.common.data_root, s.common.video_remux) == ("me/copy", tmp_path, False)
    assert KEY not in repr(s)  # the key stays out of logs
    assert hash(s) == hash(MMESettings.from_env(
        env(tmp_path, **LOOPBACK, EMO_JUDGE_MODEL="j", EMO_MME_ALPHA="0.3", EMO_JUDGE_CONCURRENCY="4",
            EMO_MME_JUDGE_PROTOCOL="Official", EMO_MME_HUB_ID="me/copy", EMO_DATA_ROOT=str(tmp_path),
            EMO_VIDEO_REMUX="off", EMO_JUDGE_CACHE="0"),
        "benchmark",
    ))  # fmt: skip


def test_live_clues_need_an_audio_model(tmp_path: Path) -> None:
    with pytest.raises(JudgeConfigError, match="EMO_AUDIO_MODEL"):
        MMESettings.from_env(env(tmp_path, **LOOPBACK, EMO_MME_AUDIO_CLUES="live"), "sample")
    s = MMESettings.from_env(env(tmp_path, **LOOPBACK, EMO_MME_AUDIO_CLUES="live", EMO_AUDIO_MODEL="a"), "sample")
    assert s.judge_models == {"step": "gpt-4.1-2025-04-14", "judge": "gpt-4o-2024-11-20", "audio": "a"}
    offline = MMESettings.from_env(env(tmp_path, EMO_JUDGE="offline", EMO_MME_AUDIO_CLUES="live"), "benchmark")
    assert offline.audio_clues == "live" and offline.models == ()


def test_no_endpoint_is_offline_for_the_sample_only(tmp_path: Path) -> None:
    assert MMESettings.from_env(env(tmp_path), "sample").judge_mode == "offline"
    with pytest.raises(JudgeConfigError, match="none is configured.*OPENAI_API_KEY.*EMO_JUDGE=offline"):
        MMESettings.from_env(env(tmp_path), "benchmark")
    with pytest.raises(JudgeConfigError, match="none is configured"):
        MMESettings.from_env(env(tmp_path, EMO_JUDGE="api"), "sample")
    assert MMESettings.from_env(env(tmp_path, EMO_JUDGE="offline"), "benchmark").judge_mode == "offline"
    assert MMESettings.from_env(env(tmp_path, **LOOPBACK, EMO_JUDGE="OFFLINE"), "sample").judge_mode == "offline"


INVALID = [
    # (variable, value, what the message must say is accepted)
    ("EMO_JUDGE", "ofline", "auto, api, offline"),
    ("EMO_MME_JUDGE_PROTOCOL", "strict", "guarded, official"),
    ("EMO_MME_AUDIO_CLUES", "qwen", "released, live"),
    ("EMO_MME_ALPHA", "2", "[0.0, 1.0]"),
    ("EMO_MME_ALPHA", "-0.1", "[0.0, 1.0]"),
    ("EMO_MME_ALPHA", "half", "[0.0, 1.0]"),
    ("EMO_MME_ALPHA", "nan", "[0.0, 1.0]"),
    ("EMO_JUDGE_CONCURRENCY", "abc", "a whole number >= 1"),
    ("EMO_JUDGE_CONCURRENCY", "0", "a whole number >= 1"),
    ("EMO_JUDGE_TIMEOUT", "0", "a number >= 0.001"),
    ("EMO_JUDGE_TIMEOUT", "soon", "a number >= 0.001"),
    ("EMO_JUDGE_MAX_TRIES", "0", "a whole number >= 1"),
    ("EMO_JUDGE_INVALID_RETRIES", "-1", "a whole number >= 0"),
    ("EMO_JUDGE_BACKOFF_BASE", "-1", "a number >= 0"),
    ("EMO_JUDGE_BACKOFF_MAX", "x", "a number >= 0"),
    ("EMO_JUDGE_CACHE", "nope", "1, true, yes, on, 0, false, no, off"),
    ("EMO_PROGRESS", "maybe", "1, true, yes, on, 0, false, no, off"),
    ("EMO_VIDEO_REMUX", "perhaps", "1, true, yes, on, 0, false, no, off"),
    ("API_TYPE", "azur", "openai, azure"),
]


@pytest.mark.parametrize(("variable", "value", "accepted"), INVALID)
@pytest.mark.parametrize("judge", ["loopback", "none"])
@pytest.mark.parametrize("source", ["sample", "benchmark"])
def test_invalid_value_names_variable_value_and_accepted_values(
    tmp_path: Path, variable: str, value: str, accepted: str, judge: str, source: str
) -> None:
    """With or without a judge configured: a typo raises (never offline), whatever the source."""
    values = {**(LOOPBACK if judge == "loopback" else {}), variable: value}
    with pytest.raises((SettingsError, JudgeConfigError)) as err:
        MMESettings.from_env(env(tmp_path, **values), source)
    msg = str(err.value)
    assert f"{variable}={value!r}" in msg and accepted in msg


@pytest.mark.parametrize(
    "typo",
    [{"EMO_JUDGE_CONCURRENCY": "abc"}, {"API_TYPE": "azur"}, {"EMO_JUDGE_TIMEOUT": "0"}, {"EMO_JUDGE": "aut"},
     {"EMO_JUDGE_CACHE": "nope"}],
)  # fmt: skip
def test_a_typo_never_means_offline(tmp_path: Path, typo: dict[str, str]) -> None:
    """The sample falls back to offline only when no endpoint is configured at all; before, a malformed judge
    variable made the endpoint look unconfigured and the sample quietly ran judge-free."""
    assert MMESettings.from_env(env(tmp_path), "sample").judge_mode == "offline"  # the one legitimate fallback
    for values in ({}, LOOPBACK):
        with pytest.raises((SettingsError, JudgeConfigError)):
            MMESettings.from_env(env(tmp_path, **values, **typo), "sample")


def test_unknown_source_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="source"):
        MMESettings.from_env(env(tmp_path), "hub")
