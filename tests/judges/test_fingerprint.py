"""The judge fingerprint (issue 34, item 3): what the endpoint serves behind a model name, asked once per endpoint per
process, joins the cache key only when it says more than the name; a changed fingerprint part misses the cache, an
unchanged one hits it (0 chat requests); the default's cache keys are the ones they always were.

Real parts: the loopback OpenAI-compatible server (its `/models` answered as OpenAI, as vLLM, or not at all), the
engine with its SQLite cache, MME-Emotion's own request builders and fingerprint."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import fast_env
from fakes import Judge

from emo_tasks.mme_emotion import judge as mme_judge
from emo_tasks.mme_emotion.settings import MMESettings
from judges import EngineSettings, JudgeRequest, reset_engine, run_batch, text_message, user_message
from judges import fingerprint as fp
from judges.testing import LoopbackServer

RECORD = {"mme_task": "ER-Lab", "row": 0, "answer": "The brows are lowered. Answer: anger"}
#: Keys of today's default requests, computed by the code before fingerprints existed (main at 897ed31): an
#: existing user's cache must keep answering them.
PAPER_STEP_KEY = "277c460100ada955a241a45a83c418193eac5d7e3e04e855e9afa344f2392f58"
PLAIN_KEY = "ca951b21fc20a384b4232cb1b1563a69c3c4ee40d643fd122dc23f242a2fe466"
VLLM = {"id": "gpt-4.1-2025-04-14", "owned_by": "vllm", "root": "/ckpt/a", "max_model_len": 32768}


def _settings(srv: LoopbackServer, cache: Path, **extra: str) -> MMESettings:
    env = fast_env(srv.base_url, EMO_JUDGE="api", EMO_CACHE_DIR=str(cache), EMO_PROGRESS="0", **extra)
    return MMESettings.from_env(env, "sample")


def _ask(settings: MMESettings, srv: LoopbackServer) -> tuple[int, dict]:
    """One step-agent request through the shared engine: (chat requests the server got, the fingerprint)."""
    before = len(srv.calls)
    batch = run_batch([mme_judge.step_request(RECORD, settings)], settings=settings.engine, progress=False)
    assert batch[0].ok, batch[0].detail
    listing = fp.served_models(settings.engine.endpoint)
    return len(srv.calls) - before, mme_judge.judge_fingerprint(settings, listing)


def _new_process() -> None:
    """What a new process knows: no engine, no `/models` answer."""
    reset_engine()


def test_default_cache_keys_are_unchanged(tmp_path: Path) -> None:
    """The paper's default against an endpoint that lists only the model id (OpenAI's `/models`) keeps every key:
    the request keys are the pre-fingerprint ones, and the engine stores and finds the answer under them."""
    req = JudgeRequest([text_message("system", "sys"), user_message("rate this")], model="gpt-4o-2024-11-20")
    assert req.cache_key() == req.cache_key({}) == PLAIN_KEY
    openai_like = [{"id": "gpt-4.1-2025-04-14", "owned_by": "system"}, {"id": "gpt-4o-2024-11-20", "owned_by": "x"}]
    with LoopbackServer(responder=Judge(), models=openai_like) as srv:
        settings = _settings(srv, tmp_path / "cache")
        step = mme_judge.step_request(RECORD, settings)
        assert step.cache_key() == PAPER_STEP_KEY and step.payload_params() == {"temperature": 0.0}
        calls, fingerprint = _ask(settings, srv)
        assert calls == 1 and srv.model_asks == 1
        from judges.engine import get_engine

        assert get_engine(settings.engine).cache.keys() == {PAPER_STEP_KEY}  # type: ignore[union-attr]
        assert fingerprint["roles"]["step"]["served"] == {"id": "gpt-4.1-2025-04-14"}


def test_a_changed_served_model_misses_the_cache_an_unchanged_one_hits(tmp_path: Path) -> None:
    """vLLM serving another checkpoint (`root`) under the same name is another judge: its answers are asked again.
    The same setup again hits the cache with 0 chat requests and gives the same fingerprint (deterministic)."""
    with LoopbackServer(responder=Judge(), models=[VLLM]) as srv:
        settings = _settings(srv, tmp_path / "cache")
        calls, first = _ask(settings, srv)
        assert calls == 1
        assert first["roles"]["step"]["served"] == {"id": VLLM["id"], "max_model_len": 32768, "root": "/ckpt/a"}
        _new_process()
        calls, again = _ask(settings, srv)
        assert calls == 0 and again == first  # unchanged: a hit, the same fingerprint
        _new_process()
        srv.models = [{**VLLM, "root": "/ckpt/b"}]
        calls, other = _ask(settings, srv)
        assert calls == 1, "a changed served root must not reuse the cached answer"
        assert fp.difference(first, other) == "step served model id gpt-4.1-2025-04-14, max_model_len 32768, root " \
            "/ckpt/a vs id gpt-4.1-2025-04-14, max_model_len 32768, root /ckpt/b"  # fmt: skip
        _new_process()
        srv.models = [{**VLLM, "max_model_len": 8192}]
        assert _ask(settings, srv)[0] == 1  # another context length: asked again too


def test_a_changed_temperature_or_prompt_template_misses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fingerprint part a request carries changes the fingerprint and misses the cache."""
    with LoopbackServer(responder=Judge(), models=[VLLM]) as srv:
        settings = _settings(srv, tmp_path / "cache")
        calls, base = _ask(settings, srv)
        assert calls == 1
        warmer = dataclasses.replace(settings, sampling=(("step", (("temperature", 0.2),)),))
        calls, changed = _ask(warmer, srv)
        assert calls == 1 and fp.difference(base, changed) == "step temperature 0.0 vs 0.2"
        proto = dict(mme_judge.protocol())
        proto["step_template"] = proto["step_template"] + "\nBe brief."
        monkeypatch.setattr(mme_judge, "protocol", lambda: proto)
        monkeypatch.setattr("emo_tasks.mme_emotion.protocol.protocol", lambda: proto)
        calls, edited = _ask(settings, srv)
        assert calls == 1 and fp.difference(base, edited) == "prompt templates differ"
        monkeypatch.undo()
        assert _ask(settings, srv) == (0, base)  # back to the original setup: its answer is still cached


