"""What an MME-Emotion lmms-eval run keeps between `process_docs`, `process_results` and the aggregations.

Why it exists: lmms-eval gives an aggregation only the `process_results` records, so what the judge needs beyond
them (the settings each task was checked with, its full rows, the answers of a group's other tasks) has to be kept
in the process by the hooks.  All of it is one object, `STATE` (a `RunState`), so a reader follows one answer from
`process_results` to its metric through one place:

- `tasks` (`TaskRegistry`): (source, task key) -> the settings and rows `process_docs` loaded, and the answers
  `process_results` recorded (so the first aggregation of a group run hands every task to the judge at once:
  `take_answers`; the judgements of the tasks judged ahead are the judge's to keep, `judge.judge`);
- `memo` (`LastResult`): the eight metric aggregations of a task share one judge phase;
- `notices`: output folders already told "judging deferred" (one line per folder and process).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emo_tasks.common import LastResult

from .settings import MMESettings


def record_key(record: Mapping[str, Any]) -> tuple[str, str]:
    """The (source, task key) a `process_results` record belongs to."""
    return record.get("data_source", "benchmark"), record["mme_task"]


@dataclass(frozen=True)
class LoadedTask:
    """One task as `process_docs` loaded it: the settings it was checked with, its docs by row, and each row's
    index in the docs lmms-eval got (its `doc_id`)."""

    settings: MMESettings
    docs: Mapping[int, dict[str, Any]]
    index: Mapping[int, int] = field(default_factory=dict)


class TaskRegistry:
    """(source, task key) -> LoadedTask.  process_docs runs on every rank before inference, so the aggregation
    (rank 0) finds the settings and the full rows here, and `process_results` records stay small in lmms-eval's
    sample logs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, str], LoadedTask] = {}
        self._answers: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}

    def register(self, source: str, key: str, settings: MMESettings, docs: Sequence[dict[str, Any]]) -> None:
        with self._lock:
            self._tasks[(source, key)] = LoadedTask(
                settings, {int(d["row"]): d for d in docs}, {int(d["row"]): i for i, d in enumerate(docs)}
            )
            self._answers.pop((source, key), None)  # a new run of the task: earlier answers are not its own

    def record_answer(self, record: Mapping[str, Any]) -> None:
        """Keep a `process_results` record of a judged task, so that the first aggregation of a group run can
        judge every task's answers in one pipeline (`take_answers`)."""
        key = record_key(record)
        with self._lock:
            loaded = self._tasks.get(key)
            if loaded is not None and loaded.settings.judge_mode == "api":
                self._answers.setdefault(key, {})[int(record["row"])] = dict(record)

    def take_answers(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Every kept answer by task, forgetting them: each is handed to the judge once."""
        with self._lock:
            answers, self._answers = self._answers, {}
        return {key: list(rows.values()) for key, rows in answers.items() if rows}

    def hold(self, groups: Sequence[Sequence[Mapping[str, Any]]]) -> None:
        """Keep exactly these answers (one task per group), forgetting any other: what the judge stage hands over,
        as `process_results` keeps an in-process run's."""
        with self._lock:
            self._answers = {}
        for records in groups:
            for record in records:
                self.record_answer(record)

    def find(self, source: str, key: str) -> LoadedTask | None:
        with self._lock:
            return self._tasks.get((source, key))

    def get(self, source: str, key: str) -> LoadedTask:
        loaded = self.find(source, key)
        if loaded is None:
            raise KeyError(
                f"MME-Emotion task {(source, key)} was not loaded in this process (process_docs did not run?)"
            )
        return loaded


class RunState:
    """Everything one process keeps for its MME-Emotion tasks between lmms-eval's hooks (see the module docstring)."""

    def __init__(self) -> None:
        self.tasks = TaskRegistry()
        self.memo = LastResult()
        self._notices: set[str | None] = set()
        self._notice_lock = threading.Lock()

    def first_notice(self, key: str | None) -> bool:
        """True the first time `key` (an output folder) asks, False after: one deferred notice per folder."""
        with self._notice_lock:
            if key in self._notices:
                return False
            self._notices.add(key)
            return True


#: The one run state of this process.
STATE = RunState()
