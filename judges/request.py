"""What a benchmark asks the judge engine, and what it gets back.

A request says *what* to ask (messages, model role, sampling parameters) plus an optional validator; the engine
decides *how* (cache, concurrency, retries).  The cache key is built from the request's content only: the model
name, the messages with media replaced by content hashes, and the sampling parameters — never the endpoint, the
API key, the sample id or the validator.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .media import canonical_part, render_part, summarise_part

CACHE_SCHEMA = "emo-judges/1"

#: A validator gets the answer text and returns None when it is usable, else a short reason ("no <score> block").
Validator = Callable[[str], str | None]


def text_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def user_message(*parts: Any) -> dict[str, Any]:
    """A user message from text strings and media parts, in order (text becomes `{"type": "text"}`)."""
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
    return {"role": "user", "content": content}


def _map_content(messages: Sequence[dict[str, Any]], fn: Callable[[Any], Any]) -> list[dict[str, Any]]:
    out = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            mapped: list[Any] = []
            for part in content:
                value = fn(part)
                # a part may expand into several (a video's frames become image parts)
                if isinstance(value, list):
                    mapped.extend(value)
                else:
                    mapped.append(value)
            msg = {**msg, "content": mapped}
        out.append(msg)
    return out


@dataclass(eq=False)
class JudgeRequest:
    """One chat request to a judge.

    `role` picks the model from the environment ("step", "judge", "audio") unless `model` is given.
    `params` are extra chat-completion parameters (top_p, seed, response_format, ...), part of the cache key.
    `validate` rejects unusable answers (retried, then a counted failure; never cached).
    `sample_id` only labels audit records.
    """

    messages: list[dict[str, Any]]
    role: str = "judge"
    model: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    validate: Validator | None = None
    sample_id: str | None = None

    def resolved_model(self) -> str:
        if self.model:
            return self.model
        from .config import model_for_role

        return model_for_role(self.role)

    def payload_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        params.update(self.params)
        return params

    def cache_key(self, served: Mapping[str, Any] | None = None) -> str:
        """sha256 over (schema, model, canonical messages, parameters): endpoint- and key-independent.

        `served`: what the endpoint serves under the model name beyond the name itself
        (`fingerprint.served_key_part`: a vLLM `root`, `max_model_len`); part of the key only when not empty, so
        the key of a request to an endpoint that reports nothing more (OpenAI) is the one it always was."""
        body: dict[str, Any] = {
            "schema": CACHE_SCHEMA,
            "model": self.resolved_model(),
            "messages": _map_content(self.messages, canonical_part),
            "params": self.payload_params(),
        }
        if served:
            body["served"] = dict(served)
        blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def render_messages(self) -> list[dict[str, Any]]:
        """The messages as the API takes them (media encoded now, dropped after the call)."""
        return _map_content(self.messages, render_part)

    def pending_renders(self) -> list[Any]:
        """Futures of this request's media parts that a render pool is producing now (parts with `pending()`)."""
        out = []
        for msg in self.messages:
            content = msg.get("content")
            if isinstance(content, list):
                for part in content:
                    pending = getattr(part, "pending", None)
                    future = pending() if callable(pending) else None
                    if future is not None:
                        out.append(future)
        return out

    async def media_ready(self) -> None:
        """Wait, without holding a concurrency slot, for media a render pool is producing now."""
        for future in self.pending_renders():
            try:
                await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                if not future.cancelled():  # our own cancellation, not the render's
                    raise
            except Exception:  # noqa: BLE001 - the request renders (and fails, naming the file) itself
                pass

    def summary(self, text_chars: int = 300) -> dict[str, Any]:
        """A short description for audit logs and the cache: text truncated, media as hashes, no secrets."""
        return {
            "role": self.role,
            "model": self.resolved_model(),
            "params": self.payload_params(),
            "messages": _map_content(
                [
                    {**m, "content": summarise_part(m["content"], text_chars)}
                    if isinstance(m.get("content"), str)
                    else m
                    for m in self.messages
                ],
                lambda p: summarise_part(p, text_chars),
            ),
        }


