"""MultiEmo-Bench's settings, read from the environment once — when the task is loaded (`process_docs`) or at
the entry point of its command lines (`judge_stage`, `baseline`) — and passed down.

- `EMO_MULTIEMO_FILE`: the data file itself (`multiemo.jsonl`, format in `data.py`);
- else `EMO_DATA_ROOT`: a folder holding `multiemo/multiemo.jsonl`;
- else the Hub dataset `EMO_MULTIEMO_HUB_ID` (no default: the data is not public), downloaded when loaded;
- `EMO_CACHE_DIR` (and the other shared settings, `emo_tasks.settings.CommonSettings`): where the bundled sample
  is generated and the judge stage caches its answers;
- the judge stage's endpoint (`judges.config.EngineSettings`: OPENAI_BASE_URL, EMO_JUDGE_*, ...) and its model
  (`EMO_JUDGE_MODEL`).
The bundled sample (`multiemo_sample`) and a command line's `--data` read none of the data variables.  A value
that names no data raises `SettingsError` naming the variable, the value and what is accepted, before any
inference (a bad judge variable raises `judges.JudgeConfigError`, which names it the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from emo_tasks.datafiles import SOURCES, DataLocation
from emo_tasks.settings import CommonSettings
from judges.config import EngineSettings, model_for_role, sampling_for_role

FIX = (
    "Set EMO_DATA_ROOT to a folder containing multiemo/multiemo.jsonl (format: see emo_tasks/multiemo/data.py and "
    "the README), or EMO_MULTIEMO_FILE to the file itself, or EMO_MULTIEMO_HUB_ID to a Hub dataset holding one."
)


@dataclass(frozen=True)
class MultiEmoSettings:
    """Everything MultiEmo-Bench takes from the environment, for one source ("benchmark" or "sample"); frozen and
    hashable (part of the aggregation's memo key)."""

    source: str
    common: CommonSettings
    #: the judge stage's engine (endpoint, answer cache under the emo-tasks cache, progress bars) and model
    engine: EngineSettings
    judge_model: str
    #: a command line's --data, EMO_MULTIEMO_FILE or EMO_DATA_ROOT/multiemo/multiemo.jsonl, else the Hub dataset
    #: EMO_MULTIEMO_HUB_ID; empty for the sample, and when nothing is configured
    data: DataLocation = DataLocation()
    #: the judge's sampling settings under a preset (EMO_JUDGE_PRESET), sorted (setting, value) pairs; empty
    #: without one or under `paper` (temperature 0 only, as always)
    judge_sampling: tuple[tuple[str, object], ...] = ()

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], source: str = "benchmark", *, data_file: Path | None = None
    ) -> MultiEmoSettings:
        """`data_file`: a file named on a command line (`--data`), used instead of the data variables."""
        if source not in SOURCES:
            raise ValueError(f"MultiEmo-Bench source must be one of {SOURCES}, got {source!r}")
        common = CommonSettings.from_env(env)
        engine = EngineSettings.from_env(env, cache_dir=common.cache_dir)
        judge_model = model_for_role("judge", env)
        if source == "sample":
            data = DataLocation()
        elif data_file is not None:
            data = DataLocation(file=Path(data_file))
        else:
            data = DataLocation.from_env(
                env,
                common.data_root,
                variable="EMO_MULTIEMO_FILE",
                hub_variable="EMO_MULTIEMO_HUB_ID",
                hub_default=None,
                folder="multiemo",
                names=("multiemo.jsonl",),
                title="MultiEmo-Bench",
                fix=FIX,
            )
        sampling = tuple(sorted(sampling_for_role("judge", env).items()))
        return cls(source, common, engine, judge_model, data, sampling)
