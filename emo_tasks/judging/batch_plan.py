"""`emo-tasks judge --dry-run --batch`: the rounds, files and bytes a batch judging of the run would send.

Why a module of its own: the byte count of a request line is shared by the benchmarks' planners (which build the
real requests: `hooks.plan`, `hooks.judge_plan`) and the report (`emo_tasks.judging.dryrun`), and the batch count
is its own concern next to the token cost.

How batch judging goes (the stage's batch loop): in rounds; each round sends every request that is not cached and
whose inputs are known, so a request goes in round 1 + the number of requests before it in its sample's chain
that are still to send (MME-Emotion: step agent -> audio clue (live clues only) -> judge; the MultiEmo-Bench
judge has no chain).  Within a round the requests are grouped by model and split into files within the limits
(`judges.batch_files.plan_files`); a line is the body the synchronous path POSTs (`judges.engine`), so its size
is measured on the real request, media rendered.  A request whose prompt waits on an earlier round's answer (the
judge's step text, a live audio clue) is measured without that text plus an estimate of it, and marked (est.).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judges.batch_files import BYTES_PER_MB, BatchLimits, FilePlan, plan_files, request_line, url_for

#: The size of an answer not given yet, per token (o200k_base English text is about 4 bytes a token).
BYTES_PER_TOKEN = 4
#: The custom_id of a line whose request is not known yet: a cache key's length (sha256 hex).
UNKNOWN_KEY = "0" * 64
#: bytes per MB, as --batch-max-mb counts them
MB = BYTES_PER_MB


@dataclass(frozen=True)
class BatchLine:
    """One request a batch judging would put in a file: its round, model, cache key (None: its prompt is not known
    before an earlier round's answer, so `nbytes` is an estimate) and the size of its line."""

    round: int
    model: str
    key: str | None
    nbytes: int
    agent: str = ""


def body_of(request: Any) -> dict[str, Any]:
    """The JSON body the synchronous path POSTs for `request` (`judges.engine`), media rendered now."""
    return {"model": request.resolved_model(), "messages": request.render_messages(), **request.payload_params()}


def line_bytes(request: Any, key: str | None, api_type: str, extra_text: int = 0) -> int:
    """The bytes of `request`'s line in a batch input file (`judges.batch_files.request_line`), plus `extra_text`
    bytes of text not known yet."""
    return len(request_line(key or UNKNOWN_KEY, body_of(request), url_for(api_type))) + extra_text


def text_bytes(text: str) -> int:
    """The bytes `text` takes inside a JSON line (escaped, UTF-8)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


@dataclass
class RoundPlan:
    """One round of a batch judging: its requests, the agents they are for, their files, and whether any size is
    an estimate."""

    number: int
    agents: list[str]
    files: list[FilePlan]
    estimated: int

    @property
    def requests(self) -> int:
        return sum(f.requests for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def largest(self) -> FilePlan:
        return max(self.files, key=lambda f: (f.bytes, f.requests))


def plan_rounds(lines: Sequence[BatchLine], limits: BatchLimits) -> list[RoundPlan]:
    """The rounds `lines` go in (a request known by its key counted once, in its earliest round; requests not known
    yet each once), and each round's files.  Raises ValueError when one line exceeds a file (`plan_files`)."""
    first: dict[str, int] = {}  # key -> index of the line that sends it: its earliest round's first
    for i, line in enumerate(lines):
        if line.key is not None and (line.key not in first or line.round < lines[first[line.key]].round):
            first[line.key] = i
    kept = [x for i, x in enumerate(lines) if x.key is None or first[x.key] == i]
    kept.sort(key=lambda x: x.round)  # stable: the planners' order within a round
    for x in kept:
        if x.nbytes > limits.max_bytes:  # `plan_files` says so too, but in 0.1 MB steps
            raise ValueError(
                f"one {x.model} request ({x.agent or 'judge'}) is a line of {_size(x.nbytes)}, over the "
                f"{_size(limits.max_bytes)} a batch file may hold: raise --batch-max-mb"
            )
    rounds = []
    for number in sorted({x.round for x in kept}):
        in_round = [x for x in kept if x.round == number]
        agents = list(dict.fromkeys(x.agent for x in in_round))
        files = plan_files([(x.model, x.nbytes) for x in in_round], limits)
        rounds.append(RoundPlan(number, agents, files, sum(x.key is None for x in in_round)))
    return rounds


def batch_report(lines: Sequence[BatchLine], limits: BatchLimits, outp: Any) -> None:
    """The batch part of a dry run: per round, requests, files, the largest file and the bytes; then the totals."""
    rounds = plan_rounds(lines, limits)
    limit = f"at most {limits.max_requests} requests and {_size(limits.max_bytes)} per file, one model per file"
    if not rounds:
        print(f"Batch (--batch): nothing to send, every request is cached ({limit}).", file=outp)
        return
    header = ("round", "agents", "requests", "files", "largest file", "bytes")
    table = []
    for r in rounds:
        est = " (est.)" if r.estimated else ""
        big = r.largest
        table.append((str(r.number), ", ".join(r.agents), str(r.requests), str(len(r.files)),
                      f"{big.requests} req, {_size(big.bytes)}{est}", f"{_size(r.bytes)}{est}"))  # fmt: skip
    n_files = sum(len(r.files) for r in rounds)
    total = sum(r.bytes for r in rounds)
    print(f"Batch (--batch): {len(rounds)} round(s), {n_files} file(s); {limit}.", file=outp)
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip(), file=outp)
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=outp)
    estimated = sum(r.estimated for r in rounds)
    lines_sent = sum(r.requests for r in rounds)
    print(f"Batch bytes: {_size(total)} in {lines_sent} request lines (cached requests are not sent).", file=outp)
    if estimated:
        print(
            f"(est.): {estimated} lines hold a prompt that waits on an earlier round's answer (the judge's step text, "
            f"a live audio clue): measured without that text plus {BYTES_PER_TOKEN} bytes per token of its expected "
            "length (the step agent's max_tokens, else the answer it restates; the typical audio clue).",
            file=outp,
        )


def _size(n: int) -> str:
    """Bytes as the report shows them: exact, and in MB (as --batch-max-mb counts)."""
    return f"{n} B ({n / MB:.3f} MB)"


def agents_lines(agents: Sequence[Mapping[str, Any]]) -> list[BatchLine]:
    """The `batch_lines` of a planner's agent rows, in order."""
    return [line for agent in agents for line in agent.get("batch_lines") or ()]
