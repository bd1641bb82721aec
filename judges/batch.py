"""Batch judging's book: which request went into which batch file, what came back, and what each answer became.

How a batched stage runs (`emo-tasks judge --batch`): the stage runs as it always does, in *passes*, with a book
active (`active`).  A request the cache does not answer goes to `BatchBook.resolve` instead of the endpoint:
- an answer a collected batch brought back is read, checked and cached exactly as the synchronous path does
  (`extract_answer`, the reasoning cut-off, the request's validator, `JudgeCache.put`), and returned;
- a request already in a batch not collected yet, or new (then written to this pass's request file), raises
  `BatchPending`: its row stops there, the other rows go on as far as they can.
A pass that ends with requests pending writes no results; the driver submits the files, waits, collects, and runs
the next pass, which finds the answers.  The pass in which nothing is pending is the synchronous stage over a
cache that holds every answer: the same validation, cache, judge logs and numbers, and a later synchronous rerun
sends nothing.  MME-Emotion's agents so become rounds (step agent, audio clue, judge) with no code of their own.

Why a book on disk (`state.json`, written atomically before anything is uploaded and after every id is known):
a crash, `kill -9` or a night between submit and collect must not upload, submit or pay twice.  An answer's
outcome is recorded per (request, batch file), so reading the same output file again counts nothing twice.
The book is read strictly (`read_state`): a damaged one is refused, naming what is wrong, and left as it is; it
records batches that are paid for.  A synchronous stage reads it too (`sync`): it refuses while batches are out,
and takes the answers of collected batches (a cancelled batch's finished lines) instead of sending them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from .atomic import atomic_write_text
from .batch_files import OPENAI_URL, BatchOptions, FilePlan, oversize, request_line, url_for
from .config import EndpointConfig, JudgeConfigError
from .endpoint import (
    DETAIL_CHARS,
    JudgeModelNotFound,
    classify_error,
    extract_answer,
    failure_detail,
    status_summary,
)
from .reasoning import cut_off
from .request import JudgeRequest, JudgeResult

SCHEMA = "emo-tasks/judge-batches/1"
STATE = "state.json"
#: how a line that never ran comes back (OpenAI's codes); such a line is sent again and counts as no try
UNRUN_CODES = frozenset({"batch_expired", "batch_cancelled", "batch_failed"})


class BatchPending(Exception):  # noqa: N818 - a signal, not an error
    """A request's answer is in a batch not answered yet: its row stops in this pass."""


class BatchStateError(JudgeConfigError):
    """The book on disk cannot be used (another endpoint's batches, a newer schema, a damaged file), or a batch's
    output contradicts itself: a refusal (`emo-tasks judge` exit 2), never a reason to drop the book."""


#: what a damaged book's refusal says to do (the book is never replaced: it records batches that are paid for)
DAMAGED = (
    "it is left as it is (it records batches that are paid for): restore or repair it, or move it away to start "
    "the batches afresh (a batch it records that is still out is then paid for again)"
)


@dataclass
class BatchFile:
    """One request file and, once submitted, its provider ids and what came back."""

    name: str
    round: int
    model: str
    requests: int
    bytes: int
    sha256: str = ""
    file_id: str | None = None
    batch_id: str | None = None
    #: the provider's status (validating ... completed / expired / failed / cancelled); "written" before submitting
    status: str = "written"
    counts: dict[str, int] = field(default_factory=dict)
    #: outputs/<name>.output.jsonl and .errors.jsonl once collected (paths relative to the book's folder)
    output: str | None = None
    errors: str | None = None
    collected: bool = False
    #: a failed batch: what the provider said
    failure: str | None = None
    #: the upload / the batch creation was begun (saved first): only then can the provider hold one we never heard of
    upload_started: bool = False
    create_started: bool = False
    #: --batch-cancel asked the provider to cancel it (or dropped it before it was submitted)
    cancel_requested: bool = False
    #: the provider's ids of the output and error files it was collected from (named when they contradict)
    output_file_id: str | None = None
    error_file_id: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchFile:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def origin(self) -> str:
        """Where its output came from at the provider (named when the output contradicts itself)."""
        ids = (("output file", self.output_file_id), ("error file", self.error_file_id), ("batch", self.batch_id))
        return ", ".join(f"{what} {value}" for what, value in ids if value)

    def label(self) -> str:
        """How a refusal names it: its batch id, or its file's name before it has one."""
        return self.batch_id or (f"{self.name} (id not recorded)" if self.create_started else self.name)


