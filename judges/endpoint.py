"""How one request travels to an OpenAI-compatible endpoint and back: the SDK client and its HTTP transport, one
POST, reading the answer, naming a failure and how long to wait before asking again.

Why a module of its own: the engine (`engine.py`) decides what is sent and when (the cache first, each distinct
request once, bounded concurrency, retries, validation, batches and pipelines, the accounting); how an endpoint
speaks HTTP and how it fails is here, in one place, so the engine's rules read without the SDK's details.
Nothing here keeps state: every function answers for one request or one endpoint.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import sys
import time
from typing import Any, NamedTuple

from .config import EndpointConfig, JudgeConfigError

RETRY_AFTER_MAX_S = 300.0
#: A failure's detail (an exception's text) is cut to this many characters.
DETAIL_CHARS = 500


class _MalformedResponse(Exception):
    pass


class _EmptyAnswer(Exception):
    pass


class _TruncatedAnswer(Exception):
    """No answer: the server put the model's reasoning in a field of its own (`reasoning_content`, `reasoning`) and
    stopped at the token limit before the answer."""


class JudgeModelNotFound(JudgeConfigError):
    """The endpoint does not know a role's model (retired or misspelt): the stage stops at once, naming the role
    and the model, instead of failing every request of the run."""

    def __init__(self, role: str, model: str, host: str, detail: str) -> None:
        self.role, self.model, self.host = role, model, host
        super().__init__(
            f"the {role} model {model!r} is retired or unknown at {host} ({detail}); nothing more was sent. Pick "
            f"another {role} model (see docs/judges.md#changing-the-judge: a new judge's numbers are not the old "
            "one's)"
        )


class Answer(NamedTuple):
    """What `extract_answer` reads of a chat completion."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    api_model: str | None
    #: why the model stopped ("stop", "length", ...; None when the server does not say)
    finish_reason: str | None = None


#: An HTTP 404 / 400 that says the model is retired or unknown (OpenAI's `model_not_found`, Azure's
#: `DeploymentNotFound`, vLLM's and SGLang's "The model `x` does not exist"): not a failure of one request.
_MODEL_GONE_CODES = frozenset({"model_not_found", "deploymentnotfound"})
_MODEL_GONE_TEXT = re.compile(
    r"\b(model|deployment)\b.{0,200}?\b(does not exist|doesn't exist|not found|is not found|was not found)",
    re.IGNORECASE,
)


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
    if isinstance(exc, _TruncatedAnswer):  # the same request runs into the same limit: not asked again
        return "truncated", False, None
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
        if status in (400, 404) and model_gone(exc):
            return "model_not_found", False, None
        return f"http_{status}", False, None
    if isinstance(exc, ValueError | TypeError | KeyError | AttributeError | IndexError):
        # The SDK could not make sense of what came back (e.g. a 200 with a non-JSON body).
        return "malformed_response", True, None
    return "client_error", False, None


def model_gone(exc: Any) -> bool:
    """Whether an HTTP error says the requested model (or Azure deployment) does not exist: its error code, or its
    message ("The model `x` does not exist or you do not have access to it.")."""
    code = str(getattr(exc, "code", None) or "").lower()
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    text = str(message if message is not None else getattr(exc, "message", "") or "")
    return code in _MODEL_GONE_CODES or _MODEL_GONE_TEXT.search(text) is not None


def status_summary(exc: Any) -> str:
    """An HTTP error in a few words: "HTTP 404 model_not_found: <the server's message, cut to 200 characters>"."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else getattr(exc, "message", "")
    code = getattr(exc, "code", None)
    head = f"HTTP {getattr(exc, 'status_code', '?')}" + (f" {code}" if code and not str(code).isdigit() else "")
    text = " ".join(str(message or "").split())
    return f"{head}: {text[:200]}" if text else head


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


def extract_answer(resp: Any) -> Answer:
    """(text, prompt tokens, completion tokens, API model id, finish reason) of a chat completion: the raw JSON
    bytes the SDK handed back (`post_completion`), or a decoded object (a dict, or the SDK's model)."""
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
    finish_reason = get(choices[0], "finish_reason")
    finish_reason = str(finish_reason) if finish_reason else None
    if content is None or not str(content).strip():
        reasoning = message is not None and any(get(message, f) for f in ("reasoning_content", "reasoning"))
        if reasoning and finish_reason == "length":
            raise _TruncatedAnswer("the judge stopped at its token limit inside its reasoning, before answering")
        raise _EmptyAnswer("the judge returned an empty answer")
    usage = get(resp, "usage")
    prompt_tokens = int((get(usage, "prompt_tokens") if usage is not None else 0) or 0)
    completion_tokens = int((get(usage, "completion_tokens") if usage is not None else 0) or 0)
    api_model = get(resp, "model")
    return Answer(str(content), prompt_tokens, completion_tokens, str(api_model) if api_model else None, finish_reason)


async def post_completion(client: Any, body: dict[str, Any]) -> bytes:
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


def make_client(endpoint: EndpointConfig) -> Any:
    """The SDK's async client for `endpoint` (made inside the engine's loop; SDK retries off: ours are counted)."""
    import openai

    if endpoint.api_type == "azure":
        return openai.AsyncAzureOpenAI(
            api_key=endpoint.api_key,
            azure_endpoint=endpoint.base_url,
            api_version=endpoint.api_version,
            max_retries=0,
            timeout=endpoint.timeout_s,
            **_http_kwargs(endpoint),
        )
    return openai.AsyncOpenAI(
        api_key=endpoint.api_key or "EMPTY",  # local vLLM/SGLang servers accept any key
        base_url=endpoint.base_url,
        max_retries=0,
        timeout=endpoint.timeout_s,
        **_http_kwargs(endpoint),
    )


def retry_delay(endpoint: EndpointConfig, tries: int, retry_after: float | None) -> float:
    """Seconds before the next try: Retry-After when the server gave one (at most `RETRY_AFTER_MAX_S`), else
    exponential backoff with equal jitter."""
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_MAX_S)
    ceiling = min(endpoint.backoff_max_s, endpoint.backoff_base_s * (2 ** (tries - 1)))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def failure_detail(exc: BaseException, endpoint: EndpointConfig) -> str:
    """What a failure's record says of `exc`: its type and text, the endpoint's API key hidden, cut to
    `DETAIL_CHARS`."""
    text = f"{type(exc).__name__}: {exc}"
    key = endpoint.api_key
    if key and len(key) >= 4:  # a shorter "key" would hide ordinary words
        text = text.replace(key, "***")
    return text[:DETAIL_CHARS]
