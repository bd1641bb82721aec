"""MVEI's settings, read from the environment once when the task is loaded (`process_docs`) and passed down.

- `EMO_MVEI_FILE`: the data file itself (`mvei.json`, the authors' standard format, or `mvei.jsonl`);
- else `EMO_DATA_ROOT`: a folder holding `mvei/mvei.json` or `mvei/mvei.jsonl` (one of them);
- else the Hub dataset `EMO_MVEI_HUB_ID` (default `wudq/MVEI`), downloaded when the data is loaded;
- `EMO_CACHE_DIR` (and the other shared settings, `emo_tasks.settings.CommonSettings`): where the bundled sample
  is generated.
The bundled sample (`mvei_sample`) reads none of the data variables.  A value that names no data raises
`SettingsError` naming the variable, the value and what is accepted, before any inference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from emo_tasks.datafiles import SOURCES, DataLocation
from emo_tasks.settings import CommonSettings

HUB_ID = "wudq/MVEI"
FIX = (
    "Set EMO_DATA_ROOT to a folder containing mvei/mvei.json (the authors' standard file) or mvei/mvei.jsonl "
    "(image, statement, label, dimension), or EMO_MVEI_FILE to the file itself."
)


@dataclass(frozen=True)
class MVEISettings:
    """Everything MVEI takes from the environment, for one source ("benchmark" or "sample"); frozen and hashable
    (part of the aggregation's memo key)."""

    source: str
    common: CommonSettings
    #: EMO_MVEI_FILE or the file under EMO_DATA_ROOT/mvei, else the Hub dataset; empty for the sample
    data: DataLocation = DataLocation()

    @classmethod
    def from_env(cls, env: Mapping[str, str], source: str = "benchmark") -> MVEISettings:
        if source not in SOURCES:
            raise ValueError(f"MVEI source must be one of {SOURCES}, got {source!r}")
        common = CommonSettings.from_env(env)
        if source == "sample":
            return cls(source, common)
        data = DataLocation.from_env(
            env,
            common.data_root,
            variable="EMO_MVEI_FILE",
            hub_variable="EMO_MVEI_HUB_ID",
            hub_default=HUB_ID,
            folder="mvei",
            names=("mvei.json", "mvei.jsonl"),
            title="MVEI",
            fix=FIX,
        )
        return cls(source, common, data)
