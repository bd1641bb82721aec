"""What `judges` registers into lmms-eval.

- A judge backend `emo_judges` in `lmms_eval.llm_judge.ProviderFactory`, so any lmms-eval task that builds its
  judge with `get_server("emo_judges", ServerConfig(...))` gets our cache, concurrency, retries and accounting.
- The aggregation `emo_mean_skip_none` in `lmms_eval.api.registry`: the mean of the items that are not None —
  the published "left out of every average" rule for unparseable judgements — with the left-out count logged.

emo-tasks' own tasks do not need these (they call the engine directly); `register()` is for users who want them in
their own lmms-eval tasks, and they call it themselves.  It is idempotent and cheap once lmms-eval is loaded.
Importing this module does not import lmms-eval (its registry import costs seconds) and opens no connection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

logger = logging.getLogger("judges")

PROVIDER_NAME = "emo_judges"
AGG_MEAN_SKIP_NONE = "emo_mean_skip_none"

_registered = False
_register_lock = threading.Lock()
#: What the provider's engine is built from (register(settings)); None: EngineSettings.from_env(), no answer cache.
_engine_settings: Any = None


def mean_skip_none(items: Iterable[Any]) -> float | None:
    """Mean of the non-None items (None = a sample left out, e.g. no `<score>` block); None if all are left out."""
    items = list(items)
    kept = [float(x) for x in items if x is not None]
    left_out = len(items) - len(kept)
    if left_out:
        logger.warning("%s: %d of %d samples left out (no usable judgement)", AGG_MEAN_SKIP_NONE, left_out, len(items))
    return sum(kept) / len(kept) if kept else None


def _provider_class() -> type:
    from lmms_eval.llm_judge.base import ServerInterface
    from lmms_eval.llm_judge.protocol import Request, Response, ServerConfig

    from .engine import JudgeEngine, get_engine
    from .media import ImagePart
    from .request import JudgeRequest, JudgeResult

    class EmoJudgesProvider(ServerInterface):
        """lmms-eval judge backend backed by the emo_tasks judge engine (cached, concurrent, retried)."""

        def __init__(self, config: ServerConfig | None = None, engine: JudgeEngine | None = None) -> None:
            super().__init__(config or ServerConfig(model_name="judge"))
            self._engine = engine

        @property
        def engine(self) -> JudgeEngine:
            return self._engine or get_engine(_engine_settings)

        def is_available(self) -> bool:
            try:
                self.engine.endpoint.check_usable()
            except Exception:
                return False
            return True

        def _to_request(self, request: Request) -> JudgeRequest:
            config = request.config or self.config
            messages = [dict(m) for m in self.prepare_messages(request)]
            if request.images:
                parts = [ImagePart(img) for img in request.images]
                for msg in reversed(messages):
                    if msg.get("role") == "user":
                        content = msg.get("content")
                        if isinstance(content, str):
                            content = [{"type": "text", "text": content}]
                        msg["content"] = list(content) + parts
                        break
            params: dict[str, Any] = {}
            if config.top_p is not None:
                params["top_p"] = config.top_p
            if config.response_format == "json":
                params["response_format"] = {"type": "json_object"}
            # A model name that is a role ("judge", "step", "audio") resolves through EMO_*_MODEL.
            return JudgeRequest(
                messages=messages,
                role=config.model_name,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                params=params,
            )

        @staticmethod
        def _to_response(result: JudgeResult) -> Response:
            return Response(
                content=result.text or "",
                model_used=result.model,
                usage={"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens},
                raw_response=result.to_dict(),
                success=result.ok,
                error_message=None if result.ok else f"{result.error}: {result.detail}",
            )

        def evaluate(self, request: Request) -> Response:
            return self.evaluate_batch([request])[0]

        def evaluate_batch(self, requests: Sequence[Request]) -> list[Response]:
            """One concurrent, cached batch for many lmms-eval requests (results in input order)."""
            batch = self.engine.run(
                [self._to_request(r) for r in requests], desc="emo_judges", progress=len(requests) > 1
            )
            return [self._to_response(r) for r in batch]

    return EmoJudgesProvider


def register(settings: Any = None) -> None:
    """Register the provider and aggregation into lmms-eval (idempotent).  `settings` (a
    `judges.EngineSettings`, e.g. with a cache path) is what the provider's engine is built from from now on."""
    global _registered, _engine_settings
    with _register_lock:
        if settings is not None:
            _engine_settings = settings
        if _registered:
            return
        from lmms_eval.api import registry
        from lmms_eval.llm_judge import ProviderFactory

        ProviderFactory.register_provider(PROVIDER_NAME, _provider_class())
        if AGG_MEAN_SKIP_NONE not in registry.AGGREGATION_REGISTRY:
            registry.register_aggregation(AGG_MEAN_SKIP_NONE)(mean_skip_none)
        _registered = True