@dataclass
class JudgeResult:
    """The outcome of one request: an answer (`ok`), or a failure with its reason category and detail."""

    ok: bool
    text: str | None
    key: str
    model: str
    error: str | None = None  # rate_limited | server_error | timeout | connection | http_4xx | malformed_response
    #                           | empty_answer | invalid_answer | client_error | truncated (cut off inside
    #                           its reasoning: `reasoning.cut_off`)
    detail: str | None = None
    cached: bool = False
    tries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    #: the model id the API named in its response (may differ from `model`, e.g. a dated snapshot or a served path)
    api_model: str | None = None
    #: host[:port] of the endpoint that produced the answer (for a cached answer: the one that produced it then)
    endpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_cache(cls, key: str, hit: Any) -> JudgeResult:
        """A cache hit (`JudgeCache` answer) as a request's result, with the tokens its call once cost."""
        return cls(
            ok=True,
            text=hit.text,
            key=key,
            model=hit.model,
            cached=True,
            prompt_tokens=hit.prompt_tokens,
            completion_tokens=hit.completion_tokens,
            api_model=hit.api_model,
            endpoint=hit.endpoint,
        )

    def shared(self) -> JudgeResult:
        """This result for a duplicate request that shared its call (or cache hit): the same answer, no tokens of
        its own."""
        return JudgeResult(**{**self.to_dict(), "prompt_tokens": 0, "completion_tokens": 0})


@dataclass
class BatchStats:
    """Accounting for one batch, returned to the caller and logged."""

    requests: int = 0
    unique_requests: int = 0
    cache_hits: int = 0
    calls: int = 0  # HTTP attempts actually made
    retries: int = 0
    answered: int = 0
    failures: int = 0
    failures_by_reason: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    #: model ids the API reported for the answers of this batch (cached ones included), with their counts
    api_models: dict[str, int] = field(default_factory=dict)
    #: endpoint hosts that produced the answers of this batch (cached ones included), with their counts
    endpoints: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def count(self, results: Sequence[JudgeResult]) -> None:
        """Add the batch's results: answers, failures by reason, the tokens of the calls made (a cached answer's
        cost nothing now), and the API model ids and endpoints that produced the answers."""
        for r in results:
            if r.ok:
                self.answered += 1
            else:
                self.failures += 1
                self.failures_by_reason[r.error or "unknown"] = self.failures_by_reason.get(r.error or "unknown", 0) + 1
            if not r.cached:
                self.prompt_tokens += r.prompt_tokens
                self.completion_tokens += r.completion_tokens
            if r.ok and r.api_model:
                self.api_models[r.api_model] = self.api_models.get(r.api_model, 0) + 1
            if r.ok and r.endpoint:
                self.endpoints[r.endpoint] = self.endpoints.get(r.endpoint, 0) + 1

    def summary_line(self) -> str:
        reasons = ", ".join(f"{k}={v}" for k, v in sorted(self.failures_by_reason.items())) or "none"
        return (
            f"{self.requests} requests ({self.unique_requests} unique): {self.cache_hits} cached, "
            f"{self.calls} calls, {self.retries} retries, {self.failures} failed [{reasons}], "
            f"tokens {self.prompt_tokens}+{self.completion_tokens}, {self.wall_time_s:.2f}s"
        )


@dataclass
class BatchResult(Sequence[JudgeResult]):
    """Results in input order, plus the batch's accounting."""

    results: list[JudgeResult]
    stats: BatchStats

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i):  # type: ignore[override]
        return self.results[i]

    def __iter__(self) -> Iterator[JudgeResult]:
        return iter(self.results)

    def failure_counts(self) -> Counter[str]:
        return Counter(r.error for r in self.results if not r.ok and r.error)
