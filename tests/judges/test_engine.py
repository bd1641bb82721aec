"""The judge engine through the real openai SDK against a real HTTP server on 127.0.0.1 that injects faults."""

from __future__ import annotations

import random
import threading
import time

import pytest

from emo_tasks.mme_emotion.parsers import score_validator
from judges import JudgeConfigError, JudgeRequest, text_message
from judges.testing import LoopbackServer, Reply


def req(text: str, **kw) -> JudgeRequest:
    return JudgeRequest([text_message("user", text)], model="judge-model", **kw)


def by_text(rules: dict[str, object]):
    """A responder: for a request whose text starts with a rule's name, `rules[name](attempt) -> Reply`."""

    def responder(body: dict, attempt: int) -> Reply:
        text = body["messages"][-1]["content"]
        for name, rule in rules.items():
            if text.startswith(name):
                return rule(attempt)  # type: ignore[operator]
        return Reply(text=f"answer to {text}")

    return responder


def test_results_in_input_order_and_usage(server: LoopbackServer, make_engine) -> None:
    server.latency_s = 0.02
    engine = make_engine(server)
    texts = [f"q{i}" for i in range(40)]
    batch = engine.run([req(t) for t in texts])
    assert [r.text for r in batch] == [f"answer to {t}" for t in texts]
    assert batch.stats.calls == 40 and batch.stats.answered == 40 and batch.stats.failures == 0
    assert batch.stats.prompt_tokens > 0 and batch.stats.completion_tokens > 0
    assert all(c.auth_ok for c in server.calls)


def test_429_honours_retry_after(server: LoopbackServer, make_engine) -> None:
    server.responder = by_text(
        {"limited": lambda a: Reply("status", status=429, retry_after=1) if a == 1 else Reply(text="ok")}
    )
    engine = make_engine(server)
    batch = engine.run([req("limited")])
    assert batch[0].ok and batch[0].tries == 2
    first, second = sorted(server.calls, key=lambda c: c.t_start)
    # backoff base is 0.01 s here, so only Retry-After explains a ~1 s gap
    assert second.t_start - first.t_end >= 0.9
    assert batch.stats.retries == 1 and batch.stats.calls == 2


@pytest.mark.parametrize(
    "fault",
    [
        Reply("status", status=500),
        Reply("status", status=503),
        Reply("garbage"),
        Reply("no_choices"),
        Reply("empty"),
        Reply("drop"),
        Reply("sleep", sleep_s=3),  # longer than the 1 s client timeout
    ],
    ids=["500", "503", "garbage", "no_choices", "empty", "drop", "timeout"],
)
def test_transient_fault_then_answer(server: LoopbackServer, make_engine, fault: Reply) -> None:
    server.responder = by_text({"flaky": lambda a: fault if a <= 2 else Reply(text="finally")})
    engine = make_engine(server, EMO_JUDGE_TIMEOUT="1")
    batch = engine.run([req("flaky"), req("steady")])
    assert batch[0].ok and batch[0].text == "finally" and batch[0].tries == 3
    assert batch[1].ok
    assert batch.stats.retries == 2


@pytest.mark.parametrize(
    "fault,reason",
    [
        (Reply("status", status=500), "server_error"),
        (Reply("status", status=429), "rate_limited"),
        (Reply("garbage"), "malformed_response"),
        (Reply("empty"), "empty_answer"),
        (Reply("sleep", sleep_s=2), "timeout"),
        (Reply("drop"), "connection"),
    ],
    ids=["500", "429", "garbage", "empty", "timeout", "drop"],
)
def test_persistent_fault_is_a_counted_failure(server: LoopbackServer, make_engine, fault: Reply, reason: str) -> None:
    server.responder = by_text({"broken": lambda a: fault})
    engine = make_engine(server, EMO_JUDGE_MAX_TRIES="3", EMO_JUDGE_TIMEOUT="0.5")
    batch = engine.run([req("broken"), req("fine")])
    bad, good = batch
    assert not bad.ok and bad.error == reason and bad.tries == 3 and bad.text is None and bad.detail
    assert good.ok
    assert batch.stats.failures == 1 and batch.stats.failures_by_reason == {reason: 1}
    assert sum(1 for c in server.calls if c.attempt >= 1 and c.key == server.calls[0].key) <= 3 + 1