@dataclass
class _Open:
    plan: FilePlan
    name: str
    path: Path
    handle: Any
    digest: Any


class BatchBook:
    """The state of one judged folder's batches (`folder`/state.json) and the request files of the pass running."""

    def __init__(self, folder: Path, options: BatchOptions, endpoint: EndpointConfig) -> None:
        self.folder = Path(folder)
        self.options = options
        self.endpoint = endpoint
        self.mode = "files" if options.local else "api"
        self.requests_dir = Path(options.file_dir) if options.file_dir else self.folder / "requests"
        self.outputs_dir = self.folder / "outputs"
        #: who answered, as the cache and the judge logs record it (a host, or the offline runner)
        self.host = "vllm run-batch" if options.local else endpoint.host
        #: vLLM's runner answers only "/v1/chat/completions", whatever API the judge would be on
        self.url = OPENAI_URL if options.local else url_for(endpoint.api_type)
        self.files: list[BatchFile] = []
        #: key -> the name of the latest file the request went into
        self.submitted: dict[str, str] = {}
        #: key -> {file name: outcome} (ok, invalid, retry, unrun, failed)
        self.outcomes: dict[str, dict[str, str]] = {}
        #: key -> the failure result (as a dict) a request ended with
        self.failed: dict[str, dict[str, Any]] = {}
        #: keys to send directly (--batch-fallback sync)
        self.direct: set[str] = set()
        self.rounds = 0
        #: a pass wrote the results (the stage finished); the next command starts a new attempt at its failures
        self.finished = False
        #: a synchronous stage reads the book (`resolve`): collected answers are taken, nothing else waits
        self.sync = False
        #: names this folder's uploads (and their batches' metadata) at the provider
        self.tag = hashlib.sha256(str(self.folder.resolve()).encode()).hexdigest()[:12]
        self._load()
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}
        self._written: set[str] = set()
        self._closed: list[str] = []
        self._answers: dict[tuple[str, str], dict[str, Any]] = {}
        #: answers read in this pass, per cache, to store when it ends (`flush`)
        self._to_cache: dict[int, tuple[Any, list[tuple[Any, ...]]]] = {}
        #: requests waiting for a batch in this pass, and answers read from collected batches
        self.waiting: set[str] = set()
        self.answered = 0

    # ------------------------------------------------------------------ the state file
    @property
    def state_path(self) -> Path:
        return self.folder / STATE

    def _load(self) -> None:
        path = self.state_path
        doc = read_state(path)
        if doc is None:
            return
        if doc["mode"] != self.mode:
            raise BatchStateError(
                f"{path}: these batches went {'to the Batch API' if doc['mode'] == 'api' else 'to request files'}"
                f"; finish them the same way ({'--batch' if doc['mode'] == 'api' else '--batch-results DIR'})"
            )
        if (
            self.mode == "api"
            and doc.get("host") != self.endpoint.host
            and any(f.get("batch_id") and not f.get("collected") for f in doc["files"])
        ):
            raise BatchStateError(
                f"{path}: batches not collected yet were submitted to {doc.get('host')}, not {self.endpoint.host}; "
                "point OPENAI_BASE_URL (or AZURE_ENDPOINT) back at it to collect them"
            )
        self.files = [BatchFile.from_dict(f) for f in doc["files"]]
        self.submitted = dict(doc.get("submitted", {}))
        self.outcomes = {k: dict(v) for k, v in doc.get("outcomes", {}).items()}
        self.failed = dict(doc.get("failed", {}))
        self.direct = set(doc.get("direct", []))
        self.rounds = int(doc.get("rounds", 0))
        self.tag = str(doc.get("tag") or self.tag)
        self.finished = bool(doc.get("finished", False))

    @classmethod
    def existing(cls, folder: Path, endpoint: EndpointConfig, poll_s: float = 60.0) -> BatchBook | None:
        """The book in `folder` in the mode it was written in (a synchronous stage reads either), None when there
        is none.  Its request folder is not known here (`--batch-file DIR`): such a book writes no request file."""
        doc = read_state(Path(folder) / STATE)
        if doc is None:
            return None
        local = doc["mode"] == "files"
        return cls(folder, BatchOptions(poll_s=poll_s, file_dir=str(Path(folder) / "requests") if local else None),
                   endpoint)  # fmt: skip

    def save(self) -> None:
        """Write the book atomically (a reader, or the next process after a crash, sees the old one or this)."""
        doc = {
            "schema": SCHEMA,
            "mode": self.mode,
            "host": self.endpoint.host,
            "rounds": self.rounds,
            "tag": self.tag,
            "finished": self.finished,
            "files": [asdict(f) for f in self.files],
            "submitted": self.submitted,
            "outcomes": self.outcomes,
            "failed": self.failed,
            "direct": sorted(self.direct),
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.state_path, json.dumps(doc, indent=1, sort_keys=True))

    def retry_failures(self) -> int:
        """Forget the failures a finished stage ended with, so that running it again tries them again, as a
        synchronous stage run again resends its failures (until the stage finishes, a failure stays one: a
        resumed or --batch-submit-only command does not resend it).  Returns how many."""
        if not self.finished:
            return 0
        self.finished = False
        n = len(self.failed)
        for key in self.failed:
            self.submitted.pop(key, None)
            self.outcomes.pop(key, None)
        self.failed = {}
        return n

    def file(self, name: str) -> BatchFile | None:
        return next((f for f in self.files if f.name == name), None)

    def uncollected(self) -> list[BatchFile]:
        return [f for f in self.files if not f.collected]

    def pending(self) -> list[BatchFile]:
        """The files whose answers may still come: a batch submitted (or whose creation began: the provider may
        hold it) and not collected; in files mode, every request file not read back yet."""
        if self.mode == "files":
            return self.uncollected()
        return [f for f in self.uncollected() if f.batch_id or f.create_started]

    def drop(self, f: BatchFile) -> None:
        """--batch-cancel of a file no batch was made of (nothing ran, nothing is charged): recorded as cancelled
        and collected, so its requests are sent again (as a cancelled batch's unrun lines) and it is never
        submitted later."""
        f.status, f.collected, f.cancel_requested = "cancelled", True, True
        self.save()

    # ------------------------------------------------------------------ a pass
    def begin_pass(self) -> None:
        """Read every collected output (request key -> its line, per file) and forget the last pass's files."""
        self._answers = {}
        for f in self.files:
            if f.collected:
                paths = [self.folder / rel for rel in (f.output, f.errors) if rel]
                for cid, line in read_output(paths, f.origin()).items():
                    self._answers[(cid, f.name)] = line
        self._open, self._written, self._closed = {}, set(), []
        self.waiting, self.answered = set(), 0
        if self.requests_dir.exists():
            for stale in self.requests_dir.glob("*.jsonl.part"):  # a pass a crash stopped: never submitted
                stale.unlink()

    async def resolve(self, engine: Any, key: str, req: JudgeRequest) -> JudgeResult | None:
        """What a request the cache did not answer becomes in this pass: its result (an answer a batch brought,
        checked and cached; or the failure it ended with), None to send it directly, or `BatchPending`."""
        if self.sync:  # a synchronous stage: a collected answer is read; the rest is sent directly
            name = self.submitted.get(key)
            line = self._answers.get((key, name)) if name is not None and key not in self.failed else None
            return None if line is None else await self._read(engine, key, req, name, line)
        if key in self.failed:
            return JudgeResult(**self.failed[key])
        name = self.submitted.get(key)
        if name is not None:
            line = self._answers.get((key, name))
            if line is not None:
                res = await self._read(engine, key, req, name, line)
                if res is not None:
                    return res
            elif self._collected(name):  # never ran (a failed or cancelled batch): sent again, no try counted
                self.outcomes.setdefault(key, {})[name] = "unrun"
            else:
                self.waiting.add(key)
                raise BatchPending(key)
        if key in self.direct:
            return None
        await self._write(key, req)
        self.waiting.add(key)
        raise BatchPending(key)

    async def resolve_many(self, engine: Any, items: list[tuple[str, JudgeRequest]]) -> dict[str, JudgeResult]:
        """`resolve` for a batch of requests (`JudgeEngine.run`): the results it has, by key (a request missing
        is sent directly); `BatchPending` once every request was seen, when any waits, so all go into this round."""
        out: dict[str, JudgeResult] = {}
        waiting: BatchPending | None = None
        for key, req in items:
            try:
                res = await self.resolve(engine, key, req)
            except BatchPending as exc:
                waiting = waiting or exc
                continue
            if res is not None:
                out[key] = res
        if waiting is not None:
            raise waiting
        return out

    def _collected(self, name: str) -> bool:
        f = self.file(name)
        return f is None or f.collected  # a file the book forgot (never saved) is as good as unrun

    async def _read(self, engine: Any, key: str, req: JudgeRequest, name: str, line: dict[str, Any]) -> Any:
        """An output line as the synchronous path would take the HTTP answer; None when it is to be sent again."""
        ep: EndpointConfig = engine.endpoint
        model = req.resolved_model()
        seen = self.outcomes.setdefault(key, {})
        tries = sum(1 for o in seen.values() if o in ("ok", "invalid", "retry", "failed")) + (name not in seen)
        base = dict(key=key, model=model, tries=tries)
        error = line.get("error")
        response = line.get("response") or {}
        status = int(response.get("status_code") or 0)
        if isinstance(error, dict) and error.get("code") in UNRUN_CODES:  # never ran: no try is counted
            seen[name] = "unrun"
            return self._again(key)
        body = response.get("body")
        try:
            if status != 200 or error:
                raise _status_error(status, body if body is not None else _error_body(error))
            text, p_tok, c_tok, api_model, finish = extract_answer(body if body is not None else b"")
        except Exception as exc:  # noqa: BLE001 - classified as the synchronous path classifies it
            reason, retryable, _ = classify_error(exc)
            if reason == "model_not_found":
                raise JudgeModelNotFound(req.role, model, self.host, status_summary(exc)) from None
            detail = failure_detail(exc, ep)
            if retryable and tries < ep.max_tries:
                seen[name] = "retry"
                return self._again(key, retryable=True)
            seen[name] = "failed"
            return self._fail(JudgeResult(ok=False, text=None, error=reason, detail=detail, **base))
        if cut_off(text, finish):
            seen[name] = "failed"
            detail = f"cut off inside its reasoning (finish_reason {finish})"
            return self._fail(JudgeResult(ok=False, text=text, error="truncated", detail=detail, **base))
        reason = req.validate(text) if req.validate is not None else None
        if reason:
            seen[name] = "invalid"
            if sum(1 for o in seen.values() if o == "invalid") <= ep.invalid_retries:
                return self._again(key, retryable=True)
            res = JudgeResult(ok=False, text=text, error="invalid_answer", detail=reason[:DETAIL_CHARS], **base)
            return self._fail(res)
        seen[name] = "ok"
        cache = engine.cache
        if cache is not None:  # cached at the pass's end, in one transaction (`flush`)
            self._to_cache.setdefault(id(cache), (cache, []))[1].append(
                (key, model, text, p_tok, c_tok, req.summary(), api_model, self.host)
            )
        self.answered += 1
        return JudgeResult(ok=True, text=text, prompt_tokens=p_tok, completion_tokens=c_tok, api_model=api_model,
                           endpoint=self.host, **base)  # fmt: skip

    def _again(self, key: str, retryable: bool = False) -> None:
        """The request goes out again: in the next batch, or directly with --batch-fallback sync."""
        if retryable and self.options.fallback == "sync":
            self.direct.add(key)
        return None

    def _fail(self, res: JudgeResult) -> JudgeResult:
        self.failed[res.key] = res.to_dict()
        return res

    async def _write(self, key: str, req: JudgeRequest) -> None:
        """Add the request to this pass's file for its model (once per pass), as the synchronous path would POST
        it."""
        if key in self._written:
            return
        self._written.add(key)
        await req.media_ready()
        messages = await asyncio.to_thread(req.render_messages)
        model = req.resolved_model()
        line = request_line(key, {"messages": messages, "model": model, **req.payload_params()}, self.url)
        with self._lock:
            self._append(model, line)
            self.submitted[key] = self._open[model].name

    def _append(self, model: str, line: bytes) -> None:
        limits = self.options.limits
        if len(line) > limits.max_bytes:
            raise JudgeConfigError(oversize(model, len(line), limits))
        cur = self._open.get(model)
        full = cur is not None and (
            cur.plan.requests + 1 > limits.max_requests or cur.plan.bytes + len(line) > limits.max_bytes
        )
        if cur is not None and full:
            self._close(cur)
            cur = None
        if cur is None:
            n = sum(1 for f in self.files if f.round == self.rounds + 1 and f.model == model) + 1
            name = f"r{self.rounds + 1}-{_slug(model)}-{n}"
            self.requests_dir.mkdir(parents=True, exist_ok=True)
            path = self.requests_dir / f"{name}.jsonl.part"
            cur = self._open[model] = _Open(FilePlan(model), name, path, path.open("wb"), hashlib.sha256())
        cur.handle.write(line)
        cur.digest.update(line)
        cur.plan.requests += 1
        cur.plan.bytes += len(line)

    def _close(self, cur: _Open) -> None:
        cur.handle.close()
        os.replace(cur.path, cur.path.with_name(f"{cur.name}.jsonl"))
        self._closed.append(cur.name)
        self.files.append(
            BatchFile(cur.name, self.rounds + 1, cur.plan.model, cur.plan.requests, cur.plan.bytes,
                      cur.digest.hexdigest())
        )  # fmt: skip
        if self._open.get(cur.plan.model) is cur:
            del self._open[cur.plan.model]

    def flush(self) -> None:
        """Cache the answers this pass read (before the next pass looks them up)."""
        pending, self._to_cache = self._to_cache, {}
        for cache, rows in pending.values():
            cache.put_many(rows)

    def end_pass(self) -> list[BatchFile]:
        """Close this pass's request files and record them (a new round when there are any); the answers it read
        cached; the book saved."""
        self.flush()
        for cur in list(self._open.values()):
            self._close(cur)
        new = [f for f in self.files if f.name in self._closed]
        self._closed = []
        if new:
            self.rounds += 1
        self.save()
        return new

    def abort_pass(self) -> None:
        """A pass that raised: its request files were never submitted; they and their keys are dropped (the answers
        it read are good: cached)."""
        self.flush()
        for cur in list(self._open.values()):
            cur.handle.close()
            cur.path.unlink(missing_ok=True)
        self._open = {}
        for key in self._written:
            if self.submitted.get(key) is not None and self.file(self.submitted[key]) is None:
                del self.submitted[key]

    def request_path(self, f: BatchFile) -> Path:
        return self.requests_dir / f"{f.name}.jsonl"


