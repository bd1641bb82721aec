"""A loopback OpenAI-compatible judge in a process of its own, for the benchmarks that time the CLIs users run.

Why a process of its own: a server inside the measured process shares its GIL and its cores, so its CPU counts
against the client and the benchmark cannot say what the client costs.  This one only parses each body, sleeps
and answers (one asyncio loop, HTTP/1.1 keep-alive), and reports its own CPU, so what it takes is known.

    python benchmarks/judge_server.py --latency 0.5 [--port 0]    # prints "port N" on its first line
    python benchmarks/judge_server.py --batches [--queue 60]      # OpenAI's Files and Batches instead

Answers: the evaluated model (`model_version=eval-model`, lmms-eval's `--model openai`) at once, per row
(tests/fakes.py `Model`); the step agent and the judge after `--latency` seconds (`Judge(per_model=True)`: two judge
models disagree).  Listens on 127.0.0.1 only.

With `--batches` it is `judges.testing_batches.BatchServer` with the same responder: each batch line is answered
as the chat route answers it (no latency: a batch's wait is its queue, one status step per poll; `--queue S`: every
batch stays in_progress S seconds from its creation, a provider's queue), and GET /v1/_loopback/counters says
what was uploaded, created and run.

Control (JSON): GET /_stats -> {"calls": [[t_start, t_end, model, images], ...], "cpu_s": server CPU seconds};
POST /_reset forgets the calls.  Times are `time.time()`, comparable with the client's clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakes import Model  # noqa: E402

from judges.testing import Reply, count_media  # noqa: E402

EVAL_MODEL = "eval-model"


def cpu_s() -> float:
    """This process's CPU seconds so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Server:
    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.responder = Model(per_model=True)
        self.calls: list[list] = []

    async def completion(self, body: bytes) -> tuple[int, bytes]:
        t0 = time.time()
        req = json.loads(body)
        model = req.get("model")
        reply = self.responder(req, 1)
        if isinstance(reply, str):
            reply = Reply(text=reply)
        if model != EVAL_MODEL and self.latency_s:
            await asyncio.sleep(self.latency_s)
        images, _ = count_media(req)
        self.calls.append([t0, time.time(), model, images])
        if reply.kind == "status":
            return reply.status, json.dumps({"error": {"message": reply.text, "type": "invalid_request"}}).encode()
        out = {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(t0),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply.text}}],
            "usage": {"prompt_tokens": 100 + 85 * images, "completion_tokens": max(1, len(reply.text) // 4),
                      "total_tokens": 100 + 85 * images + max(1, len(reply.text) // 4)},
        }  # fmt: skip
        return 200, json.dumps(out).encode()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path = line.decode("latin-1").split(" ", 2)[:2]
                length = 0
                while True:
                    header = await reader.readline()
                    if header in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = header.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                if path.endswith("/chat/completions") and method == "POST":
                    status, payload = await self.completion(body)
                elif path == "/_stats":
                    status, payload = 200, json.dumps({"calls": self.calls, "cpu_s": cpu_s()}).encode()
                elif path == "/_reset":
                    self.calls = []
                    status, payload = 200, b"{}"
                else:
                    status, payload = 404, b'{"error": {"message": "not found"}}'
                head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\ncontent-type: application/json\r\n"
                        f"content-length: {len(payload)}\r\nconnection: keep-alive\r\n\r\n")  # fmt: skip
                writer.write(head.encode("latin-1") + payload)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


async def serve(latency_s: float, port: int) -> None:
    server = Server(latency_s)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=4096, limit=1 << 20)
    print(f"port {srv.sockets[0].getsockname()[1]}", flush=True)
    async with srv:
        await srv.serve_forever()


def serve_batches(port: int, queue_s: float = 0.0) -> None:
    """--batches: Files and Batches answering with `Model(per_model=True)`, each batch held in_progress `queue_s`
    seconds; /_stats gives the server's CPU (no chat calls) and /_reset does nothing, so
    `judge_cli_paths.JudgeServer` drives either kind."""
    from judges.testing_batches import BatchServer, Lifecycle

    class Batches(BatchServer):
        def route(self, handler: Any, method: str, raw: bytes) -> bool:
            if handler.path in ("/_stats", "/_reset"):
                handler._send_json(200, {"calls": [], "cpu_s": cpu_s()} if handler.path == "/_stats" else {})
                return True
            return super().route(handler, method, raw)

    life = Lifecycle(min_seconds=queue_s)
    srv = Batches(responder=Model(per_model=True), port=port, default_lifecycle=life).start()
    print(f"port {urlsplit(srv.base_url).port}", flush=True)
    while True:
        time.sleep(3600)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds each judge request takes")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--batches", action="store_true", help="serve OpenAI's Files and Batches (no --latency)")
    ap.add_argument("--queue", type=float, default=0.0, metavar="S",
                    help="--batches: each batch stays in_progress S s after its creation (a queue)")  # fmt: skip
    args = ap.parse_args()
    try:
        if args.batches:
            serve_batches(args.port, args.queue)
        asyncio.run(serve(args.latency, args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
