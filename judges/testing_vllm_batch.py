"""Testing utility, not part of the engine: a stand-in for `vllm run-batch` that answers with a loopback responder.

    python -m judges.testing_vllm_batch -i IN.jsonl -o OUT.jsonl --model M [--served-model-name M ...]
        [--responder fakes:Judge]

Why it exists: `emo-tasks judge --batch-file DIR` writes request files for `vllm run-batch` and `--batch-results
DIR` reads its output files back (issue 35), but there is no vLLM (nor a GPU) here.  This program reads an input
file and writes an output file the way vLLM's batch runner (vllm/entrypoints/openai/run_batch.py) does, so the
round trip can be proven end to end:

- a line that is not a JSON object with `custom_id`, `method`, `url` and a chat `body` (one with `messages`) stops
  the whole run with exit status 1 and no output file: vLLM's `BatchRequestInput.model_validate_json` raises
  outside any handler;
- `method` is not checked (vLLM never looks at it); a `url` other than "/v1/chat/completions" (Azure's
  "/chat/completions" included), a `body.model` that is neither `--model` nor a `--served-model-name`, and
  `"stream": true` each give a failed line, not a failed run;
- every line, answered or failed, goes into the one output file, in input order: `{"id", "custom_id", "response":
  {"status_code", "request_id", "body"}, "error"}`, compact JSON as pydantic's `model_dump_json` writes it.  A failed
  line has `response.body` null, `response.status_code` the HTTP status, and `error` either a string (bad url,
  stream) or an ErrorResponse `{"error": {"message", "type", "param", "code"}}` (unknown model: 404 NotFoundError).

Answers come from the same responder a `judges.testing.LoopbackServer` uses (`--responder`, spelled as for
`python -m judges.testing`), built by the same `answer_completion`, with attempts counted per request body within
the run: a body gets from here what it gets from a fresh LoopbackServer, so a vLLM round trip scores what the
synchronous stage scores.  A "status" reply becomes a failed line with that status and the reply's error.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from judges.testing import Reply, Responder, answer_completion, error_body, load_responder

#: the one url vLLM routes to chat completions (`url == "/v1/chat/completions"`, exact)
CHAT_URL = "/v1/chat/completions"
#: the other endpoints vLLM's batch runner knows, by the last segment of the url; a chat model serves none
OTHER_ENDPOINTS = {"embeddings": "/v1/embeddings", "transcriptions": "/v1/audio/transcriptions",
                   "translations": "/v1/audio/translations"}  # fmt: skip
#: vLLM's message for a url it has no route for (the newest runner's text, typo-spaces and all)
UNKNOWN_URL = (
    "URL {url} was used. Supported endpoints: /v1/chat/completions, /v1/embeddings, /v1/audio/transcriptions, "
    "/v1/audio/translations, /score,  /rerank."
)
STREAM_MESSAGE = "Request must not be sent in stream mode"


class BadInputLine(ValueError):
    """A line vLLM's batch runner cannot even parse: the run stops."""


def parse_line(text: str, number: int) -> dict[str, Any]:
    """One input line as vLLM's `BatchRequestInput` takes it; BadInputLine names the line and what is missing."""
    try:
        line = json.loads(text)
    except ValueError as exc:
        raise BadInputLine(f"line {number}: not JSON ({exc})") from exc
    if not isinstance(line, dict):
        raise BadInputLine(f"line {number}: not a JSON object")
    for key in ("custom_id", "method", "url"):
        if not isinstance(line.get(key), str):
            raise BadInputLine(f"line {number}: {key} must be a string")
    body = line.get("body")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise BadInputLine(f"line {number}: body must be a chat completion request with messages")
    return line


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The input file's requests; blank lines are skipped, as vLLM skips them."""
    texts = path.read_text(encoding="utf-8").splitlines()
    return [parse_line(t.strip(), n) for n, t in enumerate(texts, 1) if t.strip()]


