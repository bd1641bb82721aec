"""The loopback Files + Batches server (`judges.testing_batches`) that batch judging is proven against (issue 35),
driven by the real openai SDK: every life cycle, the output and error files OpenAI writes, the checks it makes
on an input file, and counters that outlive the client."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import openai
import pytest
from conftest import API_KEY

from judges.testing import Reply, echo_responder
from judges.testing_batches import TERMINAL, BatchServer, Lifecycle

N = 12


def _line(i: int, model: str = "judge-model", custom_id: str | None = None) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": f"question {i}"}], "max_tokens": 64}
    return {"custom_id": custom_id or f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def _client(srv: BatchServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key=API_KEY, max_retries=0)


def _submit(client: openai.OpenAI, lines: list[dict[str, Any]]) -> Any:
    uploaded = client.files.create(file=("round.jsonl", io.BytesIO(_jsonl(lines))), purpose="batch")
    return client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")


def _poll(client: Any, batch: Any) -> list[Any]:
    """Every batch object seen, from the one create returned to the terminal one."""
    seen = [batch]
    while seen[-1].status not in TERMINAL:
        seen.append(client.batches.retrieve(batch.id))
        assert len(seen) < 50
    return seen


def _read(client: Any, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(t) for t in client.files.content(file_id).text.splitlines()]


def test_a_completed_batch_answers_every_line_as_the_chat_route_does_in_shuffled_order() -> None:
    lines = [_line(i) for i in range(N)]
    with BatchServer() as srv:
        client = _client(srv)
        seen = _poll(client, _submit(client, lines))
        done = seen[-1]
        output = _read(client, done.output_file_id)
        # the synchronous path, same requests: the same answers
        sync = {
            line["custom_id"]: client.chat.completions.create(**line["body"]).choices[0].message.content
            for line in lines
        }
        counters = srv.counters()
    assert [b.status for b in seen] == ["validating", "in_progress", "in_progress", "finalizing", "completed"]
    assert [(b.request_counts.completed, b.request_counts.failed) for b in seen[1:]] == [(6, 0)] + [(12, 0)] * 3
    assert done.request_counts.total == N and done.error_file_id is None and done.model == "judge-model"
    ids = [o["custom_id"] for o in output]
    assert sorted(ids) == sorted(line["custom_id"] for line in lines)  # one to one
    assert ids != [line["custom_id"] for line in lines]  # not in the input's order
    assert all(o["response"]["status_code"] == 200 and o["error"] is None for o in output)
    assert {o["custom_id"]: o["response"]["body"]["choices"][0]["message"]["content"] for o in output} == sync
    assert {o["response"]["body"]["model"] for o in output} == {"judge-model"}
    assert counters["uploads"] == 1 and counters["batches_created"] == 1 and counters["lines_run"] == N
    assert counters["polls"] == {"in_progress": 2, "finalizing": 1, "completed": 1}
    assert counters["downloads"] == 1 and counters["cancels"] == 0


def test_the_shuffled_order_is_seeded() -> None:
    def order(seed: int) -> list[str]:
        with BatchServer(seed=seed) as srv:
            client = _client(srv)
            done = _poll(client, _submit(client, [_line(i) for i in range(N)]))[-1]
            return [o["custom_id"] for o in _read(client, done.output_file_id)]

    assert order(1) == order(1) != order(2)


def test_an_expired_batch_keeps_the_lines_it_ran_and_lists_the_rest_as_expired() -> None:
    lines = [_line(i) for i in range(N)]
    with BatchServer(lifecycles=[Lifecycle(end="expired", answered=5)]) as srv:
        client = _client(srv)
        seen = _poll(client, _submit(client, lines))
        output, errors = _read(client, seen[-1].output_file_id), _read(client, seen[-1].error_file_id)
        polls = srv.counters()["polls"]
    assert [b.status for b in seen] == ["validating", "in_progress", "in_progress", "expired"]
    assert seen[-1].expired_at is not None and seen[-1].completed_at is None
    assert len(output) == 5 and len(errors) == N - 5
    assert {o["custom_id"] for o in output} | {e["custom_id"] for e in errors} == {line["custom_id"] for line in lines}
    assert all(e["response"] is None and e["error"]["code"] == "batch_expired" for e in errors)
    counts = seen[-1].request_counts
    assert (counts.total, counts.completed, counts.failed) == (N, 5, N - 5)
    assert polls == {"in_progress": 2, "expired": 1}


def test_an_error_reply_goes_to_the_error_file_with_the_status_and_body_the_chat_route_sends() -> None:
    def responder(body: dict, attempt: int) -> Reply:
        text = body["messages"][-1]["content"]
        if text.endswith((" 3", " 7")):
            return Reply("status", status=400, code="context_length_exceeded", text="too long")
        return echo_responder(body, attempt)

    lines = [_line(i) for i in range(N)]
    with BatchServer(responder=responder) as srv:
        client = _client(srv)
        done = _poll(client, _submit(client, lines))[-1]
        output, errors = _read(client, done.output_file_id), _read(client, done.error_file_id)
        with pytest.raises(openai.BadRequestError) as sync_error:
            client.chat.completions.create(**lines[3]["body"])
    assert done.status == "completed"
    assert (done.request_counts.completed, done.request_counts.failed) == (N - 2, 2)
    assert sorted(e["custom_id"] for e in errors) == ["req-3", "req-7"] and len(output) == N - 2
    for e in errors:  # as OpenAI writes an HTTP error: in `response`, with `error` null
        assert e["error"] is None and e["response"]["status_code"] == 400
        assert e["response"]["body"] == sync_error.value.response.json()


def test_a_cancelled_batch_keeps_what_ran_before_the_cancel() -> None:
    lines = [_line(i) for i in range(N)]
    with BatchServer(lifecycles=[Lifecycle(in_progress=3)]) as srv:
        client = _client(srv)
        created = _submit(client, lines)
        running = client.batches.retrieve(created.id)
        cancelling = client.batches.cancel(created.id)
        seen = _poll(client, cancelling)
        done = seen[-1]
        output, errors = _read(client, done.output_file_id), _read(client, done.error_file_id)
        with pytest.raises(openai.BadRequestError, match="Cannot cancel a batch with status 'cancelled'"):
            client.batches.cancel(created.id)
        counters = srv.counters()
    assert (running.status, running.request_counts.completed) == ("in_progress", 4)
    assert [b.status for b in seen] == ["cancelling", "cancelled"]
    assert done.cancelling_at is not None and done.cancelled_at is not None
    # the four lines run before the cancel, no more; the others are in neither file
    assert len(output) == 4 and errors == [] and done.error_file_id is None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (N, 4, 0)
    assert counters["cancels"] == 2 and counters["lines_run"] == 4
    assert counters["polls"] == {"in_progress": 1, "cancelled": 1}


def test_a_batch_cancelled_from_outside_and_an_unfinished_list_on_request() -> None:
    life = Lifecycle(end="cancelled", answered=3, list_unfinished=True)
    with BatchServer(lifecycles=[life]) as srv:
        client = _client(srv)
        seen = _poll(client, _submit(client, [_line(i) for i in range(N)]))
        output, errors = _read(client, seen[-1].output_file_id), _read(client, seen[-1].error_file_id)
    assert [b.status for b in seen] == ["validating", "in_progress", "in_progress", "cancelling", "cancelled"]
    assert len(output) == 3 and len(errors) == N - 3
    assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}


@pytest.mark.parametrize(
    ("lines", "code", "line_no"),
    [
        ([_line(0), _line(1, model="other-model"), _line(2)], "mismatched_model", 2),
        ([_line(0), _line(1), _line(2, custom_id="req-0")], "duplicate_custom_id", 3),
        ([_line(0), {k: v for k, v in _line(1).items() if k != "body"}], "missing_required_parameter", 2),
        ([_line(0), {**_line(1), "url": "/v1/embeddings"}], "invalid_url", 2),
        ([_line(0), {**_line(1), "method": "GET"}], "invalid_method", 2),
    ],
    ids=["two-models", "duplicate-custom-id", "no-body", "other-url", "get"],
)
def test_a_file_that_breaks_the_rules_fails_its_batch_with_errors(lines: list, code: str, line_no: int) -> None:
    with BatchServer() as srv:
        client = _client(srv)
        seen = _poll(client, _submit(client, lines))
        lines_run = srv.lines_run
    failed = seen[-1]
    assert [b.status for b in seen] == ["validating", "failed"]
    assert [(e.code, e.line) for e in failed.errors.data] == [(code, line_no)]
    assert failed.failed_at is not None and failed.output_file_id is None and failed.error_file_id is None
    assert (failed.request_counts.total, failed.request_counts.completed) == (0, 0) and lines_run == 0


def test_limits_a_scripted_failure_and_a_refused_line_fail_the_batch() -> None:
    def no_images(line: dict) -> tuple[str, str] | None:
        content = line["body"]["messages"][-1]["content"]
        return ("image_inputs_not_supported", "Images are not supported in batches") if "image" in content else None

    with BatchServer(max_requests=3, max_bytes=10_000, line_check=no_images) as srv:
        client = _client(srv)
        too_many = _poll(client, _submit(client, [_line(i) for i in range(4)]))[-1]
        big = _line(0)
        big["body"]["messages"][0]["content"] = "x" * 10_000
        too_big = _poll(client, _submit(client, [big]))[-1]
        image = _line(1)
        image["body"]["messages"][0]["content"] = "an image"
        refused = _poll(client, _submit(client, [_line(0), image]))[-1]
        srv.lifecycles.append(Lifecycle(end="failed"))
        scripted = _poll(client, _submit(client, [_line(0)]))[-1]
    assert [e.code for e in too_many.errors.data] == ["request_limit_exceeded"]
    assert [e.code for e in too_big.errors.data] == ["file_too_large"]
    assert [(e.code, e.line) for e in refused.errors.data] == [("image_inputs_not_supported", 2)]
    assert [e.code for e in scripted.errors.data] == ["token_limit_exceeded"]
    assert {too_many.status, too_big.status, refused.status, scripted.status} == {"failed"}


def test_a_bad_create_is_refused_at_once() -> None:
    with BatchServer() as srv:
        client = _client(srv)
        other = client.files.create(file=("x.jsonl", io.BytesIO(_jsonl([_line(0)]))), purpose="user_data")
        with pytest.raises(openai.NotFoundError):
            client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
        with pytest.raises(openai.BadRequestError, match="purpose"):
            client.batches.create(input_file_id=other.id, endpoint="/v1/chat/completions", completion_window="24h")
        with pytest.raises(openai.BadRequestError, match="endpoint"):
            client.batches.create(input_file_id=other.id, endpoint="/v1/embeddings", completion_window="24h")
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch-nope")
        assert srv.batches_created == 0


def test_files_and_batches_list_page_and_delete() -> None:
    with BatchServer() as srv:
        client = _client(srv)
        made = [_submit(client, [_line(i)]) for i in range(3)]
        listed = [b.id for b in client.batches.list(limit=2)]  # the SDK pages through `after`
        first = client.batches.list(limit=2)
        assert listed == [b.id for b in reversed(made)] and first.has_more and len(first.data) == 2
        assert [f.purpose for f in client.files.list()] == ["batch"] * 3
        deleted = client.files.delete(made[0].input_file_id)
        assert deleted.deleted and srv.deletes == 1
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(made[0].input_file_id)
        assert client.files.retrieve(made[1].input_file_id).bytes == len(_jsonl([_line(1)]))


def test_an_azure_client_reaches_the_same_routes() -> None:
    lines = [{**_line(i), "url": "/chat/completions"} for i in range(4)]
    with BatchServer() as srv:
        client = openai.AzureOpenAI(
            azure_endpoint=srv.root_url, api_key=API_KEY, api_version="2024-10-21", max_retries=0
        )
        uploaded = client.files.create(file=("round.jsonl", io.BytesIO(_jsonl(lines))), purpose="batch")
        batch = client.batches.create(input_file_id=uploaded.id, endpoint="/chat/completions", completion_window="24h")
        done = _poll(client, batch)[-1]
        assert done.status == "completed" and len(_read(client, done.output_file_id)) == 4


_SUBMITTER = textwrap.dedent(
    """
    import io, sys, time, openai
    client = openai.OpenAI(base_url=sys.argv[1], api_key="k", max_retries=0)
    data = open(sys.argv[2], "rb").read()
    uploaded = client.files.create(file=("round.jsonl", io.BytesIO(data)), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    client.batches.retrieve(batch.id)
    print(uploaded.id, batch.id, flush=True)
    time.sleep(60)
    """
)


def test_the_server_keeps_every_batch_after_its_client_is_killed(tmp_path) -> None:
    """A client killed with `kill -9` after submitting: a new client finds the batch and collects it, and the
    counters show one upload and one batch, not more."""
    request_file = tmp_path / "round.jsonl"
    request_file.write_bytes(_jsonl([_line(i) for i in range(N)]))
    with BatchServer() as srv:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SUBMITTER, srv.base_url, str(request_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            file_id, batch_id = proc.stdout.readline().split()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        client = _client(srv)
        seen = _poll(client, client.batches.retrieve(batch_id))
        output = _read(client, seen[-1].output_file_id)
        counters = srv.counters()
    assert seen[0].input_file_id == file_id and seen[-1].status == "completed"
    assert [b.status for b in seen] == ["in_progress", "finalizing", "completed"]  # it went on where it stood
    assert len(output) == N
    assert (counters["uploads"], counters["batches_created"]) == (1, 1)
    assert counters["polls"] == {"in_progress": 2, "finalizing": 1, "completed": 1}


def test_counters_can_be_read_from_another_process() -> None:
    with BatchServer() as srv:
        client = _client(srv)
        _submit(client, [_line(0)])
        raw = client.get("/_loopback/counters", cast_to=object)
    assert raw["uploads"] == 1 and raw["batches_created"] == 1


def test_route_faults_a_lost_answer_a_dropped_request_and_a_rate_limit() -> None:
    """A lost answer is work done that the client never hears of (the case that tempts it to upload or submit
    twice); a dropped request and an error reply do nothing."""
    faults = {
        ("upload", 1): Reply("lost"),
        ("create", 1): Reply("drop"),
        ("create", 2): Reply("lost"),
        ("retrieve", 1): Reply("status", status=429, retry_after=1),
    }
    data = _jsonl([_line(i) for i in range(N)])
    with BatchServer(fault=lambda route, nth: faults.get((route, nth))) as srv:
        client = _client(srv)
        with pytest.raises(openai.APIConnectionError):
            client.files.create(file=("round.jsonl", io.BytesIO(data)), purpose="batch")
        (stored,) = client.files.list()
        assert (srv.uploads, stored.bytes, stored.purpose) == (1, len(data), "batch")

        def create() -> Any:
            return client.batches.create(
                input_file_id=stored.id, endpoint="/v1/chat/completions", completion_window="24h"
            )

        with pytest.raises(openai.APIConnectionError):
            create()
        assert srv.batches_created == 0
        with pytest.raises(openai.APIConnectionError):
            create()
        (batch,) = client.batches.list()
        assert srv.batches_created == 1 and batch.status == "validating"
        with pytest.raises(openai.RateLimitError) as limited:
            client.batches.retrieve(batch.id)
        assert limited.value.response.headers["Retry-After"] == "1" and srv.polls == {}
        assert client.batches.retrieve(batch.id).status == "in_progress"  # the refused poll moved nothing
        counters = srv.counters()
    assert counters["hits"] == {"upload": 1, "list_files": 1, "create": 2, "list_batches": 1, "retrieve": 2}


QUEUE_S = 1.0


def test_a_queue_holds_a_batch_in_progress_until_its_time_however_often_it_is_polled() -> None:
    """Lifecycle.min_seconds, a provider's queue: polled many times before it, the batch stays in_progress (its
    lines run meanwhile); after it, it finishes step by step.  A batch without it (the default) is not held."""
    import time

    lines = [_line(i) for i in range(N)]
    with BatchServer(lifecycles=[Lifecycle(min_seconds=QUEUE_S), Lifecycle()]) as srv:
        client = _client(srv)
        start = time.monotonic()
        queued, plain = _submit(client, lines), _submit(client, lines)
        assert [b.status for b in _poll(client, plain)][-1] == "completed"  # default 0: four GETs, as before
        early = []
        while time.monotonic() - start < QUEUE_S * 0.7 and len(early) < 30:
            early.append(client.batches.retrieve(queued.id))
        assert len(early) >= 5, "the machine is too slow to poll within the queue"
        time.sleep(max(0.0, QUEUE_S - (time.monotonic() - start)) + 0.05)
        late = _poll(client, client.batches.retrieve(queued.id))
        output = _read(client, late[-1].output_file_id)
    assert {b.status for b in early} == {"in_progress"}
    assert early[-1].request_counts.completed == N and early[-1].completed_at is None  # the lines ran, it waits
    assert [b.status for b in late] == ["finalizing", "completed"]
    assert len(output) == N


def test_a_clients_cancel_is_not_held_by_the_queue() -> None:
    with BatchServer(lifecycles=[Lifecycle(min_seconds=60)]) as srv:
        client = _client(srv)
        batch = _submit(client, [_line(i) for i in range(N)])
        client.batches.retrieve(batch.id)
        assert client.batches.cancel(batch.id).status == "cancelling"
        assert client.batches.retrieve(batch.id).status == "cancelled"


def test_the_command_line_server_takes_a_queue() -> None:
    """`python -m judges.testing_batches --queue S` (what a benchmark runs in a process of its own)."""
    import time

    proc = subprocess.Popen([sys.executable, "-m", "judges.testing_batches", "--queue", str(QUEUE_S)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        client = openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0)
        start = time.monotonic()
        batch = _submit(client, [_line(i) for i in range(N)])
        early = [client.batches.retrieve(batch.id).status for _ in range(6)]
        assert time.monotonic() - start < QUEUE_S, "the machine is too slow to poll within the queue"
        time.sleep(QUEUE_S)
        late = [client.batches.retrieve(batch.id).status for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert set(early) == {"in_progress"} and late == ["finalizing", "completed"]
