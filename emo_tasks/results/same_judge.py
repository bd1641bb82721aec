"""Whether two recorded judges are the same judge: the one rule `compare`, `report --trend`, `calibrate`, a
calibration file's match and the gate across a judge change share (issue 42, item 3).

Why one rule: `compare` once accepted a run whose endpoint did not say what it serves while `compare
--calibration` refused the same pair; a judge must be the same judge to every command.  The rule:

- a judge identity is a benchmark summary's judge keys (`calibration.judge_identity`: models per role, protocol,
  alpha, audio clues, the judge fingerprint);
- each key is equal on both sides, except the fingerprint (`fingerprint_difference`): one recorded on one side
  only (a run judged before fingerprints existed) is compared on the other keys, and a served identity one side
  could not learn ("not reported", `judges.fingerprint.served_difference`) is never a difference.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: The summary key of the judge fingerprint (docs/judges.md#judge-fingerprint).
FINGERPRINT_KEY = "judge_fingerprint"


def fingerprint_difference(base: Any, new: Any) -> str | None:
    """What differs between two runs' judge fingerprints ("judge fingerprint: judge temperature 0.0 vs 0.2"), None
    when they agree or when either run records none: a run made before fingerprints were recorded is compared on
    what it does record (models, protocol, mode, alpha), so older baselines stay usable."""
    from judges.fingerprint import difference

    if not isinstance(base, Mapping) or not isinstance(new, Mapping):
        return None
    what = difference(base, new)
    return f"judge fingerprint: {what}" if what else None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def value_difference(key: str, a: Any, b: Any) -> bool:
    """Whether one judge key's two recorded values make two judges different (the module's rule)."""
    if key == FINGERPRINT_KEY:
        return fingerprint_difference(a, b) is not None
    return _canonical(a) != _canonical(b)


def identity_difference(a: Mapping[str, Any], b: Mapping[str, Any], order: Sequence[str] = ()) -> list[str]:
    """The keys whose values make two judge identities different judges ([]: the same judge), in `order` first."""
    keys = sorted(set(a) | set(b), key=lambda k: (order.index(k) if k in order else len(order), k))
    return [k for k in keys if value_difference(k, a.get(k), b.get(k))]


def _reported(identity: Mapping[str, Any]) -> int:
    """How many served identities an identity's fingerprint records (the most informative one stands for a group)."""
    from judges.fingerprint import NOT_REPORTED, served_by_role

    fps = identity.get(FINGERPRINT_KEY)
    if not isinstance(fps, Mapping):
        return 0
    return sum(served not in (None, NOT_REPORTED) for _model, served in served_by_role(fps).values())


def group_by_judge(items: Iterable[tuple[Mapping[str, Any], str]]) -> list[tuple[dict[str, Any], list[str]]]:
    """(identity, names) pairs grouped into judges by the rule: each group's identity is its member that records
    the most (a served identity learnt beats "not reported").  More than one group: more than one judge."""
    groups: list[tuple[dict[str, Any], list[str]]] = []
    for identity, name in items:
        for i, (rep, names) in enumerate(groups):
            if not identity_difference(rep, identity):
                names.append(name)
                if _reported(identity) > _reported(rep):
                    groups[i] = (dict(identity), names)
                break
        else:
            groups.append((dict(identity), [name]))
    return groups
