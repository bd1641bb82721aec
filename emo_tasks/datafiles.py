"""What the image benchmarks (MVEI, MultiEmo-Bench) share around their data: where it is (the environment's
`EMO_<BENCH>_FILE`, else `EMO_DATA_ROOT/<bench>/`, else the Hub), the bundled sample they generate, the source
lmms-eval's placeholder row names and what `process_docs` loaded for it, and the per-sample log lmms-eval writes
for a run.

Why shared: both benchmarks find, generate, register and read back their data the same way; one copy keeps the
rules and the messages the same.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from emo_tasks.benchmarks import SampleReader, SampleValues
from emo_tasks.common import DataError, atomic_write_text, once, sample_dir
from emo_tasks.settings import SettingsError, cache_dir

SOURCES = ("benchmark", "sample")
T = TypeVar("T")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


# ------------------------------------------------------------------------------------------------ settings
def local_data_file(
    env: Mapping[str, str],
    data_root: Path | None,
    *,
    variable: str,
    folder: str,
    names: Sequence[str],
    title: str,
    fix: str,
) -> Path | None:
    """The local data file the environment names: `variable` (must be an existing file), else the one file of
    `names` in `<data_root>/<folder>/` (EMO_DATA_ROOT); None when neither is set (the caller falls back to the
    Hub).  A value that names no data is a SettingsError naming the variable, its value and what is accepted."""
    raw = (env.get(variable) or "").strip()
    if raw:
        path = Path(raw).expanduser()
        if not path.is_file():
            raise SettingsError(
                f"{variable}={raw!r} is not an existing file; set it to the {title} data file "
                f"({' or '.join(names)}), or unset it. {fix}"
            )
        return path
    if data_root is None:
        return None
    where = data_root / folder
    found = [where / name for name in names if (where / name).is_file()]
    if not found:
        looked = " or ".join(f"{folder}/{name}" for name in names)
        raise SettingsError(
            f"EMO_DATA_ROOT={str(data_root)!r} holds no {title} data (looked for {looked} in it); set it to a folder "
            f"that does, or unset it. {fix}"
        )
    if len(found) > 1:
        raise SettingsError(
            f"EMO_DATA_ROOT={str(data_root)!r}: {where} holds both {' and '.join(names)}; keep one, or set {variable}."
        )
    return found[0]


def hub_id(env: Mapping[str, str], variable: str, default: str | None) -> str | None:
    """A Hub dataset id from `variable` ("owner/name"; unset or empty: `default`); a SettingsError otherwise."""
    raw = (env.get(variable) or "").strip()
    if not raw:
        return default
    if not _HUB_ID.match(raw):
        raise SettingsError(
            f"{variable}={raw!r} is not a Hub dataset id; use owner/name (e.g. {default or 'my-org/my-data'}), "
            "or unset it"
        )
    return raw


@dataclass(frozen=True)
class DataLocation:
    """Where a benchmark's data is: a local file, else a Hub dataset searched when the data is loaded; both None:
    nothing configured (or the bundled sample, which needs neither)."""

    file: Path | None = None
    hub_id: str | None = None

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        data_root: Path | None,
        *,
        variable: str,
        hub_variable: str,
        hub_default: str | None,
        folder: str,
        names: Sequence[str],
        title: str,
        fix: str,
    ) -> DataLocation:
        """`variable` (a file), else `<data_root>/<folder>/<one of names>`, plus the Hub id from `hub_variable`;
        values that name no data raise SettingsError (`local_data_file`, `hub_id`)."""
        file = local_data_file(env, data_root, variable=variable, folder=folder, names=names, title=title, fix=fix)
        return cls(file=file, hub_id=hub_id(env, hub_variable, hub_default))


# ------------------------------------------------------------------------------------------------ lmms-eval tasks
def dataset_source(dataset_name: str, prefix: str) -> str:
    """The source ("benchmark" | "sample") a task's `dataset_name: <prefix>/<source>` names (the name lmms_patch's
    placeholder row carries, and the one results.json records); a DataError for anything else."""
    source = dataset_name.removeprefix(f"{prefix}/")
    if not dataset_name.startswith(f"{prefix}/") or source not in SOURCES:
        raise DataError(f"dataset_name must be {prefix}/benchmark or {prefix}/sample, got {dataset_name!r}")
    return source


class LoadedSources(Generic[T]):
    """What `process_docs` loaded, by source.  process_docs runs on every rank, so the aggregation (rank 0) finds
    here the settings (its memo key) and whatever else the records leave out (MultiEmo-Bench's votes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_source: dict[str, T] = {}

    def put(self, source: str, value: T) -> None:
        with self._lock:
            self._by_source[source] = value

    def get(self, source: str) -> T | None:
        with self._lock:
            return self._by_source.get(source)


# ------------------------------------------------------------------------------------------------ data files
def check_listed_files(missing: Sequence[str], total: int, what: str, path: Path) -> None:
    """A DataError listing (the first ten of) the files a data file lists that do not exist."""
    if not missing:
        return
    shown = "\n  ".join(missing[:10])
    more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
    raise DataError(f"{len(missing)} of {total} {what} listed in {path} are missing:\n  {shown}{more}")


def bundled_sample(name: str, filename: str, cache_dir: Path, write: Callable[[Path], str]) -> Path:
    """`<cache dir>/samples/<name>/<filename>`, generated on first use: `write(root)` writes the sample's images
    under root (root/images exists) and returns the data file's text, which is written last and atomically, so a
    data file that exists is complete."""
    root = sample_dir(name, cache_dir)
    path = root / filename
    if path.is_file():
        return path
    (root / "images").mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, write(root))
    return path


