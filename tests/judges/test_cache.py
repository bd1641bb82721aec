"""The persistent cache: reruns make no call, a killed run resumes, keys ignore endpoint and key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import API_KEY, env_without_secrets

from judges import (
    EndpointConfig,
    ImagePart,
    JudgeCache,
    JudgeConfigError,
    JudgeEngine,
    JudgeRequest,
    text_message,
    user_message,
)
from judges.testing import LoopbackServer, Reply


def req(text: str) -> JudgeRequest:
    return JudgeRequest([text_message("user", text)], model="judge-model")


def test_second_run_makes_zero_calls(server: LoopbackServer, make_engine) -> None:
    engine = make_engine(server)
    first = engine.run([req(f"r{i}") for i in range(25)])
    assert first.stats.calls == 25 and first.stats.cache_hits == 0
    n_calls = len(server.calls)
    second = engine.run([req(f"r{i}") for i in range(25)])
    assert len(server.calls) == n_calls
    assert second.stats.calls == 0 and second.stats.cache_hits == 25
    assert [r.text for r in second] == [r.text for r in first]
    assert all(r.cached for r in second)


def test_cached_batch_needs_no_endpoint_or_key(server: LoopbackServer, make_engine, tmp_path: Path) -> None:
    make_engine(server, cache_dir=tmp_path / "c").run([req("a")])
    offline = JudgeEngine(EndpointConfig.from_env({}), cache=JudgeCache(tmp_path / "c"), progress=False)
    batch = offline.run([req("a")])
    assert batch[0].ok and batch[0].cached and batch.stats.calls == 0
    offline.close()


def test_failures_are_not_cached(server: LoopbackServer, make_engine) -> None:
    server.responder = lambda body, attempt: Reply("status", status=500)
    engine = make_engine(server, EMO_JUDGE_MAX_TRIES="2")
    assert engine.run([req("x")])[0].error == "server_error"
    server.responder = lambda body, attempt: Reply(text="recovered")
    again = engine.run([req("x")])
    assert again[0].ok and again[0].text == "recovered" and not again[0].cached


def test_key_is_endpoint_and_api_key_independent(server: LoopbackServer, make_engine, tmp_path: Path) -> None:
    make_engine(server, cache_dir=tmp_path / "shared").run([req("same question")])
    with LoopbackServer() as other:
        engine = JudgeEngine(
            EndpointConfig.from_env({"OPENAI_BASE_URL": other.base_url, "OPENAI_API_KEY": "sk-another-key"}),
            cache=JudgeCache(tmp_path / "shared"),
            progress=False,
        )
        batch = engine.run([req("same question")])
        engine.close()
        assert batch[0].cached and other.calls == []


def test_key_depends_on_content_model_params_and_media(tmp_path: Path) -> None:
    from PIL import Image

    red, blue = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    base = JudgeRequest([user_message("q", ImagePart(red))], model="m")
    keys = {
        base.cache_key(),
        JudgeRequest([user_message("q", ImagePart(blue))], model="m").cache_key(),
        JudgeRequest([user_message("q2", ImagePart(red))], model="m").cache_key(),
        JudgeRequest([user_message("q", ImagePart(red))], model="m2").cache_key(),
        JudgeRequest([user_message("q", ImagePart(red))], model="m", temperature=0.7).cache_key(),
    }
    assert len(keys) == 5
    assert JudgeRequest([user_message("q", ImagePart(red.copy()))], model="m").cache_key() == base.cache_key()
    assert API_KEY not in base.cache_key()


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from judges import EndpointConfig, JudgeCache, JudgeEngine, JudgeRequest, text_message
    base_url, cache_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    engine = JudgeEngine(EndpointConfig.from_env({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": sys.argv[4]},
                                                 concurrency=4), cache=JudgeCache(cache_dir), progress=False)
    engine.run([JudgeRequest([text_message("user", f"k{i}")], model="judge-model") for i in range(n)])
    print("finished", flush=True)
    """
)


