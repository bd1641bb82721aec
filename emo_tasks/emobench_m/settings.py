"""EmoBench-M's settings, read from the environment once when a task is loaded (`process_docs`) and passed down.

- `EMO_EMOBENCH_M_ROOT`: the folder the authors' download unpacks to (`benchmark_json/<scenario>.json` and
  `dataset/<folder>/videos/...`); the data is on Google Drive only, so there is no Hub fallback;
- `EMO_CACHE_DIR` (and the other shared settings, `emo_tasks.settings.CommonSettings`): where the bundled sample
  is generated.
The bundled sample (`emobench_m_sample`) reads no data variable.  A missing or wrong root raises `SettingsError`
naming the variable, the value and what is missing, before any inference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emo_tasks.datafiles import SOURCES
from emo_tasks.settings import CommonSettings, SettingsError

VARIABLE = "EMO_EMOBENCH_M_ROOT"
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

    @classmethod
    def from_env(cls, env: Mapping[str, str], source: str = "benchmark") -> EmoBenchMSettings:
        if source not in SOURCES:
            raise ValueError(f"EmoBench-M source must be one of {SOURCES}, got {source!r}")
        common = CommonSettings.from_env(env)
        if source == "sample":
            return cls(source, common)
        raw = (env.get(VARIABLE) or "").strip()
        if not raw:
            raise SettingsError(f"{VARIABLE} is not set. {FIX}")
        root = Path(raw).expanduser()
        if not (root / "benchmark_json").is_dir():
            raise SettingsError(f"{VARIABLE}={raw}: no benchmark_json/ folder in it. {FIX}")
        return cls(source, common, root)
