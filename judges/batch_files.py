"""Batch request files: one line per request, split within a provider's limits (requests and bytes per file, one
model per file).

The same format serves OpenAI's and Azure OpenAI's Batch API and `vllm run-batch`: a JSON line
`{"custom_id", "method": "POST", "url", "body"}` in, a line `{"id", "custom_id", "response": {"status_code",
"body"}, "error"}` out.  `custom_id` is the request's cache key, so an output line is matched to its request by
content, never by position (providers write output lines in any order).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: OpenAI's limits per batch input file (https://platform.openai.com/docs/guides/batch): 50,000 requests, 200 MB
DEFAULT_MAX_REQUESTS = 50_000
DEFAULT_MAX_MB = 200.0
#: a megabyte as providers count file sizes (OpenAI's "200 MB"): 10^6 bytes, so a full file is never over the limit
BYTES_PER_MB = 1_000_000
#: the URL a line names: OpenAI and vLLM take "/v1/chat/completions", Azure OpenAI "/chat/completions"
OPENAI_URL = "/v1/chat/completions"
AZURE_URL = "/chat/completions"
#: the batch rate against the synchronous one (OpenAI and Azure: half price)
DEFAULT_DISCOUNT = 0.5


@dataclass(frozen=True)
class BatchLimits:
    """What one input file may hold."""

    max_requests: int = DEFAULT_MAX_REQUESTS
    max_bytes: int = int(DEFAULT_MAX_MB * BYTES_PER_MB)

    def __post_init__(self) -> None:
        if self.max_requests < 1:
            raise ValueError(f"a batch file must hold at least 1 request, not {self.max_requests}")
        if self.max_bytes < 1024:
            raise ValueError(f"a batch file must be allowed at least 1 KB, not {self.max_bytes} bytes")


def url_for(api_type: str) -> str:
    """The `url` of a line (and the batch's `endpoint`) for the provider."""
    return AZURE_URL if api_type == "azure" else OPENAI_URL


def request_line(custom_id: str, body: Mapping[str, Any], url: str = OPENAI_URL) -> bytes:
    """One input line, newline included: the same JSON body the synchronous path POSTs."""
    line = {"custom_id": custom_id, "method": "POST", "url": url, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def oversize(model: str, size: int, limits: BatchLimits) -> str:
    """What is said of one request too large for any batch file."""
    return (
        f"one {model} request is {size / BYTES_PER_MB:.1f} MB ({size} bytes), over the "
        f"{limits.max_bytes / BYTES_PER_MB:.1f} MB a batch file may hold; raise --batch-max-mb or send fewer frames"
    )


@dataclass
class FilePlan:
    """One input file: its model, and how many requests and bytes it holds."""

    model: str
    requests: int = 0
    bytes: int = 0


def plan_files(lines: Iterable[tuple[str, int]], limits: BatchLimits) -> list[FilePlan]:
    """The files `lines` ((model, bytes) per request, in order) go into: one model per file, a new file when the
    next line would pass either limit.  A single line larger than `max_bytes` raises ValueError (no provider takes
    it), naming its size."""
    open_files: dict[str, FilePlan] = {}
    out: list[FilePlan] = []
    for model, size in lines:
        if size > limits.max_bytes:
            raise ValueError(oversize(model, size, limits))
        cur = open_files.get(model)
        if cur is None or cur.requests + 1 > limits.max_requests or cur.bytes + size > limits.max_bytes:
            cur = open_files[model] = FilePlan(model)
            out.append(cur)
        cur.requests += 1
        cur.bytes += size
    return out


#: --batch-fallback: what happens to a line that failed in a batch and may be tried again
FALLBACKS = ("batch", "sync")


@dataclass(frozen=True)
class BatchOptions:
    """How `emo-tasks judge --batch` sends the stage's requests (the command line's --batch-* flags).

    `file_dir` (--batch-file): write each round's request files there for `vllm run-batch` instead of uploading;
    `results_dir` (--batch-results): read their output files back from there (and write the next round's files
    there).  `poll_s`: the first wait between polls (it grows).  `fallback`: "batch" sends a line that failed again
    in a new batch, "sync" sends it directly.  `discount`: the batch price against the synchronous one (dry runs)."""

    limits: BatchLimits = BatchLimits()
    poll_s: float = 60.0
    submit_only: bool = False
    fallback: str = "batch"
    file_dir: str | None = None
    results_dir: str | None = None
    discount: float = DEFAULT_DISCOUNT

    def __post_init__(self) -> None:
        if self.fallback not in FALLBACKS:
            raise ValueError(f"--batch-fallback {self.fallback!r}: use one of {', '.join(FALLBACKS)}")
        if not (0.0 < self.discount <= 1.0):
            raise ValueError(f"--batch-discount {self.discount}: a share of the price, above 0 and at most 1")
        if self.poll_s < 0:
            raise ValueError(f"--batch-poll {self.poll_s}: seconds, at least 0")

    @property
    def local(self) -> bool:
        """Request files on disk for `vllm run-batch`, not a provider's Batch API."""
        return self.file_dir is not None or self.results_dir is not None
