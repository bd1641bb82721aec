"""What a MultiEmo-Bench run keeps between `process_docs` and the aggregation: one object, `STATE`.

Why it exists: lmms-eval gives the aggregation only the `process_results` records, and MultiEmo's records stay
small (no votes); the aggregation and the judge stage look the votes and the settings up in `STATE.sources`, and
a task's metrics share one scoring pass through `STATE.memo`.  A module of its own, below `hooks` and
`judge_stage`, so neither imports the other to reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emo_tasks.common import LastResult
from emo_tasks.datafiles import LoadedSources

from .settings import MultiEmoSettings


@dataclass(frozen=True)
class Loaded:
    """One source as process_docs loaded it: the settings it was read with and its images by image_id."""

    settings: MultiEmoSettings
    images: Mapping[str, dict[str, Any]]


class RunState:
    """`sources`: source -> what `load_task` loaded (settings and images; the aggregation looks the votes up here
    and keys its memo by the settings); `memo`: the last scoring pass (one per task)."""

    def __init__(self) -> None:
        self.sources: LoadedSources[Loaded] = LoadedSources()
        self.memo = LastResult()


#: The one run state of this process.
STATE = RunState()


def loaded(source: str) -> Loaded | None:
    """What `load_task` (or process_docs) last loaded for `source` in this process: its settings and images."""
    return STATE.sources.get(source)
