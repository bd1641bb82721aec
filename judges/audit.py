"""Per-sample audit logs (JSONL): what was asked, what came back, what it parsed to.

Why: leaderboard numbers are only trustworthy when a reader can see each judgement.  Records hold request
summaries (text truncated, media as content hashes) — never base64 payloads, endpoints or API keys.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .atomic import atomic_path
from .config import _MIN_SECRET, SECRET_VARIABLES, env_secrets  # noqa: E402,F401  (re-exported)
from .request import JudgeRequest, JudgeResult


def redact(value: Any, secrets: Sequence[str] | None = None) -> Any:
    """`value` with every occurrence of every secret (default: `env_secrets()`) in every string — keys and values,
    at any depth — replaced by "***".  A judge that echoes the key inside a 200 answer must not put it in a log."""
    secrets = env_secrets() if secrets is None else tuple(s for s in secrets if s and len(s) >= _MIN_SECRET)
    if not secrets:
        return value

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            for s in secrets:
                v = v.replace(s, "***")
            return v
        if isinstance(v, dict):
            return {walk(k) if isinstance(k, str) else k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


def json_text(value: Any, *, indent: int | None = None, secrets: Sequence[str] | None = None) -> str:
    """`value` as JSON text that any writer can encode as UTF-8, secrets redacted (`redact`).  Readable text
    (ensure_ascii=False) unless a string holds a lone surrogate (a model may answer "\\ud800"), which UTF-8 cannot
    encode: then that text is written with \\u escapes, still valid JSON that reads back to the same string."""
    value = redact(_jsonable(value), secrets)
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, indent=indent)
    return text


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def audit_record(request: JudgeRequest, result: JudgeResult, parsed: Any = None, **extra: Any) -> dict[str, Any]:
    """One audit line for a (request, result) pair; `parsed` is whatever the benchmark made of the answer."""
    record: dict[str, Any] = {
        "sample_id": request.sample_id,
        "role": request.role,
        "model": result.model,
        "key": result.key,
        "request": request.summary(),
        "raw_answer": result.text,
        "ok": result.ok,
        "error": result.error,
        "detail": result.detail,
        "cached": result.cached,
        "tries": result.tries,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "parsed": _jsonable(parsed),
    }
    record.update({k: _jsonable(v) for k, v in extra.items()})
    return record


def write_audit_jsonl(
    path: str | Path,
    records: Iterable[dict[str, Any]],
    *,
    append: bool = False,
    secrets: Sequence[str] | None = None,
) -> Path:
    """Write records as JSON lines (atomically when not appending, so a crash never leaves half a file).  Every
    string is stored with the API keys redacted (`secrets`, default: those in the environment) and any string
    survives (`json_text`): one odd answer never costs a task its logs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    secrets = env_secrets() if secrets is None else secrets
    if append:
        with open(path, "a", encoding="utf-8") as f:
            for rec in records:
                f.write(json_text(rec, secrets=secrets) + "\n")
        return path
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json_text(rec, secrets=secrets) + "\n")
    return path
