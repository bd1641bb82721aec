"""What an MME-Emotion lmms-eval run keeps between `process_docs`, `process_results` and the aggregations.

Why it exists: lmms-eval gives an aggregation only the `process_results` records, so what the judge needs beyond
them (the settings each task was checked with, its full rows, the answers of a group's other tasks) has to be kept
in the process by the hooks.  All of it is one object, `STATE` (a `RunState`), so a reader follows one answer from
`process_results` to its metric through one place:

- `tasks` (`TaskRegistry`): (source, task key) -> the settings and rows `process_docs` loaded, and the answers
  `process_results` recorded (so the first aggregation of a group run can judge every task in one pipeline);
- `ahead` (`JudgedAhead`): judgements made ahead of their task's aggregation, taken once by exactly those records;
- `memo` (`LastResult`): the eight metric aggregations of a task share one judge phase;
- `notices`: output folders already told "judging deferred" (one line per folder and process).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emo_tasks.common import LastResult
from judges import BatchStats

from .judge import Judgement
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
        judge every task's answers in one pipeline (`hooks.judge_ahead`)."""
        key = record_key(record)
        with self._lock:
            loaded = self._tasks.get(key)
            if loaded is not None and loaded.settings.judge_mode == "api":
                self._answers.setdefault(key, {})[int(record["row"])] = dict(record)

    def take_answers(self) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Every kept answer by task, forgetting them."""
        with self._lock:
            answers, self._answers = self._answers, {}
        return {key: list(rows.values()) for key, rows in answers.items() if rows}

    def forget_answers(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._answers.pop(key, None)

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


def record_id(record: Mapping[str, Any]) -> tuple[Any, ...]:
    return (*record_key(record), int(record["row"]), record["video_id"], record["answer"])


def same_answers(ids: Collection[tuple[Any, ...]], records: Sequence[Mapping[str, Any]]) -> bool:
    """Whether `records` are exactly the answers `ids` (record ids) name, each once."""
    return len(ids) == len(records) and set(ids) == {record_id(r) for r in records}


class JudgedAhead:
    """Judgements made ahead of their task's aggregation by `hooks.judge_ahead` (several tasks in one pipeline), each
    taken once by the aggregation of exactly the same records, with that task's per-agent accounting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple[MMESettings, tuple[str, str]], tuple[dict, dict[str, BatchStats]]] = {}

    def put(self, settings: MMESettings, items: Sequence[Mapping[str, Any]], judged: Sequence[Judgement],
            stats: dict[str, BatchStats]) -> None:  # fmt: skip
        by_id = {record_id(r): j for r, j in zip(items, judged, strict=True)}
        with self._lock:
            self._done[(settings, record_key(items[0]))] = (by_id, stats)

    def has(self, settings: MMESettings, records: Sequence[Mapping[str, Any]]) -> bool:
        with self._lock:
            entry = self._done.get((settings, record_key(records[0])))
        return entry is not None and same_answers(entry[0].keys(), records)

    def take(
        self, settings: MMESettings, records: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Judgement], dict[str, BatchStats]] | None:
        """The judgements of `records` (in their order) and the accounting, when judged ahead for exactly these."""
        with self._lock:
            entry = self._done.pop((settings, record_key(records[0])), None)
        if entry is None:
            return None
        by_id, stats = entry
        if not same_answers(by_id.keys(), records):
            return None  # other answers than the ones judged ahead: judge these now
        return [by_id[record_id(r)] for r in records], stats


class RunState:
    """Everything one process keeps for its MME-Emotion tasks between lmms-eval's hooks (see the module docstring)."""

    def __init__(self) -> None:
        self.tasks = TaskRegistry()
        self.ahead = JudgedAhead()
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
