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

from emo_tasks.judging.batching import judge_with_book
from emo_tasks.judging.stage_types import StageRefused
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
    srv: BatchServer,
    tmp: Path,
    requests: list[JudgeRequest],
    *,
    options: BatchOptions | None = None,
    sync: bool = False,
    cancel: float | None = None,
    **ep: Any,
) -> tuple[int, list[Any], io.StringIO]:
    """Judge `requests` through the driver: (exit code, the last pass's results, what it printed).  `sync`: the
    synchronous stage over the same folder (no --batch); `cancel`: --batch-cancel (its --batch-poll)."""
    engine = JudgeEngine(EndpointConfig.from_env(_env(srv), **ep), cache=tmp / "cache.sqlite", progress=False)
    got: list[Any] = []

    def one_pass() -> int:
        got[:] = list(engine.run(requests, progress=False))
        return 0

    err = io.StringIO()
    options = None if sync else options or BatchOptions(poll_s=0)
    try:
        code = judge_with_book(one_pass, tmp / "judged", _env(srv), options, err, cancel)
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


def _one_line_back(tmp: Path, line: dict[str, Any], max_tries: int = 2) -> tuple[Any, BatchBook]:
    """A book whose one request went into a collected file that brought back `line`; what `resolve` makes of it
    (a JudgeResult, None to send directly, or the BatchPending of a request sent again), and the book."""
    import asyncio

    from judges.batch import BatchFile, BatchPending

    endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", api_key=API_KEY, max_tries=max_tries)
    engine = JudgeEngine(endpoint, cache=tmp / "cache.sqlite", progress=False)
    book = BatchBook(tmp / "book", BatchOptions(), endpoint)
    req = _requests(1)[0]
    key = engine.key_of(req, None)
    (book.folder / "outputs").mkdir(parents=True)
    (book.folder / "outputs" / "r1.output.jsonl").write_text(json.dumps({**line, "custom_id": key}) + "\n")
    book.files.append(BatchFile("r1", 1, "judge-a", 1, 10, collected=True, output="outputs/r1.output.jsonl"))
    book.submitted[key] = "r1"
    book.begin_pass()
    try:
        got: Any = asyncio.run(book.resolve(engine, key, req))
    except BatchPending as exc:
        got = exc
    book.abort_pass()
    engine.close()
    return got, book


def test_how_each_kind_of_output_line_is_taken(tmp_path: Path) -> None:
    from judges.batch import BatchPending

    answer = {"response": {"status_code": 200, "body": {"choices": [{"message": {"content": "fine"}}], "model": "m"}}}
    got, book = _one_line_back(tmp_path / "ok", answer)
    assert got.ok and got.text == "fine" and got.tries == 1 and not got.cached
    # expired (OpenAI's error file): sent again, no try counted
    expired = {"response": None, "error": {"code": "batch_expired", "message": "not run"}}
    got, book = _one_line_back(tmp_path / "expired", expired)
    assert isinstance(got, BatchPending) and list(book.outcomes.values()) == [{"r1": "unrun"}]
    # an HTTP 500 (OpenAI's error file) and a failure with no response (vLLM, or a provider's own error): tries
    for name, line in {
        "500": {"response": {"status_code": 500, "body": {"error": {"message": "boom"}}}, "error": None},
        "noresponse": {"response": None, "error": {"code": "server_error", "message": "boom"}},
    }.items():
        got, book = _one_line_back(tmp_path / name, line)
        assert isinstance(got, BatchPending) and list(book.outcomes.values()) == [{"r1": "retry"}], name
        got, _ = _one_line_back(tmp_path / f"{name}_last", line, max_tries=1)
        assert (got.ok, got.error) == (False, "server_error"), name
    # a 400: not retried, a failure kept for the rest of the stage
    got, book = _one_line_back(
        tmp_path / "400", {"response": {"status_code": 400, "body": {"error": {"message": "no"}}}}
    )
    assert (got.ok, got.error) == (False, "http_400") and list(book.failed) == [got.key]
    # vLLM's failed line: a null body, the error beside it
    vllm = {"response": {"status_code": 400, "body": None}, "error": "URL /chat/completions was used."}
    got, _ = _one_line_back(tmp_path / "vllm", vllm)
    assert (got.ok, got.error) == (False, "http_400") and "URL /chat/completions" in got.detail


