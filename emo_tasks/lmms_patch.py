"""emo_tasks' one adaptation of lmms-eval's dataset loading: `dataset_path: emo_tasks`.

lmms-eval hands `dataset_path` to `datasets.load_dataset`, which cannot reach files inside an installed package
or read our environment variables (EMO_DATA_ROOT).  A task YAML with `dataset_path: emo_tasks` and
`dataset_name: <benchmark>/<source>/<task>` is therefore loaded as a one-row local JSON file naming the task;
the task's `process_docs` then replaces that row with the validated rows.  Everything else in lmms-eval's
loading (process_docs, splits, --limit) is untouched.  A task run on a subset (`EMO_SUBSET`) records it in
its config's metadata (`record_subset`).  Applied by `_emo_tasks_autoload` when `lmms_eval.tasks`
is imported.
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


def apply() -> None:
    """Patch lmms-eval's ConfigurableTask (it must already be imported by the caller)."""
    from lmms_eval.api.task import ConfigurableTask

    patch_configurable_task(ConfigurableTask)
