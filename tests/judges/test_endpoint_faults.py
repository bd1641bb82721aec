"""A dead or hanging endpoint costs seconds, not minutes; a corrupt cache names itself; answers say where they came
from (issue 14, items 7-9)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import API_KEY, fast_env, unused_port

from judges import EndpointConfig, JudgeCache, JudgeEngine, JudgeRequest, text_message
from judges.cache import CacheFileError
from judges.testing import LoopbackServer, Reply


def _req(text: str) -> JudgeRequest:
    return JudgeRequest([text_message("user", text)], model="judge-model")


def test_connection_refused_stops_the_batch_at_once_and_says_so(tmp_path: Path, capsys) -> None:
    base = f"http://127.0.0.1:{unused_port()}/v1"
    # defaults that made a dead endpoint cost minutes: 6 tries with backoff from 1 s
    env = {"OPENAI_BASE_URL": base, "OPENAI_API_KEY": API_KEY, "EMO_JUDGE_CONCURRENCY": "4"}
    engine = JudgeEngine(EndpointConfig.from_env(env), cache=None, progress=False)
    started = time.perf_counter()
    batch = engine.run([_req(f"q{i}") for i in range(40)], desc="mme judge")
    took = time.perf_counter() - started
    engine.close()
    assert not any(r.ok for r in batch) and batch.stats.failures == 40
    assert set(batch.stats.failures_by_reason) == {"connection"}
    assert took < 15, took  # without the stop: 40 requests x 6 tries with 1-60 s backoff
    assert batch.stats.calls <= 8  # the first few tries, then nothing more was sent
    err = capsys.readouterr().err
    assert "mme judge: stopped sending to 127.0.0.1:" in err and "connection" in err
    assert "40 of 40 requests failed" in err  # the failure-share warning reaches the console


def test_a_hanging_endpoint_is_given_up_after_the_first_timeouts(capsys) -> None:
    with LoopbackServer(responder=lambda b, a: Reply("sleep", text="late", sleep_s=3), expected_api_key=API_KEY) as srv:
        env = fast_env(srv.base_url, EMO_JUDGE_TIMEOUT="0.3", EMO_JUDGE_CONCURRENCY="2")
        engine = JudgeEngine(EndpointConfig.from_env(env), cache=None, progress=False)
        batch = engine.run([_req(f"h{i}") for i in range(20)], desc="step agent")
        engine.close()
        calls = len(srv.calls)
        srv.wait_idle(10)
    assert batch.stats.failures == 20 and set(batch.stats.failures_by_reason) == {"timeout"}
    assert calls <= 4
    assert "step agent: stopped sending" in capsys.readouterr().err


def test_one_answer_keeps_the_batch_going_through_later_faults(tmp_path: Path) -> None:
    def responder(body: dict, attempt: int) -> Reply:
        text = body["messages"][-1]["content"]
        return Reply(text="fine") if text == "q0" else Reply("drop")

    with LoopbackServer(responder=responder, expected_api_key=API_KEY) as srv:
        env = fast_env(srv.base_url, EMO_JUDGE_MAX_TRIES="3", EMO_JUDGE_CONCURRENCY="1")
        engine = JudgeEngine(EndpointConfig.from_env(env), cache=None, progress=False)
        batch = engine.run([_req(f"q{i}") for i in range(4)])
        engine.close()
    assert batch[0].ok and batch.stats.calls == 1 + 3 * 3  # the endpoint answered once: every try is made


def test_a_corrupt_cache_file_names_itself_and_the_fix(tmp_path: Path) -> None:
    bad = tmp_path / "judge_cache.sqlite3"
    bad.write_bytes(b"\x00\x17 definitely not sqlite " * 100)
    with pytest.raises(CacheFileError) as err:
        JudgeCache(bad)
    assert str(bad) in str(err.value) and "delete" in str(err.value) and "EMO_CACHE_DIR" in str(err.value)


def test_answers_name_the_endpoint_that_produced_them(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "c")
    with LoopbackServer(responder=lambda b, a: Reply(text="from A"), expected_api_key=API_KEY) as a:
        engine = JudgeEngine(EndpointConfig.from_env(fast_env(a.base_url)), cache=cache, progress=False)
        first = engine.run([_req("same question")])
        engine.close()
        host_a = a.base_url.split("/")[2]
    with LoopbackServer(responder=lambda b, a: Reply(text="from B"), expected_api_key=API_KEY) as b:
        engine = JudgeEngine(EndpointConfig.from_env(fast_env(b.base_url)), cache=cache, progress=False)
        second = engine.run([_req("same question"), _req("new question")])
        engine.close()
        host_b = b.base_url.split("/")[2]
    cache.close()
    assert first[0].endpoint == host_a and first.stats.endpoints == {host_a: 1}
    # the cache filled from A answers the run pointed at B, and says so
    assert second[0].cached and second[0].text == "from A" and second[0].endpoint == host_a
    assert second[1].endpoint == host_b and second.stats.endpoints == {host_a: 1, host_b: 1}


@pytest.mark.slow
def test_a_corrupt_cache_stops_the_run_before_inference(tmp_path: Path) -> None:
    import subprocess
    import sys

    from conftest import env_without_secrets

    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "judge_cache.sqlite3").write_bytes(b"random bytes, not a database" * 64)
    with LoopbackServer(expected_api_key=API_KEY) as srv:
        env = env_without_secrets()
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", EMO_CACHE_DIR=str(cache_dir), EMO_PROGRESS="0",
                   OPENAI_BASE_URL=srv.base_url, OPENAI_API_KEY=API_KEY)  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--tasks", "mme_emotion_sample_ir",
             "--output_path", str(tmp_path / "out")],
            env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        assert srv.calls == []
    assert not sorted((tmp_path / "out").rglob("*_results.json"))
    out = proc.stdout + proc.stderr
    assert "judge_cache.sqlite3 is not a usable SQLite database" in out and "EMO_CACHE_DIR" in out
