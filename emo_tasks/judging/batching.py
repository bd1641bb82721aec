"""`emo-tasks judge --batch`: the judge stage through a provider's Batch API, or files for `vllm run-batch`.

The stage itself does not change: it runs in passes with a batch book active (`judges.batch`), and every request
the cache does not answer waits for a batch instead of going out.  Between passes this driver submits the pass's
request files (`judges.batch_api.BatchAPI.submit`), waits for them (or exits 5 with --batch-submit-only / after
writing files for vLLM), and collects what came back; the next pass reads it.  The pass in which nothing waits
writes the results, as a synchronous stage would.  Why passes and not a batch pipeline of its own: the answers
then go through the one validation, cache and judge log the synchronous stage has, and MME-Emotion's agents
become rounds (step agent -> audio clue -> judge) by themselves.

Without --batch the stage still reads the folder's book (`judge_with_book`): while batches are out it refuses
(exit 2: their answers are paid for, a synchronous stage would pay again), `--batch-cancel` cancels them at the
provider first; a collected batch's answers are read, not sent again.  A book that cannot be read (damaged, another
endpoint's, a newer schema) or a batch output that contradicts itself is a refusal too, and the book is left as
it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from emo_tasks.judging.stage_types import EXIT_ERROR, EXIT_PENDING, StageError, StageRefused
from emo_tasks.results import layout

#: how many batches a refusal names
NAMED = 5


def judge_with_book(
    run_pass: Callable[[], int],
    out_dir: Path,
    env: Mapping[str, str],
    options: Any,
    err: Any,
    cancel: float | None = None,
) -> int:
    """The stage over the judged folder's batch book: in batches (`options`, --batch / --batch-file /
    --batch-results), else synchronously (`judge_sync`).  `cancel` (--batch-cancel; the seconds before the first
    poll of a cancelled batch, --batch-poll): the batches still out are cancelled first.  A book or an output
    that cannot be used is StageRefused (exit 2), naming the file."""
    from judges.batch import BatchStateError

    try:
        if options is None:
            return judge_sync(run_pass, out_dir, env, err, cancel)
        return judge_in_batches(run_pass, out_dir, env, options, err, cancel is not None)
    except BatchStateError as exc:
        raise StageRefused(str(exc)) from None


def judge_sync(
    run_pass: Callable[[], int], out_dir: Path, env: Mapping[str, str], err: Any, cancel: float | None = None
) -> int:
    """A synchronous stage in a folder with a batch book: refused while batches are out (unless `cancel`), then
    run with the book read for answers collected batches brought (never sent again); no book, just `run_pass`."""
    from judges.batch import STATE, BatchBook, activated
    from judges.batch_api import BatchAPI
    from judges.config import EndpointConfig

    folder = out_dir / layout.BATCH_DIR
    book = BatchBook.existing(folder, EndpointConfig.from_env(env), poll_s=cancel or 0.0) if (
        folder / STATE).exists() else None  # fmt: skip
    if book is None:
        if cancel is not None:
            print(f"emo-tasks judge: --batch-cancel: no batch book in {folder}; nothing to cancel", file=err)
        return run_pass()
    pending = book.pending()
    if pending and cancel is None:
        raise StageRefused(pending_refusal(book, pending))
    if pending and book.mode == "api":
        try:
            BatchAPI(book.endpoint, err).cancel(book)
        except KeyboardInterrupt:
            return _interrupted(lambda t: print(f"emo-tasks judge --batch-cancel: {t}", file=err, flush=True))
    for f in book.pending():  # request files for `vllm run-batch`: nothing at a provider, dropped
        book.drop(f)
    book.sync = True
    with activated(book, linger=False):
        book.begin_pass()
        try:
            code = run_pass()
        except BaseException:
            book.abort_pass()
            raise
        book.finished = True
        book.end_pass()
    return code


def pending_refusal(book: Any, pending: list[Any]) -> str:
    """The one line a synchronous stage refuses with while batches are out."""
    names = ", ".join(f.label() for f in pending[:NAMED]) + (", ..." if len(pending) > NAMED else "")
    if book.mode == "files":
        return (f"{len(pending)} request file(s) written for `vllm run-batch` are not read back yet ({names}; book "
                f"{book.state_path}); a synchronous judge would send their requests again. Run it with "
                "--batch-results DIR to read their outputs, or add --batch-cancel to drop them and judge "
                "synchronously")  # fmt: skip
    return (f"{len(pending)} batch(es) submitted with --batch are not collected yet ({names}; book "
            f"{book.state_path}); a synchronous judge would send their requests again and pay twice. Run it with "
            "--batch to collect them, or add --batch-cancel to cancel them at the provider (what they ran is kept) "
            "and judge the rest synchronously")  # fmt: skip


def judge_in_batches(
    run_pass: Callable[[], int], out_dir: Path, env: Mapping[str, str], options: Any, err: Any, cancel: bool = False
) -> int:
    """Run `run_pass` (the stage: judge and write) until no request waits for a batch; its exit code, or
    EXIT_PENDING (5) when batches are out (--batch-submit-only, vLLM files written, or waiting interrupted).
    `cancel` (--batch-cancel): the batches still out are cancelled (what they ran kept) and their unrun requests
    go into new batches."""
    from judges.batch import BatchBook, BatchPending, activated
    from judges.batch_api import BatchAPI, collect_local, local_commands
    from judges.config import EndpointConfig, env_flag

    if not env_flag(env, "EMO_JUDGE_CACHE", True):
        raise StageError("--batch keeps each round's answers in the judge cache; EMO_JUDGE_CACHE=0 turns it off")
    endpoint = EndpointConfig.from_env(env)
    book = BatchBook(out_dir / layout.BATCH_DIR, options, endpoint)
    api = None if options.local else BatchAPI(endpoint, err)

    def say(text: str) -> None:
        print(f"emo-tasks judge --batch: {text}", file=err, flush=True)

    if api is not None:
        endpoint.check_usable()
    if cancel:
        try:
            if api is not None:
                api.cancel(book)
            elif options.results_dir is not None:
                collect_local(book, Path(options.results_dir))  # the outputs there are read, the rest dropped
        except KeyboardInterrupt:
            return _interrupted(say)
        for f in book.pending():
            book.drop(f)
    if again := book.retry_failures():
        say(f"sending again what failed when this stage last finished: {again} request(s)")
    known = {f.name for f in book.files if f.failure}  # refusals an earlier process reported: resubmitted now
    with activated(book):
        while True:
            if api is not None:  # what ended since the last look (a batch submitted by an earlier process too)
                try:
                    api.poll_once(book)
                except KeyboardInterrupt:
                    return _interrupted(say)
                refused = [f for f in book.files if f.failure and f.name not in known]
                known.update(f.name for f in refused)
                if refused and options.fallback != "sync":
                    f = refused[0]
                    say(f"the batch of {f.name} ({f.batch_id}) failed at {endpoint.host}: {f.failure}. None of its "
                        "requests ran or is charged. Run the same command to submit them again, or add "
                        "--batch-fallback sync to send them directly (a provider that takes no images in batches "
                        "refuses every judge round: judge without --batch)")  # fmt: skip
                    return EXIT_ERROR
                for f in refused:  # --batch-fallback sync: the refused batch's requests go out directly
                    book.direct.update(k for k, name in book.submitted.items() if name == f.name)
            elif options.results_dir is not None:
                collect_local(book, Path(options.results_dir))
            book.begin_pass()
            try:
                code = run_pass()
            except BatchPending:
                new = book.end_pass()
            except BaseException:
                book.abort_pass()
                raise
            else:
                book.finished = True
                book.end_pass()
                if book.files:
                    say(f"done: {len(book.files)} batch files in {book.rounds} rounds; the book of what was sent is "
                        f"{book.state_path}")  # fmt: skip
                return code
            waiting = book.uncollected()
            say(f"round {book.rounds}: {len(book.waiting)} requests wait for a batch ({len(new)} new files, "
                f"{book.answered} answers read in this pass)")  # fmt: skip
            if api is None:
                say("run these, then the same command with --batch-results "
                    f"{options.results_dir or options.file_dir} (exit 5 until every output is there):")  # fmt: skip
                for line in local_commands(book, waiting):
                    print(f"  {line}", file=err, flush=True)
                return EXIT_PENDING
            if not new and not waiting:
                raise StageError("internal: requests wait for a batch but none is out (please report)")
            try:
                api.submit(book)
                if options.submit_only:
                    say(f"{len(waiting)} batches are out; run the same command to collect them (exit 5 until "
                        "they are done)")  # fmt: skip
                    return EXIT_PENDING
                api.wait(book)
            except KeyboardInterrupt:
                return _interrupted(say)


def _interrupted(say: Callable[[str], None]) -> int:
    say("stopped waiting; the batches go on at the provider: run the same command to collect them")
    return EXIT_PENDING