# ---------------------------------------------------------------------- issue 42: the book outside --batch, its reading


def _state(tmp: Path) -> Path:
    return tmp / "judged" / "emo_tasks_batch" / "state.json"


def test_a_synchronous_stage_refuses_while_batches_are_out_and_batch_cancel_keeps_what_they_ran(
    tmp_path: Path,
) -> None:
    reqs = _requests(5)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        code, _, _ = _batched(srv, tmp_path, reqs, options=BatchOptions(poll_s=0, submit_only=True))
        assert code == 5
        batch_id = json.loads(_state(tmp_path).read_text())["files"][0]["batch_id"]
        # without --batch: refused, naming the batch and both ways on; nothing is sent
        with pytest.raises(StageRefused) as refused:
            _batched(srv, tmp_path, reqs, sync=True)
        said = str(refused.value)
        assert f"1 batch(es) submitted with --batch are not collected yet ({batch_id}; book " in said
        assert "--batch to collect them" in said and "--batch-cancel to cancel them" in said and "\n" not in said
        assert srv.calls == [] and srv.counters()["cancels"] == 0
        # --batch-cancel: cancelled at the provider, what it ran is read, only the rest is sent directly
        code, got, err = _batched(srv, tmp_path, reqs, sync=True, cancel=0.0)
        counters = srv.counters()
        assert code == 0, err.getvalue()
        assert counters["cancels"] == 1 and counters["uploads"] == counters["batches_created"] == 1
        ran = counters["lines_run"]
        assert 0 < ran < 5 and len(srv.calls) == 5 - ran  # nothing the batch ran is paid again
        assert [r.text for r in got] == [r.text for r in _sync(tmp_path, reqs)]
        (f,) = json.loads(_state(tmp_path).read_text())["files"]  # the record of the paid batch is kept
        assert (f["batch_id"], f["status"], f["cancel_requested"], f["collected"]) == (batch_id, "cancelled", True,
                                                                                       True)  # fmt: skip
        assert f["output"] and f["output_file_id"]
        # and again: the book has nothing out, every answer is cached
        code, again, _ = _batched(srv, tmp_path, reqs, sync=True)
        assert code == 0 and [r.text for r in again] == [r.text for r in got] and len(srv.calls) == 5 - ran


def test_batch_cancel_with_batch_cancels_and_submits_the_unrun_requests_anew(tmp_path: Path) -> None:
    reqs = _requests(4)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        code, _, _ = _batched(srv, tmp_path, reqs, options=BatchOptions(poll_s=0, submit_only=True))
        assert code == 5
        code, got, err = _batched(srv, tmp_path, reqs, cancel=0.0)
        counters = srv.counters()
    assert code == 0, err.getvalue()
    assert counters["cancels"] == 1 and counters["batches_created"] == 2 and counters["lines_run"] == 4
    assert srv.calls == [] and all(r.ok for r in got)
    assert [f["status"] for f in json.loads(_state(tmp_path).read_text())["files"]] == ["cancelled", "completed"]


