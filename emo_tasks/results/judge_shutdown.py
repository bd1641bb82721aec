"""What a run recorded of its judge models' announced shutdown, for the tools that only read results.

Why: the judge endpoint says ahead when a dated model shuts down (`GET /models`'s `shutdown_date`,
`judges.fingerprint.shutdown_dates`); the judge records it beside the judge fingerprint (a summary's and a judged
result's `judge_shutdown`: {model: {"date", "roles"}}).  The report and the viewer show it, `calibrate` repeats the
warning, and a CI gate (`compare`, `plan-gate`) warns when its reference run's judge shuts down within its horizon,
so a gate is never silently left without its judge.  Never part of a key, a fingerprint or a comparison.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any

from judges.fingerprint import shutdown_date
from judges.shutdown import days_left, today

#: The summary's (and the judged result's) key of what the endpoint said of the judge models' shutdown.
KEY = "judge_shutdown"


def merged(records: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """One {model: {"date", "roles"}} from several records (summaries of a run's tasks): a model's roles joined,
    its earliest date kept (the one that leaves least time); entries that are not dates are left out."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        if not isinstance(rec, Mapping):
            continue
        for model, entry in rec.items():
            date = shutdown_date(entry.get("date")) if isinstance(entry, Mapping) else None
            if date is None:
                continue
            roles = [str(r) for r in entry.get("roles") or [] if isinstance(r, str)]
            have = out.setdefault(str(model), {"date": date, "roles": []})
            have["date"] = min(have["date"], date)
            have["roles"] = sorted(set(have["roles"]) | set(roles))
    return dict(sorted(out.items()))


def run_shutdowns(run: Any) -> dict[str, dict[str, Any]]:
    """What a run (`reader.Run`) recorded: its tasks' summaries and its judged results' block."""
    from emo_tasks.results.layout import MARKER

    block = (run.data.get(MARKER) or {}) if isinstance(run.data.get(MARKER), Mapping) else {}
    return merged([*(s.get(KEY) for s in run.summaries.values() if isinstance(s, Mapping)), block.get(KEY)])


def describe(recorded: Mapping[str, Mapping[str, Any]], on: datetime.date | None = None) -> list[str]:
    """One phrase per model: "gpt-4o-2024-11-20 (judge) on 2027-01-14 (40 days left)"."""
    day = on or today()
    out = []
    for model, rec in recorded.items():
        left = days_left(rec["date"], day)
        when = f"{left} days left" if left >= 0 else f"{-left} days ago"
        roles = f" ({', '.join(rec['roles'])})" if rec.get("roles") else ""
        out.append(f"{model}{roles} on {rec['date']} ({when})")
    return out


def within(
    recorded: Mapping[str, Mapping[str, Any]], horizon: int, on: datetime.date | None = None
) -> dict[str, dict[str, Any]]:
    """The models of `recorded` that shut down within `horizon` days of today (or are already shut down)."""
    day = on or today()
    return {m: rec for m, rec in recorded.items() if days_left(rec["date"], day) <= horizon}
