"""Masking secrets in text the tools print or write (report labels, the results site, exports): one rule for all.

Why: lmms-eval records `--model_args` as given, so an `api_key=...` or a URL with a password in it would reach a
report, an export or a site page; older lmms-eval versions and hand-made results record them as a dict
(`{"api_key": "sk-..."}`), which must be masked by the same rule.  And a model may repeat an environment variable
in its answer, which the site and the exports carry.  API keys never appear in what the tools write.

The rule: a name says secret when it holds key, token, secret, password, passwd, pwd, auth, credential or
signature (`name=value` in text, a key of a dict); a URL's user and password; and the value of every environment
variable whose name says key, token, secret, password, passwd, credential or auth (8 characters or more).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

#: A name (an argument's, a dict key) that says its value is a secret.
_SECRET_NAME = r"[\w.-]*(?:key|token|secret|password|passwd|pwd|auth|credential|signature)[\w.-]*"
#: `name=value` where the name says it is a secret (model_args, a URL's query).
_SECRET_ARG = re.compile(rf"(?i)(\b{_SECRET_NAME}=)(\"[^\"]*\"|'[^']*'|[^\s,;&)\"']+)")
_SECRET_KEY = re.compile(rf"(?i){_SECRET_NAME}")
_URL_USER = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_SECRET_ENV = re.compile(r"(?i)key|token|secret|password|passwd|credential|auth")
MASK = "***"


class Redactor:
    """Masks secrets in text: the value of every environment variable whose name says secret (8 characters or
    more) and, unless `arguments` is False, the values of `name=value` arguments whose name says secret and a
    URL's user and password.

    `arguments=False` is for model text that a file must carry as it is (an export's answers): only the
    environment's secrets are taken out of it, nothing that merely looks like an argument."""

    def __init__(self, env: Mapping[str, str] | None = None, arguments: bool = True) -> None:
        env = os.environ if env is None else env
        values = {v.strip() for k, v in env.items() if _SECRET_ENV.search(k) and len(v.strip()) >= 8}
        self.values = sorted(values, key=len, reverse=True)  # a longer secret first: no half-masked one
        self.arguments = arguments

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        if self.arguments and "=" in text:
            text = _SECRET_ARG.sub(_mask_value, text)
        if self.arguments and "@" in text:
            text = _URL_USER.sub(lambda m: m.group(1) + MASK + "@", text)
        return text

    def data(self, obj: Any) -> Any:
        """`obj` (JSON-like data) with every string in it masked, dict keys included; other values as they are."""
        if isinstance(obj, str):
            return self(obj)
        if isinstance(obj, Mapping):
            return {self.data(k): self.data(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.data(v) for v in obj]
        return obj


#: Values that are already masks (lmms-eval writes `api_key=[REDACTED]`): left as they are, so text that holds no
#: secret reads the same before and after (an export's provenance stays byte for byte what it was).
_ALREADY_MASKED = frozenset({MASK, "[REDACTED]", "<REDACTED>"})


def _mask_value(m: re.Match[str]) -> str:
    return m.group(0) if m.group(2).strip("\"'") in _ALREADY_MASKED else m.group(1) + MASK


def mask_secrets(text: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """`text` with its secrets masked (`Redactor`); None stays None."""
    return None if text is None else Redactor(env)(text)


def mask_config(value: Any, redact: Redactor) -> Any:
    """A run's configuration (a dict, a list, text) with its secrets masked: the value of a key that says secret is
    masked whole (every string and number in it; True, False and None say nothing), every other string by `redact`,
    recursively."""
    if isinstance(value, Mapping):
        return {k: _masked_whole(v) if _SECRET_KEY.search(str(k)) else mask_config(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_config(v, redact) for v in value]
    return redact(value) if isinstance(value, str) else value


def _masked_whole(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _masked_whole(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked_whole(v) for v in value]
    if value is None or isinstance(value, bool) or (isinstance(value, str) and value.strip("\"'") in _ALREADY_MASKED):
        return value
    return MASK


def model_args_text(value: Any, env: Mapping[str, str] | None = None) -> str | None:
    """A run's `model_args` as text with its secrets masked, whatever form the results file holds them in: text as
    lmms-eval writes it (`pretrained=x,api_key=***`), and a dict (older lmms-eval versions, hand-made results) in
    that same `name=value,...` form after masking it by key (`mask_config`; a nested value as JSON), so every
    reader of model_args (labels, the default export name, trends) takes it as it takes the text; None stays None."""
    redact = Redactor(env)
    if value is None or isinstance(value, str):
        return None if value is None else redact(value)
    masked = mask_config(value, redact)
    if isinstance(masked, Mapping):
        return ",".join(f"{k}={_text(v)}" for k, v in masked.items())
    if isinstance(masked, list):
        return ",".join(_text(v) for v in masked)
    return redact(str(masked))


def _text(value: Any) -> str:
    """A value as `name=value` text shows it: a string as it is, a dict or list as JSON, anything else as Python
    prints it (lmms-eval's own form: `True`, `None`, `0.5`)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if isinstance(value, Mapping | list) else str(value)