@pytest.mark.slow  # a subprocess: not in the fast tier
def test_kill_9_mid_run_resumes_without_repeating_answered_calls(server: LoopbackServer, tmp_path: Path) -> None:
    n, concurrency = 60, 4
    server.latency_s = 0.15
    script = tmp_path / "judge_run.py"
    script.write_text(KILL_SCRIPT)
    cache_dir = tmp_path / "killcache"
    proc = subprocess.Popen(
        [sys.executable, str(script), server.base_url, str(cache_dir), str(n), API_KEY],
        env=env_without_secrets(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while len(server.keys_answered()) < 20 and time.time() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and "finished" not in out
    server.wait_idle()
    answered_before_kill = len(server.keys_answered())

    cached_before = JudgeCache(cache_dir).keys()
    assert 0 < len(cached_before) < n
    # only what was in flight at the kill can be lost
    assert answered_before_kill - len(cached_before) <= concurrency

    server.reset_log()
    engine = JudgeEngine(
        EndpointConfig.from_env({"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": API_KEY}, concurrency=4),
        cache=JudgeCache(cache_dir),
        progress=False,
    )
    rerun = engine.run([JudgeRequest([text_message("user", f"k{i}")], model="judge-model") for i in range(n)])
    assert all(r.ok for r in rerun)
    assert {r.key for r in rerun if r.cached} == cached_before
    assert len(server.calls) == n - len(cached_before) == rerun.stats.calls
    assert [r.text for r in rerun] == [f"answer to k{i}" for i in range(n)]

    server.reset_log()
    third = engine.run([JudgeRequest([text_message("user", f"k{i}")], model="judge-model") for i in range(n)])
    engine.close()
    assert third.stats.calls == 0 and server.calls == []
    assert API_KEY not in out + err


def test_emo_tasks_cache_location_and_off_switch(server: LoopbackServer, monkeypatch, tmp_path: Path) -> None:
    """The judge engine has no cache location of its own: emo-tasks gives it its cache folder (EMO_CACHE_DIR);
    EMO_JUDGE_CACHE=0 turns the cache off."""
    from conftest import fast_env

    from emo_tasks.settings import cache_dir
    from judges import EngineSettings, get_engine

    env = {**fast_env(server.base_url), "EMO_CACHE_DIR": str(tmp_path / "user_cache"), "EMO_PROGRESS": "0"}
    settings = EngineSettings.from_env(env, cache_dir=cache_dir(env))
    engine = get_engine(settings)
    engine.run([req("d1")])
    assert engine.run([req("d1")]).stats.calls == 0
    assert get_engine(settings) is engine  # one shared engine per settings
    engine.close()
    assert (tmp_path / "user_cache" / "judge_cache.sqlite3").is_file()

    uncached_settings = EngineSettings.from_env({**env, "EMO_JUDGE_CACHE": "0"}, cache_dir=cache_dir(env))
    assert uncached_settings.cache_path is None
    uncached = get_engine(uncached_settings)
    assert uncached.run([req("d1")]).stats.calls == 1 and uncached.run([req("d1")]).stats.calls == 1
    with pytest.raises(JudgeConfigError, match="EMO_JUDGE_CACHE='nope'.*accepted"):
        EngineSettings.from_env({**env, "EMO_JUDGE_CACHE": "nope"}, cache_dir=tmp_path)


def test_default_cache_dir_follows_the_platform(monkeypatch, tmp_path: Path) -> None:
    from emo_tasks.settings import cache_dir

    assert cache_dir({"EMO_CACHE_DIR": str(tmp_path / "x")}) == tmp_path / "x"
    assert cache_dir({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == tmp_path / "xdg" / "emo_tasks"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir({}) == tmp_path / "home" / ".cache" / "emo_tasks"


def test_put_many_stores_every_row_as_put_does_in_one_transaction(tmp_path: Path) -> None:
    """A batch round's answers are cached together (`judges.batch`); each reads back as one `put` would store it."""
    one, many = JudgeCache(tmp_path / "one.sqlite"), JudgeCache(tmp_path / "many.sqlite")
    rows = [
        (f"k{i}", "m", f"answer {i}", 10 + i, i, {"role": "judge", "i": i}, "m-2024", "127.0.0.1:1") for i in range(50)
    ]
    for row in rows:
        one.put(*row)
    statements: list[str] = []
    many._conn.set_trace_callback(statements.append)
    assert many.put_many(rows) == 50 and many.put_many([]) == 0
    many._conn.set_trace_callback(None)
    assert statements.count("COMMIT") == 1
    assert many.get_many(r[0] for r in rows) == one.get_many(r[0] for r in rows)
    one.close()
    many.close()