def _kind(value: Any) -> str:
    """A JSON value's kind, as a refusal names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


#: a book entry's fields: (required?, the types it may hold, how a refusal says them)
_STR: tuple[tuple[type, ...], str] = ((str,), "a string")
_OPT_STR: tuple[tuple[type, ...], str] = ((str, type(None)), "a string or null")
_INT: tuple[tuple[type, ...], str] = ((int,), "a whole number")
_BOOL: tuple[tuple[type, ...], str] = ((bool,), "true or false")
_FILE_FIELDS: dict[str, tuple[bool, tuple[tuple[type, ...], str]]] = {
    "name": (True, _STR), "round": (True, _INT), "model": (True, _STR), "requests": (True, _INT),
    "bytes": (True, _INT), "sha256": (False, _STR), "file_id": (False, _OPT_STR), "batch_id": (False, _OPT_STR),
    "status": (False, _STR), "counts": (False, ((dict,), "an object")), "output": (False, _OPT_STR),
    "errors": (False, _OPT_STR), "collected": (False, _BOOL), "failure": (False, _OPT_STR),
    "upload_started": (False, _BOOL), "create_started": (False, _BOOL), "cancel_requested": (False, _BOOL),
    "output_file_id": (False, _OPT_STR), "error_file_id": (False, _OPT_STR),
}  # fmt: skip
_RESULT_FIELDS = {f.name for f in fields(JudgeResult)}


def _typed(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def read_state(path: Path) -> dict[str, Any] | None:
    """The book at `path`, read strictly (None when there is none): every part `BatchBook` uses is there and of its
    type, or BatchStateError names the file, what is wrong and what to do (one line).  Nothing here writes."""
    if not path.exists():
        return None

    def bad(what: str) -> BatchStateError:
        return BatchStateError(f"{path}: {what}; {DAMAGED}")

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BatchStateError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise bad(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise bad(f"holds {_kind(doc)}, not the batch book's object")
    if doc.get("schema") != SCHEMA:
        raise BatchStateError(f"{path}: schema {doc.get('schema')!r}, this version reads {SCHEMA}; {DAMAGED}")
    if doc.get("mode") not in ("api", "files"):
        raise bad(f"'mode' is {doc.get('mode')!r}, not 'api' or 'files'")
    files = doc.get("files")
    if not isinstance(files, list):
        raise bad(f"'files' is {_kind(files)}, not a list of batch files")
    for i, entry in enumerate(files):
        if not isinstance(entry, dict):
            raise bad(f"files[{i}] is {_kind(entry)}, not a batch file's object")
        name = entry.get("name") if isinstance(entry.get("name"), str) else "?"
        for key, (required, (types, said)) in _FILE_FIELDS.items():
            if key not in entry:
                if required:
                    raise bad(f"files[{i}] ({name}) has no {key!r}")
            elif not _typed(entry[key], types):
                raise bad(f"files[{i}] ({name}): {key!r} is {_kind(entry[key])}, not {said}")
    names = [f["name"] for f in files]
    if len(set(names)) != len(names):
        raise bad(f"the file {next(n for n in names if names.count(n) > 1)!r} is recorded twice")
    for key, inner, said in (("submitted", str, "file names"), ("outcomes", dict, "outcomes per file"),
                             ("failed", dict, "failures")):  # fmt: skip
        value = doc.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, inner) for v in value.values()):
            raise bad(f"{key!r} is {_kind(value)}, not an object of {said} by request")
    if not all(all(isinstance(o, str) for o in per.values()) for per in doc.get("outcomes", {}).values()):
        raise bad("'outcomes' holds an outcome that is not a string")
    for k, res in doc.get("failed", {}).items():
        if not {"ok", "text", "key", "model"} <= set(res) or not set(res) <= _RESULT_FIELDS:
            raise bad(f"failed[{k[:16]}...] is not a judge result")
    direct = doc.get("direct", [])
    if not isinstance(direct, list) or not all(isinstance(k, str) for k in direct):
        raise bad(f"'direct' is {_kind(direct)}, not a list of request keys")
    for key, (types, said) in (("rounds", _INT), ("finished", _BOOL), ("tag", _OPT_STR), ("host", _OPT_STR)):
        if key in doc and not _typed(doc[key], types):
            raise bad(f"{key!r} is {_kind(doc[key])}, not {said}")
    return doc


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:60] or "model"


def _read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their line numbers (a line that is not one is skipped: an output file
    is the provider's)."""
    if not path.exists():
        return
    with path.open("rb") as fh:
        for no, raw in enumerate(fh, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield no, obj


class BatchOutputError(BatchStateError):
    """A batch's output names a request twice with different content: which answer is the judge's is unknown."""


def read_output(paths: list[Path], where: str = "") -> dict[str, dict[str, Any]]:
    """custom_id -> its line, over one batch's output (and error) files.  A line repeated word for word is taken
    once; the same custom_id with different content raises BatchOutputError naming the file and the id (the last
    one read must not silently win: it would change a score)."""
    out: dict[str, dict[str, Any]] = {}
    seen: dict[str, tuple[Path, int]] = {}
    for path in paths:
        for no, line in _read_lines(path):
            cid = line.get("custom_id")
            if not isinstance(cid, str):
                continue
            if cid in out and out[cid] != line:
                first, first_no = seen[cid]
                at = f"line {first_no}" if first == path else f"line {first_no} of {first}"
                raise BatchOutputError(
                    f"{path}{f' ({where})' if where else ''}: custom_id {cid} comes back twice with different "
                    f"content ({at} and line {no}), so which answer the judge gave is unknown; keep the one right "
                    "line (or delete both to send that request again), then run the same command"
                )
            out[cid] = line
            seen.setdefault(cid, (path, no))
    return out


def _error_body(error: Any) -> dict[str, Any]:
    """An output line's `error` as an HTTP error body: vLLM puts its failures there (a dict, or a string), not in
    `response.body`."""
    if isinstance(error, dict):
        return error if isinstance(error.get("error"), dict) else {"error": error}
    return {"error": {"message": str(error)}}


def _status_error(status: int, body: Any) -> Exception:
    """An output line's non-200 response as the SDK would raise it for the same HTTP answer (so `classify_error`
    names it as the synchronous path does)."""
    import httpx
    import openai

    err = body.get("error") if isinstance(body, dict) else None
    message = (err or {}).get("message") if isinstance(err, dict) else None
    response = httpx.Response(status or 500, json=body, request=httpx.Request("POST", "https://batch.invalid/v1"))
    return openai.APIStatusError(str(message or f"HTTP {status}"), response=response, body=err)


#: the book of the stage running in this process (`active`), consulted by the engine on every cache miss
_ACTIVE: BatchBook | None = None


def active() -> BatchBook | None:
    return _ACTIVE


@contextlib.contextmanager
def activated(book: BatchBook, linger: bool = True) -> Iterator[BatchBook]:
    """Make `book` the process's batch book while the block runs (one batched stage per process).  `linger`: the
    next round's frames render while the client waits for this one (a synchronous stage has no next round)."""
    from . import frames

    global _ACTIVE
    if _ACTIVE is not None:
        raise RuntimeError("a batched judge stage is already running in this process")
    _ACTIVE = book
    frames.linger(linger)
    try:
        yield book
    finally:
        _ACTIVE = None
        frames.linger(False)
