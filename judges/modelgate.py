"""When to stop sending: each model's first request goes alone (`ModelGate`), so that a retired or unknown model
stops a run after one request; and a batch whose endpoint looks down stops sending (`BatchHealth`).

Why a module of its own: the engine (`engine.py`) asks the gate before each call and tells it what the first reply
said; the rule itself (who waits, who goes, what a gone model does to the requests after it) reads here in one
place.  It lives on the engine's loop: one gate per client.
"""

from __future__ import annotations

import asyncio
import sys

from .endpoint import JudgeModelNotFound


class ModelGate:
    """Each model's first request goes alone; the others wait for its first reply.  Why: a retired or unknown model
    (HTTP 404 `model_not_found`) must stop the run after one request, not after a slot-full of them; and once a
    model is known to be gone, no request for it is sent.  Any other outcome of the first try (an answer, a 429, a
    timeout) lets the waiting requests go: the price is one round trip per model and process (one timeout when the
    endpoint does not answer), not a slower run."""

    def __init__(self) -> None:
        self._known: set[str] = set()
        self._gone: dict[str, JudgeModelNotFound] = {}
        self._probing: dict[str, asyncio.Future[None]] = {}

    async def admit(self, model: str) -> bool:
        """Wait until `model` may be asked; True when this request is its first (it must call `settle`)."""
        while True:
            gone = self._gone.get(model)
            if gone is not None:
                raise gone
            if model in self._known:
                return False
            probe = self._probing.get(model)
            if probe is None:
                self._probing[model] = asyncio.get_running_loop().create_future()
                return True
            await asyncio.shield(probe)

    def settle(self, model: str) -> None:
        """The first request of `model` got its first reply (or ended): let the others go."""
        self._known.add(model)
        probe = self._probing.pop(model, None)
        if probe is not None and not probe.done():
            probe.set_result(None)

    def gone(self, model: str, error: JudgeModelNotFound) -> JudgeModelNotFound:
        """`model` does not exist at the endpoint: every request for it raises `error` from now on."""
        self._gone.setdefault(model, error)
        self.settle(model)
        return self._gone[model]


#: Failures that, before any answer, say the endpoint is down (`BatchHealth`).
FATAL_AT_START = frozenset({"connection", "timeout", "http_401", "http_403", "http_404"})


class BatchHealth:
    """Whether a batch's endpoint looks down: `threshold` consecutive connection, timeout or auth failures before
    any answer.  Then nothing more is sent in this batch: the remaining requests fail at once with that reason,
    and one line on stderr says so (a dead endpoint must not cost minutes per task)."""

    def __init__(self, desc: str, host: str, threshold: int) -> None:
        self.desc, self.host, self.threshold = desc, host, max(2, threshold)
        self.answers = 0
        self.consecutive = 0
        self.reason: str | None = None
        self.detail: str | None = None

    @property
    def down(self) -> bool:
        return self.reason is not None

    def answered(self) -> None:
        self.answers += 1
        self.consecutive = 0

    def failed(self, reason: str, detail: str) -> None:
        if self.down or self.answers or reason not in FATAL_AT_START:
            if reason not in FATAL_AT_START:
                self.consecutive = 0
            return
        self.consecutive += 1
        if self.consecutive >= self.threshold:
            self.reason = reason
            self.detail = f"not sent: {self.host} failed {self.consecutive} times in a row ({detail})"
            print(
                f"emo-tasks judges: {self.desc}: stopped sending to {self.host} after {self.consecutive} {reason} "
                f"failures in a row at the start of the batch; the remaining requests fail with that reason",
                file=sys.stderr,
                flush=True,
            )
