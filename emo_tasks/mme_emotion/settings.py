"""MME-Emotion's settings, read from the environment and checked once, when a task is loaded.

Why: every switch MME-Emotion has (judge mode, judge protocol, audio clues, alpha, the judge endpoint and its
knobs, the role models, where the data and cache are) is read here, in `process_docs`, before any inference.
A value that cannot be used stops the run there, naming the variable, its value and what is accepted — it never
silently changes what is measured (a typo in `EMO_JUDGE_CONCURRENCY` does not turn the judge off).  The frozen
result is passed down to the loader, the judge and the scoring, and is part of the aggregation's memo key; no
other module of this package reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emo_tasks.settings import CommonSettings, SettingsError, choice, number, refuse_batch_judge
from judges.config import (
    EndpointConfig,
    EngineSettings,
    JudgeConfigError,
    MediaSettings,
    model_for_role,
    render_workers,
    sampling_for_role,
)
from judges.frames import frame_cache_max_bytes

from .data import HUB_ID
from .protocol import DEFAULT_ALPHA, DEFAULT_JUDGE_PROTOCOL, JUDGE_PROTOCOLS

#: `EMO_JUDGE`: auto (the judge when an endpoint is configured; the bundled sample falls back to label matching
#: only when none is), api (the judge, required), offline (label matching, no judge) or defer (no judge now: the
#: answers are kept and `emo-tasks judge RUN_DIR` judges them later, with the same hooks).
JUDGE_MODES = ("auto", "api", "offline", "defer")
#: `EMO_MME_AUDIO_CLUES`: the released Qwen2-Audio clues, or clues made live by `EMO_AUDIO_MODEL`.
CLUE_MODES = ("released", "live")
SOURCES = ("benchmark", "sample")

NO_JUDGE_MESSAGE = (
    "MME-Emotion is scored by an LLM judge and none is configured. Set OPENAI_API_KEY (api.openai.com), or "
    "OPENAI_BASE_URL (+ OPENAI_API_KEY) for a vLLM/SGLang/other OpenAI-compatible server, or API_TYPE=azure "
    "with AZURE_ENDPOINT and AZURE_API_KEY. Models: EMO_STEP_MODEL (default gpt-4.1-2025-04-14) and "
    "EMO_JUDGE_MODEL (default gpt-4o-2024-11-20). For a judge-free smoke test set EMO_JUDGE=offline "
    "(recognition by label matching only; not comparable with the paper), or EMO_JUDGE=defer to run the model "
    "now and judge later with `emo-tasks judge RUN_DIR` (run lmms-eval with --output_path and --log_samples)."
)


@dataclass(frozen=True)
class MMESettings:
    """Everything MME-Emotion takes from the environment, validated (frozen and hashable: a memo key).

    `judge_mode` is resolved: "api", "offline" or "defer".  `models` holds (role, model) pairs for the judge roles
    in api mode (step, judge, and audio with live clues), empty offline and deferred.  The API key stays inside
    `engine.endpoint`, whose repr leaves it out."""

    source: str  # benchmark | sample
    judge_mode: str  # api | offline | defer
    judge_protocol: str  # guarded | official
    audio_clues: str  # released | live
    alpha: float
    engine: EngineSettings
    models: tuple[tuple[str, str], ...]
    common: CommonSettings
    hub_id: str = HUB_ID
    #: bound of the on-disk cache of the judge's video frames (`<cache dir>/frames`); 0 turns it off
    frame_cache_max_bytes: int = 0
    #: processes rendering judge frames in the background (EMO_RENDER_WORKERS; 0: in the request threads)
    render_workers: int = 0
    #: (role, ((setting, value), ...)): the sampling settings a preset (EMO_JUDGE_PRESET) sends with each role's
    #: requests; empty without a preset or under `paper` (temperature 0 only, as always)
    sampling: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str], source: str) -> MMESettings:
        """Read and check every MME-Emotion variable; SettingsError / JudgeConfigError name what is wrong."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        common = CommonSettings.from_env(env)
        refuse_batch_judge(env)  # batch judging is the stage's (`emo-tasks judge --batch`): say so, not "use one of"
        requested = choice(env, "EMO_JUDGE", JUDGE_MODES, "auto")
        protocol = choice(env, "EMO_MME_JUDGE_PROTOCOL", JUDGE_PROTOCOLS, DEFAULT_JUDGE_PROTOCOL)
        clues = choice(env, "EMO_MME_AUDIO_CLUES", CLUE_MODES, "released")
        alpha = float(number(env, "EMO_MME_ALPHA", DEFAULT_ALPHA, minimum=0.0, maximum=1.0))
        # Malformed endpoint values (a bad number, an unknown API_TYPE) raise here, whatever the mode.
        engine = EngineSettings.from_env(env, cache_dir=common.cache_dir)
        mode = resolve_judge_mode(requested, engine.endpoint, source)
        models: tuple[tuple[str, str], ...] = ()
        sampling: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
        if mode == "api":
            roles = ("step", "judge", "audio") if clues == "live" else ("step", "judge")
            models = tuple((role, model_for_role(role, env)) for role in roles)
            sampling = role_sampling(roles, env)
        hub_id = (env.get("EMO_MME_HUB_ID") or "").strip() or HUB_ID
        frame_cache = frame_cache_max_bytes(env)  # EMO_FRAME_CACHE_MAX_MB, checked here like the rest
        workers = render_workers(env)
        return cls(
            source=source,
            judge_mode=mode,
            judge_protocol=protocol,
            audio_clues=clues,
            alpha=alpha,
            engine=engine,
            models=models,
            common=common,
            hub_id=hub_id,
            frame_cache_max_bytes=frame_cache,
            render_workers=workers,
            sampling=sampling,
        )

    @property
    def frame_cache_dir(self) -> Path:
        return self.common.cache_dir / "frames"

    @property
    def media(self) -> MediaSettings:
        """The judge's video media: the frame cache (`<cache dir>/frames`), the content-hash store, the render pool."""
        return MediaSettings(
            self.frame_cache_dir, self.frame_cache_max_bytes, self.common.digest_store, self.render_workers
        )

    def model(self, role: str) -> str:
        """The model for a judge role ("step", "judge", "audio")."""
        for name, model in self.models:
            if name == role:
                return model
        raise JudgeConfigError(f"no model resolved for the '{role}' judge role (judge mode {self.judge_mode})")

    def sampling_for(self, role: str) -> dict[str, object]:
        """The sampling settings of `role`'s requests under the preset ({}: the requests' own temperature 0)."""
        return dict(dict(self.sampling).get(role) or ())

    @property
    def judge_models(self) -> dict[str, str]:
        """{role: model}, as the judge summary records it."""
        return dict(self.models)


