"""A judge setup's fingerprint: what the endpoint serves behind each model name, and the deterministic record of
everything about a judge that can change its answers.

Why: a model name is not a model.  A vLLM server may serve any checkpoint under `--served-model-name`, with a
context length of its own; sampling settings and prompt templates change answers too.  The fingerprint records
them all (never a time, an endpoint host or a key), so two results can be proven judged alike, and the part the
request does not already carry (what the endpoint serves) joins the answer cache key (`served_key_part`).

The endpoint is asked `GET <base_url>/models` at most once per endpoint per process, when an engine is about to
answer requests (never at import, never for an endpoint that cannot be used).  A server that does not answer it
(404, an error, no such model listed) gives "not reported", never a failure.

The same answer says when a model shuts down (each entry's optional `shutdown_date`, YYYY-MM-DD or null: OpenAI's
`GET /models` and `GET /models/{id}`).  It is a fact about the endpoint, kept apart (`shutdown_dates`): it is in no
served identity, so in no fingerprint hash, cache key or judged folder name, and a date that appears, moves or
vanishes changes none of them.  `judges.shutdown` says it to the user.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import re
import sys
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

from .config import EndpointConfig

#: What a fingerprint says of a model its endpoint did not describe (no `/models`, an error, not listed).
NOT_REPORTED = "not reported"
#: The fields of an OpenAI-style `/models` entry the fingerprint keeps: OpenAI gives `id`; vLLM and SGLang add
#: `root` (the checkpoint served under that name) and `max_model_len` (the context length).
SERVED_FIELDS = ("id", "root", "max_model_len")
#: Seconds the `/models` question may take (an endpoint that does not answer it costs this once per process).
ASK_TIMEOUT_S = 10.0
FINGERPRINT_SCHEMA = "emo-judges/fingerprint/1"
#: The field of a `/models` entry naming the day its model shuts down (YYYY-MM-DD; null: none announced).
SHUTDOWN_FIELD = "shutdown_date"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

logger = logging.getLogger("judges")

_lock = threading.Lock()
_listings: dict[tuple[str, str], dict[str, dict[str, Any]] | None] = {}
#: per endpoint, served identities a judged folder recorded, for the models the endpoint does not report now
_assumed: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
#: per endpoint, {model: its shutdown date} of every entry the listing (or a retrieve) gave a date
_shutdowns: dict[tuple[str, str], dict[str, str]] = {}
#: (endpoint, model) pairs asked `GET /models/{id}` this process (at most once each)
_retrieved: set[tuple[tuple[str, str], str]] = set()


def _endpoint_key(endpoint: EndpointConfig) -> tuple[str, str]:
    return endpoint.api_type, endpoint.base_url or "https://api.openai.com/v1"


def askable(endpoint: EndpointConfig) -> bool:
    """Whether `/models` can say anything about this endpoint: an OpenAI-compatible one that is configured (Azure
    lists base models, not the deployments requests name; the dry run's stand-in host cannot resolve)."""
    if endpoint.api_type != "openai" or endpoint.host.endswith(".invalid"):
        return False
    try:
        endpoint.check_usable()
    except Exception:  # noqa: BLE001 - not configured: nothing to ask
        return False
    return True


def _get(endpoint: EndpointConfig, path: str) -> Any:
    """The JSON body of `GET <base_url><path>`, None on any failure (never raises)."""
    import urllib.request

    url = (endpoint.base_url or "https://api.openai.com/v1").rstrip("/") + path
    headers = {"Accept": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    try:
        req = urllib.request.Request(url, headers=headers, method="GET")
        with urllib.request.urlopen(req, timeout=min(ASK_TIMEOUT_S, endpoint.timeout_s)) as resp:  # noqa: S310
            return json.loads(resp.read(4_000_000))
    except Exception:  # noqa: BLE001 - 404, refused, timeout, not JSON: "not reported"
        return None


def _ask(endpoint: EndpointConfig) -> dict[str, dict[str, Any]] | None:
    """{model id: its entry's SERVED_FIELDS} from `GET /models`, None on any failure (never raises).  The entries'
    shutdown dates are kept apart (`_keep_dates`)."""
    body = _get(endpoint, "/models")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    out: dict[str, dict[str, Any]] = {}
    for entry in data:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            out[entry["id"]] = {k: entry[k] for k in SERVED_FIELDS if entry.get(k) is not None}
    _keep_dates(endpoint, [e for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)])
    return out


def shutdown_date(value: Any) -> str | None:
    """`value` as a shutdown date (YYYY-MM-DD, a real day), else None."""
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        return None
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return None
    return value


def _keep_dates(endpoint: EndpointConfig, entries: list[dict[str, Any]]) -> None:
    """Keep each entry's shutdown date; a value that is neither a date nor null is ignored with one warning naming
    the endpoint and the value(s) (an endpoint's odd field never stops a run)."""
    dates = _shutdowns.setdefault(_endpoint_key(endpoint), {})
    bad = []
    for entry in entries:
        value = entry.get(SHUTDOWN_FIELD)
        if value is None:
            continue
        if (date := shutdown_date(value)) is not None:
            dates[entry["id"]] = date
        else:
            bad.append(f"{entry['id']} {json.dumps(value, default=str)[:60]}")
    if bad:
        line = (
            f"emo-tasks judges: warning: the judge endpoint {endpoint.host} reports a {SHUTDOWN_FIELD} that is not "
            f"a date (YYYY-MM-DD): {'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}; ignored"
        )
        logger.info(line)  # the log; stderr below (a warning would print it twice)
        print(line, file=sys.stderr, flush=True)


def shutdown_dates(endpoint: EndpointConfig, models: Any, ask: bool = True) -> dict[str, str]:
    """{model: the day the endpoint says it shuts down} for `models` (an iterable of names), for those it gave a
    date.  From the listing (`served_models`, asked once per endpoint per process); a model a listing answered
    without is asked once with `GET /models/{id}`.  `ask=False`: only what this process already knows."""
    key = _endpoint_key(endpoint)
    wanted = [m for m in dict.fromkeys(models) if isinstance(m, str) and m]
    if not wanted:
        return {}
    if ask:
        served_models(endpoint)
        with _lock:
            listing = _listings.get(key)
            missing = [m for m in wanted if listing is not None and m not in listing and (key, m) not in _retrieved]
            _retrieved.update((key, m) for m in missing)
        for model in missing:  # the listing answered without it: ask for it by name
            body = _get(endpoint, "/models/" + urllib.parse.quote(model, safe=""))
            if isinstance(body, dict) and body.get("id") == model:
                with _lock:
                    _keep_dates(endpoint, [body])
    with _lock:
        known = _shutdowns.get(key) or {}
        return {m: known[m] for m in wanted if m in known}


def served_models(endpoint: EndpointConfig, ask: bool = True) -> dict[str, dict[str, Any]] | None:
    """What the endpoint lists on `/models` ({id: {id, root, max_model_len}}), asked once per endpoint per process;
    None when it cannot be asked or did not answer.  `ask=False`: only what this process already knows.  A model
    the endpoint did not report is given what `assume_served` recorded for it, if anything."""
    key = _endpoint_key(endpoint)
    with _lock:
        if key in _listings or not ask:
            return _with_assumed(key, _listings.get(key))
    if not askable(endpoint):
        with _lock:
            return _with_assumed(key, None)
    with _lock:  # one question per endpoint even when several threads start at once
        if key not in _listings:
            _listings[key] = _ask(endpoint)
        return _with_assumed(key, _listings[key])


def _with_assumed(key: tuple[str, str], listing: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
    assumed = _assumed.get(key)
    if not assumed:
        return listing
    out = dict(listing or {})
    for model, entry in assumed.items():
        out.setdefault(model, entry)
    return out


def assume_served(endpoint: EndpointConfig, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Stand in `entries` ({model: its recorded served identity}) for the models this endpoint does not report, for
    the rest of the process.  Why: a judged folder records what was served when it was judged; a later run whose
    `/models` fails (or lists a model only once asked) is taken to be served the same, so its fingerprint, its
    folder and its answer cache keys (`served_key_part`) stay those of the folder, and nothing is paid twice."""
    with _lock:
        _assumed.setdefault(_endpoint_key(endpoint), {}).update(
            {m: dict(e) for m, e in entries.items() if isinstance(e, Mapping)}
        )


def forget_assumed() -> None:
    """Drop what `assume_served` stood in: a process that judges several folders assumes only the one's it judges."""
    with _lock:
        _assumed.clear()


def forget_served() -> None:
    """Forget what endpoints said (with `engine.reset_engine`: a test's next server may reuse a port)."""
    with _lock:
        _listings.clear()
        _assumed.clear()
        _shutdowns.clear()
        _retrieved.clear()


def served_identity(listing: Mapping[str, Mapping[str, Any]] | None, model: str) -> dict[str, Any] | str:
    """What the endpoint reported for `model`: its entry's SERVED_FIELDS, else NOT_REPORTED."""
    if listing is None or model not in listing:
        return NOT_REPORTED
    return dict(sorted(listing[model].items()))


def served_key_part(identity: Mapping[str, Any] | str) -> dict[str, Any]:
    """What of a served identity joins the cache key: the `root` when it is not the requested name itself and the
    `max_model_len`.  {} for an endpoint that reports only the id (OpenAI) or nothing: then the key is the one of
    a request without any served identity, so caches filled before fingerprints existed stay valid."""
    if not isinstance(identity, Mapping):
        return {}
    part: dict[str, Any] = {}
    root = identity.get("root")
    if isinstance(root, str) and root and root != identity.get("id"):
        part["root"] = root
    if isinstance(identity.get("max_model_len"), int):
        part["max_model_len"] = identity["max_model_len"]
    return part


def role_entry(model: str, params: Mapping[str, Any], served: Mapping[str, Any] | str) -> dict[str, Any]:
    """One role of a fingerprint: the model requested, what the endpoint serves under it, and the sampling
    settings its requests send (`JudgeRequest.payload_params`: temperature, max_tokens, seed, any other)."""
    rest = dict(params)
    entry: dict[str, Any] = {
        "model": model,
        "served": served,
        "temperature": rest.pop("temperature", None),
        "max_tokens": rest.pop("max_tokens", None),
        "seed": rest.pop("seed", None),
    }
    if rest:
        entry["params"] = {k: rest[k] for k in sorted(rest)}
    return entry


def fingerprint(
    roles: Mapping[str, tuple[str, Mapping[str, Any]]],
    *,
    protocol: str,
    prompts: Any,
    listing: Mapping[str, Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """The fingerprint of a judge setup: per role (model, its `payload_params`) with what `listing` (`served_models`)
    says is served under it, the protocol (name and version) and a hash of the prompt templates (`prompts`: any
    JSON value holding them or their hashes).  Deterministic: the same setup gives the same JSON."""
    blob = json.dumps(prompts, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    return {
        "schema": FINGERPRINT_SCHEMA,
        "protocol": protocol,
        "prompts": hashlib.sha256(blob).hexdigest()[:16],
        "roles": {
            role: role_entry(model, params, served_identity(listing, model))
            for role, (model, params) in sorted(roles.items())
        },
    }


def served_difference(a: Any, b: Any) -> str | None:
    """The one rule for what is served under a model name: a difference ("id m, root /a vs id m, root /b") only
    when both sides reported it and the reports differ; "not reported" (or nothing recorded) on either side proves
    nothing either way, so it is never a difference.  Used by `difference`, and so by compare, calibrate, the
    gate and the judge stage's check of a judged folder."""
    if a in (None, NOT_REPORTED) or b in (None, NOT_REPORTED):
        return None
    if json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str):
        return None
    return f"{_shown(a)} vs {_shown(b)}"


def requested(fp: Mapping[str, Any]) -> dict[str, Any]:
    """What of a fingerprint the user asked for: everything but what the endpoint reported it serves (each role's
    `served`).  Why: a judged folder is keyed on it, so a `/models` that fails or changes its mind moves nothing."""
    out = dict(fp)
    roles = fp.get("roles")
    if isinstance(roles, Mapping):
        out["roles"] = {
            role: ({k: v for k, v in entry.items() if k != "served"} if isinstance(entry, Mapping) else entry)
            for role, entry in roles.items()
        }
    return out


def served_by_role(fp: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """{role: (its model, what the endpoint reported is served under it)} of a fingerprint."""
    roles = fp.get("roles")
    if not isinstance(roles, Mapping):
        return {}
    return {
        role: (str(entry.get("model")), entry.get("served", NOT_REPORTED))
        for role, entry in roles.items()
        if isinstance(entry, Mapping)
    }


def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items()) or "{}"
    return "not set" if value is None else (value if isinstance(value, str) else json.dumps(value))


def show(value: Any) -> str:
    """A fingerprint value in a few words, as `difference` says it (a served identity: "id m, root /a")."""
    return _shown(value)


def difference(a: Mapping[str, Any], b: Mapping[str, Any], limit: int = 3) -> str | None:
    """What differs between two fingerprints, in a few words ("judge temperature 0.0 vs 0.2; prompt templates
    differ"), None when they are the same.  A served identity one side could not learn ("not reported") is not a
    difference: it proves nothing either way."""
    if json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str):
        return None
    parts: list[str] = []
    if a.get("protocol") != b.get("protocol"):
        parts.append(f"protocol {_shown(a.get('protocol'))} vs {_shown(b.get('protocol'))}")
    if a.get("prompts") != b.get("prompts"):
        parts.append("prompt templates differ")
    ra, rb = a.get("roles") or {}, b.get("roles") or {}
    for role in sorted(set(ra) | set(rb)):
        if role not in ra or role not in rb:
            parts.append(f"{role} role only in the {'second' if role not in ra else 'first'}")
            continue
        ea, eb = ra[role], rb[role]
        for field in sorted(set(ea) | set(eb), key=lambda f: (f != "model", f)):
            va, vb = ea.get(field), eb.get(field)
            if field == "served":
                if what := served_difference(va, vb):
                    parts.append(f"{role} served model {what}")
                continue
            if json.dumps(va, sort_keys=True, default=str) != json.dumps(vb, sort_keys=True, default=str):
                parts.append(f"{role} {'served model' if field == 'served' else field} {_shown(va)} vs {_shown(vb)}")
    if not parts:
        rest = sorted(k for k in set(a) | set(b) if k not in ("protocol", "prompts", "roles") and a.get(k) != b.get(k))
        if not rest:
            return None  # only a served identity one side did not learn
        parts.append(f"{', '.join(rest)} differ")
    shown = "; ".join(parts[:limit])
    return shown + (f"; and {len(parts) - limit} more" if len(parts) > limit else "")
