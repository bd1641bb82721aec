"""Cached judge answers copied out of a `JudgeCache` into a file, and back into another cache.

Why: a dated judge model (`gpt-4o-2024-11-20`, ...) is shut down one day; after that the answer cache is the only
copy of its verdicts.  A cache file is a machine's, mixed with every other run's answers; this file carries
exactly the answers one result needs, so it can sit beside the run and travel with it.  Re-judging with the
imported answers sends nothing (`JudgeEngine` looks the cache up before anything is sent).

The file (`FORMAT`) is gzip-compressed JSON lines (plain JSON lines are read too): a header line, one line per
answer, and an end line with the count and a digest over every answer line.  Each answer line carries its own
sha256 over its other fields, so a damaged line is named by number; a cut-off file has no end line and is
refused.  The cache key itself cannot be recomputed from a line (it is a hash of the whole request, media
included, and the cache keeps only a short summary of it): keys are checked for their form, the content by the
line's digest.  Nothing secret is in a cache row (key hash, model names, answer, token usage, a request summary
without keys, the endpoint's host); the API keys set in the environment are looked for in every line anyway, both
ways, and a line holding one is refused.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .atomic import atomic_path
from .cache import CACHE_FILENAME, READ_OBSERVERS, JudgeCache

FORMAT = "emo-judges/answer-cache/1"
#: The fields of one answer line, besides its own `sha256`: the cache row as stored.
ENTRY_FIELDS = ("key", "model", "text", "prompt_tokens", "completion_tokens", "created", "summary", "api_model",
                "endpoint")  # fmt: skip
_KEY = re.compile(r"[0-9a-f]{64}")


class TransferError(ValueError):
    """A cache file that cannot be read or trusted; the message names the file (and the line) and what to do."""


@contextlib.contextmanager
def recorded_reads() -> Iterator[set[str]]:
    """The keys every answer cache of this process finds while inside (what a re-judge reads from the cache)."""
    found: set[str] = set()
    lock = threading.Lock()

    def observe(keys: Iterable[str]) -> None:
        with lock:
            found.update(keys)

    READ_OBSERVERS.append(observe)
    try:
        yield found
    finally:
        READ_OBSERVERS.remove(observe)


def cache_file(cache: str | Path) -> Path:
    """The SQLite file of a cache folder (`JudgeCache`'s rule: a folder, or a name without a suffix, holds
    `judge_cache.sqlite3`)."""
    path = Path(cache)
    return path / CACHE_FILENAME if path.is_dir() or path.suffix == "" else path


def read_rows(cache: str | Path, keys: Iterable[str]) -> list[dict[str, Any]]:
    """The cache rows of `keys` (those present), each as an answer line's fields, sorted by key; the cache is
    opened read-only (a running judge may share it)."""
    path = cache_file(cache)
    if not path.is_file():
        raise TransferError(f"{path}: no judge answer cache there (set --cache / EMO_CACHE_DIR to the folder)")
    wanted = sorted(set(keys))
    rows: list[dict[str, Any]] = []
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    try:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            got = conn.execute(
                f"SELECT {', '.join(ENTRY_FIELDS)} FROM answers WHERE key IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            for row in got:
                entry = dict(zip(ENTRY_FIELDS, row, strict=True))
                entry["summary"] = json.loads(entry["summary"]) if entry["summary"] else None
                rows.append(entry)
    except sqlite3.Error as exc:
        raise TransferError(f"{path}: the judge answer cache cannot be read ({exc})") from exc
    finally:
        conn.close()
    return sorted(rows, key=lambda r: r["key"])


def entry_digest(entry: Mapping[str, Any]) -> str:
    """sha256 of an answer line's fields (its own `sha256` left out), over their canonical JSON."""
    body = {k: entry.get(k) for k in ENTRY_FIELDS}
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _check_secrets(line: str, secrets: Sequence[str], where: str) -> None:
    for secret in secrets:
        if secret and secret in line:
            raise TransferError(f"{where}: holds the value of an API key set in the environment; refused (nothing "
                                "with a key is written or imported)")  # fmt: skip


