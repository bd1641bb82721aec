"""Small pieces every benchmark's loader and hooks share: the lmms-eval placeholder row, data files named by the
environment or fetched from the Hub, the sample cache folder, writes that a concurrent reader (another rank) never
sees half done, the once-per-task memo of the aggregations, the read-once memo of one command (below), and the
warning when a task's answers are all empty."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from judges.atomic import atomic_path, atomic_write_text  # noqa: F401  (re-exported: one helper for all)


class DataError(ValueError):
    """Bad or missing benchmark data; the message names the file or row and the fix."""


#: lmms-eval's clock for the names of its results files (`lmms_eval.utils.get_datetime_str`: Asia/Singapore, UTC+8
#: all year since 1982).  Every file name emo-tasks stamps uses it too, so one run folder has one clock whatever the
#: machine's time zone (docs/cli.md).
STAMP_TZ = timezone(timedelta(hours=8))


def file_stamp(fmt: str = "%Y%m%d_%H%M%S", when: float | None = None) -> str:
    """`when` (a POSIX time; now when None) on lmms-eval's clock, formatted for a file name."""
    moment = datetime.now(STAMP_TZ) if when is None else datetime.fromtimestamp(when, STAMP_TZ)
    return moment.strftime(fmt)


def placeholder_name(dataset: Any, family: str) -> str:
    """The `dataset_name` that `emo_tasks.lmms_patch` put in the placeholder row (e.g. "mvei/sample")."""
    if len(dataset) == 0 or "emo_source" not in dataset.column_names:
        raise DataError(f"{family} tasks must be loaded with dataset_path: emo_tasks (placeholder row missing)")
    return str(dataset[0]["emo_source"])


def sample_dir(name: str, cache_dir: Path) -> Path:
    """Where a bundled sample is generated: `<cache dir>/samples/<name>`."""
    return Path(cache_dir) / "samples" / name


def atomic_save_png(path: Path, pixels: Any) -> None:
    """Save an RGB uint8 array as PNG, atomically."""
    from PIL import Image

    with atomic_path(path, ".png") as tmp:
        Image.fromarray(pixels.astype("uint8")).save(tmp, format="PNG")


def read_text(path: str | Path) -> str:
    """A data file's text, decoded as UTF-8 (a leading UTF-8 byte-order mark is dropped).  The one reader every
    loader uses: bytes that are not UTF-8 are a DataError naming the file, the byte offset (and its line) and the
    fix, never a bare UnicodeDecodeError."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{path}: not UTF-8 text (byte {exc.start} = 0x{data[exc.start]:02x}, line {line}: {exc.reason}). "
            "Save the file as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8 in > out`, naming its real encoding)."
        ) from exc


def load_json(path: str | Path, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """A JSON data file (`read_text`); text that is not JSON is a DataError naming the file and the position."""
    try:
        return json.loads(read_text(path), object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not valid JSON: {exc}") from exc


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, object) for every non-blank line (`read_text`); a line that is not JSON is a DataError naming
    it."""
    text = read_text(path).replace("\r\n", "\n").replace("\r", "\n")  # the newlines open() would fold
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path} line {n}: not valid JSON ({exc.msg})") from exc
        yield n, obj


class FunctionRef(str):
    """A task YAML's `!function module.name` (lmms-eval's tag), kept as its text."""


def task_configs() -> dict[str, dict[str, Any]]:
    """Task name -> its YAML under emo_tasks/<benchmark>/ as lmms-eval reads it: the file's keys over those of the
    template it `include`s, a `!function` value as a `FunctionRef`.  The YAMLs installed now: parsed again
    whenever one of them changed (by its path, size and mtime), else from a per-process memo (the judge stage asks
    once per task: parsing the 40-odd files each time cost a second of its start-up).  A copy: callers may edit."""
    import copy

    paths = sorted(Path(__file__).parent.glob("*/*.yaml"))
    signature = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        signature.append((str(path), st.st_size, st.st_mtime_ns))
    key = tuple(signature)
    with _TASK_CONFIGS_LOCK:
        if _TASK_CONFIGS.get("key") != key:
            _TASK_CONFIGS.update(key=key, value=_parse_task_configs(paths))
        return copy.deepcopy(_TASK_CONFIGS["value"])


_TASK_CONFIGS: dict[str, Any] = {}
_TASK_CONFIGS_LOCK = threading.Lock()


