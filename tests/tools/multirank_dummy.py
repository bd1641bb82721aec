"""lmms-eval's CLI with the `dummy` model made usable on several ranks (CPU), for tests/test_multirank.py.

With more than one rank lmms-eval's evaluator reads `lm.device` (the gather of per-task instance counts), and the
`dummy` model has none; this wrapper gives it a CPU `device` and then runs `lmms_eval.__main__.cli_evaluate()`.

When EMO_MULTIRANK_RECORD names a file, every process appends one JSON line to it when it starts
(`{"event": "start", "pid", "rank", "world_size", "local_rank"}` from the launcher's environment) and one when the
model answers (`{"event": "generate", "pid", "rank", "world_size", "n_requests"}`, the rank as lmms-eval set it on
the model), so a test can check that a launcher really started several ranks and that each got its own shard.
"""

from __future__ import annotations

import hashlib
import json
import os


def _record(event: str, **fields: object) -> None:
    path = os.environ.get("EMO_MULTIRANK_RECORD")
    if not path:
        return
    row = {"event": event, "pid": os.getpid(), **fields}
    # one short line per write, opened in append mode: safe enough for two processes
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def _pick(alternatives: list[str], key: tuple[str, str]) -> str:
    digest = hashlib.sha256("/".join(map(str, key)).encode("utf-8")).hexdigest()
    return alternatives[int(digest[:8], 16) % len(alternatives)].strip()


def _patch_dummy() -> None:
    import torch
    from lmms_eval.models.simple.dummy import Dummy

    if not hasattr(Dummy, "device"):
        Dummy.device = property(lambda self: torch.device("cpu"))

    original = Dummy.generate_until

    def generate_until(self, requests):
        keys = [(str(r.task_name), str(r.doc_id)) for r in requests]
        _record(
            "generate",
            rank=self.rank,
            world_size=self.world_size,
            n_requests=len(requests),
            docs=sorted({f"{task}/{doc_id}" for task, doc_id in keys}),
        )
        answers = original(self, requests)
        alternatives = self._response.split("|")
        if os.environ.get("EMO_MULTIRANK_SPLIT") == "1" and len(alternatives) > 1:
            answers = [_pick(alternatives, key) for key in keys]
        return answers

    Dummy.generate_until = generate_until


def main() -> None:
    _record(
        "start",
        rank=int(os.environ.get("RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
    )
    _patch_dummy()
    from lmms_eval.__main__ import cli_evaluate

    try:
        cli_evaluate()
    finally:
        _close_process_group()


def _close_process_group() -> None:
    """Destroy the torch.distributed process group lmms-eval 0.7.3 started and never destroys.

    Why: a rank that reaches interpreter shutdown with its gloo group alive sometimes aborts there ("terminate called
    without an active exception", SIGABRT) after its work is done and its results written, and the launcher then
    fails the whole run; seen in 2 full-suite runs of about 8 (tests/test_multirank.py's setup errors).  A launched
    script ends its group before it exits (torch's advice); lmms-eval's `cli_evaluate` does not, so this wrapper does.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