def write_file(
    path: str | Path, rows: Sequence[Mapping[str, Any]], about: Mapping[str, Any], secrets: Sequence[str] = ()
) -> dict[str, Any]:
    """Write `rows` (`read_rows`' entries) to a cache file at `path` (gzip when it ends in .gz), atomically;
    `about`: what the header says of where they come from.  Returns the end line."""
    path = Path(path)
    digest = hashlib.sha256()
    lines = [json.dumps({"format": FORMAT, **about}, sort_keys=True, ensure_ascii=False)]
    for row in rows:
        entry = {k: row.get(k) for k in ENTRY_FIELDS}
        entry["sha256"] = entry_digest(entry)
        digest.update(entry["sha256"].encode())
        line = json.dumps(entry, sort_keys=True, ensure_ascii=False)
        _check_secrets(line, secrets, f"answer {entry['key']}")
        lines.append(line)
    end = {"end": FORMAT, "entries": len(rows), "sha256": digest.hexdigest()}
    lines.append(json.dumps(end, sort_keys=True))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    with atomic_path(path) as tmp:
        if path.name.endswith(".gz"):
            with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
                gz.write(data)
        else:
            Path(tmp).write_bytes(data)
    return end


def _open_text(path: Path) -> IO[str]:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115


@dataclass
class CacheFile:
    """A read and checked cache file: its header and its answers, in file order."""

    path: Path
    header: dict[str, Any]
    entries: list[dict[str, Any]] = field(default_factory=list)


def read_file(path: str | Path, secrets: Sequence[str] = ()) -> CacheFile:
    """Read and check a cache file: the header's format, each answer line's fields, form and digest, no key twice
    with different answers, the end line's count and digest.  Any fault is a TransferError naming the line."""
    path = Path(path)
    try:
        with _open_text(path) as f:
            lines = f.read().splitlines()
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as exc:
        raise TransferError(f"{path}: not a readable cache file ({exc}); export it again") from exc
    if not lines:
        raise TransferError(f"{path}: empty; not a cache file written by `emo-tasks cache export`")
    header = _json_line(path, 1, lines[0])
    if header.get("format") != FORMAT:
        raise TransferError(f"{path} line 1: not a judge answer cache file (format {header.get('format')!r}, "
                            f"expected {FORMAT!r})")  # fmt: skip
    out = CacheFile(path, header)
    digest = hashlib.sha256()
    seen: dict[str, tuple[int, str]] = {}
    end: dict[str, Any] | None = None
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        if end is not None:
            raise TransferError(f"{path} line {n}: text after the end line (line {end['_line']}); the file was "
                                "joined or damaged, export it again")  # fmt: skip
        obj = _json_line(path, n, line)
        if "end" in obj:
            end = {**obj, "_line": n}
            continue
        _check_secrets(line, secrets, f"{path} line {n}")
        entry = _check_entry(path, n, obj)
        digest.update(entry["sha256"].encode())
        first = seen.get(entry["key"])
        if first is not None and first[1] != entry["sha256"]:
            raise TransferError(f"{path} line {n}: key {entry['key']} is in the file twice with different answers "
                                f"(lines {first[0]} and {n})")  # fmt: skip
        if first is None:
            seen[entry["key"]] = (n, entry["sha256"])
            out.entries.append(entry)
    if end is None:
        raise TransferError(f"{path}: no end line after line {len(lines)}: the file is cut off (an interrupted copy?);"
                            " copy or export it again")  # fmt: skip
    counted = len(lines) - 2 - sum(1 for x in lines[1:] if not x.strip())
    if end.get("entries") != counted or end.get("sha256") != digest.hexdigest():
        raise TransferError(f"{path} line {end['_line']}: the end line says {end.get('entries')} answers and digest "
                            f"{str(end.get('sha256'))[:12]}..., the file holds {counted} with digest "
                            f"{digest.hexdigest()[:12]}...: lines were added or removed; export it again")  # fmt: skip
    return out


