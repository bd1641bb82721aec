"""The one judge engine: cache ▸ bounded concurrent calls ▸ retry ▸ validate ▸ account.

Why this shape:
- lmms-eval calls our hooks synchronously (aggregation on rank 0, `process_results` from 4 threads).  The engine
  runs its own asyncio loop in a daemon thread; `run()` may be called from any thread, and every caller shares
  one concurrency budget (`EMO_JUDGE_CONCURRENCY`), so four post-processing threads neither cap nor multiply it.
- Cache look-ups happen in the caller's thread, in one query per batch, before anything is sent: a rerun of an
  answered batch makes no call and needs no API key.
- Faults are data: every request ends as an answer or as a failure with a reason; only a configuration error
  (no endpoint, no model for a role) raises, and it does so before the first call.
"""

from __future__ import annotations

import asyncio
import atexit
import email.utils
import logging
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from .cache import JudgeCache
from .config import EndpointConfig, EngineSettings, JudgeConfigError
from .request import BatchResult, BatchStats, JudgeRequest, JudgeResult

logger = logging.getLogger("judges")
T = TypeVar("T")
R = TypeVar("R")

RETRY_AFTER_MAX_S = 300.0
#: A batch whose failure share passes this prints a warning on stderr (lmms-eval's console), not only in the log.
FAILURE_SHARE_WARNING = 0.1
#: Reasons that, when every answer of a batch so far failed with them, say the endpoint is down or refuses us.
_FATAL_AT_START = frozenset({"connection", "timeout", "http_401", "http_403", "http_404"})
_DETAIL_CHARS = 500


class _MalformedResponse(Exception):
    pass


