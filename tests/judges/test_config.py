"""Endpoint and role configuration from the environment, as lmms-eval users already set it."""

from __future__ import annotations

import pytest

from emo_tasks.settings import cache_dir
from judges import EndpointConfig, JudgeConfigError, model_for_role


def test_openai_base_url_and_lmms_eval_alias() -> None:
    assert EndpointConfig.from_env({"OPENAI_BASE_URL": "http://h:8000/v1/"}).base_url == "http://h:8000/v1"
    full = EndpointConfig.from_env({"OPENAI_API_URL": "https://api.example.com/v1/chat/completions"})
    assert full.base_url == "https://api.example.com/v1"
    both = EndpointConfig.from_env({"OPENAI_BASE_URL": "http://a/v1", "OPENAI_API_URL": "http://b/v1"})
    assert both.base_url == "http://a/v1"


def test_azure_like_lmms_eval() -> None:
    ep = EndpointConfig.from_env(
        {"API_TYPE": "azure", "AZURE_ENDPOINT": "https://r.openai.azure.com", "AZURE_API_KEY": "k-az"}
    )
    assert ep.api_type == "azure" and ep.api_version == "2024-02-15-preview" and ep.api_key == "k-az"
    ep.check_usable()
    with pytest.raises(JudgeConfigError, match="AZURE_ENDPOINT"):
        EndpointConfig.from_env({"API_TYPE": "azure", "AZURE_API_KEY": "k"}).check_usable()


def test_key_not_in_repr_or_describe() -> None:
    ep = EndpointConfig.from_env({"OPENAI_API_KEY": "sk-very-secret"})
    assert "sk-very-secret" not in repr(ep) and "sk-very-secret" not in str(ep.describe())
    assert ep.describe()["api_key_set"] is True


def test_knobs_and_bad_values() -> None:
    ep = EndpointConfig.from_env(
        {"EMO_JUDGE_CONCURRENCY": "32", "EMO_JUDGE_TIMEOUT": "7.5", "EMO_JUDGE_MAX_TRIES": "2"}
    )
    assert (ep.concurrency, ep.timeout_s, ep.max_tries) == (32, 7.5, 2)
    assert EndpointConfig.from_env({}).concurrency == 16
    with pytest.raises(JudgeConfigError, match="EMO_JUDGE_CONCURRENCY"):
        EndpointConfig.from_env({"EMO_JUDGE_CONCURRENCY": "many"})
    with pytest.raises(JudgeConfigError, match=">= 1"):
        EndpointConfig.from_env({"EMO_JUDGE_CONCURRENCY": "0"})
    with pytest.raises(JudgeConfigError, match="API_TYPE"):
        EndpointConfig.from_env({"API_TYPE": "bedrock"})


def test_role_models() -> None:
    assert model_for_role("step", {}) == "gpt-4.1-2025-04-14"
    assert model_for_role("judge", {}) == "gpt-4o-2024-11-20"
    assert (
        model_for_role("judge", {"EMO_JUDGE_MODEL": "Qwen/Qwen2.5-VL-72B-Instruct"}) == "Qwen/Qwen2.5-VL-72B-Instruct"
    )
    assert model_for_role("audio", {"EMO_AUDIO_MODEL": "qwen2-audio"}) == "qwen2-audio"
    with pytest.raises(JudgeConfigError, match="EMO_AUDIO_MODEL"):
        model_for_role("audio", {})
    assert model_for_role("some-literal-model", {}) == "some-literal-model"


def test_cache_dir_is_the_packages(tmp_path) -> None:
    assert cache_dir({"EMO_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_dir({"XDG_CACHE_HOME": "/x"}).as_posix() == "/x/emo_tasks"


@pytest.mark.parametrize(
    "name, value, accepted",
    [
        ("EMO_JUDGE_CONCURRENCY", "abc", "whole number >= 1"),
        ("EMO_JUDGE_TIMEOUT", "0", "number >= 0.001"),
        ("EMO_JUDGE_MAX_TRIES", "six", "whole number >= 1"),
        ("API_TYPE", "azzure", "openai, azure"),
    ],
)
def test_a_bad_value_names_the_variable_the_value_and_what_is_accepted(name: str, value: str, accepted: str) -> None:
    with pytest.raises(JudgeConfigError) as err:
        EndpointConfig.from_env({"OPENAI_API_KEY": "k", name: value})
    assert name in str(err.value) and repr(value) in str(err.value) and accepted in str(err.value)