class StandIn:
    """Answers lines as `vllm run-batch --model MODEL` would, with `responder` in place of the model."""

    def __init__(self, model: str, responder: Responder, served_model_names: Iterable[str] | None = None) -> None:
        self.served = list(served_model_names or [model])
        self.responder = responder
        self._attempts: dict[str, int] = {}

    def answer(self, line: dict[str, Any]) -> dict[str, Any]:
        """The output record of one parsed input line."""
        url, body = line["url"], line["body"]
        if url != CHAT_URL:
            key = url.split("/")[-1]
            known = OTHER_ENDPOINTS.get(key) == url or key in ("score", "rerank")
            message = f"Model does not support endpoint: {url}" if known else UNKNOWN_URL.format(url=url)
            return _record(line, 400, error=message)
        model = body.get("model")
        if model and model not in self.served:
            info = {"message": f"The model `{model}` does not exist.", "type": "NotFoundError", "param": "model"}
            return _record(line, 404, error={"error": {**info, "code": 404}})
        if body.get("stream"):
            return _record(line, 400, error=STREAM_MESSAGE)
        reply = self._reply(body)
        if reply.kind == "status":
            err = error_body(reply)["error"]
            info = {"message": err["message"], "type": err["type"], "param": None, "code": err["code"]}
            return _record(line, reply.status, error={"error": info})
        return _record(line, 200, body=_completion_for(reply, body))

    def _reply(self, body: dict[str, Any]) -> Reply:
        key = json.dumps(body, sort_keys=True)
        self._attempts[key] = attempt = self._attempts.get(key, 0) + 1
        reply = self.responder(body, attempt)
        return Reply(text=reply) if isinstance(reply, str) else reply


def _completion_for(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion the loopback chat route sends for `reply` (a batch has no client timeout: a "sleep"
    reply is its late answer)."""
    if reply.kind == "sleep":
        reply = replace(reply, kind="answer", text=reply.text or "late answer")
    if reply.kind == "empty":
        reply = Reply(text="", prompt_tokens=1, completion_tokens=0)
    if reply.kind != "answer":
        raise ValueError(f"a {reply.kind!r} reply has no `vllm run-batch` counterpart; use 'answer' or 'status'")
    return answer_completion(reply, body)


def _record(line: dict[str, Any], status: int, body: Any = None, error: Any = None) -> dict[str, Any]:
    """vLLM's BatchRequestOutput, field for field (ids are `vllm-` and `vllm-batch-` plus a uuid4 hex)."""
    response = {"status_code": status, "request_id": f"vllm-batch-{uuid.uuid4().hex}", "body": body}
    return {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": line["custom_id"], "response": response, "error": error}


def run(input_file: Path, output_file: Path, stand_in: StandIn) -> int:
    """Answer every line of `input_file` into `output_file` (input order); how many lines failed."""
    records = [stand_in.answer(line) for line in read_lines(input_file)]
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
    output_file.write_text(text, encoding="utf-8")
    return sum(r["response"]["status_code"] != 200 for r in records)


def main(argv: list[str] | None = None) -> int:
    """The command line (vLLM's flags that matter here, plus --responder); exit status 1 on an unreadable line."""
    ap = argparse.ArgumentParser(prog="python -m judges.testing_vllm_batch", description=__doc__.splitlines()[0])
    ap.add_argument("-i", "--input-file", required=True, type=Path)
    ap.add_argument("-o", "--output-file", required=True, type=Path)
    ap.add_argument("--model", required=True, help="the model vLLM would load; request lines must name it")
    ap.add_argument("--served-model-name", nargs="+", default=None, help="names lines may use instead of --model")
    ap.add_argument("--responder", default="echo", help="'echo' (default) or module:name, as for judges.testing")
    args = ap.parse_args(argv)
    stand_in = StandIn(args.model, load_responder(args.responder), args.served_model_name)
    try:
        failed = run(args.input_file, args.output_file, stand_in)
    except BadInputLine as exc:
        print(f"{args.input_file}: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.output_file} ({failed} failed)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
