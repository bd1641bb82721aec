"""Masking secrets in text the tools print or write (report labels, the results site): one rule for all of them.

Why: lmms-eval records `--model_args` as given, so an `api_key=...` or a URL with a password in it would reach a
report, an export or a site page.  API keys never appear in what the tools write.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

#: `name=value` where the name says it is a secret (model_args, a URL's query).
_SECRET_ARG = re.compile(
    r"(?i)(\b[\w.-]*(?:key|token|secret|password|passwd|pwd|auth|credential|signature)[\w.-]*=)"
    r"(\"[^\"]*\"|'[^']*'|[^\s,;&)\"']+)"
)
_URL_USER = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_SECRET_ENV = re.compile(r"(?i)key|token|secret|password|passwd|credential|auth")
MASK = "***"


class Redactor:
    """Masks secrets in text: the values of `name=value` arguments whose name says secret, a URL's user and
    password, and the value of every environment variable whose name says secret (8 characters or more)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        values = {v.strip() for k, v in env.items() if _SECRET_ENV.search(k) and len(v.strip()) >= 8}
        self.values = sorted(values, key=len, reverse=True)  # a longer secret first: no half-masked one

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        if "=" in text:
            text = _SECRET_ARG.sub(_mask_value, text)
        if "@" in text:
            text = _URL_USER.sub(lambda m: m.group(1) + MASK + "@", text)
        return text


#: Values that are already masks (lmms-eval writes `api_key=[REDACTED]`): left as they are, so text that holds no
#: secret reads the same before and after (an export's provenance stays byte for byte what it was).
_ALREADY_MASKED = frozenset({MASK, "[REDACTED]", "<REDACTED>"})


def _mask_value(m: re.Match[str]) -> str:
    return m.group(0) if m.group(2).strip("\"'") in _ALREADY_MASKED else m.group(1) + MASK


def mask_secrets(text: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """`text` with its secrets masked (`Redactor`); None stays None."""
    return None if text is None else Redactor(env)(text)
