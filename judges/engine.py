"""The one judge engine: cache ▸ bounded concurrent calls ▸ retry ▸ validate ▸ account, as batches and pipelines.

What is here: `JudgeEngine` (a batch: `run`, `lookup`; each request through a slot, retried and validated),
the pipeline it runs agent after agent (`Lane`, `run_agents`) and the process's shared engines (`get_engine`,
`run_batch`).  How the endpoint is spoken to (the SDK client and transport, one POST, reading the answer, naming
a failure, the wait before the next try) is `endpoint.py`'s; what a request and a result are is `request.py`'s.

Why this shape:
- lmms-eval calls our hooks synchronously (aggregation on rank 0, `process_results` from 4 threads).  The engine
  runs its own asyncio loop in a daemon thread; `run()` may be called from any thread, and every caller shares
  one concurrency budget (`EMO_JUDGE_CONCURRENCY`), so four post-processing threads neither cap nor multiply it.
- Cache look-ups happen in the caller's thread, in one query per batch, before anything is sent: a rerun of an
  answered batch makes no call and needs no API key.
- Faults are data: every request ends as an answer or as a failure with a reason; only a configuration error
  raises: no endpoint or no model for a role before the first call, a model the endpoint does not know
  (`JudgeModelNotFound`) at its first reply, each model's first request going alone (`modelgate.py`).
- Batches and pipelines keep one rule book (the cache first, each distinct request once, media rendered outside
  the slots, the same accounting), so an agent run as a lane of a pipeline reports what it would as a batch.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from .batch import BatchPending, active
from .cache import JudgeCache
from .config import EndpointConfig, EngineSettings, JudgeConfigError
from .endpoint import (
    DETAIL_CHARS,
    JudgeModelNotFound,
    classify_error,
    extract_answer,
    failure_detail,
    make_client,
    post_completion,
    retry_delay,
    status_summary,
)
from .fingerprint import forget_served, served_identity, served_key_part, served_models
from .modelgate import BatchHealth, ModelGate
from .reasoning import cut_off
from .request import BatchResult, BatchStats, JudgeRequest, JudgeResult
from .shutdown import forget_warned, warn_shutdowns

logger = logging.getLogger("judges")
T = TypeVar("T")
R = TypeVar("R")

#: A batch whose failure share passes this prints a warning on stderr (lmms-eval's console), not only in the log.
FAILURE_SHARE_WARNING = 0.1
#: Reasons that, when every answer of a batch so far failed with them, say the endpoint is down or refuses us.


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
        self._models = ModelGate()

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
        """The SDK client, made lazily inside the engine's loop (`endpoint.make_client`)."""
        if self._client is None:
            self._client = make_client(self.endpoint)
            self._sem = asyncio.Semaphore(self.endpoint.concurrency)
            self._models = ModelGate()
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

    def served(self, ask: bool = True) -> dict[str, dict[str, Any]] | None:
        """What the endpoint serves under each model name (`GET /models`, asked once per endpoint per process:
        `fingerprint.served_models`); None when it cannot be asked or did not answer.  `ask=False`: only what is
        known already."""
        return served_models(self.endpoint, ask=ask)

    def key_of(self, req: JudgeRequest, listing: dict[str, dict[str, Any]] | None) -> str:
        """The cache key of `req` at this endpoint: its content plus what is served under its model when the
        endpoint says more than the name (a vLLM root, max_model_len; `fingerprint.served_key_part`)."""
        part = served_key_part(served_identity(listing, req.resolved_model())) if listing else {}
        return req.cache_key(part) if part else req.cache_key()

    def _invalid_request(self, req: JudgeRequest, exc: Exception) -> JudgeResult:
        """The failure of a request that cannot even be keyed (e.g. its media file does not exist)."""
        return JudgeResult(
            ok=False,
            text=None,
            key="",
            model=req.model or req.role,
            error="invalid_request",
            detail=failure_detail(exc, self.endpoint),
        )

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
        listing = self.served() if requests else None
        for i, req in enumerate(requests):
            try:
                key = self.key_of(req, listing)
            except JudgeConfigError:
                raise
            except Exception as exc:  # e.g. a media file that does not exist: this request fails, loudly counted
                results[i] = self._invalid_request(req, exc)
                continue
            by_key.setdefault(key, []).append(i)
            first.setdefault(key, req)
        stats.unique_requests = len(by_key)
        # a model the endpoint says shuts down: said once per model per process, before anything is sent
        warn_shutdowns(self.endpoint, {(r.role, r.resolved_model()) for r in first.values()})

        cache = self.cache
        hits = cache.get_many(by_key) if cache is not None else {}
        for key, hit in hits.items():
            for n, i in enumerate(by_key[key]):
                results[i] = JudgeResult.from_cache(key, hit) if n == 0 else JudgeResult.from_cache(key, hit).shared()
        stats.cache_hits = sum(len(by_key[k]) for k in hits)
        misses = [k for k in by_key if k not in hits]

        book = active() if misses else None
        if book is not None:  # a batched stage: the book answers (or a request waits for a batch: BatchPending)
            coro = book.resolve_many(self, [(k, first[k]) for k in misses])
            for key, res in asyncio.run_coroutine_threadsafe(coro, self._ensure_loop()).result().items():
                for n, i in enumerate(by_key[key]):
                    results[i] = res if n == 0 else res.shared()
            misses = [k for k in misses if results[by_key[k][0]] is None]  # the ones it sends directly
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
                        results[i] = res if n == 0 else res.shared()
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
        stats.count(final)
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
        listing = self.served() if requests else None
        keys = [self.key_of(req, listing) for req in requests]
        cache = self.cache
        hits = cache.get_many(keys) if cache is not None else {}
        out: list[JudgeResult | None] = []
        for key in keys:
            hit = hits.get(key)
            out.append(None if hit is None else JudgeResult.from_cache(key, hit))
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
        dict send a request they both ask once (see `Lane`).  Made in the caller's thread: the endpoint is asked
        what it serves now (`served`), not on the loop."""
        self.served()
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
        health = BatchHealth(desc, self.endpoint.host, min(self.endpoint.concurrency, len(items)))

        async def one(key: str, req: JudgeRequest) -> tuple[str, JudgeResult]:
            await req.media_ready()
            res = await self._call(client, key, req, stats, health)
            bar.update(len(by_key[key]))
            return key, res

        pairs = await gather_all([one(k, r) for k, r in items])  # a retired model stops the batch at once
        return dict(pairs)

    async def _call(
        self, client: Any, key: str, req: JudgeRequest, stats: BatchStats, health: BatchHealth | None = None
    ) -> JudgeResult:
        ep = self.endpoint
        health = health or BatchHealth("judge", ep.host, ep.concurrency)
        assert self._sem is not None
        model = req.resolved_model()
        gate = self._models
        first = await gate.admit(model)  # a model's first request goes alone: a retired model costs one request
        try:
            return await self._call_admitted(client, key, req, stats, health, model, first)
        finally:
            if first:
                gate.settle(model)

    async def _call_admitted(
        self, client: Any, key: str, req: JudgeRequest, stats: BatchStats, health: BatchHealth, model: str,
        first: bool,
    ) -> JudgeResult:  # fmt: skip
        ep = self.endpoint
        assert self._sem is not None
        async with self._sem:
            base = dict(key=key, model=model)
            if health.down:  # the endpoint failed every try of this batch so far: do not knock again
                return JudgeResult(ok=False, text=None, error=health.reason, detail=health.detail, **base)
            try:
                # Encode media off the loop; the payload lives only while this request is in flight.
                messages = await asyncio.to_thread(req.render_messages)
            except Exception as exc:
                detail = failure_detail(exc, self.endpoint)
                return JudgeResult(ok=False, text=None, error="invalid_request", detail=detail, **base)
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
                    try:
                        raw = await post_completion(client, {"messages": messages, "model": model, **params})
                    finally:  # the first reply lets the model's other requests go (a gone model: they
                        if first and tries == 1:  # raise, `gone` below runs before they wake)
                            self._models.settle(model)
                    text, p_tok, c_tok, api_model, finish_reason = extract_answer(raw)
                    health.answered()
                    prompt_tokens += p_tok
                    completion_tokens += c_tok
                    if cut_off(text, finish_reason):  # not asked again: the same request meets the same limit
                        detail = f"cut off inside its reasoning (finish_reason {finish_reason})"
                        return finish(False, text, "truncated", detail)
                    reason = req.validate(text) if req.validate is not None else None
                    if reason:
                        if invalid_left > 0:
                            invalid_left -= 1
                            stats.retries += 1
                            continue
                        # the raw answer is kept for the audit log, but never cached
                        return finish(False, text, "invalid_answer", reason[:DETAIL_CHARS])
                    if self._cache is not None:
                        await asyncio.to_thread(
                            self._cache.put, key, model, text, p_tok, c_tok, req.summary(), api_model, ep.host
                        )
                    return finish(True, text)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    reason_code, retryable, retry_after = classify_error(exc)
                    if reason_code == "model_not_found":
                        raise self._models.gone(
                            model, JudgeModelNotFound(req.role, model, ep.host, status_summary(exc))
                        ) from None
                    detail = failure_detail(exc, self.endpoint)
                    health.failed(reason_code, detail)
                    if not retryable or tries >= ep.max_tries or health.down:
                        return finish(False, None, reason_code, detail)
                    stats.retries += 1
                    logger.debug("judge retry %d for %s: %s", tries, key[:12], detail)
                    await asyncio.sleep(retry_delay(ep, tries, retry_after))


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
        self._health = BatchHealth(desc, engine.endpoint.host, min(concurrency, expected or concurrency))
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
            key = self.engine.key_of(req, self.engine.served(ask=False))
        except JudgeConfigError:
            raise
        except Exception as exc:  # e.g. a media file that does not exist: this request fails, loudly counted
            return self.engine._invalid_request(req, exc)
        shared = self._seen.get(key)
        if shared is not None:  # a duplicate shares the first one's answer (and its cache hit), not its tokens
            res, hit = await asyncio.shield(shared)
            self.stats.cache_hits += hit
            return res.shared()
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
            return JudgeResult.from_cache(key, hit), True
        book = active()
        if book is not None:  # a batched stage: the book answers, or the row waits for a batch (BatchPending)
            res = await book.resolve(engine, key, req)
            if res is not None:
                return res, False
        if not self._usable:
            engine.endpoint.check_usable()
            self._usable = True
        client = engine._get_client()
        await req.media_ready()
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

        async def one(lane: Mapping[str, Lane], item: T) -> R | BatchPending:
            async with window:
                try:
                    return await row(lane, item)
                except BatchPending as exc:  # a batched stage: this row waits for a batch, the others go on
                    return exc

        return await gather_all([one(lane, item) for lane, group in zip(lanes, groups, strict=True) for item in group])

    try:
        flat = engine.run_pipeline(everything())
    finally:
        for bar in bars.values():
            bar.close()
    waiting = [r for r in flat if isinstance(r, BatchPending)]
    if waiting:
        raise waiting[0]
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
    forget_served()
    forget_warned()


def run_batch(
    requests: Sequence[JudgeRequest],
    *,
    desc: str = "judge",
    progress: bool | None = None,
    settings: EngineSettings | None = None,
) -> BatchResult:
    """Answer a batch with the shared engine for `settings` (the entry point benchmark aggregations use)."""
    return get_engine(settings).run(requests, desc=desc, progress=progress)
