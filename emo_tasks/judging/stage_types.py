"""What the judge stage (`emo_tasks.judging.stage`) and its dry run (`emo_tasks.judging.dryrun`) share: exit codes,
errors and the checked plan of one task.  A module below both, so neither imports the other at module level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import Benchmark

EXIT_OK, EXIT_REFUSED, EXIT_ERROR, EXIT_JUDGE_FAILURES = 0, 2, 3, 4
#: `judge --batch`: batches are submitted (or request files written for `vllm run-batch`) and not all answered
#: yet; nothing is written.  The same command collects and goes on.
EXIT_PENDING = 5
#: `judge` exits EXIT_JUDGE_FAILURES above this share of failed judgements (the default of `compare`'s gate).
DEFAULT_MAX_FAILURE_SHARE = 0.1
#: --judge-model / --step-model / --audio-model -> the variables the benchmarks' settings read.
MODEL_FLAGS = {"judge_model": "EMO_JUDGE_MODEL", "step_model": "EMO_STEP_MODEL", "audio_model": "EMO_AUDIO_MODEL"}


class StageRefused(Exception):
    """The saved answers do not belong to the data, prompts or task version we have now (exit 2)."""


class StageError(Exception):
    """The run cannot be judged as asked: no run, no saved answers, a bad setting (exit 3)."""


class NoAnswers(StageError):
    """A task of the run saved no answers (run without --log_samples)."""


@dataclass
class LoggedSample:
    """One saved answer: what lmms-eval's sample log (or our deferred answers file) holds per document."""

    doc_id: int
    filtered_resps: Any
    target: str | None = None
    input: str | None = None
    line: int = 0  # the line of the file it came from, for messages


@dataclass
class TaskPlan:
    """One task of the run, checked and ready to judge."""

    task: str
    bench: Benchmark
    hooks: Any
    config: dict[str, Any]
    samples: list[LoggedSample]
    docs: list[dict[str, Any]]
    answers_file: Path | None = None
    #: rows the run answered that this judgement leaves out (only with --partial), and how many the run has
    missing: list[int] = field(default_factory=list)
    n_expected: int | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    per_metric: list[dict[str, Any]] = field(default_factory=list)  # process_results output per sample
