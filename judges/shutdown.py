"""A judge model's announced shutdown, said where users look: once per model per command, on stderr and in the log.

Why: a dated judge snapshot stops answering one day, and a user who learns it from a failed request has lost the
chance to calibrate a replacement against it or to keep its verdicts.  The endpoint says it ahead (`GET /models`'s
`shutdown_date`, read by `judges.fingerprint.shutdown_dates`); every command that judges calls `warn_shutdowns`
with the models it is about to use, and commands that only read results (calibrate) call `warn_recorded` with the
dates the results recorded.  Within `URGENT_DAYS` the line is marked urgent.

"Today" is the machine's date; `EMO_TODAY` (YYYY-MM-DD) stands in for it, for tests only.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from .config import EndpointConfig
from .fingerprint import shutdown_date, shutdown_dates

logger = logging.getLogger("judges")

#: Days left at or under which the warning is marked urgent (and the gate's default horizon).
URGENT_DAYS = 30
#: For tests only: the day taken as today (YYYY-MM-DD).
TODAY_ENV = "EMO_TODAY"

_lock = threading.Lock()
_warned: set[str] = set()


def today(env: Mapping[str, str] | None = None) -> datetime.date:
    """The machine's date, or `EMO_TODAY` when it is set to a date (tests)."""
    given = (os.environ if env is None else env).get(TODAY_ENV)
    return datetime.date.fromisoformat(given) if shutdown_date(given) else datetime.date.today()


def days_left(date: str, on: datetime.date | None = None) -> int:
    """Days from `on` (default `today()`) to the shutdown `date` (negative: it is past)."""
    return (datetime.date.fromisoformat(date) - (on or today())).days


def notice(model: str, roles: Iterable[str], date: str, on: datetime.date | None = None) -> str:
    """The one line a user sees: model, role(s), date, days left, what to do; urgent within URGENT_DAYS."""
    left = days_left(date, on)
    when = f"{left} days left" if left >= 0 else f"{-left} days ago"
    mark = "URGENT: " if left <= URGENT_DAYS else ""
    names = ", ".join(sorted(set(roles))) or "judge"
    return (
        f"emo-tasks judges: warning: {mark}judge model {model} ({names}) shuts down on {date} ({when}), the "
        "endpoint reports: calibrate a replacement on your own runs now (emo-tasks calibrate) and keep its "
        "verdicts (emo-tasks cache export RUN; docs/judges.md#before-your-judge-shuts-down)"
    )


def _say(model: str, roles: Iterable[str], date: str) -> None:
    with _lock:
        if model in _warned:
            return
        _warned.add(model)
    line = notice(model, roles, date)
    logger.info(line)  # the log; stderr below (a warning would print it twice)
    print(line, file=sys.stderr, flush=True)


def _by_model(roles: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    pairs = roles.items() if isinstance(roles, Mapping) else roles
    out: dict[str, list[str]] = {}
    for role, model in pairs:
        if isinstance(model, str) and model:
            out.setdefault(model, []).append(str(role))
    return out


def warn_shutdowns(
    endpoint: EndpointConfig, roles: Mapping[str, str] | Iterable[tuple[str, str]], ask: bool = True
) -> dict[str, str]:
    """Warn (once per model per process) of each model of `roles` ({role: model} or (role, model) pairs) the
    endpoint says shuts down; {model: date} of those it gave a date.  Never raises: an endpoint that cannot be
    asked has no date."""
    models = _by_model(roles)
    try:
        dates = shutdown_dates(endpoint, models, ask=ask)
    except Exception:  # noqa: BLE001 - a warning never stops a run
        return {}
    for model, date in dates.items():
        _say(model, models[model], date)
    return dates


def warn_recorded(recorded: Mapping[str, Mapping[str, Any]]) -> None:
    """Warn (once per model per process) of recorded shutdowns: {model: {"date", "roles"}} (`recorded_shutdowns`
    of results that only are read, e.g. by calibrate)."""
    for model, rec in sorted(recorded.items()):
        date = shutdown_date(rec.get("date"))
        if date is not None:
            _say(model, rec.get("roles") or [], date)


def record(roles: Mapping[str, str] | Iterable[tuple[str, str]], dates: Mapping[str, str]) -> dict[str, Any]:
    """What a result records of its judge's shutdown: {model: {"date", "roles"}} for the models with a date ({}
    when the endpoint gave none).  A fact about the endpoint: never part of a key or a folder name."""
    models = _by_model(roles)
    return {m: {"date": dates[m], "roles": sorted(set(models[m]))} for m in sorted(models) if m in dates}


def forget_warned() -> None:
    """Warn again (tests: one process standing in for several commands)."""
    with _lock:
        _warned.clear()
