"""What an EmoBench-M lmms-eval run keeps between `process_docs` and the aggregations: one object, `STATE`.

Why it exists: lmms-eval gives an aggregation only the `process_results` records, so the settings each source was
loaded with are kept here by `load_task`, and a task's metrics share one scoring pass through `memo`.
"""

from __future__ import annotations

from emo_tasks.common import LastResult
from emo_tasks.datafiles import LoadedSources

from .settings import EmoBenchMSettings


class RunState:
    """`sources`: source -> the settings `load_task` read; `memo`: the last scoring pass (one per task)."""

    def __init__(self) -> None:
        self.sources: LoadedSources[EmoBenchMSettings] = LoadedSources()
        self.memo = LastResult()


#: The one run state of this process.
STATE = RunState()