def _json_line(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise TransferError(f"{path} line {n}: not JSON ({exc}); the file is damaged, export it again") from None
    if not isinstance(obj, dict):
        raise TransferError(f"{path} line {n}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _check_entry(path: Path, n: int, obj: Mapping[str, Any]) -> dict[str, Any]:
    where = f"{path} line {n}"
    missing = [k for k in (*ENTRY_FIELDS, "sha256") if k not in obj]
    if missing:
        raise TransferError(f"{where}: an answer line without {', '.join(missing)}")
    if not isinstance(obj["key"], str) or not _KEY.fullmatch(obj["key"]):
        raise TransferError(f"{where}: key {str(obj['key'])[:80]!r} is not a cache key (64 hex digits)")
    if not isinstance(obj["model"], str) or not obj["model"] or not isinstance(obj["text"], str):
        raise TransferError(f"{where}: model and text must be strings (key {obj['key']})")
    for name in ("prompt_tokens", "completion_tokens"):
        if not isinstance(obj[name], int) or isinstance(obj[name], bool) or obj[name] < 0:
            raise TransferError(f"{where}: {name} {obj[name]!r} is not a count (key {obj['key']})")
    if entry_digest(obj) != obj["sha256"]:
        raise TransferError(f"{where}: the answer of key {obj['key']} does not match its sha256 (changed after "
                            "export); the file is damaged, export it again")  # fmt: skip
    return {k: obj[k] for k in (*ENTRY_FIELDS, "sha256")}


@dataclass
class ImportReport:
    """What an import did: answers added, already there (the same answer), and conflicts (the cache holds another
    answer under the key: `(key, model, cache's text, file's text)`), kept as the cache had them."""

    added: int = 0
    same: int = 0
    conflicts: list[tuple[str, str, str, str]] = field(default_factory=list)


class ImportConflict(TransferError):
    """The cache holds other answers under keys of the file; nothing was imported (`report` says which)."""

    def __init__(self, message: str, report: ImportReport) -> None:
        super().__init__(message)
        self.report = report


def import_entries(
    cache: JudgeCache, entries: Sequence[Mapping[str, Any]], keep_existing: bool = False
) -> ImportReport:
    """Put checked answers into `cache` in one transaction.  A key the cache already holds with the same model and
    text is left as it is; with another answer it is a conflict: refused, nothing written (ImportConflict), or,
    `keep_existing`, the cache's answer kept and the rest imported."""
    report = ImportReport()
    have = cache.get_many(e["key"] for e in entries)
    new = []
    for e in entries:
        old = have.get(e["key"])
        if old is None:
            new.append(e)
        elif old.model == e["model"] and old.text == e["text"]:
            report.same += 1
        else:
            report.conflicts.append((e["key"], e["model"], old.text, e["text"]))
    if report.conflicts and not keep_existing:
        raise ImportConflict(f"{len(report.conflicts)} answer(s) of the file differ from the ones the cache holds "
                             "under the same key; nothing was imported", report)  # fmt: skip
    report.added = cache.put_many(
        (e["key"], e["model"], e["text"], e["prompt_tokens"], e["completion_tokens"], e["summary"], e["api_model"],
         e["endpoint"]) for e in new
    )  # fmt: skip
    return report


def holdings(cache: str | Path, keys: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """What a cache holds per (model, role): {"model", "role", "verdicts", "first", "last"} (the times its answers
    were stored, Unix seconds), sorted by model and role; only `keys` when given.  The role is the one the request
    summary records (None for a row without one).  Opened read-only: a running judge may share it.  Why: before a
    judge model shuts down, a user sees which paid verdicts to export (`emo-tasks cache list`)."""
    path = cache_file(cache)
    if not path.is_file():
        raise TransferError(f"{path}: no judge answer cache there (set --cache / EMO_CACHE_DIR to the folder)")
    wanted = None if keys is None else sorted(set(keys))
    groups: dict[tuple[str, str | None], dict[str, Any]] = {}
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    try:
        chunks = [None] if wanted is None else [wanted[i : i + 500] for i in range(0, len(wanted), 500)]
        for chunk in chunks:
            where = "" if chunk is None else f" WHERE key IN ({','.join('?' * len(chunk))})"
            rows = conn.execute(
                "SELECT model, json_extract(summary, '$.role'), COUNT(*), MIN(created), MAX(created) FROM answers"
                f"{where} GROUP BY 1, 2",
                chunk or [],
            ).fetchall()
            for model, role, n, first, last in rows:
                g = groups.setdefault((model, role), {"model": model, "role": role, "verdicts": 0, "first": first,
                                                      "last": last})  # fmt: skip
                g["verdicts"] += int(n)
                g["first"], g["last"] = min(g["first"], first), max(g["last"], last)
    except sqlite3.Error as exc:
        raise TransferError(f"{path}: the judge answer cache cannot be read ({exc})") from exc
    finally:
        conn.close()
    return [groups[k] for k in sorted(groups, key=lambda k: (k[0], k[1] or ""))]
