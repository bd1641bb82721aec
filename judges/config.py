"""Judge configuration read from the environment.

Why a module of its own: every benchmark asks the same three questions (which endpoint, which key, which model
for which role), and the answers must be read the same way lmms-eval reads them so a user's existing
`OPENAI_API_URL` / `API_TYPE=azure` setup keeps working.  Nothing here opens a connection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: The published MME-Emotion protocol's models (paper and official scripts).
DEFAULT_ROLE_MODELS: dict[str, str | None] = {
    "step": "gpt-4.1-2025-04-14",
    "judge": "gpt-4o-2024-11-20",
    "audio": None,
}
ROLE_ENV: dict[str, str] = {"step": "EMO_STEP_MODEL", "judge": "EMO_JUDGE_MODEL", "audio": "EMO_AUDIO_MODEL"}


@dataclass(frozen=True)
class Preset:
    """A whole judge setup named by `EMO_JUDGE_PRESET`: a model per role and the sampling settings every request
    of a role carries (`JudgeRequest.temperature`, `max_tokens`, `params`).  Applied whole or not at all."""

    name: str
    models: Mapping[str, str | None]
    #: role -> the sampling settings sent with each request of that role (temperature, max_tokens, seed, ...)
    sampling: Mapping[str, Mapping[str, object]]


#: The published protocol: the paper's closed judges, sampled as today (temperature 0, nothing else sent), so
#: requests, cache keys and numbers are those of a run without any preset.
PAPER = Preset("paper", dict(DEFAULT_ROLE_MODELS), {})
#: Open-weight judges (docs/judges.md#judge-presets says why): one vision-language model as both step agent and
#: judge, because every role is asked at one endpoint (`OPENAI_BASE_URL`) and one vLLM or SGLang server serves one
#: model; greedy, seeded, with a bound on the answer so a runaway answer cannot fill the context.  No audio model:
#: as the paper's, the preset scores with the released audio clues.
OPEN = Preset(
    "open",
    {"step": "Qwen/Qwen2.5-VL-72B-Instruct", "judge": "Qwen/Qwen2.5-VL-72B-Instruct", "audio": None},
    {role: {"temperature": 0.0, "max_tokens": 4096, "seed": 1234} for role in ("step", "judge")},
)
PRESETS: dict[str, Preset] = {p.name: p for p in (PAPER, OPEN)}
PRESET_ENV = "EMO_JUDGE_PRESET"

DEFAULT_CONCURRENCY = 16
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_TRIES = 6
DEFAULT_INVALID_RETRIES = 1
DEFAULT_BACKOFF_BASE_S = 1.0
DEFAULT_BACKOFF_MAX_S = 60.0
DEFAULT_AZURE_API_VERSION = "2024-02-15-preview"  # lmms-eval's own default


class JudgeConfigError(RuntimeError):
    """The judge cannot run as configured (missing model name, key or endpoint)."""


def _env_number(env: Mapping[str, str], name: str, default: float, cast: type = float, minimum: float = 0) -> float:
    """A number >= minimum; anything else names the variable, its value and what is accepted."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    kind = "a whole number" if cast is int else "a number"
    try:
        value = cast(raw.strip())
    except ValueError:
        value = None
    if value is None or value != value or value < minimum:
        raise JudgeConfigError(f"{name}={raw!r} is not accepted; use {kind} >= {minimum} (default {default})")
    return value


#: `EMO_JUDGE_HTTP`: the HTTP transport of the SDK client (see `judges.endpoint.http_client`).
HTTP_TRANSPORTS = ("auto", "aiohttp", "httpx")


