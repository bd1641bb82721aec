"""EmoBench-M's settings, read from the environment once when a task is loaded (`process_docs`) and passed down.

- `EMO_EMOBENCH_M_ROOT`: the folder the authors' download unpacks to (`benchmark_json/<scenario>.json` and
  `dataset/<folder>/videos/...`); the data is on Google Drive only, so there is no Hub fallback;
- `EMO_CACHE_DIR` (and the other shared settings, `emo_tasks.settings.CommonSettings`): where the bundled sample
  is generated.
- `EMO_JUDGE` (auto | api | offline | defer) and the judge endpoint variables (`judges.config`): the authors' LLM
  scorer of SMILE's reasons (`judge.py`).  auto: the scorer when an endpoint is configured, else none (its
  metrics N/A with a note: the rule-based metrics need no judge); api: required; offline / defer: none now
  (`emo-tasks judge RUN_DIR` scores a run later).  Model: EMO_JUDGE_MODEL (the "judge" role).
The bundled sample (`emobench_m_sample`) reads no data variable.  A missing or wrong root raises `SettingsError`
naming the variable, the value and what is missing, before any inference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emo_tasks.datafiles import SOURCES
from emo_tasks.settings import CommonSettings, SettingsError, choice
from judges.config import EngineSettings, JudgeConfigError, model_for_role, sampling_for_role

VARIABLE = "EMO_EMOBENCH_M_ROOT"
JUDGE_MODES = ("auto", "api", "offline", "defer")
NO_JUDGE = (
    "EMO_JUDGE=api: EmoBench-M's LLM scorer of SMILE's reasons needs a judge endpoint and none is usable. Set "
    "OPENAI_API_KEY, or OPENAI_BASE_URL (+ OPENAI_API_KEY) for an OpenAI-compatible server, or API_TYPE=azure with "
    "AZURE_ENDPOINT and AZURE_API_KEY (model: EMO_JUDGE_MODEL); or EMO_JUDGE=offline to leave its metrics N/A"
)
DOWNLOAD = "https://drive.google.com/file/d/1ohQWGJOuJVN3-uOeEifA3C0tMaadYe_K/view"
FIX = (
    f"Download EmoBench-M from Google Drive ({DOWNLOAD}), unpack it, and set {VARIABLE} to the folder holding "
    "benchmark_json/ and dataset/."
)


@dataclass(frozen=True)
class EmoBenchMSettings:
    """Everything EmoBench-M takes from the environment, for one source; frozen and hashable (memo key)."""

    source: str
    common: CommonSettings
    root: Path | None = None  # EMO_EMOBENCH_M_ROOT; None for the sample
    #: "api" (SMILE's reasons rated by the LLM scorer), "offline" (no scorer: N/A) or "defer" (no scorer now)
    judge_mode: str = "offline"
    #: the scorer's engine (endpoint, answer cache under the emo-tasks cache); None unless judge_mode is "api"
    engine: EngineSettings | None = None
    judge_model: str = ""
    #: the judge's sampling settings under a preset (EMO_JUDGE_PRESET), sorted pairs; empty: temperature 0 only
    judge_sampling: tuple[tuple[str, object], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str], source: str = "benchmark") -> EmoBenchMSettings:
        if source not in SOURCES:
            raise ValueError(f"EmoBench-M source must be one of {SOURCES}, got {source!r}")
        common = CommonSettings.from_env(env)
        judge = judge_settings(env, common)
        if source == "sample":
            return cls(source, common, None, *judge)
        raw = (env.get(VARIABLE) or "").strip()
        if not raw:
            raise SettingsError(f"{VARIABLE} is not set. {FIX}")
        root = Path(raw).expanduser()
        if not (root / "benchmark_json").is_dir():
            raise SettingsError(f"{VARIABLE}={raw}: no benchmark_json/ folder in it. {FIX}")
        return cls(source, common, root, *judge)


def judge_settings(
    env: Mapping[str, str], common: CommonSettings
) -> tuple[str, EngineSettings | None, str, tuple[tuple[str, object], ...]]:
    """(judge_mode, engine, judge_model, sampling) from EMO_JUDGE and the endpoint variables; a malformed value
    raises, naming it, whatever the mode; EMO_JUDGE=api without a usable endpoint raises `NO_JUDGE`."""
    requested = choice(env, "EMO_JUDGE", JUDGE_MODES, "auto")
    engine = EngineSettings.from_env(env, cache_dir=common.cache_dir)
    if requested in ("offline", "defer"):
        return requested, None, "", ()
    try:
        engine.endpoint.check_usable()
    except JudgeConfigError:
        if requested == "api":
            raise JudgeConfigError(NO_JUDGE) from None
        return "offline", None, "", ()
    return "api", engine, model_for_role("judge", env), tuple(sorted(sampling_for_role("judge", env).items()))