def test_request_files_for_vllm_not_read_back_refuse_a_synchronous_stage_and_batch_cancel_drops_them(
    tmp_path: Path,
) -> None:
    reqs = _requests(3)
    files = BatchOptions(file_dir=str(tmp_path / "vllm"))
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        assert _batched(srv, tmp_path, reqs, options=files)[0] == 5
        with pytest.raises(StageRefused, match=r"1 request file\(s\) written for `vllm run-batch` are not read back "
                           r"yet \(r1-judge-a-1; book .*--batch-results DIR"):  # fmt: skip
            _batched(srv, tmp_path, reqs, sync=True)
        assert srv.calls == []
        code, got, _ = _batched(srv, tmp_path, reqs, sync=True, cancel=0.0)
        assert code == 0 and all(r.ok for r in got) and len(srv.calls) == 3
    (f,) = json.loads(_state(tmp_path).read_text())["files"]
    assert (f["status"], f["cancel_requested"], f["collected"]) == ("cancelled", True, True)


def _complete_at_provider(srv: BatchServer, batch_id: str) -> Any:
    """Let the provider finish a batch (the client polls through the SDK, as anyone could)."""
    import openai

    client = openai.OpenAI(base_url=srv.base_url, api_key=API_KEY)
    for _ in range(10):
        batch = client.batches.retrieve(batch_id)
        if batch.status == "completed":
            return batch
    raise AssertionError(f"{batch_id} never completed")


def test_a_provider_output_with_one_request_twice_and_different_answers_is_refused(tmp_path: Path) -> None:
    reqs = _requests(3)
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        assert _batched(srv, tmp_path, reqs, options=BatchOptions(poll_s=0, submit_only=True))[0] == 5
        batch = _complete_at_provider(srv, json.loads(_state(tmp_path).read_text())["files"][0]["batch_id"])
        stored = srv.files[batch.output_file_id]
        first = stored.data.splitlines()[0]
        line = json.loads(first)
        line["response"]["body"]["choices"][0]["message"]["content"] = "echo:another answer"
        stored.data += json.dumps(line).encode() + b"\n"  # the same custom_id, another answer, last in the file
        with pytest.raises(StageRefused) as refused:
            _batched(srv, tmp_path, reqs)
        said = str(refused.value)
        copy = tmp_path / "judged" / "emo_tasks_batch" / "outputs" / "r1-judge-a-1.output.jsonl"
        assert said.startswith(
            f"{copy} (output file {batch.output_file_id}, batch {batch.id}): custom_id "
            f"{line['custom_id']} comes back twice with different content (line 1 and line 4)"
        )
        assert srv.counters()["uploads"] == 1
        # the refused output is kept (paid for); keeping the right line (an identical repeat) goes on
        copy.write_bytes(copy.read_bytes() + first + b"\n")
        lines = [ln for ln in copy.read_bytes().splitlines() if ln != json.dumps(line).encode()]
        copy.write_bytes(b"\n".join(lines) + b"\n")
        code, got, _ = _batched(srv, tmp_path, reqs)
        assert code == 0 and [r.text for r in got] == [r.text for r in _sync(tmp_path, reqs)]
        assert srv.counters()["uploads"] == 1 and srv.calls == []


def test_a_vllm_output_with_one_request_twice_and_different_answers_is_refused_naming_it(tmp_path: Path) -> None:
    from judges.testing_vllm_batch import StandIn, run

    reqs = _requests(3)
    folder = tmp_path / "vllm"
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        assert _batched(srv, tmp_path, reqs, options=BatchOptions(file_dir=str(folder)))[0] == 5
        out = folder / "r1-judge-a-1.output.jsonl"
        assert run(folder / "r1-judge-a-1.jsonl", out, StandIn("judge-a", echo_responder)) == 0
        good = out.read_bytes()
        line = json.loads(good.splitlines()[1])
        line["response"]["body"]["choices"][0]["message"]["content"] = "echo:another answer"
        out.write_bytes(good + json.dumps(line).encode() + b"\n")
        results = BatchOptions(file_dir=str(folder), results_dir=str(folder))
        with pytest.raises(StageRefused) as refused:
            _batched(srv, tmp_path, reqs, options=results)
        assert str(refused.value).startswith(f"{out}: custom_id {line['custom_id']} comes back twice with "
                                             "different content (line 2 and line 4)")  # fmt: skip
        assert not (tmp_path / "judged" / "emo_tasks_batch" / "outputs").exists()  # not taken
        out.write_bytes(good + good.splitlines()[1] + b"\n")  # a repeat word for word is taken once
        code, got, _ = _batched(srv, tmp_path, reqs, options=results)
        assert code == 0 and [r.text for r in got] == [r.text for r in _sync(tmp_path, reqs)]
        assert srv.calls == []


