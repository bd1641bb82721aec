"""A judge model's announced shutdown (issue 46, items 1 and 2), in process: the endpoint's `shutdown_date` read
from `GET /models` (and `GET /models/{id}` when the listing lacks the model), said once per model per process with
the days left (urgent within 30), kept out of every cache key and fingerprint; a value that is not a date is ignored
with one warning naming the endpoint and the value.

Real parts: the loopback OpenAI-compatible server, the engine with its SQLite cache, MME-Emotion's request builders
and fingerprint.  "Today" is given by EMO_TODAY (for tests only)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from conftest import fast_env
from fakes import Judge

from emo_tasks.mme_emotion import judge as mme_judge
from emo_tasks.mme_emotion.settings import MMESettings
from judges import fingerprint as fp
from judges import reset_engine, run_batch, shutdown
from judges.testing import LoopbackServer

STEP, JUDGE = "gpt-4.1-2025-04-14", "gpt-4o-2024-11-20"
TODAY = datetime.date(2026, 12, 5)
RECORD = {"mme_task": "ER-Lab", "row": 0, "answer": "The brows are lowered. Answer: anger"}


def day(n: int) -> str:
    return (TODAY + datetime.timedelta(days=n)).isoformat()


def _settings(srv: LoopbackServer, cache: Path) -> MMESettings:
    env = fast_env(srv.base_url, EMO_JUDGE="api", EMO_CACHE_DIR=str(cache), EMO_PROGRESS="0")
    return MMESettings.from_env(env, "sample")


def _step(settings: MMESettings) -> str:
    """One step-agent request through the shared engine; the key it was cached under."""
    batch = run_batch([mme_judge.step_request(RECORD, settings)], settings=settings.engine, progress=False)
    assert batch[0].ok, batch[0].detail
    return batch[0].key


@pytest.fixture(autouse=True)
def today(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shutdown.TODAY_ENV, TODAY.isoformat())


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "shuts down on" in line]


def test_a_listed_date_is_said_once_per_model_with_days_left_and_urgent_within_30(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = [{"id": STEP, "owned_by": "system", "shutdown_date": day(10)},
              {"id": JUDGE, "owned_by": "system", "shutdown_date": day(90)}]  # fmt: skip
    with LoopbackServer(responder=Judge(), models=listed) as srv:
        settings = _settings(srv, tmp_path / "cache")
        for _ in range(3):  # three batches of one process: one warning
            _step(settings)
        # the stage and the MME pipeline say every role at once: the judge model joins here
        dates = shutdown.warn_shutdowns(settings.engine.endpoint, dict(settings.models))
        shutdown.warn_shutdowns(settings.engine.endpoint, dict(settings.models))
        assert srv.model_asks == 1 and srv.model_retrieves == 0  # both listed: no retrieve
    assert dates == {STEP: day(10), JUDGE: day(90)}
    lines = _warnings(capsys.readouterr().err)
    assert len(lines) == 2, lines  # once per model, however many batches and calls
    step_line = next(x for x in lines if STEP in x)
    judge_line = next(x for x in lines if JUDGE in x)
    assert "URGENT" in step_line and "(10 days left)" in step_line and "(step)" in step_line
    assert "URGENT" not in judge_line and "(90 days left)" in judge_line and "(judge)" in judge_line
    for line in lines:
        assert "emo-tasks calibrate" in line and "emo-tasks cache export" in line


def test_a_model_the_listing_lacks_is_retrieved_once_null_and_absent_say_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OpenAI-style listing without the step model; `GET /models/{id}` answers it with a date.  A null date (none
    announced) and an absent field (vLLM) give no warning."""
    unlisted = [{"id": STEP, "owned_by": "system", "shutdown_date": day(40)}]
    with LoopbackServer(responder=Judge(), models=[{"id": JUDGE, "shutdown_date": None}],
                        unlisted_models=unlisted) as srv:  # fmt: skip
        settings = _settings(srv, tmp_path / "cache")
        for _ in range(2):
            shutdown.warn_shutdowns(settings.engine.endpoint, dict(settings.models))
        assert srv.model_asks == 1 and srv.model_retrieves == 1  # the unlisted model only, once
    (line,) = _warnings(capsys.readouterr().err)
    assert STEP in line and "(40 days left)" in line and "URGENT" not in line
    reset_engine()
    with LoopbackServer(responder=Judge(), models=[{"id": STEP}, {"id": JUDGE}]) as srv:
        settings = _settings(srv, tmp_path / "cache")
        assert shutdown.warn_shutdowns(settings.engine.endpoint, dict(settings.models)) == {}
    assert _warnings(capsys.readouterr().err) == []


@pytest.mark.parametrize("garbage", ["soon", "2027-13-40", 20270114, {"date": "2027-01-14"}])
def test_a_value_that_is_not_a_date_is_one_warning_never_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], garbage: object
) -> None:
    listed = [{"id": STEP, "shutdown_date": garbage}, {"id": JUDGE}]
    with LoopbackServer(responder=Judge(), models=listed) as srv:
        settings = _settings(srv, tmp_path / "cache")
        for _ in range(2):
            _step(settings)
        assert shutdown.warn_shutdowns(settings.engine.endpoint, dict(settings.models)) == {}
        host = settings.engine.endpoint.host
    err = capsys.readouterr().err
    bad = [line for line in err.splitlines() if "not a date" in line]
    assert len(bad) == 1 and host in bad[0] and STEP in bad[0], err
    shown = str(garbage) if not isinstance(garbage, str) else garbage
    assert shown.split(":")[0].strip("{'\"") in bad[0]
    assert _warnings(err) == []


def test_keys_and_fingerprint_are_the_same_with_without_and_with_another_date(tmp_path: Path) -> None:
    """The date is a fact about the endpoint: it joins no cache key and no fingerprint, whether it is there,
    moves or vanishes (and a second process reuses the first one's cached answer: 0 chat requests)."""
    seen: list[tuple[str, dict, int]] = []
    for value in (None, day(10), day(200), "garbage", "absent"):
        entry = {"id": STEP, "owned_by": "vllm", "root": "/ckpt/a", "max_model_len": 32768}
        if value != "absent":
            entry["shutdown_date"] = value
        reset_engine()
        with LoopbackServer(responder=Judge(), models=[entry]) as srv:
            settings = _settings(srv, tmp_path / "cache")
            key = _step(settings)
            fingerprint = mme_judge.judge_fingerprint(settings, fp.served_models(settings.engine.endpoint))
            seen.append((key, fingerprint, len(srv.calls)))
    assert len({k for k, _, _ in seen}) == 1
    assert all(f == seen[0][1] for _, f, _ in seen)
    assert [n for _, _, n in seen] == [1, 0, 0, 0, 0]  # the first run paid; every later one hit the cache
    assert "shutdown" not in str(seen[0][1])


def test_today_is_injectable_and_the_notice_counts_past_days() -> None:
    assert shutdown.today({"EMO_TODAY": "2027-01-04"}) == datetime.date(2027, 1, 4)
    assert shutdown.today({"EMO_TODAY": "not a day"}) == datetime.date.today()
    line = shutdown.notice(JUDGE, ["judge"], "2027-01-14", on=datetime.date(2027, 1, 20))
    assert "(6 days ago)" in line and "URGENT" in line
    assert fp.shutdown_date("2027-02-30") is None and fp.shutdown_date("2027-01-14") == "2027-01-14"
