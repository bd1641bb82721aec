"""Testing utility, not part of the engine: a loopback OpenAI-compatible chat server with scripted answers and
faults, for tests and benchmarks (`python -m judges.testing --port 8765` serves echo answers on 127.0.0.1).

Why it exists: the remote judge cannot be reached here, and our engine must be proven against a real HTTP server
through the real openai SDK — including 429 with Retry-After, 5xx, timeouts, dropped connections and garbage.
It listens on 127.0.0.1 only.  A *responder* decides each answer from the request body and the attempt number
for that request's content, so "fail twice, then answer" is a one-liner.

    with LoopbackServer(latency_s=0.2) as srv:
        engine = JudgeEngine(EndpointConfig(base_url=srv.base_url))
        ...
        srv.calls  # every request seen: time, content hash, model, images, attempt, outcome
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What the server does with one request.

    kind: "answer" (text), "status" (HTTP `status` with an OpenAI-style error body, optional `retry_after`),
    "sleep" (wait `sleep_s` then answer `text` — a client timeout when longer than its timeout), "garbage"
    (200 with a non-JSON body), "no_choices" (200 JSON without choices), "empty" (200, empty content),
    "drop" (close the connection without a response), "echo_auth" (401 whose body echoes the Authorization header).
    """

    kind: str = "answer"
    text: str = ""
    status: int = 200
    retry_after: float | None = None
    sleep_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: the model id the response names (default: the requested model), like a server that serves a dated snapshot
    model: str | None = None
    #: why the answer ended ("length": cut at max_tokens), as the choice's `finish_reason`
    finish_reason: str = "stop"
    #: reasoning in a field of its own (`message.reasoning_content`), as vLLM's and SGLang's reasoning parsers give it
    reasoning: str | None = None
    #: a "status" reply's error `code` (default: the status), e.g. "model_not_found"
    code: str | None = None


Responder = Callable[[dict[str, Any], int], Reply | str]


def content_hash(raw_body: bytes) -> str:
    """Hash of a request body, for counting attempts per request content (the SDK serialises deterministically)."""
    return hashlib.sha256(raw_body).hexdigest()


def last_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(body.get("messages", [])):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")
    return ""


def count_media(body: dict[str, Any]) -> tuple[int, int]:
    images = audios = 0
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, list):
            for p in content:
                if isinstance(p, dict):
                    images += p.get("type") == "image_url"
                    audios += p.get("type") == "input_audio"
    return images, audios


def echo_responder(body: dict[str, Any], attempt: int) -> Reply:
    """Default: a deterministic answer derived from the last user text."""
    return Reply(text="echo:" + hashlib.sha256(last_user_text(body).encode()).hexdigest()[:16])


@dataclass
class Call:
    t_start: float
    t_end: float
    key: str
    model: str | None
    attempt: int
    images: int
    audios: int
    outcome: str
    auth_ok: bool | None
    path: str


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default backlog of 5 drops bursts of concurrent connects


