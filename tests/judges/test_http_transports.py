"""The engine's two HTTP transports (`EMO_JUDGE_HTTP`: the SDK's aiohttp transport, or its httpx client) through
the real openai SDK against the loopback server: the same answers, the same failure reasons, the same request
body as the SDK's `chat.completions.create` sends."""

from __future__ import annotations

import json

import pytest
from conftest import API_KEY, fast_env, unused_port

from judges import EndpointConfig, JudgeConfigError, JudgeEngine, JudgeRequest, text_message, user_message
from judges.endpoint import http_client
from judges.media import ImagePart
from judges.testing import LoopbackServer, Reply

TRANSPORTS = ["aiohttp", "httpx"]


def _engine(srv_url: str, transport: str, **env: str) -> JudgeEngine:
    return JudgeEngine(EndpointConfig.from_env(fast_env(srv_url, EMO_JUDGE_HTTP=transport, **env)), progress=False)


def _req(text: str) -> JudgeRequest:
    return JudgeRequest([text_message("user", text)], model="judge-model", max_tokens=64)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_client_sends_through_the_transport_asked_for(transport: str) -> None:
    client = http_client(EndpointConfig(base_url="http://127.0.0.1:1/v1", concurrency=48, http=transport))
    transport_name = type(client._transport).__name__.lower()  # the httpx(2) client's transport
    assert ("aiohttp" in transport_name) == (transport == "aiohttp"), transport_name
    if transport == "httpx":  # every slot its own kept-alive connection: none waits, none is reopened
        pool = client._transport._pool
        assert pool._max_connections == 48 and pool._max_keepalive_connections == 48
    auto = http_client(EndpointConfig(base_url="http://127.0.0.1:1/v1"))
    assert "aiohttp" in type(auto._transport).__name__.lower()  # auto: aiohttp, installed here


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    "fault,reason",
    [
        (Reply("status", status=503), "server_error"),
        (Reply("status", status=429, retry_after=0), "rate_limited"),
        (Reply("garbage"), "malformed_response"),
        (Reply("no_choices"), "malformed_response"),
        (Reply("empty"), "empty_answer"),
        (Reply("sleep", sleep_s=2), "timeout"),
        (Reply("drop"), "connection"),
    ],
    ids=["503", "429", "garbage", "no_choices", "empty", "timeout", "drop"],
)
def test_faults_end_in_the_same_reasons_on_both_transports(transport: str, fault: Reply, reason: str) -> None:
    def responder(body: dict, attempt: int) -> Reply:
        return fault if body["messages"][-1]["content"] == "broken" else Reply(text="fine", prompt_tokens=7)

    with LoopbackServer(responder=responder) as srv:
        engine = _engine(srv.base_url, transport, EMO_JUDGE_MAX_TRIES="2", EMO_JUDGE_TIMEOUT="0.5")
        try:
            bad, good = engine.run([_req("broken"), _req("fine")])
        finally:
            engine.close()
    assert not bad.ok and bad.error == reason and bad.tries == 2, (bad.error, bad.detail)
    assert good.ok and good.text == "fine" and good.prompt_tokens == 7 and good.api_model == "judge-model"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_connection_is_a_connection_failure(transport: str) -> None:
    engine = _engine(f"http://127.0.0.1:{unused_port()}/v1", transport, EMO_JUDGE_MAX_TRIES="2")
    try:
        (res,) = engine.run([_req("anyone?")])
    finally:
        engine.close()
    assert not res.ok and res.error == "connection", (res.error, res.detail)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_body_is_what_the_sdks_create_sends(transport: str) -> None:
    """The engine posts the request itself (no per-request SDK transform): the server must get the JSON the
    SDK's `chat.completions.create` would have sent for the same messages and parameters, images included."""
    import asyncio

    import openai

    bodies: list[dict] = []

    def responder(body: dict, attempt: int) -> Reply:
        bodies.append(body)
        return Reply(text="ok")

    jpeg = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4
    request = JudgeRequest(
        [text_message("system", "be fair"), user_message("rate the steps: é ✓", ImagePart(jpeg, detail="low"))],
        model="judge-model",
        max_tokens=32,
        params={"top_p": 0.5, "seed": 3},
    )
    with LoopbackServer(responder=responder) as srv:
        engine = _engine(srv.base_url, transport)
        try:
            assert engine.run([request])[0].ok
        finally:
            engine.close()

        async def by_create() -> None:
            client = openai.AsyncOpenAI(api_key=API_KEY, base_url=srv.base_url, max_retries=0)
            await client.chat.completions.create(
                model=request.resolved_model(), messages=request.render_messages(), **request.payload_params()
            )
            await client.close()

        asyncio.run(by_create())
    ours, sdks = bodies
    assert ours == sdks
    assert json.dumps(ours, sort_keys=True) == json.dumps(sdks, sort_keys=True)


def test_an_unknown_transport_is_named() -> None:
    with pytest.raises(JudgeConfigError, match=r"EMO_JUDGE_HTTP='curl' is not accepted; use one of: auto, aiohttp"):
        EndpointConfig.from_env({"OPENAI_BASE_URL": "http://x/v1", "EMO_JUDGE_HTTP": "curl"})
