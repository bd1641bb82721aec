"""Per-sample audit logs (JSONL): what was asked, what came back, what it parsed to.

Why: leaderboard numbers are only trustworthy when a reader can see each judgement.  Records hold request
summaries (text truncated, media as content hashes) — never base64 payloads, endpoints or API keys.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .atomic import atomic_path
from .request import JudgeRequest, JudgeResult


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


def write_audit_jsonl(path: str | Path, records: Iterable[dict[str, Any]], *, append: bool = False) -> Path:
    """Write records as JSON lines (atomically when not appending, so a crash never leaves half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with open(path, "a", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(_jsonable(rec), ensure_ascii=False) + "\n")
        return path
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(_jsonable(rec), ensure_ascii=False) + "\n")
    return path
