"""Our backend and aggregation inside the real lmms-eval 0.7.3 registries."""

from __future__ import annotations

import pytest

from judges.testing import LoopbackServer, Reply

pytestmark = pytest.mark.slow  # imports lmms-eval's registries (seconds): not in the fast tier


@pytest.fixture
def lmms_env(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path) -> LoopbackServer:
    from conftest import API_KEY

    from judges import reset_engine

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    reset_engine()
    from judges import EngineSettings
    from judges.lmms_eval_hooks import register

    register(EngineSettings.from_env(cache_dir=tmp_path / "lmms_cache"))
    return server


def test_provider_registered_and_answers(lmms_env: LoopbackServer) -> None:
    from lmms_eval.llm_judge import ProviderFactory, Request, ServerConfig, get_server

    from judges.lmms_eval_hooks import PROVIDER_NAME, register

    register()
    register()  # idempotent
    judge = get_server(PROVIDER_NAME, ServerConfig(model_name="judge-model", max_tokens=64))
    assert type(judge).__name__ == "EmoJudgesProvider"
    assert ProviderFactory.create_provider(PROVIDER_NAME, ServerConfig(model_name="x")).is_available()
    response = judge.evaluate(Request(messages=[{"role": "user", "content": "hello"}]))
    assert response.success and response.content == "answer to hello" and response.model_used == "judge-model"
    assert lmms_env.calls[-1].model == "judge-model"

    lmms_env.reset_log()
    batch = judge.evaluate_batch([Request(messages=[{"role": "user", "content": f"b{i}"}]) for i in range(12)])
    assert [r.content for r in batch] == [f"answer to b{i}" for i in range(12)]
    again = judge.evaluate_batch([Request(messages=[{"role": "user", "content": f"b{i}"}]) for i in range(12)])
    assert [r.content for r in again] == [r.content for r in batch]
    assert len(lmms_env.calls) == 12  # the second batch came from the cache

    binary = judge.evaluate_binary(question="Is it sad?", answer="yes", prediction="yes")
    assert binary["success"] and binary["raw_response"].startswith("answer to")


def test_provider_reports_failures_and_images(lmms_env: LoopbackServer) -> None:
    from lmms_eval.llm_judge import Request, ServerConfig, get_server
    from PIL import Image

    from judges.lmms_eval_hooks import PROVIDER_NAME, register

    lmms_env.responder = lambda body, attempt: Reply("status", status=400)
    register()
    judge = get_server(PROVIDER_NAME, ServerConfig(model_name="judge-model"))
    response = judge.evaluate(
        Request(messages=[{"role": "user", "content": "look"}], images=[Image.new("RGB", (8, 8), "red")])
    )
    assert not response.success and response.error_message.startswith("http_400")
    assert lmms_env.calls[0].images == 1


def test_aggregation_registered() -> None:
    from lmms_eval.api import registry

    from judges.lmms_eval_hooks import AGG_MEAN_SKIP_NONE, mean_skip_none, register

    register()
    agg = registry.get_aggregation(AGG_MEAN_SKIP_NONE)
    assert agg is mean_skip_none
    assert agg([1.0, None, 0.0, 0.5]) == pytest.approx(0.5)
    assert agg([None, None]) is None
