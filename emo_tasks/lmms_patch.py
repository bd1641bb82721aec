"""emo_tasks' two adaptations of lmms-eval: its dataset loading (`dataset_path: emo_tasks`) and its `--baseline`
loader.

lmms-eval hands `dataset_path` to `datasets.load_dataset`, which cannot reach files inside an installed package
or read our environment variables (EMO_DATA_ROOT).  A task YAML with `dataset_path: emo_tasks` and
`dataset_name: <benchmark>/<source>/<task>` is therefore loaded as a one-row local JSON file naming the task;
the task's `process_docs` then replaces that row with the validated rows.  Everything else in lmms-eval's
loading (process_docs, splits, --limit) is untouched.  A task run on a subset (`EMO_SUBSET`) records it in
its config's metadata (`record_subset`).

`--baseline PREV_samples_<task>.jsonl`: lmms-eval 0.7.3 reads that one file for every task of the run and takes a
sample's score from a top-level key containing "score" (else it compares `target` with the answer, which gives 0
for every one of our samples).  For a file whose records carry `score_of` (ours: `metrics.paired_fields`), the
wrapped loader reads, for each task, that task's own samples file of the same run (`PREV_samples_<task>.jsonl`,
beside the one given), takes `record["score"]`, refuses a file that holds a doc twice, and pairs nothing (one
warning) where that file is missing or the benchmark has no per-row value.  Other files go to lmms-eval's loader.

Applied by `_emo_tasks_autoload` when `lmms_eval.tasks` is imported.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

SENTINEL = "emo_tasks"
_PATCHED = "__emo_tasks_patched__"


def placeholder_file(dataset_name: str) -> Path:
    """A one-row JSONL naming the task, written once under the emo_tasks cache."""
    from emo_tasks.settings import cache_dir
    from judges.atomic import atomic_write_text

    folder = cache_dir() / "lmms_eval_placeholders"
    digest = hashlib.sha256(dataset_name.encode("utf-8")).hexdigest()[:16]
    path = folder / f"{digest}.jsonl"
    if not path.is_file():
        atomic_write_text(path, json.dumps({"emo_source": dataset_name}) + "\n")
    return path


def record_subset(task: Any, dataset_name: str) -> None:
    """A task run on a subset (`EMO_SUBSET`, `emo_tasks.subset`) says so in its config's metadata, which lmms-eval
    writes into the results file (with --predict_only too): the judge stage and `compare` read it there."""
    from emo_tasks import subset
    from emo_tasks.settings import environ

    rec = subset.record_for(dataset_name, environ())
    if rec is None:
        return
    meta = task.config.metadata if isinstance(task.config.metadata, dict) else {}
    task.config.metadata = {**meta, subset.RECORD: rec}


def patch_configurable_task(task_cls: Any) -> None:
    """Wrap `ConfigurableTask.download` so `dataset_path: emo_tasks` loads the placeholder row (idempotent)."""
    original = task_cls.download
    if getattr(original, _PATCHED, False):
        return

    def download(self: Any, dataset_kwargs: dict[str, Any] | None = None) -> None:
        if getattr(self, "DATASET_PATH", None) != SENTINEL:
            return original(self, dataset_kwargs)
        name = getattr(self, "DATASET_NAME", None)
        if not name:
            raise ValueError("dataset_path: emo_tasks needs dataset_name: <benchmark>/<source>/<task>")
        self.DATASET_PATH, self.DATASET_NAME = "json", None
        # lmms-eval retries download() 5 times (2 s apart) and reports a RetryError whose real message sits ~45
        # lines up. Our placeholder is a local file and our errors (bad setting, bad data) do not go away on a
        # retry: call the undecorated method once, and say the real problem first, on one line.
        once = getattr(original, "__wrapped__", original)
        try:
            loaded = once(self, {"data_files": {"test": str(placeholder_file(name))}})
            record_subset(self, name)
        except Exception as exc:
            print(f"emo-tasks: {name}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            raise
        return loaded

    setattr(download, _PATCHED, True)
    download.__wrapped__ = original  # type: ignore[attr-defined]
    download.__doc__ = original.__doc__
    task_cls.download = download


def _paired_record(sample: dict[str, Any]) -> dict[str, Any] | None:
    """The sample's record that says which metric lmms-eval pairs (`score_of`), or None: not one of ours."""
    from emo_tasks.metrics import PAIRED_OF

    for value in sample.values():
        if isinstance(value, dict) and PAIRED_OF in value:
            return value
    return None


