"""The provider's side of batch judging: upload a round's request files, create their batches, poll, download.

Through the openai SDK's Files and Batches endpoints (OpenAI, Azure OpenAI), with the SDK's own retries off: a
POST retried after a lost answer can upload a file or create a batch twice.  Instead every step is idempotent by
what the provider already holds: before uploading, a file of the same name (the name carries its content hash)
is adopted; before creating a batch, a batch of the same input file is.  Every id is written into the book before
the next step, so a process killed anywhere resumes without paying twice.

`cancel` is --batch-cancel: every batch still out is cancelled at the provider and waited for, and what it ran
is collected as an expired batch's is (paid for, so kept).

`collect_local` is the `vllm run-batch` path: the request files were written for the user to run, and the output
files are read from the folder they name.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .atomic import atomic_path
from .batch import BatchBook, BatchFile, read_output
from .batch_files import BYTES_PER_MB
from .config import EndpointConfig, JudgeConfigError
from .endpoint import failure_detail

#: statuses after which a batch never changes
TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})
#: the wait between polls grows by this factor up to POLL_MAX_S (or the first wait, when that is longer)
POLL_GROWTH = 1.5
POLL_MAX_S = 600.0
#: transient errors of one provider call are retried this many times (connection, 429, 5xx)
CALL_TRIES = 5


class BatchFailed(JudgeConfigError):
    """The provider refused a batch as a whole (status `failed`: an input it does not take, a quota)."""


class BatchAPI:
    """One endpoint's Files and Batches API, through the synchronous openai SDK client."""

    def __init__(self, endpoint: EndpointConfig, err: Any = None, sleep: Callable[[float], None] = time.sleep):
        self.endpoint = endpoint
        self.err = sys.stderr if err is None else err
        self.sleep = sleep
        self._client: Any = None
        self.uploaded = 0

    @property
    def client(self) -> Any:
        if self._client is None:
            import openai

            self.endpoint.check_usable()
            ep = self.endpoint
            if ep.api_type == "azure":
                self._client = openai.AzureOpenAI(
                    api_key=ep.api_key,
                    azure_endpoint=ep.base_url,
                    api_version=ep.api_version,
                    max_retries=0,
                    timeout=ep.timeout_s,
                )
            else:
                self._client = openai.OpenAI(
                    api_key=ep.api_key or "EMPTY", base_url=ep.base_url, max_retries=0, timeout=ep.timeout_s
                )
        return self._client

    def say(self, text: str) -> None:
        print(f"emo-tasks judge --batch: {text}", file=self.err, flush=True)

    def _call(self, what: str, fn: Callable[[], Any], done: Callable[[], Any] | None = None) -> Any:
        """One provider call, retried on a transient error (its own wait, as the engine's); others raise, named.
        `done()`, for a call that creates something, finds what an attempt whose answer was lost created: it is
        asked before each retry, and its find returned instead of creating a second one."""
        from .endpoint import classify_error, retry_delay

        for attempt in range(1, CALL_TRIES + 1):
            if attempt > 1 and done is not None:
                found = done()
                if found is not None:
                    return found
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified below
                reason, retryable, retry_after = classify_error(exc)
                if not retryable or attempt == CALL_TRIES:
                    raise JudgeConfigError(f"{what} failed at {self.endpoint.host}: "
                                           f"{failure_detail(exc, self.endpoint)}") from None  # fmt: skip
                self.sleep(retry_delay(self.endpoint, attempt, retry_after))
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ submit
    def upload_name(self, book: BatchBook, f: BatchFile) -> str:
        """The file's name at the provider: unique to the judged folder and the content (so it can be adopted)."""
        return f"emo-tasks-{book.tag}-{f.name}-{f.sha256[:16]}.jsonl"

    def submit(self, book: BatchBook) -> int:
        """Upload and submit every file of the book that has no batch yet; each id saved in the book at once.
        Returns the number of batches created."""
        made = 0
        for f in book.files:
            if f.collected or f.batch_id:
                continue
            if not f.file_id:
                resumed, f.upload_started = f.upload_started, True
                book.save()  # before the upload: a process killed during it finds the upload by name
                f.file_id = (self._adopt_file(book, f) if resumed else None) or self._upload(book, f)
                book.save()
                self.uploaded += 1
            resumed, f.create_started = f.create_started, True
            book.save()
            batch = self._adopt_batch(f) if resumed else None
            if batch is None:
                batch = self._call(f"creating the batch of {f.name}", lambda f=f: self.client.batches.create(
                    input_file_id=f.file_id, endpoint=book.url, completion_window="24h",
                    metadata={"emo_tasks": f"{book.tag}/{f.name}"},
                ), done=lambda f=f: self._adopt_batch(f))  # fmt: skip
                made += 1
            f.batch_id, f.status = batch.id, batch.status
            book.save()
            self.say(f"{f.name}: {f.requests} requests ({f.bytes / BYTES_PER_MB:.1f} MB) submitted as {f.batch_id}")
        return made

    def _adopt_file(self, book: BatchBook, f: BatchFile) -> str | None:
        """The id of a file this book uploaded before its id was saved (a crash right after the upload)."""
        name = self.upload_name(book, f)
        page = self._call("listing files", lambda: self.client.files.list(purpose="batch"))
        for item in page:
            if getattr(item, "filename", None) == name:
                return str(item.id)
        return None

    def _upload(self, book: BatchBook, f: BatchFile) -> str:
        path = book.request_path(f)
        if not path.exists():
            raise JudgeConfigError(f"{path}: the request file of {f.name} is gone and it was never uploaded; delete "
                                   f"{book.state_path} to start the batches afresh")  # fmt: skip
        name = self.upload_name(book, f)

        def upload() -> Any:
            with path.open("rb") as fh:
                return self.client.files.create(file=(name, fh, "application/jsonl"), purpose="batch")

        made = self._call(f"uploading {path.name}", upload, done=lambda: self._adopt_file(book, f))
        return made if isinstance(made, str) else str(made.id)

    def _adopt_batch(self, f: BatchFile) -> Any:
        """A batch already made of this file (a crash right after creating it, or a lost answer)."""
        page = self._call("listing batches", lambda: self.client.batches.list(limit=100))
        for item in page:
            if getattr(item, "input_file_id", None) == f.file_id:
                return item
        return None

    # ------------------------------------------------------------------ wait and collect
    def poll_once(self, book: BatchBook) -> list[BatchFile]:
        """Ask each batch not collected yet for its status once; collect those that ended.  Returns those still
        running."""
        running = []
        for f in book.uncollected():
            if not f.batch_id:
                running.append(f)
                continue
            batch = self._call(f"polling {f.batch_id}", lambda f=f: self.client.batches.retrieve(f.batch_id))
            counts = getattr(batch, "request_counts", None)
            new_counts = {k: int(getattr(counts, k, 0) or 0) for k in ("total", "completed", "failed")}
            if batch.status != f.status or new_counts != f.counts:
                f.status, f.counts = batch.status, new_counts
                self.say(f"{f.name} ({f.batch_id}): {f.status}, {new_counts['completed']} of "
                         f"{new_counts['total'] or f.requests} done, {new_counts['failed']} failed")  # fmt: skip
            if batch.status in TERMINAL:
                self._collect(book, f, batch)
            else:
                running.append(f)
        return running

    def wait(self, book: BatchBook) -> None:
        """Poll until every batch of the book ended (waits grow from --batch-poll), collecting each as it ends."""
        delay = book.options.poll_s
        while self.poll_once(book):
            self.sleep(delay)
            delay = min(max(POLL_MAX_S, book.options.poll_s), delay * POLL_GROWTH if delay else 0.0)

    def cancel(self, book: BatchBook) -> int:
        """--batch-cancel: cancel every batch of the book still out (one whose creation began is looked up
        first), drop the files never submitted, and wait until each cancelled batch ended, collecting what it ran
        (it is paid for: its answers are read as an expired batch's, the rest is sent again).  The book keeps every
        record.  Returns the number of cancels asked for."""
        self.poll_once(book)  # a batch that ended meanwhile is collected as it is
        asked = 0
        for f in book.uncollected():
            if not f.batch_id and f.create_started and f.file_id:
                found = self._adopt_batch(f)
                if found is not None:
                    f.batch_id, f.status = found.id, found.status
                    book.save()
            if not f.batch_id:  # no batch was made of it: nothing ran, nothing is charged
                book.drop(f)
                self.say(f"{f.name}: never submitted; dropped (its requests are sent again)")
                continue
            if f.cancel_requested:
                continue  # asked by an earlier command: its end is awaited below
            try:
                batch = self._call(f"cancelling {f.batch_id}", lambda f=f: self.client.batches.cancel(f.batch_id))
            except JudgeConfigError:  # a provider refuses to cancel a batch that just ended: collected below
                batch = self._call(f"polling {f.batch_id}", lambda f=f: self.client.batches.retrieve(f.batch_id))
                if batch.status not in TERMINAL:
                    raise
            f.cancel_requested, f.status = True, batch.status
            book.save()
            asked += 1
            self.say(f"{f.name} ({f.batch_id}): cancel asked ({batch.status}); what it ran so far is kept")
        self.wait(book)
        return asked

    def _collect(self, book: BatchBook, f: BatchFile, batch: Any) -> None:
        for attr, suffix, slot in (("output_file_id", "output", "output"), ("error_file_id", "errors", "errors")):
            file_id = getattr(batch, attr, None)
            if not file_id:
                continue
            target = book.outputs_dir / f"{f.name}.{suffix}.jsonl"
            data = self._call(f"downloading {file_id}", lambda fid=file_id: self.client.files.content(fid).read())
            with atomic_path(target) as tmp:
                tmp.write_bytes(data)
            setattr(f, slot, str(target.relative_to(book.folder)))
            setattr(f, attr, str(file_id))  # the provider's id, named if the file contradicts itself
        if batch.status == "failed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            said = "; ".join(_said(e) for e in errors[:3])
            f.failure = said or "the provider gave no reason"
        f.collected = True
        book.save()
        request = book.request_path(f)
        if request.exists() and f.file_id:  # uploaded and answered: the local copy is not needed any more
            request.unlink()