class _EmptyAnswer(Exception):
    pass


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms` / `retry-after` (seconds or an HTTP date); None when absent."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        raw = headers.get("retry-after")
    except Exception:
        return None
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classify_error(exc: BaseException) -> tuple[str, bool, float | None]:
    """(reason, retryable, retry_after_s) for an exception raised while asking the judge."""
    import openai

    if isinstance(exc, _MalformedResponse | openai.APIResponseValidationError):
        return "malformed_response", True, None
    if isinstance(exc, _EmptyAnswer):
        return "empty_answer", True, None
    if isinstance(exc, openai.APITimeoutError | asyncio.TimeoutError):
        return ("connection" if _refused_or_dropped(exc) else "timeout"), True, None
    if isinstance(exc, openai.APIConnectionError):
        return "connection", True, None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(getattr(exc.response, "headers", None))
        if status == 429:
            return "rate_limited", True, retry_after
        if status >= 500:
            return "server_error", True, retry_after
        if status in (408, 409):
            return f"http_{status}", True, retry_after
        return f"http_{status}", False, None
    if isinstance(exc, ValueError | TypeError | KeyError | AttributeError | IndexError):
        # The SDK could not make sense of what came back (e.g. a 200 with a non-JSON body).
        return "malformed_response", True, None
    return "client_error", False, None


def _refused_or_dropped(exc: BaseException) -> bool:
    """A 'timeout' from the SDK's aiohttp transport that was in fact a refused or dropped connection: that
    transport maps every `aiohttp.ClientConnectionError` to httpx's ConnectTimeout, and the reason a failure is
    counted under must say what happened."""
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is None:
        return False
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 10:
        if isinstance(cause, aiohttp.ClientConnectionError):
            return not isinstance(cause, aiohttp.ServerTimeoutError | asyncio.TimeoutError | TimeoutError)
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return False


def _extract_answer(resp: Any) -> tuple[str, int, int, str | None]:
    """(text, prompt tokens, completion tokens, API model id) of a chat completion: the raw JSON bytes the SDK
    handed back (`_send`), or a decoded object (a dict, or the SDK's model)."""
    if isinstance(resp, bytes | bytearray):
        import json

        try:
            resp = json.loads(resp)
        except ValueError as exc:
            raise _MalformedResponse(f"response is not JSON ({exc})") from None
    if isinstance(resp, str | bytes) or resp is None:
        raise _MalformedResponse(f"response is not a chat completion ({type(resp).__name__})")
    get = lambda obj, name: obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)  # noqa: E731
    choices = get(resp, "choices")
    if not choices or not isinstance(choices, list | tuple):
        raise _MalformedResponse("response has no choices")
    message = get(choices[0], "message")
    content = get(message, "content") if message is not None else None
    if isinstance(content, list):  # some servers return content parts
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    if content is None or not str(content).strip():
        raise _EmptyAnswer("the judge returned an empty answer")
    usage = get(resp, "usage")
    prompt_tokens = int((get(usage, "prompt_tokens") if usage is not None else 0) or 0)
    completion_tokens = int((get(usage, "completion_tokens") if usage is not None else 0) or 0)
    api_model = get(resp, "model")
    return str(content), prompt_tokens, completion_tokens, str(api_model) if api_model else None


async def _send(client: Any, body: dict[str, Any]) -> bytes:
    """POST one chat completion through the SDK client and return the response body unparsed.

    Why not `client.chat.completions.create`: it walks the whole request (every base64 frame) through the SDK's
    type-driven transform and builds a pydantic model of the answer, which together cost more CPU per request than
    the rest of the engine; on a 2-core machine that capped a client near 130 requests/s.  `post` is the SDK's own
    path for any endpoint: the same URL rules (Azure deployments too), headers, auth, timeouts and status errors
    (`openai.APIStatusError` & co., which `classify_error` reads); the body is the same JSON."""
    return await client.post("/chat/completions", cast_to=bytes, body=body)


def http_client(endpoint: EndpointConfig) -> Any:
    """The HTTP client the SDK sends through: its aiohttp transport when that is installed (`openai[aiohttp]`;
    less CPU per request than httpx's pure-Python connection pool, whose bookkeeping grows with the number of
    connections), else its default httpx client; either with a connection pool as large as the concurrency, so
    no request waits for a connection and none is closed and reopened between requests.  `EMO_JUDGE_HTTP`
    (auto | aiohttp | httpx) picks; None when the SDK is too old to offer these clients (its own defaults)."""
    import openai

    choice = endpoint.http
    aio = getattr(openai, "DefaultAioHttpClient", None)
    use_aio = choice == "aiohttp" or (choice == "auto" and aio is not None and _aiohttp_available())
    if use_aio and (aio is None or not _aiohttp_available()):
        raise JudgeConfigError(
            "EMO_JUDGE_HTTP=aiohttp needs the openai SDK's aiohttp transport: pip install 'openai[aiohttp]'"
        )
    cls = aio if use_aio else getattr(openai, "DefaultAsyncHttpxClient", None)
    if cls is None:
        return None
    limits = _limits(endpoint.concurrency)
    return cls(limits=limits, timeout=endpoint.timeout_s) if limits is not None else cls(timeout=endpoint.timeout_s)


def _aiohttp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("aiohttp") is not None


def _limits(concurrency: int) -> Any:
    """httpx(2).Limits for `concurrency` connections, all kept alive (the SDK's own httpx flavour)."""
    import importlib

    for name in ("httpx2", "httpx"):  # the SDK moved to its httpx2 fork; older releases use httpx
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return None


def _http_kwargs(endpoint: EndpointConfig) -> dict[str, Any]:
    client = http_client(endpoint)
    return {} if client is None else {"http_client": client}


class JudgeEngine:
    """Runs batches of `JudgeRequest`s against an OpenAI-compatible endpoint.

    `cache`: a `JudgeCache` (the caller owns it and closes it), a path to open one at (on first use; `close()`
    closes it), or None for no cache.  Nothing is opened or connected until the first batch that needs it.
    """

    def __init__(
        self,
        endpoint: EndpointConfig | None = None,
        cache: JudgeCache | str | Path | None = None,
        progress: bool = True,
    ) -> None:
        self.endpoint = endpoint or EndpointConfig()
        self._cache_path = None if isinstance(cache, JudgeCache) or cache is None else Path(cache)
        self._cache: JudgeCache | None = cache if isinstance(cache, JudgeCache) else None
        self.progress = progress
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None

    # ----------------------------------------------------------------- plumbing
    @property
    def cache(self) -> JudgeCache | None:
        if self._cache is None and self._cache_path is not None:
            with self._lock:
                if self._cache is None:
                    self._cache = JudgeCache(self._cache_path)
        return self._cache

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="emo-judges-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _get_client(self) -> Any:
        """The SDK client, made lazily inside the engine's loop (SDK retries off: ours are counted)."""
        if self._client is None:
            import openai

            ep = self.endpoint
            if ep.api_type == "azure":
                self._client = openai.AsyncAzureOpenAI(
                    api_key=ep.api_key,
                    azure_endpoint=ep.base_url,
                    api_version=ep.api_version,
                    max_retries=0,
                    timeout=ep.timeout_s,
                    **_http_kwargs(ep),
                )
            else:
                self._client = openai.AsyncOpenAI(
                    api_key=ep.api_key or "EMPTY",  # local vLLM/SGLang servers accept any key
                    base_url=ep.base_url,
                    max_retries=0,
                    timeout=ep.timeout_s,
                    **_http_kwargs(ep),
                )
            self._sem = asyncio.Semaphore(ep.concurrency)
        return self._client

    def close(self) -> None:
        """Stop the loop thread and close the client and cache (the engine can be used again afterwards)."""
        with self._lock:
            loop, self._loop = self._loop, None
            client, self._client = self._client, None
            thread, self._thread = self._thread, None
        if loop is not None:
            if client is not None:
                try:
                    asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=5)
                except Exception:  # closing is best effort
                    pass
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(timeout=5)
            loop.close()
        if self._cache is not None and self._cache_path is not None:
            self._cache.close()
            self._cache = None

    def _invalid_request(self, req: JudgeRequest, exc: Exception) -> JudgeResult:
        """The failure of a request that cannot even be keyed (e.g. its media file does not exist)."""
        return JudgeResult(
            ok=False,
            text=None,
            key="",
            model=req.model or req.role,
            error="invalid_request",
            detail=self.redact(f"{type(exc).__name__}: {exc}")[:_DETAIL_CHARS],
        )

    def redact(self, text: str) -> str:
        key = self.endpoint.api_key
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    # ----------------------------------------------------------------- public API
    def run(
        self, requests: Sequence[JudgeRequest], *, desc: str = "judge", progress: bool | None = None
    ) -> BatchResult:
        """Answer `requests` (results in input order).  Safe to call from any thread, concurrently."""
        if self._thread is not None and threading.current_thread() is self._thread:
            raise RuntimeError("JudgeEngine.run() called from the engine's own loop; use `await engine.arun()`")
        started = time.perf_counter()
        stats = BatchStats(requests=len(requests))
        results: list[JudgeResult | None] = [None] * len(requests)
        by_key: dict[str, list[int]] = {}
        first: dict[str, JudgeRequest] = {}
        for i, req in enumerate(requests):
            try:
                key = req.cache_key()
            except JudgeConfigError:
                raise
            except Exception as exc:  # e.g. a media file that does not exist: this request fails, loudly counted
                results[i] = self._invalid_request(req, exc)
                continue
            by_key.setdefault(key, []).append(i)
            first.setdefault(key, req)
        stats.unique_requests = len(by_key)

        cache = self.cache
        hits = cache.get_many(by_key) if cache is not None else {}
        for key, hit in hits.items():
            for n, i in enumerate(by_key[key]):
                results[i] = _cached_result(key, hit) if n == 0 else _shared_copy(_cached_result(key, hit))
        stats.cache_hits = sum(len(by_key[k]) for k in hits)
        misses = [k for k in by_key if k not in hits]

        show = self.progress if progress is None else progress
        bar = progress_bar(len(requests), desc, show)
        bar.update(len(requests) - sum(len(by_key[k]) for k in misses))
        try:
            if misses:
                self.endpoint.check_usable()
                loop = self._ensure_loop()
                coro = self._run_misses([(k, first[k]) for k in misses], stats, bar, by_key, desc)
                answered = asyncio.run_coroutine_threadsafe(coro, loop).result()
                for key, res in answered.items():
                    for n, i in enumerate(by_key[key]):
                        # a duplicate inside the batch shares the single call's answer
                        results[i] = res if n == 0 else _shared_copy(res)
        finally:
            bar.close()

        final: list[JudgeResult] = [r for r in results if r is not None]
        assert len(final) == len(requests)
        self._account(stats, final, desc, started)
        return BatchResult(results=final, stats=stats)

    def _account(
        self, stats: BatchStats, final: Sequence[JudgeResult], desc: str, started: float, ended: float | None = None
    ) -> None:
        """A batch's (or a lane's) closing accounting from its results: answers, failures by reason, tokens of the
        calls made, API model ids and endpoints, the time from `started` to `ended` (default now); logged, and a
        warning on stderr when too many failed."""
        for r in final:
            if r.ok:
                stats.answered += 1
            else:
                stats.failures += 1
                stats.failures_by_reason[r.error or "unknown"] = (
                    stats.failures_by_reason.get(r.error or "unknown", 0) + 1
                )
            if not r.cached:
                stats.prompt_tokens += r.prompt_tokens
                stats.completion_tokens += r.completion_tokens
            if r.ok and r.api_model:
                stats.api_models[r.api_model] = stats.api_models.get(r.api_model, 0) + 1
            if r.ok and r.endpoint:
                stats.endpoints[r.endpoint] = stats.endpoints.get(r.endpoint, 0) + 1
        stats.wall_time_s = (time.perf_counter() if ended is None else ended) - started
        logger.info("judge batch '%s': %s", desc, stats.summary_line())
        if stats.requests and stats.failures / stats.requests > FAILURE_SHARE_WARNING:
            reasons = ", ".join(f"{k}={v}" for k, v in sorted(stats.failures_by_reason.items()))
            print(
                f"emo-tasks judges: warning: {desc}: {stats.failures} of {stats.requests} requests failed at "
                f"{self.endpoint.host} ({reasons}); they are counted as failures, not scored",
                file=sys.stderr,
                flush=True,
            )

    def lookup(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult | None]:
        """What a `run()` would take from the cache, sending nothing: the cached result per request, else None
        (for dry runs and cost estimates).  Needs no endpoint or key."""
        keys = [req.cache_key() for req in requests]
        cache = self.cache
        hits = cache.get_many(keys) if cache is not None else {}
        out: list[JudgeResult | None] = []
        for key in keys:
            hit = hits.get(key)
            out.append(None if hit is None else _cached_result(key, hit))
        return out

    async def arun(
        self, requests: Sequence[JudgeRequest], *, desc: str = "judge", progress: bool | None = None
    ) -> BatchResult:
        """`run()` for async callers: the batch runs on the engine's loop while the caller's loop stays free."""
        return await asyncio.to_thread(self.run, requests, desc=desc, progress=progress)

    # ----------------------------------------------------------------- pipelines
    def lane(
        self, desc: str = "judge", *, expected: int | None = None, bar: Any = None, shared: dict | None = None
    ) -> Lane:
        """A `Lane` for one agent's requests in a pipelined run (`run_pipeline`); lanes given the same `shared`
        dict send a request they both ask once (see `Lane`)."""
        return Lane(self, desc, expected=expected, bar=bar, shared=shared)

    def run_pipeline(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the engine's loop and return its value (blocking the caller's thread, not the loop).

        For work whose requests depend on earlier answers (agent after agent): each request goes out through a
        `Lane` as soon as what it needs is there, so the concurrency slots stay full across agents and tasks
        instead of draining at the end of every batch."""
        if self._thread is not None and threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("JudgeEngine.run_pipeline() called from the engine's own loop; await the coroutine")
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    # ----------------------------------------------------------------- the loop side
    async def _run_misses(
        self,
        items: list[tuple[str, JudgeRequest]],
        stats: BatchStats,
        bar: Any,
        by_key: dict[str, list[int]],
        desc: str = "judge",
    ) -> dict[str, JudgeResult]:
        client = self._get_client()
        health = _BatchHealth(desc, self.endpoint.host, min(self.endpoint.concurrency, len(items)))

        async def one(key: str, req: JudgeRequest) -> tuple[str, JudgeResult]:
            await _wait_for_renders(req)
            res = await self._call(client, key, req, stats, health)
            bar.update(len(by_key[key]))
            return key, res

        pairs = await asyncio.gather(*(one(k, r) for k, r in items))
        return dict(pairs)

    async def _call(
        self, client: Any, key: str, req: JudgeRequest, stats: BatchStats, health: _BatchHealth | None = None
    ) -> JudgeResult:
        ep = self.endpoint
        health = health or _BatchHealth("judge", ep.host, ep.concurrency)
        assert self._sem is not None
        async with self._sem:
            model = req.resolved_model()
            base = dict(key=key, model=model)
            if health.down:  # the endpoint failed every try of this batch so far: do not knock again
                return JudgeResult(ok=False, text=None, error=health.reason, detail=health.detail, **base)
            try:
                # Encode media off the loop; the payload lives only while this request is in flight.
                messages = await asyncio.to_thread(req.render_messages)
            except Exception as exc:
                return JudgeResult(
                    ok=False,
                    text=None,
                    error="invalid_request",
                    detail=self.redact(f"{type(exc).__name__}: {exc}")[:_DETAIL_CHARS],
                    **base,
                )
            params = req.payload_params()
            tries = 0
            invalid_left = ep.invalid_retries
            prompt_tokens = completion_tokens = 0
            api_model: str | None = None
            started = time.perf_counter()

            def finish(ok: bool, text: str | None, error: str | None = None, detail: str | None = None) -> JudgeResult:
                return JudgeResult(
                    ok=ok,
                    text=text,
                    error=error,
                    detail=detail,
                    tries=tries,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    latency_s=time.perf_counter() - started,
                    api_model=api_model,
                    endpoint=ep.host if ok else None,
                    **base,
                )

            while True:
                tries += 1
                stats.calls += 1
                try:
                    raw = await _send(client, {"messages": messages, "model": model, **params})
                    text, p_tok, c_tok, api_model = _extract_answer(raw)
                    health.answered()
                    prompt_tokens += p_tok
                    completion_tokens += c_tok
                    reason = req.validate(text) if req.validate is not None else None
                    if reason:
                        if invalid_left > 0:
                            invalid_left -= 1
                            stats.retries += 1
                            continue
                        # the raw answer is kept for the audit log, but never cached
                        return finish(False, text, "invalid_answer", reason[:_DETAIL_CHARS])
                    if self._cache is not None:
                        await asyncio.to_thread(
                            self._cache.put, key, model, text, p_tok, c_tok, req.summary(), api_model, ep.host
                        )
                    return finish(True, text)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    reason_code, retryable, retry_after = classify_error(exc)
                    detail = self.redact(f"{type(exc).__name__}: {exc}")[:_DETAIL_CHARS]
                    health.failed(reason_code, detail)
                    if not retryable or tries >= ep.max_tries or health.down:
                        return finish(False, None, reason_code, detail)
                    stats.retries += 1
                    logger.debug("judge retry %d for %s: %s", tries, key[:12], detail)
                    await asyncio.sleep(self._delay(tries, retry_after))

    def _delay(self, tries: int, retry_after: float | None) -> float:
        """Retry-After when the server gives one, else exponential backoff with equal jitter."""
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_MAX_S)
        ep = self.endpoint
        ceiling = min(ep.backoff_max_s, ep.backoff_base_s * (2 ** (tries - 1)))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def _cached_result(key: str, hit: Any) -> JudgeResult:
    """A cache hit (`JudgeCache` answer) as a request's result, with the tokens its call once cost."""
    return JudgeResult(
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


def _shared_copy(res: JudgeResult) -> JudgeResult:
    """`res` for a duplicate request that shared its call (or cache hit): the same answer, no tokens of its own."""
    return JudgeResult(**{**res.to_dict(), "prompt_tokens": 0, "completion_tokens": 0})


async def _wait_for_renders(req: JudgeRequest) -> None:
    """Wait, without holding a concurrency slot, for media of `req` that a render pool is producing now."""
    for future in _pending_renders(req):
        try:
            await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if not future.cancelled():  # our own cancellation, not the render's
                raise
        except Exception:  # noqa: BLE001 - the request renders (and fails, naming the file) itself
            pass


async def gather_all(coros: Sequence[Coroutine[Any, Any, Any]]) -> list[Any]:
    """`asyncio.gather` that cancels the others when one raises (a configuration error met mid-pipeline must not
    leave requests going out after the caller has been told), then raises that error."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    if pending:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    # every error is retrieved (a row behind a window that failed while the others were cancelled printed "Task
    # exception was never retrieved" when collected); the first in order is raised
    errors = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
    if errors:
        raise errors[0]  # type: ignore[misc]
    return [task.result() for task in tasks]


def _pending_renders(req: JudgeRequest) -> list[Any]:
    """Futures of media parts of `req` that a render pool is producing now (parts with a `pending()` method)."""
    out = []
    for msg in req.messages:
        content = msg.get("content")
        if isinstance(content, list):
            for part in content:
                pending = getattr(part, "pending", None)
                future = pending() if callable(pending) else None
                if future is not None:
                    out.append(future)
    return out


class _BatchHealth:
    """Whether a batch's endpoint looks down: `threshold` consecutive connection, timeout or auth failures before
    any answer.  Then nothing more is sent in this batch: the remaining requests fail at once with that reason,
    and one line on stderr says so (a dead endpoint must not cost minutes per task)."""

    def __init__(self, desc: str, host: str, threshold: int) -> None:
        self.desc, self.host, self.threshold = desc, host, max(2, threshold)
        self.answers = 0
        self.consecutive = 0
        self.reason: str | None = None
        self.detail: str | None = None

    @property
    def down(self) -> bool:
        return self.reason is not None

    def answered(self) -> None:
        self.answers += 1
        self.consecutive = 0

    def failed(self, reason: str, detail: str) -> None:
        if self.down or self.answers or reason not in _FATAL_AT_START:
            if reason not in _FATAL_AT_START:
                self.consecutive = 0
            return
        self.consecutive += 1
        if self.consecutive >= self.threshold:
            self.reason = reason
            self.detail = f"not sent: {self.host} failed {self.consecutive} times in a row ({detail})"
            print(
                f"emo-tasks judges: {self.desc}: stopped sending to {self.host} after {self.consecutive} {reason} "
                f"failures in a row at the start of the batch; the remaining requests fail with that reason",
                file=sys.stderr,
                flush=True,
            )


class Lane:
    """One agent's share of a pipelined run (`JudgeEngine.run_pipeline`): `await lane.ask(request)` on the
    engine's loop as each request becomes known, `lane.finish()` when none is left.

    The same rules as a `run()` batch, request by request: a request seen before in the lane shares its answer
    (one call, tokens counted once), the cache answers first, a miss waits for its media outside the slots and
    then takes a slot, the lane's endpoint health stops sending after `expected`-bounded consecutive connection
    failures, and `finish()` returns the same `BatchStats` (and logs and warns the same way).

    Lanes sharing a `shared` dict (the tasks of one pipeline) also share requests in flight: a request another
    lane is already sending is answered by that call and counted as a cache hit, as it would be had the tasks run
    one after another (a failed call is not shared: the lane then sends its own, as it would after a miss)."""

    def __init__(
        self, engine: JudgeEngine, desc: str, *, expected: int | None = None, bar: Any = None,
        shared: dict | None = None,
    ) -> None:  # fmt: skip
        self.engine, self.desc, self.bar = engine, desc, bar
        self._shared: dict[str, asyncio.Future[JudgeResult]] = {} if shared is None else shared
        self.stats = BatchStats()
        self._results: list[JudgeResult] = []
        self._seen: dict[str, asyncio.Future[tuple[JudgeResult, bool]]] = {}
        concurrency = engine.endpoint.concurrency
        self._health = _BatchHealth(desc, engine.endpoint.host, min(concurrency, expected or concurrency))
        self._usable = False
        self._lookups: dict[str, list[asyncio.Future[Any]]] = {}
        self._looking_up = False
        self._flusher: asyncio.Future[None] | None = None
        self._started = time.perf_counter()
        self._last_answer = self._started

    async def ask(self, req: JudgeRequest) -> JudgeResult:
        """The answer to `req` (from this lane's earlier identical request, the cache, or a call)."""
        res = await self._answer(req)
        self._results.append(res)
        self._last_answer = time.perf_counter()
        if self.bar is not None:
            self.bar.update(1)
        return res

    def skip(self) -> None:
        """A row that does not reach this agent (an earlier one failed): counted on the bar only, so the bar still
        ends at its total."""
        if self.bar is not None:
            self.bar.update(1)

    async def _answer(self, req: JudgeRequest) -> JudgeResult:
        self.stats.requests += 1
        try:
            key = req.cache_key()
        except JudgeConfigError:
            raise
        except Exception as exc:  # e.g. a media file that does not exist: this request fails, loudly counted
            return self.engine._invalid_request(req, exc)
        shared = self._seen.get(key)
        if shared is not None:  # a duplicate shares the first one's answer (and its cache hit), not its tokens
            res, hit = await asyncio.shield(shared)
            self.stats.cache_hits += hit
            return _shared_copy(res)
        future: asyncio.Future[tuple[JudgeResult, bool]] = asyncio.get_running_loop().create_future()
        self._seen[key] = future
        self.stats.unique_requests += 1
        try:
            res, hit = await self._first(key, req)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: duplicates waiting on it raise it, nobody else needs to
            raise
        future.set_result((res, hit))
        self.stats.cache_hits += hit
        return res

    async def _first(self, key: str, req: JudgeRequest) -> tuple[JudgeResult, bool]:
        other = self._shared.get(key)
        if other is not None:  # another lane of this pipeline is sending it: its answer is our cache hit
            try:
                res = await asyncio.shield(other)
            except asyncio.CancelledError:
                if not other.cancelled():  # our own cancellation, not the other lane's
                    raise
            else:
                if res.ok:
                    return JudgeResult(**{**res.to_dict(), "cached": True}), True
        mine: asyncio.Future[JudgeResult] = asyncio.get_running_loop().create_future()
        self._shared[key] = mine
        try:
            res, hit = await self._lookup_or_call(key, req)
        except BaseException:
            mine.cancel()
            if self._shared.get(key) is mine:
                del self._shared[key]
            raise
        mine.set_result(res)
        return res, hit

    async def _lookup(self, key: str) -> Any:
        """The cached answer of `key`, or None.  Keys asked while a look-up is under way wait and go to the cache
        together, as one query in one worker thread (the 6,500 step requests of a pipeline are one look-up,
        not 6,500 thread hand-offs on a loop that is busy sending)."""
        cache = self.engine.cache
        if cache is None:
            return None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._lookups.setdefault(key, []).append(future)
        if not self._looking_up:
            self._looking_up = True
            self._flusher = asyncio.ensure_future(self._flush_lookups(cache))  # a strong reference while it runs
        return await future

    async def _flush_lookups(self, cache: JudgeCache) -> None:
        try:
            while self._lookups:
                await asyncio.sleep(0)  # let the asks of this loop turn join the query
                batch, self._lookups = self._lookups, {}
                try:
                    hits = await asyncio.to_thread(cache.get_many, list(batch))
                except Exception as exc:  # noqa: BLE001 - each asker raises it
                    for futures in batch.values():
                        for f in futures:
                            if not f.done():
                                f.set_exception(exc)
                    continue
                for key, futures in batch.items():
                    for f in futures:
                        if not f.done():
                            f.set_result(hits.get(key))
        finally:
            self._looking_up = False

    async def _lookup_or_call(self, key: str, req: JudgeRequest) -> tuple[JudgeResult, bool]:
        engine = self.engine
        hit = await self._lookup(key)
        if hit is not None:
            return _cached_result(key, hit), True
        if not self._usable:
            engine.endpoint.check_usable()
            self._usable = True
        client = engine._get_client()
        await _wait_for_renders(req)
        return await engine._call(client, key, req, self.stats, self._health), False

    def finish(self) -> BatchStats:
        """The lane's accounting (as `run()`'s batch stats), logged; a warning on stderr when many failed."""
        self.engine._account(self.stats, self._results, self.desc, self._started, self._last_answer)
        return self.stats


def progress_bar(total: int, desc: str, show: bool) -> Any:
    """The engine's tqdm bar (requests done of `total`), or a disabled one."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="req", disable=not show, mininterval=0.5, dynamic_ncols=True)


#: Rows in the pipeline at once: this many per concurrency slot, at least ROWS_MIN.  Why: when the first agent's
#: answers come from the cache (a re-judge), every row's first answer arrived at once and every row's next request
#: was built and looked up before the first one was sent (1.5 s of 6,500 rows); a window of many times the
#: concurrency keeps the slots as full as before and sends the first requests at once.  The requests, and so
#: every number, are the same.
ROWS_PER_SLOT = 8
ROWS_MIN = 512


@dataclass
class AgentsRun(Generic[R]):
    """What `run_agents` gives back, per group in the groups' order: each row's result in the rows' order, and
    each agent's accounting (what one batch per agent over that group reports)."""

    results: list[list[R]]
    stats: list[dict[str, BatchStats]]


def run_agents(
    settings: EngineSettings,
    groups: Sequence[Sequence[T]],
    row: Callable[[Mapping[str, Lane], T], Awaitable[R]],
    *,
    agents: Mapping[str, str],
    descs: Sequence[str],
    title: str,
    progress: bool | None = None,
) -> AgentsRun[R]:
    """Run every row of every group (a task, say) through `row(lanes, item)` on the engine for `settings`, in one
    pipeline; blocks the calling thread until the last row is done.

    `agents`: role -> the words that name it in progress bars and logs, in the order the agents answer.  `lanes`
    holds one `Lane` per agent for the row's group: `await lanes[role].ask(request)` sends a request (cache first,
    duplicates shared, retries and failures counted), `lanes[role].skip()` counts a row that does not reach that
    agent.  Lanes of different groups share requests in flight (a request two tasks ask is sent once, the later
    asker counting a cache hit, as it would running second).  One progress bar per agent over every group
    (`progress`: the engine's setting when None).  The first error a row raises cancels the others and is raised."""
    engine = get_engine(settings)
    total = sum(len(g) for g in groups)
    show = engine.progress if progress is None else progress
    bars = {role: progress_bar(total, f"{title} {words}", show) for role, words in agents.items()}
    shared: dict = {}
    lanes = [
        {
            role: engine.lane(f"{desc} {words}", expected=len(group), bar=bars[role], shared=shared)
            for role, words in agents.items()
        }
        for desc, group in zip(descs, groups, strict=True)
    ]
    window_size = max(ROWS_MIN, ROWS_PER_SLOT * engine.endpoint.concurrency)

    async def everything() -> list[Any]:
        window = asyncio.Semaphore(window_size)  # rows enter a window at a time, in order

        async def one(lane: Mapping[str, Lane], item: T) -> R:
            async with window:
                return await row(lane, item)

        return await gather_all([one(lane, item) for lane, group in zip(lanes, groups, strict=True) for item in group])

    try:
        flat = engine.run_pipeline(everything())
    finally:
        for bar in bars.values():
            bar.close()
    stats = [{role: lane[role].finish() for role in agents} for lane in lanes]
    results, start = [], 0
    for group in groups:
        results.append(flat[start : start + len(group)])
        start += len(group)
    return AgentsRun(results, stats)


_shared_engines: dict[EngineSettings, JudgeEngine] = {}
_closes_at_exit = False
_shared_lock = threading.Lock()


def get_engine(settings: EngineSettings | None = None) -> JudgeEngine:
    """The process-wide engine for `settings` (one concurrency budget and one cache connection per setting),
    made on first use.  Without settings: `EngineSettings.from_env()` (no answer cache: callers that want one say
    where, as emo-tasks does)."""
    settings = EngineSettings.from_env() if settings is None else settings
    with _shared_lock:
        engine = _shared_engines.get(settings)
        if engine is None:
            global _closes_at_exit
            if not _closes_at_exit:
                # closed before the interpreter goes: an HTTP session left open at exit is reported on stderr
                # (aiohttp's "Unclosed client session" and its connection list) after the run's last line
                atexit.register(reset_engine)
                _closes_at_exit = True
            engine = _shared_engines[settings] = JudgeEngine(
                settings.endpoint, cache=settings.cache_path, progress=settings.progress
            )
        return engine


def reset_engine() -> None:
    """Close and forget the shared engines (in tests, or to release the cache file)."""
    with _shared_lock:
        engines = list(_shared_engines.values())
        _shared_engines.clear()
    for engine in engines:
        engine.close()


def run_batch(
    requests: Sequence[JudgeRequest],
    *,
    desc: str = "judge",
    progress: bool | None = None,
    settings: EngineSettings | None = None,
) -> BatchResult:
    """Answer a batch with the shared engine for `settings` (the entry point benchmark aggregations use)."""
    return get_engine(settings).run(requests, desc=desc, progress=progress)
