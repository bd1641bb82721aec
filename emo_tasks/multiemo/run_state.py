"""What a MultiEmo-Bench run keeps between `process_docs` and the aggregation: each source's settings and images.

Why it exists: lmms-eval gives the aggregation only the `process_results` records, and MultiEmo's records stay
small (no votes); the aggregation and the judge stage look the votes and the settings up here.  A module of its
own, below `hooks` and `judge_stage`, so neither imports the other to reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emo_tasks.datafiles import LoadedSources

from .settings import MultiEmoSettings


@dataclass(frozen=True)
class Loaded:
    """One source as process_docs loaded it: the settings it was read with and its images by image_id."""

    settings: MultiEmoSettings
    images: Mapping[str, dict[str, Any]]


#: What each source was loaded with: the aggregation looks the votes up here, so `process_results` records stay
#: small, and keys its memo by the settings.
_loaded: LoadedSources[Loaded] = LoadedSources()


def loaded(source: str) -> Loaded | None:
    """What `load_task` (or process_docs) last loaded for `source` in this process: its settings and images."""
    return _loaded.get(source)