def _parse_task_configs(paths: list[Path]) -> dict[str, dict[str, Any]]:
    import yaml

    base_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it: same result

    class _Loader(base_loader):  # type: ignore[misc, valid-type]
        pass

    _Loader.add_constructor("!function", lambda loader, node: FunctionRef(loader.construct_scalar(node)))
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader) or {}  # noqa: S506 - a SafeLoader
        if not isinstance(doc.get("task"), str):
            continue
        if doc.get("include"):
            base = yaml.load((path.parent / doc["include"]).read_text(encoding="utf-8"), Loader=_Loader) or {}  # noqa: S506
            doc = {**base, **doc}
        out[doc["task"]] = doc
    return out


@cache
def load_yaml(path: str) -> Any:
    """A package data file (prompts, protocol tables), parsed once per process."""
    import yaml

    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def hub_snapshot(repo_id: str, fix: str) -> Path:
    """Download (or reuse from the Hub cache) a dataset repository; a DataError with `fix` when that fails
    (offline, no access, not found)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id=repo_id, repo_type="dataset"))
    except Exception as exc:
        raise DataError(f"Could not get the Hub dataset {repo_id} ({type(exc).__name__}: {exc}). {fix}") from exc


def file_from_env(env: dict[str, str], variable: str, fix: str) -> Path | None:
    """The file named by `variable` (None when unset); a DataError when it names nothing."""
    if not env.get(variable):
        return None
    path = Path(env[variable]).expanduser()
    if not path.is_file():
        raise DataError(f"{variable}={path} does not exist. {fix}")
    return path


class LastResult:
    """Compute once per key, keep only the latest: lmms-eval calls one aggregation per metric with the same items,
    one task after another, so every metric of a task shares one computation (a judge phase, a scoring pass)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: Hashable = None
        self._value: Any = None
        self._set = False

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:  # held while computing: concurrent callers wait instead of computing twice
            if not (self._set and self._key == key):
                self._value, self._key, self._set = compute(), key, True
            return self._value


def row_target(gold: str, row: Any) -> str:
    """A task's `doc_to_target`: the gold answer plus a hash of the row's portable content (`row`: ids, labels,
    texts, votes — never a machine's absolute paths).  lmms-eval logs it per sample even with `--predict_only`
    (where it drops the doc), so a judge stage run later can prove each answer is mapped back to the same row."""
    import hashlib

    blob = json.dumps(row, sort_keys=True, ensure_ascii=False, default=str)
    return f"{gold} #{hashlib.sha256(blob.encode('utf-8')).hexdigest()[:12]}"


# ------------------------------------------------------------------------------------------------ read once per command
# Read once per command: within `remembering()`, `once(kind, path, compute)` computes a value derived from a file
# one time, and later calls get the same value while the file is unchanged (same inode, size and mtime).
#
# Why: one command (`emo-tasks view`, `compare --view`) asks several tools about the same run, and each reads the
# same files again: the report's per-sample values and the viewer both parse a MultiEmo sample log and score its
# 10,344 images; each of MME-Emotion's 8 tasks parses the one judge log that covers them all.  Outside the block
# nothing is kept (a long-lived process sees a file change between two calls).  Values are shared, not copied: a
# caller must not change what it gets.
T = TypeVar("T")

_MEMO: dict[tuple[Any, ...], Any] | None = None


@contextmanager
def remembering() -> Iterator[None]:
    """Within the block, `once` computes each (kind, file) once; nested blocks share the outer one's values."""
    global _MEMO
    before = _MEMO
    if _MEMO is None:
        _MEMO = {}
    try:
        yield
    finally:
        _MEMO = before


def once(kind: Hashable, path: str | Path, compute: Callable[[], T]) -> T:
    """`compute()`, or within `remembering()` the value computed before for this kind and this file's content (a
    file that cannot be stat'ed is computed every time: `compute` raises what it raises)."""
    if _MEMO is None:
        return compute()
    try:
        st = os.stat(path)
    except OSError:
        return compute()
    key = (kind, os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _MEMO:
        _MEMO[key] = compute()
    return _MEMO[key]


def say_if_all_empty(label: str, answers: Iterable[Any]) -> bool:
    """One line on stderr when every one of `answers` (a task's, at its aggregation) is empty or blank; True then.

    Why: lmms-eval's model classes catch an error of the model's `generate` and answer "" (e.g. its Qwen-Omni chat
    classes), so a run that never reached the model scores like a model that said nothing.  Only a line: no number
    changes."""
    texts = ["" if a is None else str(a) for a in answers]
    if not texts or any(t.strip() for t in texts):
        return False
    print(
        f"emo-tasks: WARNING: {label}: all {len(texts)} answers are empty: the model said nothing, or its lmms-eval "
        "class caught an error and answered \"\" (look for 'Error in generating' in lmms-eval's log); the scores "
        "are those of empty answers",
        file=sys.stderr,
        flush=True,
    )
    return True
