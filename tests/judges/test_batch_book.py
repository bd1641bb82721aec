"""The batch book (`judges.batch`) and the provider's side (`judges.batch_api`) under the engine, in process: the
real engine, cache and openai SDK against the loopback Files + Batches server, driven by the stage's own driver
(`emo_tasks.judging.batching.judge_in_batches`) around a plain `JudgeEngine.run`.  The fast tier's proof that a
batched run answers as a synchronous one, splits files within the limits, retries as the engine retries, and
resumes from its book; the CLI life cycles are tests/judging/test_batch_stage.py."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY

from emo_tasks.judging.batching import judge_in_batches
from judges.batch import BatchBook, BatchStateError
from judges.batch_files import BatchLimits, BatchOptions, plan_files, request_line
from judges.config import EndpointConfig, JudgeConfigError
from judges.engine import JudgeEngine
from judges.request import JudgeRequest
from judges.testing import LoopbackServer, Reply, echo_responder
from judges.testing_batches import BatchServer


def _requests(n: int, model: str = "judge-a", **kw: Any) -> list[JudgeRequest]:
    return [JudgeRequest([{"role": "user", "content": f"question {i}"}], model=model, **kw) for i in range(n)]


def _env(srv: LoopbackServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": API_KEY}


def _batched(
    srv: BatchServer, tmp: Path, requests: list[JudgeRequest], *, options: BatchOptions | None = None, **ep: Any
) -> tuple[int, list[Any], io.StringIO]:
    """Judge `requests` through the driver: (exit code, the last pass's results, what it printed)."""
    engine = JudgeEngine(EndpointConfig.from_env(_env(srv), **ep), cache=tmp / "cache.sqlite", progress=False)
    got: list[Any] = []

    def one_pass() -> int:
        got[:] = list(engine.run(requests, progress=False))
        return 0

    err = io.StringIO()
    options = options or BatchOptions(poll_s=0)
    try:
        code = judge_in_batches(one_pass, tmp / "judged", _env(srv), options, err)
    finally:
        engine.close()
    return code, got, err


def _sync(tmp: Path, requests: list[JudgeRequest], responder: Any = echo_responder, **ep: Any) -> list[Any]:
    with LoopbackServer(responder=responder, expected_api_key=API_KEY) as srv:
        engine = JudgeEngine(EndpointConfig.from_env(_env(srv), **ep), cache=tmp / "sync.sqlite", progress=False)
        try:
            return list(engine.run(requests, progress=False))
        finally:
            engine.close()


def test_batched_answers_equal_the_synchronous_ones_split_within_the_limits_and_a_rerun_sends_nothing(
    tmp_path: Path,
) -> None:
    reqs = _requests(7) + _requests(2, model="judge-b") + _requests(1)  # the last one repeats the first
    options = BatchOptions(limits=BatchLimits(max_requests=3), poll_s=0)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        code, got, err = _batched(srv, tmp_path, reqs, options=options)
        counters = srv.counters()
        assert code == 0, err.getvalue()
        assert [r.text for r in got] == [r.text for r in _sync(tmp_path, reqs)]
        assert all(r.ok for r in got)
        state = json.loads((tmp_path / "judged" / "emo_tasks_batch" / "state.json").read_text())
        # one model per file, at most 3 requests each: judge-a's 7 distinct in 3 files, judge-b's 2 in 1
        assert sorted((f["model"], f["requests"]) for f in state["files"]) == [
            ("judge-a", 1), ("judge-a", 3), ("judge-a", 3), ("judge-b", 2),
        ]  # fmt: skip
        assert counters["uploads"] == counters["batches_created"] == 4 and counters["lines_run"] == 9
        assert "submitted as batch-" in err.getvalue() and "completed, 3 of 3 done, 0 failed" in err.getvalue()
        # the same requests again: answered from the cache, nothing uploaded
        code, again, _ = _batched(srv, tmp_path, reqs, options=options)
        assert code == 0 and [r.text for r in again] == [r.text for r in got]
        assert srv.counters()["uploads"] == 4
    assert srv.calls == []  # never the synchronous route


def _first_answer_bad(body: dict, attempt: int) -> Any:
    return Reply(text="no verdict here") if attempt == 1 else echo_responder(body, attempt)


def _validate(text: str) -> str | None:
    return None if "no verdict" not in text else "no verdict"


def test_an_unusable_answer_goes_into_the_next_round_then_fails_as_the_engine_fails_it(tmp_path: Path) -> None:
    reqs = _requests(3, validate=_validate)
    with BatchServer(responder=_first_answer_bad, expected_api_key=API_KEY) as srv:
        code, got, _ = _batched(srv, tmp_path / "retry", reqs, invalid_retries=1)
        assert code == 0 and all(r.ok for r in got) and srv.counters()["batches_created"] == 2
    with BatchServer(responder=_first_answer_bad, expected_api_key=API_KEY) as srv:
        code, got, _ = _batched(srv, tmp_path / "fail", reqs, invalid_retries=0)
        assert srv.counters()["batches_created"] == 1
    assert code == 0
    assert [(r.ok, r.error, r.text) for r in got] == [(False, "invalid_answer", "no verdict here")] * 3
    sync = _sync(tmp_path, reqs, _first_answer_bad, invalid_retries=0)  # as the engine fails them
    assert [(r.ok, r.error, r.text) for r in sync] == [(r.ok, r.error, r.text) for r in got]


def test_an_upload_and_a_batch_whose_answers_were_lost_are_found_not_made_twice(tmp_path: Path) -> None:
    def fault(route: str, nth: int) -> Reply | None:
        return Reply("lost") if (route, nth) in {("upload", 1), ("create", 1)} else None

    with BatchServer(responder=echo_responder, expected_api_key=API_KEY, fault=fault) as srv:
        code, got, err = _batched(srv, tmp_path, _requests(4))
        counters = srv.counters()
    assert code == 0 and all(r.ok for r in got), err.getvalue()
    assert counters["uploads"] == counters["batches_created"] == 1
    assert counters["hits"]["upload"] == counters["hits"]["create"] == 1  # found, not sent again


def test_submit_only_exits_5_and_the_book_on_disk_lets_another_process_collect(tmp_path: Path) -> None:
    reqs = _requests(5)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        code, got, err = _batched(srv, tmp_path, reqs, options=BatchOptions(poll_s=0, submit_only=True))
        assert code == 5 and got == [] and "run the same command to collect" in err.getvalue()
        book = BatchBook(tmp_path / "judged" / "emo_tasks_batch", BatchOptions(), EndpointConfig.from_env(_env(srv)))
        assert [(f.requests, f.collected, bool(f.batch_id)) for f in book.files] == [(5, False, True)]
        code, got, _ = _batched(srv, tmp_path, reqs)
        assert code == 0 and [r.text for r in got] == [r.text for r in _sync(tmp_path, reqs)]
        assert srv.counters()["uploads"] == srv.counters()["batches_created"] == 1


def test_a_book_of_batches_out_at_another_endpoint_is_refused(tmp_path: Path) -> None:
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        code, _, _ = _batched(srv, tmp_path, _requests(2), options=BatchOptions(poll_s=0, submit_only=True))
        assert code == 5
    other = EndpointConfig(base_url="http://127.0.0.1:9/v1", api_key=API_KEY)
    with pytest.raises(BatchStateError, match="submitted to 127.0.0.1:"):
        BatchBook(tmp_path / "judged" / "emo_tasks_batch", BatchOptions(), other)
    with pytest.raises(BatchStateError, match=r"went to the Batch API; finish them the same way \(--batch\)"):
        BatchBook(tmp_path / "judged" / "emo_tasks_batch", BatchOptions(file_dir=str(tmp_path / "f")), other)


def test_request_lines_and_how_they_split() -> None:
    line = request_line("k1", {"model": "m", "messages": []})
    assert json.loads(line) == {"custom_id": "k1", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": "m", "messages": []}}  # fmt: skip
    assert line.endswith(b"\n")
    plans = plan_files([("a", 400), ("b", 10), ("a", 700), ("a", 100)], BatchLimits(max_requests=5, max_bytes=1024))
    assert [(p.model, p.requests, p.bytes) for p in plans] == [("a", 1, 400), ("b", 1, 10), ("a", 2, 800)]
    with pytest.raises(ValueError, match="over the"):
        plan_files([("a", 2048)], BatchLimits(max_bytes=1024))
    with pytest.raises(ValueError):
        BatchLimits(max_requests=0)


def test_a_request_larger_than_a_file_may_hold_is_refused_naming_its_size(tmp_path: Path) -> None:
    big = [JudgeRequest([{"role": "user", "content": "x" * 5000}], model="judge-a")]
    options = BatchOptions(limits=BatchLimits(max_bytes=2048), poll_s=0)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        with pytest.raises(JudgeConfigError, match=r"request is 0\.0 MB \(\d+ bytes\), over the 0\.0 MB"):
            _batched(srv, tmp_path, big, options=options)
        assert srv.counters()["uploads"] == 0


def test_a_provider_refusing_the_file_stops_naming_its_error_and_fallback_sync_sends_it_directly(
    tmp_path: Path,
) -> None:
    reqs = _requests(3)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        srv.line_check = lambda line: ("invalid_request", "image inputs are not supported in batches")
        code, got, err = _batched(srv, tmp_path / "refused", reqs)
        assert code == 3 and got == []
        assert "failed at 127.0.0.1" in err.getvalue()
        assert "invalid_request: image inputs are not supported in batches (line 1)" in err.getvalue()
        assert srv.calls == []
        code, got, err = _batched(srv, tmp_path / "refused", reqs, options=BatchOptions(poll_s=0, fallback="sync"))
        # the same command resubmits (refused again), and with --batch-fallback sync the requests go directly
        assert code == 0 and [r.text for r in got] == [r.text for r in _sync(tmp_path, reqs)]
        assert len(srv.calls) == 3


def test_a_retired_model_in_an_output_line_stops_the_stage_as_the_synchronous_path_does(tmp_path: Path) -> None:
    from judges.endpoint import JudgeModelNotFound

    def gone(body: dict, attempt: int) -> Any:
        return Reply(kind="status", status=404, text=f"The model `{body['model']}` does not exist.")

    with BatchServer(responder=gone, expected_api_key=API_KEY) as srv:
        with pytest.raises(JudgeModelNotFound, match="'judge-a' is retired or unknown"):
            _batched(srv, tmp_path, _requests(2))
