"""The `vllm run-batch` stand-in (`python -m judges.testing_vllm_batch`, issue 35), run as the process a user runs:
its output lines have the fields of vLLM's BatchRequestOutput, each answer is the one a LoopbackServer with the same
responder sends over HTTP, and the lines vLLM fails (wrong url, unknown model, stream) fail the same way."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from judges.batch_files import AZURE_URL, request_line
from judges.testing import LoopbackServer, load_responder

ROOT = Path(__file__).resolve().parents[2]
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)


def _body(text: str, model: str = "judge-m", image: bool = False, **extra: Any) -> dict[str, Any]:
    content: Any = text
    if image:
        content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": PNG}}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 256, **extra}


def _run(tmp_path: Path, lines: list[bytes], *flags: str, name: str = "round") -> subprocess.CompletedProcess:
    src, out = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.output.jsonl"
    src.write_bytes(b"".join(lines))
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    cmd = [sys.executable, "-m", "judges.testing_vllm_batch", "-i", str(src), "-o", str(out), *flags]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def _output(tmp_path: Path, name: str = "round") -> list[dict[str, Any]]:
    text = (tmp_path / f"{name}.output.jsonl").read_text(encoding="utf-8")
    assert text.endswith("\n") and "\n\n" not in text
    # pydantic's model_dump_json: compact, fields in the model's order
    for raw in text.splitlines():
        assert ", " not in raw.split('"response"')[0] and raw.startswith('{"id":"vllm-')
    return [json.loads(t) for t in text.splitlines()]


def _post(srv: LoopbackServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(srv.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _check_envelope(rec: dict[str, Any], custom_id: str, status: int) -> None:
    """BatchRequestOutput(id, custom_id, response: BatchResponseData(status_code, request_id, body), error)."""
    assert list(rec) == ["id", "custom_id", "response", "error"]
    assert re.fullmatch(r"vllm-[0-9a-f]{32}", rec["id"])
    assert rec["custom_id"] == custom_id
    assert list(rec["response"]) == ["status_code", "request_id", "body"]
    assert rec["response"]["status_code"] == status
    assert re.fullmatch(r"vllm-batch-[0-9a-f]{32}", rec["response"]["request_id"])


def _without_created(completion: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in completion.items() if k != "created"}


def test_answers_equal_the_loopback_servers_and_lines_keep_vllms_format_and_input_order(tmp_path: Path) -> None:
    bodies = {
        "step": _body("Given the following answer, list the steps: the face frowns."),
        "judge": _body("Rating Requirements ... the answer has 3 step(s): ...", image=True),
        "multiemo": _body("Weigh both sides.\nFinal score: <a number from 0 to 100>"),
        "odd": _body("something the judge was never asked"),  # fakes.Judge answers HTTP 400
    }
    lines = [request_line(cid, body) for cid, body in bodies.items()]
    proc = _run(tmp_path, lines, "--model", "judge-m", "--responder", "fakes:Judge")
    assert proc.returncode == 0, proc.stderr
    records = _output(tmp_path)
    assert [r["custom_id"] for r in records] == list(bodies)  # vLLM writes in input order

    with LoopbackServer(responder=load_responder("fakes:Judge")) as srv:
        for rec, (cid, body) in zip(records, bodies.items(), strict=True):
            status, over_http = _post(srv, body)
            _check_envelope(rec, cid, status)
            if status == 200:
                assert rec["error"] is None
                assert _without_created(rec["response"]["body"]) == _without_created(over_http)
                assert rec["response"]["body"]["choices"][0]["message"]["content"]
            else:  # the failed request: body null, the ErrorResponse in `error`
                assert rec["response"]["body"] is None
                assert rec["error"] == {"error": {**over_http["error"], "param": None}}
                assert list(rec["error"]["error"]) == ["message", "type", "param", "code"]
                assert rec["error"]["error"]["code"] == status == 400
    assert "1 failed" in proc.stderr


def test_repeated_bodies_count_attempts_as_the_loopback_server_does(tmp_path: Path) -> None:
    """fakes.Model answers the third repeat of a statement differently: the stand-in must count attempts per body."""
    statement = _body("Statement: the speaker sounds calm.", model="eval-model")
    other = _body("Statement: the speaker sounds tense.", model="eval-model")
    order = [statement, other, statement, statement, other]
    lines = [request_line(f"r{i}", body) for i, body in enumerate(order)]
    proc = _run(tmp_path, lines, "--model", "eval-model", "--responder", "fakes:Model")
    assert proc.returncode == 0, proc.stderr
    got = [r["response"]["body"]["choices"][0]["message"]["content"] for r in _output(tmp_path)]
    with LoopbackServer(responder=load_responder("fakes:Model")) as srv:
        want = [_post(srv, body)[1]["choices"][0]["message"]["content"] for body in order]
    assert got == want
    assert got[3] != got[0]  # the attempt number reached the responder


def test_lines_vllm_refuses_fail_in_the_output_file_and_the_rest_are_answered(tmp_path: Path) -> None:
    lines = [
        request_line("azure-url", _body("a"), url=AZURE_URL),
        request_line("wrong-model", _body("b", model="gpt-4o")),
        request_line("alias", _body("c", model="judge")),
        request_line("streamed", _body("d", model="judge", stream=True)),
        request_line("embeddings", {"model": "judge", "messages": []}, url="/v1/embeddings"),
        request_line("ok", _body("e", model="judge")),
    ]
    proc = _run(tmp_path, lines, "--model", "/ckpt/qwen", "--served-model-name", "judge", "judge-2")
    assert proc.returncode == 0, proc.stderr
    recs = {r["custom_id"]: r for r in _output(tmp_path)}
    assert list(recs) == ["azure-url", "wrong-model", "alias", "streamed", "embeddings", "ok"]

    _check_envelope(recs["azure-url"], "azure-url", 400)
    assert recs["azure-url"]["response"]["body"] is None
    assert recs["azure-url"]["error"].startswith("URL /chat/completions was used. Supported endpoints: /v1/chat")

    _check_envelope(recs["wrong-model"], "wrong-model", 404)
    assert recs["wrong-model"]["response"]["body"] is None
    assert recs["wrong-model"]["error"] == {
        "error": {
            "message": "The model `gpt-4o` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
    }

    assert recs["streamed"]["error"] == "Request must not be sent in stream mode"
    assert recs["embeddings"]["error"] == "Model does not support endpoint: /v1/embeddings"
    for cid in ("alias", "ok"):  # --served-model-name replaces --model as the name lines use
        _check_envelope(recs[cid], cid, 200)
        assert recs[cid]["error"] is None and recs[cid]["response"]["body"]["model"] == "judge"
        assert recs[cid]["response"]["body"]["choices"][0]["message"]["content"].startswith("echo:")


@pytest.mark.parametrize(
    "bad",
    [b"{not json\n", b'{"custom_id": "x", "method": "POST", "url": "/v1/chat/completions"}\n',
     b'{"custom_id": 7, "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}\n'],
)  # fmt: skip
def test_an_unparsable_line_stops_the_run_without_an_output_file(tmp_path: Path, bad: bytes) -> None:
    lines = [request_line("ok", _body("fine")), bad]
    proc = _run(tmp_path, lines, "--model", "judge-m")
    assert proc.returncode == 1
    assert "line 2" in proc.stderr
    assert not (tmp_path / "round.output.jsonl").exists()


def test_the_stand_in_needs_the_model_flag(tmp_path: Path) -> None:
    """vLLM would load its default model without --model; the stand-in refuses to guess which name lines use."""
    proc = _run(tmp_path, [request_line("ok", _body("fine"))])
    assert proc.returncode == 2 and "--model" in proc.stderr


def test_a_responder_spec_names_echo_a_callable_or_a_class() -> None:
    """The one spelling `python -m judges.testing`, and the stand-in read --responder with."""
    from fakes import Judge

    from judges.testing import echo_responder

    assert load_responder("echo") is echo_responder
    assert isinstance(load_responder("fakes:Judge"), Judge)
    assert load_responder("judges.testing:echo_responder") is echo_responder
    for bad in ("fakes", "fakes:", "judges.testing:API_KEY_MISSING", "judges.testing:__doc__"):
        with pytest.raises((ValueError, AttributeError)):
            load_responder(bad)