_BOOK_ENTRY = {"name": "r1-judge-a-1", "round": 1, "model": "judge-a", "requests": 2, "bytes": 300,
               "batch_id": "batch-1", "file_id": "file-1", "status": "in_progress"}  # fmt: skip


def _book_doc(**changes: Any) -> str:
    doc = {"schema": "emo-tasks/judge-batches/1", "mode": "api", "host": "127.0.0.1:9", "files": [_BOOK_ENTRY],
           "submitted": {"k1": "r1-judge-a-1"}, "outcomes": {}, "failed": {}, "direct": [], "rounds": 1}  # fmt: skip
    doc.update(changes)
    return json.dumps(doc)


@pytest.mark.parametrize(
    "text, said",
    [
        ("[]", "holds a list, not the batch book's object"),
        ('{"schema": "emo-tasks/judge-b', "not JSON ("),
        (_book_doc(files=None), "'files' is null, not a list of batch files"),
        (
            _book_doc(files=[{k: v for k, v in _BOOK_ENTRY.items() if k != "model"}]),
            "files[0] (r1-judge-a-1) has no 'model'",
        ),
        (_book_doc(files=[{**_BOOK_ENTRY, "batch_id": 7}]), "files[0] (r1-judge-a-1): 'batch_id' is a number"),
        (_book_doc(files=["r1"]), "files[0] is a string, not a batch file's object"),
        (_book_doc(submitted=None), "'submitted' is null, not an object of file names by request"),
        (_book_doc(files=[_BOOK_ENTRY, _BOOK_ENTRY]), "the file 'r1-judge-a-1' is recorded twice"),
        (_book_doc(failed={"k1": {"ok": False}}), "failed[k1...] is not a judge result"),
        (_book_doc(mode=None), "'mode' is None, not 'api' or 'files'"),
    ],
    ids=[
        "list",
        "not-json",
        "files-null",
        "entry-incomplete",
        "entry-mistyped",
        "entry-not-object",
        "submitted-null",
        "file-twice",
        "failed-not-result",
        "no-mode",
    ],  # fmt: skip
)
def test_a_damaged_book_is_refused_naming_the_file_and_what_is_wrong_and_left_as_it_is(
    tmp_path: Path, text: str, said: str
) -> None:
    state = tmp_path / "book" / "state.json"
    state.parent.mkdir()
    state.write_text(text)
    endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", api_key=API_KEY)
    with pytest.raises(BatchStateError) as refused:
        BatchBook(state.parent, BatchOptions(), endpoint)
    message = str(refused.value)
    assert message.startswith(f"{state}: {said}") and "\n" not in message
    assert "left as it is" in message and "move it away" in message
    assert state.read_text() == text


def test_a_damaged_book_stops_batched_and_synchronous_stages_alike_and_is_never_replaced(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.parent.mkdir(parents=True)
    state.write_text(_book_doc(files=None))
    with BatchServer(responder=echo_responder, expected_api_key=API_KEY) as srv:
        for kw in ({}, {"sync": True}, {"sync": True, "cancel": 0.0}, {"cancel": 0.0}):
            with pytest.raises(StageRefused, match="'files' is null"):
                _batched(srv, tmp_path, _requests(2), **kw)
        counters = srv.counters()
    assert state.read_text() == _book_doc(files=None)
    assert srv.calls == [] and counters["uploads"] == counters["cancels"] == 0