def role_sampling(
    roles: tuple[str, ...], env: Mapping[str, str]
) -> tuple[tuple[str, tuple[tuple[str, object], ...]], ...]:
    """`MMESettings.sampling` for `roles`: each role's preset sampling settings, sorted; roles without any left out."""
    pairs = ((role, tuple(sorted(sampling_for_role(role, env).items()))) for role in roles)
    return tuple((role, items) for role, items in pairs if items)


def resolve_judge_mode(requested: str, endpoint: EndpointConfig, source: str) -> str:
    """`api`, `offline` or `defer` for a (valid) EMO_JUDGE value.

    offline -> offline.  defer -> defer (no endpoint needed: nothing is judged in this run).  api -> the endpoint
    must be usable.  auto -> api when an endpoint is configured;
    otherwise offline for the bundled sample and an error (saying what to set) for the benchmark.  Only "no
    endpoint at all" leads to offline: malformed values never reach this point (they raise while being read)."""
    if requested in ("offline", "defer"):
        return requested
    try:
        endpoint.check_usable()
    except JudgeConfigError:
        if requested == "auto" and source == "sample":
            return "offline"
        raise JudgeConfigError(NO_JUDGE_MESSAGE) from None
    return "api"


__all__ = [
    "CLUE_MODES",
    "DEFAULT_ALPHA",
    "HUB_ID",
    "JUDGE_MODES",
    "JudgeConfigError",
    "MMESettings",
    "SettingsError",
    "resolve_judge_mode",
]