def test_client_errors_are_not_retried(server: LoopbackServer, make_engine) -> None:
    server.responder = by_text({"bad": lambda a: Reply("status", status=400)})
    engine = make_engine(server)
    batch = engine.run([req("bad")])
    assert batch[0].error == "http_400" and batch[0].tries == 1
    assert len(server.calls) == 1


def test_every_request_ends_answered_or_counted(server: LoopbackServer, make_engine) -> None:
    """A storm of mixed faults: nothing raises, nothing is lost, the counts add up."""
    rng = random.Random(7)
    faults = [
        Reply("status", status=429, retry_after=0),
        Reply("status", status=500),
        Reply("garbage"),
        Reply("empty"),
        Reply("drop"),
        Reply("sleep", sleep_s=1.5),
    ]
    lock = threading.Lock()

    def responder(body: dict, attempt: int) -> Reply:
        with lock:
            roll = rng.random()
            fault = rng.choice(faults)
        return fault if roll < 0.45 else Reply(text="ok " + body["messages"][-1]["content"])

    server.responder = responder
    engine = make_engine(server, EMO_JUDGE_MAX_TRIES="3", EMO_JUDGE_TIMEOUT="0.5")
    n = 120
    batch = engine.run([req(f"s{i}") for i in range(n)])
    assert len(batch) == n
    assert batch.stats.answered + batch.stats.failures == n
    assert batch.stats.failures == sum(batch.stats.failures_by_reason.values())
    for i, r in enumerate(batch):
        assert (r.ok and r.text == f"ok s{i}") or (not r.ok and r.error and r.text is None)
    assert batch.stats.failures > 0 and batch.stats.answered > n // 2
    assert server.wait_idle()
    # every attempt the server saw was counted; a few more may have died on a dropped keep-alive connection
    assert (
        len(server.calls)
        <= batch.stats.calls
        <= len(server.calls)
        + batch.stats.failures_by_reason.get("connection", 0)
        + sum(1 for c in server.calls if c.outcome in ("drop", "client_gone"))
    )


def test_bounded_concurrency(server: LoopbackServer, make_engine) -> None:
    server.latency_s = 0.3
    engine = make_engine(server, EMO_JUDGE_CONCURRENCY="8")
    engine.run([req(f"c{i}") for i in range(40)])
    assert server.max_in_flight == 8


def test_threads_share_one_budget_and_are_not_capped_at_four(server: LoopbackServer, make_engine) -> None:
    """lmms-eval's 4 post-processing threads calling the engine together: 16 in flight, never more."""
    server.latency_s = 0.4
    engine = make_engine(server, EMO_JUDGE_CONCURRENCY="16")
    out: dict[int, list[str | None]] = {}

    def worker(t: int) -> None:
        out[t] = [r.text for r in engine.run([req(f"t{t}-{i}") for i in range(20)])]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert server.max_in_flight == 16
    for t in range(4):
        assert out[t] == [f"answer to t{t}-{i}" for i in range(20)]


def test_concurrency_speeds_up(server: LoopbackServer, make_engine) -> None:
    server.latency_s = 0.1
    engine = make_engine(server, cache_dir=None, EMO_JUDGE_CONCURRENCY="10")
    t0 = time.perf_counter()
    batch = engine.run([req(f"p{i}") for i in range(30)])
    elapsed = time.perf_counter() - t0
    assert batch.stats.answered == 30
    # 30 x 0.1 s sequentially would take >= 3 s; 10 at a time needs about 0.3 s.
    assert elapsed < 3.0 * 0.5


def test_invalid_answer_retried_once_then_counted(server: LoopbackServer, make_engine) -> None:
    server.responder = by_text(
        {
            "fixes": lambda a: Reply(
                text="<score>Step 1: 1/1</score>" if a == 1 else "<score>Step 1: 1/1, Step 2: 0/1</score>"
            ),
            "never": lambda a: Reply(text="I think it is fine"),
        }
    )
    engine = make_engine(server)
    batch = engine.run([req("fixes", validate=score_validator(2)), req("never", validate=score_validator(2))])
    fixed, never = batch
    assert fixed.ok and fixed.tries == 2 and fixed.text.endswith("0/1</score>")
    assert not never.ok and never.error == "invalid_answer" and never.detail == "no <score> block"
    assert never.text == "I think it is fine" and never.tries == 2  # raw answer kept for the audit log
    assert batch.stats.failures_by_reason == {"invalid_answer": 1}


