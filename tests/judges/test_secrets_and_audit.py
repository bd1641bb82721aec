"""API keys never reach logs, caches, audit logs or results; the audit log holds what a reader needs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from conftest import API_KEY

from emo_tasks.mme_emotion.parsers import parse_scores, score_validator
from judges import JudgeRequest, audit_record, text_message, user_message, write_audit_jsonl
from judges.testing import LoopbackServer, Reply


def test_key_appears_in_no_log_cache_audit_or_result(
    server: LoopbackServer, make_engine, tmp_path: Path, caplog
) -> None:
    def responder(body: dict, attempt: int) -> Reply:
        text = body["messages"][-1]["content"]
        text = text if isinstance(text, str) else "media"
        if text.startswith("auth"):
            return Reply("echo_auth")  # a server that echoes the Authorization header in its error
        if text.startswith("flaky") and attempt == 1:
            return Reply("status", status=500, text=f"upstream saw {API_KEY}")
        return Reply(text="<score>Step 1: 1/1</score>")

    server.responder = responder
    cache_dir = tmp_path / "cache"
    engine = make_engine(server, cache_dir=cache_dir)
    log_file = tmp_path / "run.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    try:
        requests = [
            JudgeRequest([text_message("user", "auth please")], model="m", sample_id="s0"),
            JudgeRequest([text_message("user", "flaky")], model="m", sample_id="s1"),
            JudgeRequest([user_message("ok")], model="m", sample_id="s2", validate=score_validator(1)),
        ]
        batch = engine.run(requests, progress=True)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()

    assert batch[0].error == "http_401" and "***" in batch[0].detail
    assert batch[1].ok and batch[2].ok
    audit = write_audit_jsonl(
        tmp_path / "audit.jsonl",
        [audit_record(r, res, parsed=parse_scores(res.text)) for r, res in zip(requests, batch, strict=True)],
    )
    results_file = tmp_path / "results.json"
    results_file.write_text(json.dumps({"results": [r.to_dict() for r in batch], "stats": batch.stats.to_dict()}))
    engine.close()

    files = [audit, results_file, log_file, *cache_dir.glob("*")]
    assert any(p.name.endswith(".sqlite3") for p in files)
    for path in files:
        assert API_KEY.encode() not in path.read_bytes(), path
    assert API_KEY not in caplog.text
    assert "judge batch" in caplog.text  # the batch summary was logged


def test_audit_record_contents(server: LoopbackServer, make_engine, tmp_path: Path) -> None:
    server.responder = lambda body, attempt: Reply(text="<score>Step 1: 1/1, Step 2: 2/3</score>")
    request = JudgeRequest(
        [text_message("system", "be fair"), user_message("x" * 1000)], model="judge-model", sample_id="vid_7"
    )
    result = make_engine(server).run([request])[0]
    path = write_audit_jsonl(
        tmp_path / "a.jsonl",
        [audit_record(request, result, parsed=parse_scores(result.text), task="mme_emotion_er_lab")],
    )
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["sample_id"] == "vid_7" and rec["task"] == "mme_emotion_er_lab"
    assert rec["raw_answer"].startswith("<score>") and rec["ok"] is True
    assert rec["parsed"]["status"] == "parsed" and len(rec["parsed"]["ratings"]) == 2
    user_text = rec["request"]["messages"][1]["content"][0]["text"]
    assert len(user_text) < 400  # truncated, not the whole prompt
    write_audit_jsonl(path, [rec], append=True)
    assert len(path.read_text().splitlines()) == 2


def test_report_masks_secrets_in_model_args(tmp_path) -> None:
    """lmms-eval records --model_args as given: the report (labels, JSON, CSV, exports read it) masks a key, a
    URL's password and any secret variable's value; other arguments stay readable."""
    import json

    from emo_tasks.results import reader

    run = tmp_path / "run"
    run.mkdir()
    args = "model_version=m1,api_key=sk-abc123456789,base_url=https://user:pw@host.example/v1,x=tok-0000000000long"
    data = {"results": {"mvei_sample": {"acc_total,none": 50.0}}, "config": {"model": "openai", "model_args": args}}
    (run / "20260101_000000_results.json").write_text(json.dumps(data))
    loaded = reader.load_run(run)
    masked = loaded.model_args
    assert "sk-abc123456789" not in masked and "user:pw" not in masked and "model_version=m1" in masked
    assert masked.count("***") == 2
    import os

    os.environ["EMO_TEST_SECRET_TOKEN"] = "tok-0000000000long"
    try:
        assert "tok-0000000000long" not in reader.load_run(run).model_args
    finally:
        del os.environ["EMO_TEST_SECRET_TOKEN"]


def test_masking_leaves_a_value_lmms_eval_already_masked_as_it_is() -> None:
    """lmms-eval writes `api_key=[REDACTED]`: text without a secret reads the same after masking (an export's
    provenance stays byte for byte what it was before the report masked model_args)."""
    from emo_tasks.results.redact import mask_secrets

    text = "model_version=m,base_url=http://127.0.0.1:9/v1,api_key=[REDACTED],max_frames_num=4"
    assert mask_secrets(text, env={}) == text
    assert mask_secrets("api_key='***',token=abcdef", env={}) == "api_key='***',token=***"


def test_model_args_as_a_dict_are_masked_by_key_and_read_as_text() -> None:
    """Older lmms-eval versions and hand-made results record model_args as a dict: its secrets are masked by key,
    recursively (a secret key's whole value; lists and nested dicts), and it reads as lmms-eval's `name=value` text,
    so every reader of model_args (labels, the export's default name, trends) takes it as it takes the text."""
    from emo_tasks.results.redact import Redactor, mask_config, model_args_text

    args = {
        "pretrained": "Qwen/Qwen2-VL-2B", "api_key": "sk-abc123456789", "base_url": "https://u:pw@host.example/v1",
        "use_auth_token": True, "client": {"session": {"token": "t-0000000000", "n": 3}, "auth": ["alice", 12345678]},
        "headers": ["x-api-key=sk-abc123456789"], "ready": "[REDACTED]", "password": "[REDACTED]", "seed": None,
    }  # fmt: skip
    text = model_args_text(args, env={})
    assert text == (
        "pretrained=Qwen/Qwen2-VL-2B,api_key=***,base_url=https://***@host.example/v1,use_auth_token=True,"
        'client={"session": {"token": "***", "n": 3}, "auth": ["***", "***"]},headers=["x-api-key=***"],'
        "ready=[REDACTED],password=[REDACTED],seed=None"
    )
    assert (
        model_args_text([{"api_key": "sk-abc123456789"}, "pretrained=x"], env={}) == '{"api_key": "***"},pretrained=x'
    )
    assert model_args_text({"model": "m", "note": "tok-0000000000long"}, env={"MY_TOKEN": "tok-0000000000long"}) == (
        "model=m,note=***"
    )
    string = "model_version=m1,api_key=sk-abc123456789,base_url=https://user:pw@host.example/v1"
    assert model_args_text(string, env={}) == "model_version=m1,api_key=***,base_url=https://***@host.example/v1"
    assert model_args_text(None) is None
    assert mask_config({"a": {"b": 1}}, Redactor({})) == {"a": {"b": 1}}


def test_the_export_name_and_the_label_read_dict_model_args(tmp_path) -> None:
    import json

    from emo_tasks.results import export, reader

    run = tmp_path / "run"
    run.mkdir()
    config = {"model": "openai", "model_args": {"model_version": "gpt-x", "api_key": "sk-abc123456789"}}
    data = {"results": {"mvei_sample": {"acc_total,none": 50.0}}, "config": config}
    (run / "20260101_000000_results.json").write_text(json.dumps(data))
    loaded = reader.load_run(run)
    reader.label_runs([loaded])
    assert loaded.label == "openai (model_version=gpt-x,api_key=***)"
    assert export.model_name_for(loaded, None) == "gpt-x"
