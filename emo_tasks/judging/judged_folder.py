"""Which folder a judge setup's results go to (`RUN/judged/<setup>-<hash>/`), and what that folder records of the
endpoint that judged them.

Why keyed on the request only: the folder (and the batch book in it) must not move with a network hiccup.  The
hash covers what the user asked for (the judge mode, models per role, protocol, alpha, audio clues, sampling
settings, prompt templates: `request_part`); what the endpoint reported it serves under each name (`GET /models`,
"not reported" on any failure) and the endpoint host are recorded beside it, in the folder's `judge_setup.json`
(`layout.SETUP_RECORD`), never hashed.  So a rerun whose `/models` fails, an endpoint that lists a model only once
asked, and `--batch-file` (which never asks) all land in the folder of a synchronous run of the same judge.

A *real* difference is refused, never a silent new folder: the folder recorded a served identity, the endpoint now
reports another (a changed `root` or `max_model_len`; `judges.fingerprint.served_difference`, for which "not
reported" is never a difference).  A run whose endpoint does not report a model the folder recorded is taken to be
served the recorded identity (`judges.fingerprint.assume_served`): its fingerprint and its answer cache keys are
the folder's, so it reuses the answers cached under them.

Folders named before this rule (the hash then covered what the endpoint reported) stay in use: when the folder of
the current name does not exist, a folder under `RUN/judged/` whose recorded judge setup (its `judge_setup.json`,
else its newest judged results' `judge_setup`) asks for the same (`request_part`) is the setup's folder (several:
the one with the newest results).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from emo_tasks.judging.stage_types import StageRefused
from emo_tasks.results.layout import JUDGED_DIR, MARKER, SETUP_RECORD

#: Setup keys the readable part of a folder name never names (the hash covers what of them the user asked for).
SLUG_UNNAMED = ("judge_mode", "endpoint", "judge_fingerprint")
#: The readable part of a judge folder's name is cut here (the hash that follows keeps names apart).
SLUG_READABLE_MAX = 80
#: The schema of a judged folder's `judge_setup.json`.
RECORD_SCHEMA = "emo-tasks/judged-setup/1"
#: Setup keys that say where and what the endpoint served, not what was asked: recorded, never hashed.
REPORTED_KEYS = ("endpoint",)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True, default=str)


def request_part(setup: Mapping[str, Any]) -> dict[str, Any]:
    """What of a judge setup (`stage.judge_setup`) the user asked for: all of it but the endpoint host and what the
    endpoint reported it serves (each fingerprint role's `served`, `judges.fingerprint.requested`)."""
    from judges.fingerprint import requested

    out = {k: v for k, v in setup.items() if k not in REPORTED_KEYS}
    fps = setup.get("judge_fingerprint")
    if isinstance(fps, Mapping):
        out["judge_fingerprint"] = {b: requested(fp) if isinstance(fp, Mapping) else fp for b, fp in fps.items()}
    return out


def judge_slug(setup: Mapping[str, Any]) -> str:
    """The folder name of one judge setup: readable models (or `offline` / `no-judge`), then `-` and a short hash
    of what the setup asks for (`request_part`).  The readable part is ASCII, at most SLUG_READABLE_MAX
    characters; the hash alone tells requests apart (`a/b` vs `a b`, two non-ASCII names, another protocol, alpha,
    temperature or prompt template)."""
    digest = hashlib.sha256(_canonical(request_part(setup)).encode()).hexdigest()[:10]
    if setup.get("judge_mode") == "offline":
        readable = "offline"
    elif setup.get("models"):
        readable = ",".join(f"{role}={model}" for role, model in sorted(setup["models"].items(), key=_role_order))
        readable = re.sub(r"[^A-Za-z0-9._=,+-]+", "_", readable).strip("_.") or "judge"
        readable = readable[:SLUG_READABLE_MAX].rstrip("_.,=")
    else:  # an optional judge stage only (its setup key, e.g. `x_judge` -> `x-judge`)
        extras = [k.replace("_", "-") for k in setup if k not in SLUG_UNNAMED and setup[k]]
        readable = re.sub(r"[^A-Za-z0-9._+-]+", "_", "+".join(extras)) or "no-judge"
    return f"{readable}-{digest}"


def _role_order(item: tuple[str, Any]) -> int:
    return {"judge": 0, "step": 1, "audio": 2}.get(item[0], 3)


def judged_dir(run_path: Path, setup: Mapping[str, Any]) -> Path:
    """Where the stage writes a judge setup's results unless told (--out): RUN/judged/<judge_slug(setup)>, or a
    folder named by the earlier rule whose recorded setup asks for the same (module docstring)."""
    base = Path(run_path) / JUDGED_DIR
    named = base / judge_slug(setup)
    if named.exists() or not base.is_dir():
        return named
    wanted = _canonical(request_part(setup))
    found = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        recorded = recorded_setup(folder)
        if recorded is not None and _canonical(request_part(recorded)) == wanted:
            found.append(folder)
    if not found:
        return named
    return max(found, key=lambda f: (max((p.name for p in f.glob("*_results.json")), default=""), f.name))


def recorded_setup(folder: Path) -> dict[str, Any] | None:
    """The judge setup a judged folder records: its `judge_setup.json`, else (a folder written before that file
    existed) the `judge_setup` of its newest judged results; None when it records none or cannot be read."""
    record = folder / SETUP_RECORD
    try:
        if record.is_file():
            doc = json.loads(record.read_text(encoding="utf-8"))
            setup = doc.get("judge_setup") if isinstance(doc, dict) else None
            return dict(setup) if isinstance(setup, dict) else None
        newest = max(folder.glob("*_results.json"), key=lambda p: p.name, default=None)
        if newest is None:
            return None
        setup = (json.loads(newest.read_text(encoding="utf-8")).get(MARKER) or {}).get("judge_setup")
    except (OSError, ValueError, AttributeError):
        return None
    return dict(setup) if isinstance(setup, dict) and setup else None


def served_conflicts(recorded: Mapping[str, Any], setup: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(each real difference between what `recorded` and `setup` say is served, as "<benchmark> <role> <model>:
    recorded <A>, the endpoint reports <B> now"; {model: recorded identity} for every model the endpoint did not
    report now but the record knows)."""
    from judges.fingerprint import NOT_REPORTED, served_by_role, served_difference, show

    conflicts: list[str] = []
    assume: dict[str, Any] = {}
    rec_fps, now_fps = recorded.get("judge_fingerprint") or {}, setup.get("judge_fingerprint") or {}
    if not isinstance(rec_fps, Mapping) or not isinstance(now_fps, Mapping):
        return conflicts, assume
    for bench, fp in sorted(now_fps.items()):
        rec = rec_fps.get(bench)
        if not isinstance(fp, Mapping) or not isinstance(rec, Mapping):
            continue
        rec_roles = served_by_role(rec)
        for role, (model, served) in sorted(served_by_role(fp).items()):
            if role not in rec_roles or rec_roles[role][0] != model:
                continue
            was = rec_roles[role][1]
            if served_difference(was, served):
                conflicts.append(
                    f"{bench} {role} {model}: recorded {show(was)}, the endpoint reports {show(served)} now"
                )
            elif served == NOT_REPORTED and isinstance(was, Mapping):
                assume[model] = was
    return conflicts, assume


def setup_shutdown(setup: Mapping[str, Any], env: Mapping[str, str], ask: bool = True) -> dict[str, Any]:
    """What the endpoint says of the shutdown of the setup's judge models (`judges.shutdown.record`: {model:
    {date, roles}}), said once per model per process (`warn_shutdowns`).  Recorded beside the setup in
    `judge_setup.json` and in the judged results, never hashed: a date that appears, moves or vanishes changes
    no folder and no key."""
    from judges.config import EndpointConfig
    from judges.fingerprint import served_by_role
    from judges.shutdown import record, warn_shutdowns

    fps = setup.get("judge_fingerprint")
    pairs = sorted({(role, model) for fp in (fps.values() if isinstance(fps, Mapping) else ())
                    if isinstance(fp, Mapping) for role, (model, _) in served_by_role(fp).items()})  # fmt: skip
    if not pairs:
        return {}
    try:
        endpoint = EndpointConfig.from_env(env)
    except Exception:  # noqa: BLE001 - an unusable endpoint fails later, with its own message
        return {}
    return record(pairs, warn_shutdowns(endpoint, pairs, ask=ask))


def settle(
    folder: Path,
    setup: Mapping[str, Any],
    env: Mapping[str, str],
    rebuild: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Check what the endpoint reports now against what `folder` recorded, and record it; the setup to judge with.

    A real difference (both reported, not equal) is a StageRefused (exit 2) naming both values.  A model the
    endpoint does not report now is assumed to be served what the folder recorded (`assume_served`), and the setup
    is built again (`rebuild`) so its fingerprint says so.  The folder's record is then the setup (what a rerun
    checks against) and, beside it, what the endpoint says of its models' shutdown (`setup_shutdown`, never
    compared); a folder holding another request's results (--out) is neither checked nor recorded."""
    from judges.atomic import atomic_write_text
    from judges.config import EndpointConfig
    from judges.fingerprint import assume_served

    recorded = recorded_setup(folder)
    if recorded is not None and _canonical(request_part(recorded)) != _canonical(request_part(setup)):
        return dict(setup)
    if recorded is not None:
        conflicts, assume = served_conflicts(recorded, setup)
        if conflicts:
            more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
            raise StageRefused(
                f"served model: {folder} was judged with another model behind the same name: {conflicts[0]}{more}. "
                "Judge into a folder of its own with --out FOLDER (compare then refuses to mix the two), or serve "
                "the recorded checkpoint again"
            )
        if assume:
            assume_served(EndpointConfig.from_env(env), assume)
            setup = rebuild()
    doc = {"schema": RECORD_SCHEMA, "judge_setup": dict(setup), "judge_shutdown": setup_shutdown(setup, env)}
    atomic_write_text(folder / SETUP_RECORD, json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    return dict(setup)