def _said(error: Any) -> str:
    """One of a failed batch's errors in a few words: its code, message and line."""
    line = getattr(error, "line", None)
    return f"{getattr(error, 'code', '')}: {getattr(error, 'message', '')}" + (f" (line {line})" if line else "")


def collect_local(book: BatchBook, results_dir: Path) -> list[BatchFile]:
    """`--batch-results DIR`: take the output file `vllm run-batch` wrote for each request file (<name>.output.jsonl
    beside it in DIR); returns the files whose output is not there yet."""
    missing = []
    for f in book.uncollected():
        src = Path(results_dir) / f"{f.name}.output.jsonl"
        if not src.exists():
            missing.append(f)
            continue
        read_output([src])  # a request answered twice, differently: refused before the copy is taken
        target = book.outputs_dir / f"{f.name}.output.jsonl"
        with atomic_path(target) as tmp:
            shutil.copyfile(src, tmp)
        f.output, f.status, f.collected = str(target.relative_to(book.folder)), "completed", True
    book.save()
    return missing


def local_commands(book: BatchBook, files: list[BatchFile]) -> list[str]:
    """What to run for each request file (vLLM's offline batch runner, one model per file)."""
    out = []
    for f in files:
        req = book.request_path(f)
        out.append(f"vllm run-batch -i {req} -o {req.with_name(f.name + '.output.jsonl')} --model {f.model}")
    return out