@dataclass
class LoopbackServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 (port 0 = any free port)."""

    responder: Responder = echo_responder
    latency_s: float = 0.0
    port: int = 0
    expected_api_key: str | None = None
    calls: list[Call] = field(default_factory=list)
    max_in_flight: int = 0
    #: what `GET /models` lists (OpenAI-style entries; vLLM adds `root` and `max_model_len`); None: one entry,
    #: `{"id": "loopback"}`.  `models_status` other than 200: that status instead (a server without the route)
    models: list[dict[str, Any]] | None = None
    models_status: int = 200
    #: `GET /models` requests seen (chat requests are in `calls`)
    model_asks: int = 0
    #: entries `GET /models/{id}` answers besides the listed ones (a listing that lacks a model it serves)
    unlisted_models: list[dict[str, Any]] = field(default_factory=list)
    #: `GET /models/{id}` requests seen
    model_retrieves: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._in_flight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def root_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> LoopbackServer:
        handler = _make_handler(self)
        self._httpd = _Server(("127.0.0.1", self.port), handler)
        # a short poll: `stop()` waits up to one poll interval (the default 0.5 s, paid by every test's teardown)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="loopback-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --------------------------------------------------------------- bookkeeping
    def reset_log(self) -> None:
        with self._lock:
            self.calls.clear()
            self.max_in_flight = 0

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until no request is being handled (a timed-out client leaves the server still sleeping)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            time.sleep(0.02)
        return False

    def keys_answered(self) -> list[str]:
        with self._lock:
            return [c.key for c in self.calls if c.outcome == "answer"]

    def _enter(self, call: Call) -> int:
        """Log the call as soon as it arrives (so a client that got its answer always finds it in `calls`)."""
        with self._lock:
            self._attempts[call.key] = self._attempts.get(call.key, 0) + 1
            call.attempt = self._attempts[call.key]
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self.calls.append(call)
            return call.attempt

    def route(self, handler: BaseHTTPRequestHandler, method: str, raw: bytes) -> bool:
        """Serve a route other than chat completions and `GET /models`; False: 404.  A subclass adds routes here
        (`judges.testing_batches` adds Files and Batches); `handler` has `_send_json(status, payload)`,
        `_send_raw(status, data, content_type)`, `path` and `headers`."""
        return False

    def _leave(self) -> None:
        """Called just before the response is written, so a client's next request never overlaps this one."""
        with self._lock:
            self._in_flight -= 1