def _env_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices` (case-insensitive); anything else names the variable, its value and the choices."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise JudgeConfigError(f"{name}={raw!r} is not accepted; use one of: {', '.join(choices)} (default {default})")
    return value


def env_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """An on/off switch (1/true/yes/on, 0/false/no/off); anything else is an error naming the variable."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise JudgeConfigError(f"{name}={raw!r} is not accepted; use one of: 1, true, yes, on, 0, false, no, off")


def normalise_base_url(url: str | None) -> str | None:
    """Accept lmms-eval's habit of putting the full `/chat/completions` URL in OPENAI_API_URL."""
    if not url:
        return None
    url = url.strip().rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return url


def preset(env: Mapping[str, str] | None = None) -> Preset | None:
    """The preset `EMO_JUDGE_PRESET` names (None when unset: the role variables or the paper's models apply).

    Refused (JudgeConfigError, one line): an unknown name (the names listed), and a role model variable set beside
    a preset (both named): a preset is applied whole or not at all."""
    env = os.environ if env is None else env
    raw = env.get(PRESET_ENV)
    if raw is None or raw.strip() == "":
        return None
    name = raw.strip().lower()
    if name not in PRESETS:
        raise JudgeConfigError(
            f"{PRESET_ENV}={raw!r} is not accepted; use one of: {', '.join(PRESETS)} (default paper)"
        )
    explicit = [var for var in ROLE_ENV.values() if (env.get(var) or "").strip()]
    if explicit:
        shown = ", ".join(f"{var}={env[var].strip()!r}" for var in explicit)
        raise JudgeConfigError(
            f"{PRESET_ENV}={raw.strip()!r} and {shown} are both set: a preset names every role's model, so it cannot "
            f"be half-applied; unset {PRESET_ENV} to choose models yourself, or unset {', '.join(explicit)}"
        )
    return PRESETS[name]


def sampling_for_role(role: str, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """The sampling settings a role's requests carry under the preset (`Preset.sampling`): {} without a preset
    or under `paper` (the requests' own temperature 0, as always)."""
    chosen = preset(env)
    return dict(chosen.sampling.get(role) or {}) if chosen is not None else {}


def model_for_role(role: str, env: Mapping[str, str] | None = None) -> str:
    """The model name for a judge role: the preset's (`EMO_JUDGE_PRESET`), else `EMO_<ROLE>_MODEL`, else the
    published default.

    An unknown role is taken as a literal model name, so callers can also pass `"my-model"`.
    """
    env = os.environ if env is None else env
    if role not in ROLE_ENV:
        return role
    chosen = preset(env)
    if chosen is not None:
        name = chosen.models.get(role)
        if not name:
            raise JudgeConfigError(
                f"No model for the '{role}' judge role in {PRESET_ENV}={chosen.name}: unset {PRESET_ENV} and set "
                f"{ROLE_ENV[role]} (with the other role models) to models your endpoint serves."
            )
        return name
    name = env.get(ROLE_ENV[role]) or DEFAULT_ROLE_MODELS[role]
    if not name:
        raise JudgeConfigError(
            f"No model for the '{role}' judge role: set {ROLE_ENV[role]} to a model your endpoint serves "
            f"(e.g. {ROLE_ENV[role]}=Qwen/Qwen2-Audio-7B-Instruct behind vLLM)."
        )
    return name


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to send judge requests.  `api_key` is kept out of `repr` so it never reaches a log."""

    api_type: str = "openai"
    base_url: str | None = None
    api_key: str = field(default="", repr=False)
    api_version: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_tries: int = DEFAULT_MAX_TRIES
    invalid_retries: int = DEFAULT_INVALID_RETRIES
    concurrency: int = DEFAULT_CONCURRENCY
    backoff_base_s: float = DEFAULT_BACKOFF_BASE_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    #: the SDK's HTTP transport (`EMO_JUDGE_HTTP`): auto (aiohttp when installed, else httpx), aiohttp, httpx
    http: str = "auto"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> EndpointConfig:
        """Read the endpoint the way lmms-eval does, plus our `EMO_JUDGE_*` knobs.

        OpenAI / vLLM / SGLang: `OPENAI_BASE_URL` (or lmms-eval's `OPENAI_API_URL`) and `OPENAI_API_KEY`.
        Azure (`API_TYPE=azure`): `AZURE_ENDPOINT`, `AZURE_API_KEY` (or `OPENAI_API_KEY`), `API_VERSION`.
        """
        env = os.environ if env is None else env
        api_type = (env.get("API_TYPE") or "openai").strip().lower()
        if api_type not in ("openai", "azure"):
            raise JudgeConfigError(f"API_TYPE={api_type!r} is not accepted; use one of: openai, azure (default openai)")
        if api_type == "azure":
            base_url = (env.get("AZURE_ENDPOINT") or "").strip() or None
            api_key = env.get("AZURE_API_KEY") or env.get("OPENAI_API_KEY") or ""
            api_version = env.get("API_VERSION") or DEFAULT_AZURE_API_VERSION
        else:
            base_url = normalise_base_url(env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_URL"))
            api_key = env.get("OPENAI_API_KEY") or ""
            api_version = None
        values: dict[str, object] = dict(
            api_type=api_type,
            base_url=base_url,
            api_key=api_key,
            api_version=api_version,
            timeout_s=_env_number(env, "EMO_JUDGE_TIMEOUT", DEFAULT_TIMEOUT_S, float, 0.001),
            max_tries=int(_env_number(env, "EMO_JUDGE_MAX_TRIES", DEFAULT_MAX_TRIES, int, 1)),
            invalid_retries=int(_env_number(env, "EMO_JUDGE_INVALID_RETRIES", DEFAULT_INVALID_RETRIES, int, 0)),
            concurrency=int(_env_number(env, "EMO_JUDGE_CONCURRENCY", DEFAULT_CONCURRENCY, int, 1)),
            backoff_base_s=_env_number(env, "EMO_JUDGE_BACKOFF_BASE", DEFAULT_BACKOFF_BASE_S, float, 0),
            backoff_max_s=_env_number(env, "EMO_JUDGE_BACKOFF_MAX", DEFAULT_BACKOFF_MAX_S, float, 0),
            http=_env_choice(env, "EMO_JUDGE_HTTP", HTTP_TRANSPORTS, "auto"),
        )
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    def check_usable(self) -> None:
        """Raise a clear error before any call when the endpoint cannot possibly work."""
        if self.api_type == "azure":
            if not self.base_url:
                raise JudgeConfigError("API_TYPE=azure needs AZURE_ENDPOINT (https://<resource>.openai.azure.com)")
            if not self.api_key:
                raise JudgeConfigError("API_TYPE=azure needs AZURE_API_KEY (or OPENAI_API_KEY)")
        elif not self.api_key and not self.base_url:
            raise JudgeConfigError(
                "No judge endpoint configured: set OPENAI_API_KEY for api.openai.com, or OPENAI_BASE_URL "
                "(or OPENAI_API_URL) for a vLLM/SGLang/other OpenAI-compatible server."
            )

    @property
    def host(self) -> str:
        """host[:port] of the endpoint, never a user, key or path: what a log or summary may say about where
        answers came from ("api.openai.com", "127.0.0.1:8765", "<resource>.openai.azure.com")."""
        from urllib.parse import urlsplit

        url = self.base_url or "https://api.openai.com/v1"
        parts = urlsplit(url if "//" in url else "//" + url)
        host = parts.hostname or ""
        try:
            port = parts.port
        except ValueError:
            port = None
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        return f"{host}:{port}" if port else host

    def describe(self) -> dict[str, object]:
        """A loggable summary with no secret in it."""
        return {
            "api_type": self.api_type,
            "base_url": self.base_url or "https://api.openai.com/v1",
            "api_key_set": bool(self.api_key),
            "api_version": self.api_version,
            "timeout_s": self.timeout_s,
            "max_tries": self.max_tries,
            "invalid_retries": self.invalid_retries,
            "concurrency": self.concurrency,
            "http": self.http,
        }


@dataclass(frozen=True)
class EngineSettings:
    """Everything an engine needs: the endpoint, where its answer cache lives (None: no cache) and progress bars.

    The cache location is the caller's to choose (emo-tasks puts it in its own cache folder); `EMO_JUDGE_CACHE=0`
    turns it off and `EMO_PROGRESS=0` hides the bars."""

    endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    cache_path: Path | None = None
    progress: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, cache_dir: Path | None = None) -> EngineSettings:
        env = os.environ if env is None else env
        preset(env)  # an unknown preset, or one beside a role model variable, stops here: before any inference
        use_cache = env_flag(env, "EMO_JUDGE_CACHE", True)
        return cls(
            endpoint=EndpointConfig.from_env(env),
            cache_path=Path(cache_dir) if (cache_dir is not None and use_cache) else None,
            progress=env_flag(env, "EMO_PROGRESS", True),
        )


@dataclass(frozen=True)
class MediaSettings:
    """Where a judge's video media live between runs, and who renders them (`judges.prepare_media`).

    `frame_cache`: the folder of the on-disk frame cache (None or `frame_cache_max_bytes=0`: off);
    `digest_store`: the SQLite file keeping content hashes across processes (None: this process only);
    `render_workers`: processes rendering frames in the background (0: in the request threads)."""

    frame_cache: Path | None = None
    frame_cache_max_bytes: int = 0
    digest_store: Path | None = None
    render_workers: int = 0


def frame_cache_max_mb(env: Mapping[str, str] | None, default: int) -> int:
    """`EMO_FRAME_CACHE_MAX_MB`: the bound of the judge's on-disk frame cache (0 turns it off); a bad value raises
    JudgeConfigError naming the variable."""
    env = os.environ if env is None else env
    return int(_env_number(env, "EMO_FRAME_CACHE_MAX_MB", default, int, 0))


def render_workers(env: Mapping[str, str] | None = None) -> int:
    """`EMO_RENDER_WORKERS`: processes that render judge video frames in the background (default: one per core;
    0 renders in the request threads, as before)."""
    env = os.environ if env is None else env
    return int(_env_number(env, "EMO_RENDER_WORKERS", os.cpu_count() or 1, int, 0))


# The environment variables that hold judge API keys (EndpointConfig.from_env reads them).
SECRET_VARIABLES = ("OPENAI_API_KEY", "AZURE_API_KEY")
_MIN_SECRET = 4  # shorter values would redact ordinary words (and `endpoint.failure_detail` skips them too)


def env_secrets(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The API keys set in the environment (`SECRET_VARIABLES`), the texts no stored record may contain."""
    env = os.environ if env is None else env
    return tuple(v for v in (env.get(k) or "" for k in SECRET_VARIABLES) if len(v) >= _MIN_SECRET)