# ------------------------------------------------------------------------------------------------ run folders
def sample_log(run_dir: Path, results_file: Path, task: str) -> Path | None:
    """lmms-eval's `<stamp>_samples_<task>.jsonl` beside the results file, with the results file's own stamp; None
    when the run was made without --log_samples.  Never a log of another run: a folder can hold several runs (or
    `judged/` results), and a per-sample value is only this run's when the file is proven to be (the same stem)."""
    stem = results_file.name[: -len("results.json")]
    same = results_file.parent / f"{stem}samples_{task}.jsonl"
    return same if same.is_file() else None


def read_jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """Every non-blank line as JSON; a bad line raises DataError naming the file and its real line number."""
    return [row for _, row in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: Path) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line, numbered as an editor numbers them (blank lines count), so a
    message can point at the line a user must fix; a line that is not JSON raises DataError naming it.  Parsed
    once per `common.remembering()` block (the values are shared: do not change them)."""
    return list(once("jsonl", path, lambda: _read_jsonl_numbered(path)))


def _read_jsonl_numbered(path: Path) -> list[tuple[int, Any]]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            text = line.strip()
            if not text:
                continue
            try:
                out.append((n, json.loads(text)))
            except ValueError as exc:
                where = f" (column {exc.colno}: {exc.msg})" if isinstance(exc, json.JSONDecodeError) else ""
                raise DataError(f"{path} line {n}: not a JSON object{where}; the file may be truncated") from None
    return out


def read_sample_log(path: Path) -> list[dict[str, Any]]:
    """The lines of an lmms-eval sample log (`*_samples_<task>.jsonl`), each an object with a `doc_id` seen once.
    lmms-eval writes each doc once per task (its repeats live inside the line), so a doc_id on two lines is a
    log that was appended to or concatenated: a DataError naming the file and both lines, never a silent winner."""
    rows: list[dict[str, Any]] = []
    first: dict[str, int] = {}
    for n, row in read_jsonl_numbered(path):
        if not isinstance(row, dict) or "doc_id" not in row:
            raise DataError(f"{path} line {n}: not an lmms-eval sample line (a JSON object with a doc_id)")
        doc_id = row["doc_id"]
        key = json.dumps(doc_id, sort_keys=True)  # a doc_id is an int; a key that also takes anything JSON holds
        if key in first:
            raise DataError(
                f"{path} lines {first[key]} and {n}: doc_id {doc_id!r} is logged twice; lmms-eval writes each doc "
                "once per task, so this log was appended to or joined with another: rerun the task, or remove the "
                "lines that are not this run's"
            )
        first[key] = n
        rows.append(row)
    return rows


def sample_log_values(
    log: Path, values_of: Callable[[list[dict[str, Any]]], dict[str, dict[Any, float]]]
) -> dict[str, dict[Any, float]]:
    """`values_of` the lines of a sample log (`read_sample_log`), computed once per `common.remembering()` block: the
    report and the viewer of one command share them."""
    return once(("sample-values", values_of), log, lambda: values_of(read_sample_log(log)))


def sample_log_reader(values_of: Callable[[list[dict[str, Any]]], dict[str, dict[Any, float]]]) -> SampleReader:
    """A benchmark's `read_samples`: its per-sample values from a task's lmms-eval sample log, by
    `values_of(rows)` (the task's config is not needed)."""

    def read_samples(run_dir: Path, results_file: Path, task: str, config: dict[str, Any]) -> SampleValues:
        return read_sample_values(run_dir, results_file, task, values_of)

    return read_samples


def read_sample_values(
    run_dir: Path,
    results_file: Path,
    task: str,
    values_of: Callable[[list[dict[str, Any]]], dict[str, dict[Any, float]]],
) -> SampleValues:
    """A task's per-sample values from its lmms-eval sample log (`read_sample_log`: each doc once), by
    `values_of(rows)`; a missing log or one that cannot be read (a duplicated doc_id among its causes) costs the
    confidence intervals (a note saying so and why), never the report."""
    log = sample_log(run_dir, results_file, task)
    if log is None:
        return SampleValues(
            notes=[
                f"{task}: no per-sample log (*_samples_{task}.jsonl), so no confidence intervals; rerun lmms-eval "
                "with --log_samples --output_path DIR to get them"
            ]
        )
    try:
        values = sample_log_values(log, values_of)
    except Exception as exc:  # noqa: BLE001 - a bad or unmatched log costs the CIs, not the report
        return SampleValues(notes=[f"{task}: could not read per-sample values from {log.name} ({exc!r}); no CIs"])
    return SampleValues(values=values)


# ------------------------------------------------------------------------------------------------ media roots
def media_roots(
    env: Mapping[str, str],
    *,
    sample: str,
    folder: str,
    hub_variable: str,
    hub_default: str | None,
    variable: str = "",
) -> list[Path]:
    """The folders a benchmark's media may come from when a viewer shows a run (`emo-tasks view` places an image
    only from the run folder or from these): the bundled sample (`<cache>/samples/<sample>`), the data folder the
    environment names (`EMO_DATA_ROOT/<folder>`, the folder of the file `variable` names) and the Hub cache's
    folder of the dataset `hub_variable` names (its snapshots and the blobs they link to).  Why folders, not the
    data's file list: a run's images are named as lmms-eval logged them, and reading the data is not needed to
    show a run.  Nothing is downloaded or required to exist; a value that names nothing is left out."""
    roots = [sample_dir(sample, cache_dir(env))]
    if (env.get("EMO_DATA_ROOT") or "").strip():
        roots.append(Path(env["EMO_DATA_ROOT"].strip()).expanduser() / folder)
    if variable and (env.get(variable) or "").strip():
        roots.append(Path(env[variable].strip()).expanduser().parent)
    try:
        repo = hub_id(env, hub_variable, hub_default)
    except SettingsError:
        repo = None
    if repo:
        roots.append(hub_dataset_folder(repo))
    return roots


def hub_dataset_folder(repo_id: str) -> Path:
    """Where the Hugging Face cache keeps a dataset repository (`<HF_HUB_CACHE>/datasets--owner--name`: its
    snapshots, the blobs they link to, and what `mme_emotion.data` extracts beside them); nothing is downloaded."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / f"datasets--{repo_id.replace('/', '--')}"
