"""`emo-tasks judge --batch`: the judge stage through a provider's Batch API, or files for `vllm run-batch`.

The stage itself does not change: it runs in passes with a batch book active (`judges.batch`), and every request
the cache does not answer waits for a batch instead of going out.  Between passes this driver submits the pass's
request files (`judges.batch_api.BatchAPI.submit`), waits for them (or exits 5 with --batch-submit-only / after
writing files for vLLM), and collects what came back; the next pass reads it.  The pass in which nothing waits
writes the results, as a synchronous stage would.  Why passes and not a batch pipeline of its own: the answers
then go through the one validation, cache and judge log the synchronous stage has, and MME-Emotion's agents
become rounds (step agent -> audio clue -> judge) by themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from emo_tasks.judging.stage_types import EXIT_ERROR, EXIT_PENDING, StageError
from emo_tasks.results import layout


def judge_in_batches(run_pass: Callable[[], int], out_dir: Path, env: Mapping[str, str], options: Any, err: Any) -> int:
    """Run `run_pass` (the stage: judge and write) until no request waits for a batch; its exit code, or
    EXIT_PENDING (5) when batches are out (--batch-submit-only, vLLM files written, or waiting interrupted)."""
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