def test_duplicates_in_a_batch_make_one_call(server: LoopbackServer, make_engine) -> None:
    engine = make_engine(server)
    batch = engine.run([req("same"), req("other"), req("same")])
    assert [r.text for r in batch] == ["answer to same", "answer to other", "answer to same"]
    assert len(server.calls) == 2 and batch.stats.unique_requests == 2


def test_no_endpoint_is_a_clear_error_before_any_call(tmp_path) -> None:
    from judges import EndpointConfig, JudgeCache, JudgeEngine

    engine = JudgeEngine(EndpointConfig.from_env({}), cache=JudgeCache(tmp_path), progress=False)
    with pytest.raises(JudgeConfigError, match="OPENAI_API_KEY"):
        engine.run([req("x")])
    engine.close()


def test_audio_role_needs_a_model(server: LoopbackServer, make_engine) -> None:
    engine = make_engine(server)
    with pytest.raises(JudgeConfigError, match="EMO_AUDIO_MODEL"):
        engine.run([JudgeRequest([text_message("user", "describe")], role="audio")])


def test_roles_pick_models_from_env(server: LoopbackServer, make_engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMO_JUDGE_MODEL", "my-judge")
    engine = make_engine(server)
    batch = engine.run(
        [
            JudgeRequest([text_message("user", "a")], role="judge"),
            JudgeRequest([text_message("user", "b")], role="step"),
        ]
    )
    assert [c.model for c in sorted(server.calls, key=lambda c: c.t_start)] in (
        ["my-judge", "gpt-4.1-2025-04-14"],
        ["gpt-4.1-2025-04-14", "my-judge"],
    )
    assert batch[0].model == "my-judge" and batch[1].model == "gpt-4.1-2025-04-14"


def test_run_from_inside_an_event_loop(server: LoopbackServer, make_engine) -> None:
    import asyncio

    engine = make_engine(server)

    async def main() -> list[str | None]:
        batch = await engine.arun([req("a1"), req("a2")])
        return [r.text for r in batch]

    assert asyncio.run(main()) == ["answer to a1", "answer to a2"]


def test_azure_through_the_sdk(server: LoopbackServer, tmp_path) -> None:
    """API_TYPE=azure: the SDK's Azure client, deployment path, api-version and api-key header."""
    from conftest import API_KEY

    from judges import EndpointConfig, JudgeCache, JudgeEngine

    ep = EndpointConfig.from_env(
        {"API_TYPE": "azure", "AZURE_ENDPOINT": server.root_url, "AZURE_API_KEY": API_KEY, "API_VERSION": "2024-10-21"}
    )
    engine = JudgeEngine(ep, cache=JudgeCache(tmp_path), progress=False)
    batch = engine.run([req("azure hello")])
    engine.close()
    assert batch[0].ok and batch[0].text == "answer to azure hello"
    call = server.calls[0]
    assert call.path.startswith("/openai/deployments/judge-model/chat/completions")
    assert "api-version=2024-10-21" in call.path and call.auth_ok


def test_the_model_id_the_api_reports_is_kept_and_cached(server: LoopbackServer, make_engine) -> None:
    server.responder = lambda body, attempt: Reply(text="fine", model="judge-model-2024-11-20")
    engine = make_engine(server)
    first = engine.run([JudgeRequest([text_message("user", "a")], model="judge-model")])
    assert first[0].model == "judge-model" and first[0].api_model == "judge-model-2024-11-20"
    assert first.stats.api_models == {"judge-model-2024-11-20": 1}
    looked = engine.lookup([JudgeRequest([text_message("user", "a")], model="judge-model"), req("never asked")])
    assert looked[0] is not None and looked[0].api_model == "judge-model-2024-11-20" and looked[1] is None
    again = engine.run([JudgeRequest([text_message("user", "a")], model="judge-model")])
    assert again[0].cached and again[0].api_model == "judge-model-2024-11-20" and len(server.calls) == 1