def _make_handler(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as two writes: avoid a ~40 ms delayed-ACK stall
        _left = True  # only requests counted by _enter are released by _leave_once

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self._send_raw(status, data, "application/json", headers)

        def _send_raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self._leave_once()
            self.wfile.write(data)
            self.wfile.flush()

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/models"):
                with server._lock:
                    server.model_asks += 1
                if server.models_status != 200:
                    self._send_json(server.models_status, {"error": {"message": "no such route"}})
                    return
                listed = server.models if server.models is not None else [{"id": "loopback"}]
                self._send_json(200, {"object": "list", "data": [{"object": "model", **m} for m in listed]})
            elif "/models/" in self.path:  # retrieve one model: a listed or an unlisted entry, else 404
                wanted = urllib.parse.unquote(self.path.split("/models/", 1)[1].rstrip("/"))
                with server._lock:
                    server.model_retrieves += 1
                listed = server.models if server.models is not None else [{"id": "loopback"}]
                found = [m for m in [*listed, *server.unlisted_models] if m.get("id") == wanted]
                if server.models_status != 200 or not found:
                    self._send_json(404, {"error": {"message": f"The model {wanted} does not exist"}})
                    return
                self._send_json(200, {"object": "model", **found[0]})
            elif not server.route(self, "GET", b""):
                self._send_json(404, {"error": {"message": "not found"}})

        def do_DELETE(self) -> None:  # noqa: N802
            if not server.route(self, "DELETE", b""):
                self._send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            t0 = time.time()
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.split("?")[0].endswith("/chat/completions"):
                if not server.route(self, "POST", raw):
                    self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send_json(400, {"error": {"message": "invalid JSON body"}})
                return
            images, audios = count_media(body)
            auth = self.headers.get("Authorization") or self.headers.get("api-key") or ""
            auth_ok = None if server.expected_api_key is None else server.expected_api_key in auth
            call = Call(t0, 0.0, content_hash(raw), body.get("model"), 0, images, audios, "pending", auth_ok, self.path)
            attempt = server._enter(call)
            self._left = False
            try:
                if server.latency_s:
                    time.sleep(server.latency_s)
                reply = server.responder(body, attempt)
                if isinstance(reply, str):
                    reply = Reply(text=reply)
                call.outcome = self._perform(reply, body, auth)
            except (BrokenPipeError, ConnectionResetError):
                call.outcome = "client_gone"
            finally:
                call.t_end = time.time()
                self._leave_once()

        def _leave_once(self) -> None:
            if not self._left:
                self._left = True
                server._leave()

        def _perform(self, reply: Reply, body: dict[str, Any], auth: str) -> str:
            if reply.kind == "sleep":
                time.sleep(reply.sleep_s)
                reply = Reply(text=reply.text or "late answer")
            if reply.kind == "answer":
                self._send_json(200, answer_completion(reply, body))
                return "answer"
            if reply.kind == "status":
                headers = {}
                if reply.retry_after is not None:
                    headers["Retry-After"] = f"{reply.retry_after:g}"
                self._send_json(reply.status, error_body(reply), headers)
                return f"http_{reply.status}"
            if reply.kind == "garbage":
                self._send_raw(200, b"<html>this is not json{{{", "application/json")
                return "garbage"
            if reply.kind == "no_choices":
                self._send_json(200, {"id": "x", "object": "chat.completion", "model": body.get("model")})
                return "no_choices"
            if reply.kind == "empty":
                self._send_json(200, _completion(body.get("model"), "", 1, 0))
                return "empty"
            if reply.kind == "drop":
                self.close_connection = True
                self._leave_once()
                self.connection.shutdown(2)
                return "drop"
            if reply.kind == "echo_auth":
                self._send_json(401, {"error": {"message": f"bad credentials: {auth}", "type": "auth"}})
                return "http_401"
            raise ValueError(f"unknown reply kind {reply.kind!r}")

    return Handler


def answer_completion(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion an "answer" reply sends (the batch server writes the same into its output lines)."""
    prompt_tokens = reply.prompt_tokens
    if prompt_tokens is None:
        prompt_tokens = max(1, len(json.dumps(body.get("messages", ""))) // 4)
    completion_tokens = reply.completion_tokens
    if completion_tokens is None:
        completion_tokens = max(1, len(reply.text) // 4)
    answer = _completion(reply.model or body.get("model"), reply.text, prompt_tokens, completion_tokens)
    answer["choices"][0]["finish_reason"] = reply.finish_reason
    if reply.reasoning is not None:
        answer["choices"][0]["message"]["reasoning_content"] = reply.reasoning
    return answer


def error_body(reply: Reply) -> dict[str, Any]:
    """The OpenAI-style error body of a "status" reply."""
    msg = reply.text or f"injected HTTP {reply.status}"
    return {"error": {"message": msg, "type": "injected", "code": reply.code or reply.status}}


def _completion(model: Any, text: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or "loopback",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def load_responder(spec: str) -> Responder:
    """The responder a command line names: "echo" (`echo_responder`), or "module:name" for a responder, or a class
    whose no-argument instance is one (`fakes:Judge` with tests/ on PYTHONPATH).  One spelling for every loopback
    command line, so a server and `judges.testing_vllm_batch` given the same SPEC answer alike."""
    if spec == "echo":
        return echo_responder
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--responder {spec!r}: use 'echo' or 'module:name'")
    found = getattr(importlib.import_module(module), name)
    responder = found() if isinstance(found, type) else found
    if not callable(responder):
        raise ValueError(f"--responder {spec!r}: {module}.{name} is not callable")
    return responder


def main(argv: list[str] | None = None) -> None:
    """`python -m judges.testing --port 8765 --latency 0.2 [--responder fakes:Judge]`: serve until interrupted."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    ap.add_argument("--responder", default="echo", help="'echo' (default) or module:name (see load_responder)")
    args = ap.parse_args(argv)
    responder = load_responder(args.responder)
    serve_until_interrupted(LoopbackServer(responder=responder, latency_s=args.latency, port=args.port))


def serve_until_interrupted(srv: LoopbackServer) -> None:
    """Start `srv`, print its base URL (a script waiting on it reads that line) and serve until Ctrl-C: the
    command-line form of every loopback server here."""
    srv.start()
    print(srv.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


if __name__ == "__main__":
    main()
