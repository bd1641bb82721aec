"""Each model's first request goes alone (`ModelGate`), so that a retired or unknown model stops a run after one
request.

Why a module of its own: the engine (`engine.py`) asks the gate before each call and tells it what the first reply
said; the rule itself (who waits, who goes, what a gone model does to the requests after it) reads here in one
place.  It lives on the engine's loop: one gate per client.
"""

from __future__ import annotations

import asyncio

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