def test_models_is_asked_once_per_endpoint_and_its_absence_is_not_a_failure(tmp_path: Path) -> None:
    """Never while settings are read; once per endpoint per process however many batches; a server without
    `/models` (404) or one that cannot be reached gives "not reported" and the judge still answers."""
    with LoopbackServer(responder=Judge(), models_status=404) as srv:
        settings = _settings(srv, tmp_path / "cache")
        assert srv.model_asks == 0  # reading the settings asks nothing
        for _ in range(3):
            calls, fingerprint = _ask(settings, srv)
        assert srv.model_asks == 1
        assert fingerprint["roles"]["step"]["served"] == fp.NOT_REPORTED
        assert mme_judge.step_request(RECORD, settings).cache_key() in _engine_keys(settings)
    unreachable = EngineSettings.from_env(fast_env("http://127.0.0.1:9/v1"))
    assert fp.served_models(unreachable.endpoint) is None


def _engine_keys(settings: MMESettings) -> set[str]:
    from judges.engine import get_engine

    return get_engine(settings.engine).cache.keys()  # type: ignore[union-attr]


def test_fingerprint_is_deterministic_and_holds_no_host_or_key(tmp_path: Path) -> None:
    """Two builds of the same setup are the same JSON; neither the endpoint host nor the API key is in it."""
    import json

    with LoopbackServer(responder=Judge(), models=[VLLM]) as srv:
        settings = _settings(srv, tmp_path / "cache")
        listing = fp.served_models(settings.engine.endpoint)
        one = json.dumps(mme_judge.judge_fingerprint(settings, listing), sort_keys=True)
        two = json.dumps(mme_judge.judge_fingerprint(settings, dict(listing or {})), sort_keys=True)
        assert one == two
        assert "127.0.0.1" not in one and settings.engine.endpoint.api_key not in one
    fingerprint = json.loads(one)
    assert set(fingerprint) == {"schema", "protocol", "prompts", "roles"}
    assert set(fingerprint["roles"]["judge"]) == {"model", "served", "temperature", "max_tokens", "seed"}


def test_difference_ignores_what_one_side_could_not_learn() -> None:
    roles = {"judge": ("m", {"temperature": 0.0})}
    known = fp.fingerprint(roles, protocol="p", prompts="t", listing={"m": {"id": "m", "root": "/r"}})
    unknown = fp.fingerprint(roles, protocol="p", prompts="t", listing=None)
    assert fp.difference(known, unknown) is None and fp.difference(known, known) is None
    other = fp.fingerprint({"judge": ("m", {"temperature": 0.0, "seed": 1, "top_p": 0.9})}, protocol="p2",
                           prompts="t", listing=None)  # fmt: skip
    assert fp.difference(known, other) == "protocol p vs p2; judge params not set vs top_p 0.9; judge seed not set vs 1"


def test_a_recorded_served_identity_stands_in_only_for_what_the_endpoint_does_not_report(tmp_path: Path) -> None:
    """Issue 42 item 1: a judged folder's recorded served identity stands in for a model `/models` does not report
    now (so the cache keys stay the folder's), never for one it does report, and is forgotten for the next folder."""
    other = {**VLLM, "id": "gpt-4o-2024-11-20", "root": "/ckpt/j"}
    with LoopbackServer(responder=Judge(), models=[{"id": "gpt-4.1-2025-04-14", "root": "/ckpt/now"}]) as srv:
        endpoint = _settings(srv, tmp_path / "cache").engine.endpoint
        try:
            fp.assume_served(endpoint, {"gpt-4.1-2025-04-14": VLLM, "gpt-4o-2024-11-20": other})
            listing = fp.served_models(endpoint)
            assert listing is not None and listing["gpt-4.1-2025-04-14"]["root"] == "/ckpt/now"  # reported wins
            assert listing["gpt-4o-2024-11-20"] == other  # not reported: the recorded one
            fp.forget_assumed()
            assert "gpt-4o-2024-11-20" not in (fp.served_models(endpoint) or {})
        finally:
            fp.forget_served()
