"""Testing utility, not part of the engine: a loopback OpenAI Files + Batches server with scripted life cycles.

It is `judges.testing.LoopbackServer` (chat completions, `GET /models`) plus OpenAI's Files and Batches routes
(`python -m judges.testing_batches --port 8765 --end expired` serves echo answers on 127.0.0.1).

Why it exists: batch judging must be proven through the real openai SDK against a server that checks an input
file as OpenAI does, answers each line with the same responder as the chat route (so a batch gets the
synchronous path's answers), writes the output lines in shuffled order, and can expire, fail or be cancelled
with part of the work done.  A batch's status moves one step on each `GET /batches/{id}` (no sleeps; the only
clock is `Lifecycle.min_seconds`, a provider's queue: `--queue S` keeps every batch in_progress for S seconds
from its creation, however often it is polled), and every file, batch and counter lives in the server object:
a client killed with `kill -9` finds it all as it left it, and the counters say whether its successor uploaded
or submitted anything again.

    with BatchServer(responder=judge, lifecycles=[Lifecycle(end="expired", answered=3)]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k")
        ...
        srv.uploads, srv.batches_created, srv.polls["completed"], srv.cancels
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from judges.testing import LoopbackServer, Reply, answer_completion, error_body, serve_until_interrupted

#: statuses after which a batch never changes
TERMINAL = ("completed", "expired", "failed", "cancelled")
#: the endpoint batches may name (Azure OpenAI's lines and batches name it without "/v1")
CHAT_ENDPOINTS = ("/v1/chat/completions", "/chat/completions")
REQUIRED = ("custom_id", "method", "url", "body")


@dataclass(frozen=True)
class Lifecycle:
    """How one batch goes.  The batch is created `validating`; each GET shows the next status of
    validating × `validating` - 1, in_progress × `in_progress`, finalizing × `finalizing` (completed only), then `end`.

    end: "completed" (every line run); "expired" (the first `answered` lines of the batch's shuffled order run,
    the rest in the error file with code `batch_expired`); "failed" (nothing run, `errors` holds `fail_code`, as
    when OpenAI's enqueued-token limit is hit; a file that fails validation fails whatever its life cycle);
    "cancelled" (cancelled from outside, e.g. the provider's dashboard: cancelling, then cancelled with
    `answered` lines run).  A client's cancel takes an unfinished batch to cancelling and its next GET to
    cancelled, with the lines run so far.  Lines run step by step during in_progress, so `request_counts` grow.

    min_seconds: a provider's queue.  The batch does not leave in_progress (for finalizing, cancelling or its end)
    until that many seconds after its creation, whatever the number of GETs; its GETs show its last in_progress
    step meanwhile.  A client's cancel is not held.  0: one step per GET, no clock.
    """

    end: str = "completed"
    validating: int = 1
    in_progress: int = 2
    finalizing: int = 1
    #: expired/cancelled: how many lines run (None: half of them, rounded down)
    answered: int | None = None
    #: whether the lines never run go to the error file (None: yes when expired, no when cancelled: then a client
    #: finds them in neither file)
    list_unfinished: bool | None = None
    fail_code: str = "token_limit_exceeded"
    fail_message: str = "Enqueued token limit reached for this model. Try again once some batches complete."
    min_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.end not in TERMINAL:
            raise ValueError(f"Lifecycle.end must be one of {TERMINAL}, not {self.end!r}")
        if self.validating < 1 or self.in_progress < 1 or self.finalizing < 0:
            raise ValueError("Lifecycle needs validating >= 1, in_progress >= 1, finalizing >= 0")
        if self.min_seconds < 0:
            raise ValueError(f"Lifecycle.min_seconds must be >= 0, not {self.min_seconds}")


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class BatchState:
    """One batch as the server keeps it (`BatchServer.batches[id]`)."""

    id: str
    input_file_id: str
    endpoint: str
    created_at: int
    lifecycle: Lifecycle
    lines: list[dict[str, Any]]
    #: the order lines run in, and their order in the output and error files (seeded shuffle)
    order: list[int]
    metadata: dict[str, Any] | None = None
    auth: str = ""
    errors: list[dict[str, Any]] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    step: int = 0
    #: line index -> (goes to the output file?, the line written)
    results: dict[int, tuple[bool, str]] = field(default_factory=dict)
    cancelled_by_client: bool = False
    #: lines never run that the error file lists (expired: with code batch_expired)
    unfinished_listed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    stamps: dict[str, int] = field(default_factory=dict)
    polls: int = 0
    #: time.monotonic() at creation: Lifecycle.min_seconds counts from it
    created_clock: float = field(default_factory=time.monotonic)

    @property
    def status(self) -> str:
        return self.steps[min(self.step, len(self.steps) - 1)]


class BatchServer(LoopbackServer):
    """`LoopbackServer` plus `/files` and `/batches` (chat completions and `GET /models` as before)."""

    def __init__(
        self,
        *args: Any,
        lifecycles: list[Lifecycle] | None = None,
        default_lifecycle: Lifecycle | None = None,
        lifecycle_for: Callable[[int, list[dict[str, Any]]], Lifecycle] | None = None,
        seed: int = 0,
        max_requests: int = 50_000,
        max_bytes: int = 200_000_000,
        line_check: Callable[[dict[str, Any]], tuple[str, str] | None] | None = None,
        fault: Callable[[str, int], Reply | None] | None = None,
        **kwargs: Any,
    ) -> None:
        """lifecycles: one per created batch, in order; then `default_lifecycle` (completed).  lifecycle_for(n,
        lines), when given, chooses instead (n counts batches from 0).  max_requests / max_bytes: the provider's
        limits per input file (OpenAI: 50,000 requests, 200 MB of 10^6 bytes).  line_check(line) -> (code, message)
        refuses a line, e.g. one with images.

        fault(route, nth) injects a fault into the nth request (from 1) of a route (one of ROUTES): a
        Reply("status", status=429, retry_after=2) answers with that error and does nothing; Reply("drop") closes
        the connection and does nothing; Reply("lost") does the work (stores the upload, creates the batch, moves
        its status) and then closes the connection, so the client never learns of it.  None: served."""
        super().__init__(*args, **kwargs)
        self.lifecycles = list(lifecycles or [])
        self.default_lifecycle = default_lifecycle or Lifecycle()
        self.lifecycle_for = lifecycle_for
        self.seed = seed
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.line_check = line_check
        self.fault = fault
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, BatchState] = {}
        #: counters: files uploaded (and their bytes), batches created, GETs of a batch per status shown,
        #: cancel requests, file contents read, files deleted, lines run through the responder
        self.uploads = 0
        self.upload_bytes = 0
        self.batches_created = 0
        self.polls: Counter[str] = Counter()
        self.cancels = 0
        self.downloads = 0
        self.deletes = 0
        self.lines_run = 0
        #: requests per route (ROUTES), faults injected or not
        self.hits: Counter[str] = Counter()
        self._ids = itertools.count(1)
        self._token = uuid.uuid4().hex[:8]  # ids of two servers never collide
        self._batch_lock = threading.RLock()
        self._line_attempts: dict[str, int] = {}

    def counters(self) -> dict[str, Any]:
        with self._batch_lock:
            return {
                "uploads": self.uploads,
                "upload_bytes": self.upload_bytes,
                "batches_created": self.batches_created,
                "polls": dict(self.polls),
                "cancels": self.cancels,
                "downloads": self.downloads,
                "deletes": self.deletes,
                "lines_run": self.lines_run,
                "hits": dict(self.hits),
            }

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{self._token}{next(self._ids):06d}"

    # --------------------------------------------------------------- routes
    def route(self, handler: BaseHTTPRequestHandler, method: str, raw: bytes) -> bool:
        url = urlsplit(handler.path)
        path = url.path.rstrip("/")
        send = handler._send_json  # type: ignore[attr-defined]
        with self._batch_lock:
            if method == "GET" and path.endswith("/_loopback/counters"):
                send(200, self.counters())
                return True
            m = re.search(r"/(files|batches)(?:/([^/]+))?(?:/(content|cancel))?$", path)
            if not m:
                return False
            kind, ident, action = m.groups()
            name = _route_name(kind, method, ident, action)
            if name is None:
                return False
            self.hits[name] += 1
            reply = self.fault(name, self.hits[name]) if self.fault is not None else None
            if reply is not None and reply.kind != "lost":
                _send_fault(handler, reply)
                return True
            serve = self._files_route if kind == "files" else self._batches_route
            if reply is None:
                return serve(handler, method, ident, action, raw, url.query)
            serve(_Unsent(handler), method, ident, action, raw, url.query)  # done, but the answer is lost
            _send_fault(handler, Reply("drop"))
            return True

    def _files_route(
        self, handler: Any, method: str, ident: str | None, action: str | None, raw: bytes, query: str
    ) -> bool:
        if ident is None and method == "POST":
            self._upload(handler, raw)
        elif ident is None and method == "GET":
            handler._send_json(200, _page([f.as_json() for f in reversed(self.files.values())], query))
        elif ident not in self.files or action == "cancel":
            handler._send_json(404, _error(f"No such File object: {ident}", "id"))
        elif action == "content" and method == "GET":
            self.downloads += 1
            handler._send_raw(200, self.files[ident].data, "application/octet-stream")
        elif action is None and method == "GET":
            handler._send_json(200, self.files[ident].as_json())
        elif action is None and method == "DELETE":
            del self.files[ident]
            self.deletes += 1
            handler._send_json(200, {"id": ident, "object": "file", "deleted": True})
        else:
            return False
        return True

    def _upload(self, handler: Any, raw: bytes) -> None:
        parts = _multipart(handler.headers.get("Content-Type", ""), raw)
        if "file" not in parts or "purpose" not in parts:
            handler._send_json(400, _error("A multipart upload needs 'file' and 'purpose'", "file"))
            return
        filename, data = parts["file"]
        purpose = parts["purpose"][1].decode()
        stored = StoredFile(self._new_id("file"), filename or "upload.jsonl", purpose, data, int(time.time()))
        self.files[stored.id] = stored
        self.uploads += 1
        self.upload_bytes += len(data)
        handler._send_json(200, stored.as_json())

    def _batches_route(
        self, handler: Any, method: str, ident: str | None, action: str | None, raw: bytes, query: str
    ) -> bool:
        if ident is None and method == "POST":
            self._create(handler, raw)
        elif ident is None and method == "GET":
            handler._send_json(200, _page([_batch_json(b) for b in reversed(self.batches.values())], query))
        elif ident not in self.batches or action == "content":
            handler._send_json(404, _error(f"No batch found with id '{ident}'.", "batch_id"))
        elif action is None and method == "GET":
            batch = self.batches[ident]
            self._advance(batch)
            batch.polls += 1
            self.polls[batch.status] += 1
            handler._send_json(200, _batch_json(batch))
        elif action == "cancel" and method == "POST":
            self.cancels += 1
            batch = self.batches[ident]
            if batch.status in TERMINAL:
                handler._send_json(400, _error(f"Cannot cancel a batch with status '{batch.status}'.", None))
                return True
            if batch.status != "cancelling":
                batch.cancelled_by_client = True
                batch.steps = batch.steps[: batch.step] + [batch.status, "cancelling", "cancelled"]
                batch.step += 1
                batch.stamps["cancelling_at"] = int(time.time())
            handler._send_json(200, _batch_json(batch))
        else:
            return False
        return True

    def _create(self, handler: Any, raw: bytes) -> None:
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            handler._send_json(400, _error("invalid JSON body", None))
            return
        endpoint, file_id = req.get("endpoint"), req.get("input_file_id")
        if req.get("completion_window") != "24h":
            handler._send_json(400, _error("completion_window must be '24h'", "completion_window"))
            return
        if endpoint not in CHAT_ENDPOINTS:
            handler._send_json(400, _error(f"endpoint {endpoint!r} is not served here", "endpoint"))
            return
        stored = self.files.get(file_id)
        if stored is None:
            handler._send_json(404, _error(f"No such File object: {file_id}", "input_file_id"))
            return
        if stored.purpose != "batch":
            handler._send_json(400, _error(f"File {file_id} has purpose {stored.purpose!r}, not 'batch'", "purpose"))
            return
        lines, errors = self._validate(stored.data, endpoint)
        n = self.batches_created
        if self.lifecycle_for is not None:
            life = self.lifecycle_for(n, lines)
        else:
            life = self.lifecycles.pop(0) if self.lifecycles else self.default_lifecycle
        order = list(range(len(lines)))
        random.Random(f"{self.seed}:{n}").shuffle(order)
        batch = BatchState(
            id=self._new_id("batch"),
            input_file_id=file_id,
            endpoint=endpoint,
            created_at=int(time.time()),
            lifecycle=life,
            lines=lines,
            order=order,
            metadata=req.get("metadata"),
            auth=handler.headers.get("Authorization") or handler.headers.get("api-key") or "",
            errors=errors,
        )
        batch.steps = ["validating"] * life.validating
        if errors or life.end == "failed":
            if not errors:
                batch.errors = [{"code": life.fail_code, "line": None, "message": life.fail_message, "param": None}]
            batch.steps.append("failed")
        else:
            batch.steps += ["in_progress"] * life.in_progress
            batch.steps += ["finalizing"] * life.finalizing if life.end == "completed" else []
            batch.steps += ["cancelling"] if life.end == "cancelled" else []
            batch.steps.append(life.end)
        self.batches[batch.id] = batch
        self.batches_created += 1
        handler._send_json(200, _batch_json(batch))

    def _validate(self, data: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The input file's lines and what is wrong with them (OpenAI-style `errors.data` entries)."""
        errors: list[dict[str, Any]] = []

        def err(code: str, line: int | None, message: str, param: str | None = None) -> None:
            errors.append({"code": code, "line": line, "message": message, "param": param})

        texts = [t for t in data.decode("utf-8", errors="replace").splitlines() if t.strip()]
        if not texts:
            err("empty_file", None, "The batch input file is empty.")
        if len(texts) > self.max_requests:
            err("request_limit_exceeded", None, f"{len(texts)} requests; a file holds at most {self.max_requests}.")
        if len(data) > self.max_bytes:
            err("file_too_large", None, f"{len(data)} bytes; a file holds at most {self.max_bytes}.")
        lines: list[dict[str, Any]] = []
        seen: set[str] = set()
        model = None
        for no, text in enumerate(texts, 1):
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if not isinstance(line, dict):
                err("invalid_json_line", no, "This line is not a JSON object.")
                continue
            missing = [k for k in REQUIRED if k not in line]
            if missing:
                err("missing_required_parameter", no, f"Missing required parameter: {missing[0]}.", missing[0])
                continue
            body = line["body"]
            if line["method"] != "POST":
                err("invalid_method", no, "The method must be POST.", "method")
            if _strip_v1(str(line["url"])) != _strip_v1(endpoint):
                err("invalid_url", no, f"The url must be the batch's endpoint {endpoint}.", "url")
            if not isinstance(body, dict) or not body.get("model"):
                err("missing_required_parameter", no, "Missing required parameter: body.model.", "body.model")
                continue
            if line["custom_id"] in seen:
                err("duplicate_custom_id", no, "The custom_id of this request duplicates another's.", "custom_id")
            seen.add(line["custom_id"])
            model = model or body["model"]
            if body["model"] != model:
                err("mismatched_model", no, f"Model {body['model']!r}; this file's requests use {model!r}.", "model")
            if self.line_check is not None and (refused := self.line_check(line)) is not None:
                err(refused[0], no, refused[1])
            lines.append(line)
        return lines, errors[:100]

    # --------------------------------------------------------------- life cycle
    def _advance(self, batch: BatchState) -> None:
        """One step of the batch's script; run the lines its new status has done, write its files when it ends."""
        if batch.status in TERMINAL or self._queued(batch):
            return
        batch.step += 1
        status = batch.status
        batch.stamps.setdefault(f"{status}_at", int(time.time()))
        life = batch.lifecycle
        if status == "in_progress":
            target = self._target(batch)
            nth = batch.steps[: batch.step + 1].count("in_progress")
            self._run(batch, target * nth // life.in_progress)
        elif status in ("finalizing", "completed", "expired", "cancelling"):
            # a client's cancel jumps to cancelling without this step: only a scripted cancel runs `answered` lines
            self._run(batch, self._target(batch))
        if status in TERMINAL and status != "failed":
            self._write_files(batch)

    def _queued(self, batch: BatchState) -> bool:
        """Whether the batch waits in the provider's queue: at its last in_progress step before min_seconds."""
        leaving = batch.status == "in_progress" and batch.steps[batch.step + 1] != "in_progress"
        return leaving and time.monotonic() - batch.created_clock < batch.lifecycle.min_seconds

    def _target(self, batch: BatchState) -> int:
        life = batch.lifecycle
        if life.end == "completed":
            return len(batch.lines)
        return min(len(batch.lines), len(batch.lines) // 2 if life.answered is None else life.answered)

    def _run(self, batch: BatchState, upto: int) -> None:
        for idx in batch.order[len(batch.results) : upto]:
            batch.results[idx] = self._run_line(batch, batch.lines[idx])

    def _run_line(self, batch: BatchState, line: dict[str, Any]) -> tuple[bool, str]:
        body = line["body"]
        key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        self._line_attempts[key] = attempt = self._line_attempts.get(key, 0) + 1
        self.lines_run += 1
        reply = self.responder(body, attempt)
        if isinstance(reply, str):
            reply = Reply(text=reply)
        digest = hashlib.sha256(f"{batch.id}:{line['custom_id']}".encode()).hexdigest()
        record: dict[str, Any] = {"id": f"batch_req_{digest[:24]}", "custom_id": line["custom_id"]}
        status, payload = 200, None
        if reply.kind == "answer":
            payload = answer_completion(reply, body)
        elif reply.kind == "sleep":  # a batch has no client timeout: the late answer, as the chat route sends it
            payload = answer_completion(replace(reply, kind="answer", text=reply.text or "late answer"), body)
        elif reply.kind == "status":
            status, payload = reply.status, error_body(reply)
        elif reply.kind == "empty":
            payload = answer_completion(Reply(text="", prompt_tokens=1, completion_tokens=0), body)
        elif reply.kind == "no_choices":
            payload = {"id": "x", "object": "chat.completion", "model": body.get("model")}
        elif reply.kind == "garbage":
            return True, "<html>this is not json{{{"
        elif reply.kind == "drop":
            status, payload = 500, error_body(Reply(kind="status", status=500, text="the server dropped the request"))
        elif reply.kind == "echo_auth":
            status, payload = 401, error_body(Reply(kind="status", status=401, text=f"bad credentials: {batch.auth}"))
        else:
            raise ValueError(f"unknown reply kind {reply.kind!r}")
        record["response"] = {"status_code": status, "request_id": f"req_{digest[24:56]}", "body": payload}
        record["error"] = None
        return status == 200, json.dumps(record)

    def _write_files(self, batch: BatchState) -> None:
        out = [batch.results[i][1] for i in batch.order if i in batch.results and batch.results[i][0]]
        err = [batch.results[i][1] for i in batch.order if i in batch.results and not batch.results[i][0]]
        life = batch.lifecycle
        listed = life.list_unfinished if life.list_unfinished is not None else batch.status == "expired"
        if listed:
            code = "batch_expired" if batch.status == "expired" else "batch_cancelled"
            message = {
                "batch_expired": "This request could not be executed before the completion window expired.",
                "batch_cancelled": "This request was not executed because the batch was cancelled.",
            }[code]
            for i in batch.order:
                if i not in batch.results:
                    cid = batch.lines[i]["custom_id"]
                    digest = hashlib.sha256(f"{batch.id}:{cid}".encode()).hexdigest()
                    entry = {"code": code, "message": message}
                    line = {"id": f"batch_req_{digest[:24]}", "custom_id": cid, "response": None, "error": entry}
                    err.append(json.dumps(line))
                    batch.unfinished_listed += 1
        for lines, attr, suffix in ((out, "output_file_id", "output"), (err, "error_file_id", "error")):
            if lines:
                data = ("\n".join(lines) + "\n").encode()
                stored = StoredFile(
                    self._new_id("file"), f"{batch.id}_{suffix}.jsonl", "batch_output", data, int(time.time())
                )
                self.files[stored.id] = stored
                setattr(batch, attr, stored.id)


#: the routes `fault` and `hits` name
ROUTES = ("upload", "list_files", "file", "content", "delete", "create", "list_batches", "retrieve", "cancel")


def _route_name(kind: str, method: str, ident: str | None, action: str | None) -> str | None:
    if kind == "files":
        names = {("POST", False, None): "upload", ("GET", False, None): "list_files", ("GET", True, None): "file"}
        names |= {("GET", True, "content"): "content", ("DELETE", True, None): "delete"}
    else:
        names = {("POST", False, None): "create", ("GET", False, None): "list_batches"}
        names |= {("GET", True, None): "retrieve", ("POST", True, "cancel"): "cancel"}
    return names.get((method, ident is not None, action))


class _Unsent:
    """A handler whose answers go nowhere: the work of a request whose response the fault `lost` drops."""

    def __init__(self, handler: Any) -> None:
        self.headers = handler.headers

    def _send_json(self, *args: Any, **kwargs: Any) -> None:
        pass

    def _send_raw(self, *args: Any, **kwargs: Any) -> None:
        pass


def _send_fault(handler: Any, reply: Reply) -> None:
    if reply.kind == "status":
        headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else None
        handler._send_json(reply.status, error_body(reply), headers)
    elif reply.kind == "drop":
        handler.close_connection = True
        handler.connection.shutdown(2)
    else:
        raise ValueError(f"a route fault is a 'status', 'drop' or 'lost' Reply, not {reply.kind!r}")


def _strip_v1(url: str) -> str:
    return url[3:] if url.startswith("/v1/") else url


def _error(message: str, param: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}


def _counts(batch: BatchState) -> dict[str, int]:
    if batch.status == "failed":
        return {"total": 0, "completed": 0, "failed": 0}
    done = sum(ok for ok, _ in batch.results.values())
    # completed + failed = the lines of the output and error files once the batch ended
    return {"total": len(batch.lines), "completed": done, "failed": len(batch.results) - done + batch.unfinished_listed}


def _batch_json(batch: BatchState) -> dict[str, Any]:
    stamps = batch.stamps
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
        "input_file_id": batch.input_file_id,
        "completion_window": "24h",
        "status": batch.status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": batch.created_at,
        "in_progress_at": stamps.get("in_progress_at"),
        "expires_at": batch.created_at + 24 * 3600,
        "finalizing_at": stamps.get("finalizing_at"),
        "completed_at": stamps.get("completed_at"),
        "failed_at": stamps.get("failed_at"),
        "expired_at": stamps.get("expired_at"),
        "cancelling_at": stamps.get("cancelling_at"),
        "cancelled_at": stamps.get("cancelled_at"),
        "request_counts": _counts(batch),
        "metadata": batch.metadata,
        "model": batch.lines[0]["body"]["model"] if batch.lines else None,
    }


def _page(items: list[dict[str, Any]], query: str) -> dict[str, Any]:
    """A cursor page as the SDK's `SyncCursorPage` reads it: newest first, `after` an id, `limit` (default 20)."""
    q = parse_qs(query)
    after = q.get("after", [None])[0]
    limit = int(q.get("limit", ["20"])[0])
    ids = [it["id"] for it in items]
    start = ids.index(after) + 1 if after in ids else 0
    page = items[start : start + limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": start + limit < len(items),
    }


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, bytes) of a multipart/form-data body (httpx writes it as the RFC says)."""
    m = re.search(r'boundary="?([^";]+)"?', content_type)
    if not m:
        return {}
    parts: dict[str, tuple[str | None, bytes]] = {}
    for chunk in raw.split(b"--" + m.group(1).encode())[1:-1]:
        head, _, data = chunk.partition(b"\r\n\r\n")
        disposition = head.decode("utf-8", errors="replace")
        name = re.search(r'\bname="([^"]*)"', disposition)
        filename = re.search(r'\bfilename="([^"]*)"', disposition)
        if name:
            parts[name.group(1)] = (
                filename.group(1) if filename else None,
                data[:-2] if data.endswith(b"\r\n") else data,
            )
    return parts


def main(argv: list[str] | None = None) -> None:
    """`python -m judges.testing_batches --port 8765 --end expired [--queue 60]`: serve Files, Batches and echo
    answers on 127.0.0.1 until interrupted; `GET /v1/_loopback/counters` reads the counters from another process."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--end", choices=TERMINAL, default="completed", help="how every batch ends")
    ap.add_argument("--seed", type=int, default=0, help="seed of the output files' shuffled order")
    ap.add_argument("--queue", type=float, default=0.0, metavar="S",
                    help="a provider's queue: every batch stays in_progress S seconds from its creation")  # fmt: skip
    args = ap.parse_args(argv)
    life = Lifecycle(end=args.end, min_seconds=args.queue)
    serve_until_interrupted(BatchServer(port=args.port, default_lifecycle=life, seed=args.seed))


if __name__ == "__main__":
    main()