def task_samples_file(given: Path, task_name: str) -> Path:
    """`task_name`'s samples file of the run that wrote `given` (named `<stamp>_samples_<task>.jsonl`)."""
    stem, sep, _ = given.name.partition("_samples_")
    return given.with_name(f"{stem}_samples_{task_name}.jsonl") if sep else given


def read_paired_scores(path: Path) -> dict[int, float] | None:
    """{doc_id: score} of one of our samples files, for lmms-eval's paired test; None: not our file.

    A doc logged twice is refused (ValueError naming the file and doc): a score is paired once or not at all."""
    from emo_tasks.metrics import PAIRED_SCORE

    scores: dict[int, float] = {}
    seen: set[Any] = set()
    ours = False
    with path.open(encoding="utf-8") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError as exc:  # a truncated or corrupt line: name it, never pair part of a file
                raise ValueError(f"{path}: line {n} is not JSON ({exc}): not paired") from None
            record = _paired_record(sample)
            if record is None:
                if not ours:  # its first sample: not one of our files
                    return None
                raise ValueError(f"{path}: line {n} has no emo-tasks record (score_of): not one run's samples")
            ours = True
            doc_id = sample.get("doc_id")
            if doc_id in seen:
                raise ValueError(f"{path}: doc {doc_id} is logged twice: not paired")
            seen.add(doc_id)
            value = record.get(PAIRED_SCORE)
            if isinstance(value, int | float) and not isinstance(value, bool):
                scores[doc_id] = float(value)
    return scores if ours else None


def patch_baseline_loader(loader: Any) -> None:
    """Wrap lmms-eval's `_load_baseline_from_local(path, task_name)` (module global, so `load_baseline` and the
    evaluator's `--baseline` go through it) with the reading described in the module docstring (idempotent)."""
    original = loader._load_baseline_from_local
    if getattr(original, _PATCHED, False):
        return

    def load(path: str, task_name: str) -> tuple[dict[Any, Any], dict[str, Any] | None]:
        from loguru import logger

        given = Path(path)
        if _paired_record_of_file(given) is None:
            return original(path, task_name)
        own = task_samples_file(given, task_name)
        if not own.is_file():
            logger.warning(f"[Baseline] emo-tasks: {task_name}: no {own.name} beside {given.name}: not paired")
            return {}, None
        scores = read_paired_scores(own)
        if scores is None:
            return original(str(own), task_name)
        if not scores:
            logger.warning(
                f"[Baseline] emo-tasks: {task_name}: no per-row score in {own.name} (docs/ci.md): not paired"
            )
            return {}, None
        logger.info(f"[Baseline] emo-tasks: {task_name}: {len(scores)} samples from {own}")
        results = own.with_name(own.name.partition("_samples_")[0] + "_results.json")
        return scores, (json.loads(results.read_text(encoding="utf-8")) if results.is_file() else None)

    setattr(load, _PATCHED, True)
    load.__wrapped__ = original  # type: ignore[attr-defined]
    loader._load_baseline_from_local = load


def _paired_record_of_file(path: Path) -> dict[str, Any] | None:
    """The first sample's emo-tasks record (`score_of`) of a samples file, or None (not ours, or not readable)."""
    try:
        with path.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "")
        return _paired_record(json.loads(first)) if first else None
    except (OSError, ValueError):
        return None


def apply() -> None:
    """Patch lmms-eval's ConfigurableTask and its baseline loader (the caller has imported `lmms_eval.tasks`)."""
    from lmms_eval.api.task import ConfigurableTask
    from lmms_eval.baselines import loader

    patch_configurable_task(ConfigurableTask)
    patch_baseline_loader(loader)
