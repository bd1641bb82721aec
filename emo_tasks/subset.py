"""Runs on a planned subset of rows (`EMO_SUBSET=SUBSET.json`, issue 23): the rows a CI gate runs on, named by
stable per-sample keys, kept by each benchmark's `load_task` before anything runs, and recorded in the run.

Why: a gate on every checkpoint cannot afford the full 6,500-video run, and lmms-eval's `--limit` keeps the
*first* rows of each task (biased, of unknown power).  `emo-tasks plan-gate` draws, from an accepted run, a
stratified random subset big enough for compare's paired tests to catch a stated drop; the subset is this file.

The file (`emo_tasks_subset: 1`): `rows` maps each task's `dataset_name` (as its YAML names it, e.g.
`mme_emotion/benchmark/ER-Lab`, `mvei/benchmark`) to the unit keys kept, as strings — an MME-Emotion row number
(`row`), an MVEI `pair_id`, a MultiEmo `image_id`: the keys `emo-tasks report` pairs runs on, the same in a full
and a subset run (a run's `doc_id`s are not: they index the rows it ran).  `plan` holds what plan-gate planned
(the drop, the power, the level, the base run; informational).  Every key must name a row of the data now and a
task run under a subset must be in it: anything else is a DataError before inference, naming the file.

A task run on a subset records, in its config's `metadata.emo_subset` (lmms-eval writes it into the results file
even with --predict_only), the subset's name, its keys for that task and their digest: the judge stage re-applies
them without the file, and `emo-tasks compare` knows the run is a subset and of which rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError

ENV = "EMO_SUBSET"
FORMAT = 1
#: The key of a task config's `metadata` a subset run records itself under.
RECORD = "emo_subset"


def digest(keys: Sequence[str]) -> str:
    """sha256[:16] over a task's sorted unit keys: which rows, not in which order."""
    return hashlib.sha256(json.dumps(sorted(keys)).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Subset:
    """A subset file, read and checked."""

    path: Path
    name: str
    rows: dict[str, tuple[str, ...]]
    plan: dict[str, Any] = field(default_factory=dict)

    def keys_for(self, dataset_name: str) -> tuple[str, ...]:
        """The keys kept of a task; a task the subset has no rows for is an error (a subset of another dataset,
        or planned without this task)."""
        if dataset_name not in self.rows:
            raise DataError(
                f"{ENV}={self.path}: the subset {self.name!r} has no rows for {dataset_name} (it lists "
                f"{', '.join(sorted(self.rows))}): plan one that includes this task (`emo-tasks plan-gate`), or "
                f"unset {ENV} for a full run"
            )
        return self.rows[dataset_name]

    def record(self, dataset_name: str) -> dict[str, Any]:
        """What a run of `dataset_name` on this subset records in its task config (`RECORD`)."""
        keys = list(self.keys_for(dataset_name))
        return {"name": self.name, "file": str(self.path), "n": len(keys), "digest": digest(keys), "keys": keys,
                "plan": dict(self.plan)}  # fmt: skip


def parse(data: Any, path: Path) -> Subset:
    """A subset file's content, checked: the format, each task's keys non-empty strings, none twice."""
    if not isinstance(data, dict) or data.get("emo_tasks_subset") != FORMAT:
        raise DataError(f"{path}: not an emo-tasks subset file (expected \"emo_tasks_subset\": {FORMAT}; make one "
                        "with `emo-tasks plan-gate`)")  # fmt: skip
    rows = data.get("rows")
    if not isinstance(rows, dict) or not rows:
        raise DataError(f'{path}: "rows" must map each task\'s dataset_name to its unit keys')
    out: dict[str, tuple[str, ...]] = {}
    for name, keys in rows.items():
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
            raise DataError(f"{path}: rows[{name!r}] must be a non-empty list of unit keys (strings)")
        seen: set[str] = set()
        twice = [k for k in keys if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
        if twice:
            raise DataError(f"{path}: rows[{name!r}] lists {len(twice)} key(s) twice: {', '.join(twice[:10])}")
        out[str(name)] = tuple(keys)
    plan = data.get("plan") or {}
    if not isinstance(plan, dict):
        raise DataError(f'{path}: "plan" must be an object')
    return Subset(path, str(data.get("name") or path.stem), out, plan)


def load(path: str | Path) -> Subset:
    """Read a subset file; a missing or malformed one is a DataError naming it."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{ENV}={p}: no such subset file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{ENV}={p}: unreadable subset file ({exc})") from None
    return parse(data, p)


def from_env(env: Mapping[str, str]) -> Subset | None:
    """The subset `EMO_SUBSET` names, else None (a full run)."""
    value = (env.get(ENV) or "").strip()
    return load(value) if value else None


def restrict(
    dataset_name: str, docs: Sequence[dict[str, Any]], unit_of: Callable[[Mapping[str, Any]], str],
    env: Mapping[str, str],
) -> list[dict[str, Any]]:  # fmt: skip
    """The docs a run keeps: all of them without `EMO_SUBSET`; else those whose unit the subset lists for this
    task, in the data's order.  A key that names no row of the data now is a DataError naming the first ones (a
    subset planned on other data, or a typo): never a silently smaller run."""
    chosen = from_env(env)
    if chosen is None:
        return list(docs)
    keys = chosen.keys_for(dataset_name)
    present = {unit_of(d) for d in docs}
    unknown = [k for k in keys if k not in present]
    if unknown:
        raise DataError(
            f"{ENV}={chosen.path}: {len(unknown)} of the {len(keys)} keys it lists for {dataset_name} name no row "
            f"of the data ({', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}): the subset was planned "
            "on other data"
        )
    keep = set(keys)
    return [d for d in docs if unit_of(d) in keep]


def record_for(dataset_name: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    """What a task run now records of its subset (None: a full run)."""
    chosen = from_env(env)
    return None if chosen is None else chosen.record(dataset_name)


def recorded(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The subset a run's task ran on, as its results file records it (None: the full data)."""
    meta = config.get("metadata")
    rec = meta.get(RECORD) if isinstance(meta, dict) else None
    return rec if isinstance(rec, dict) and isinstance(rec.get("keys"), list) else None


def materialize(dataset_name: str, rec: Mapping[str, Any], folder: Path) -> Path:
    """A subset file holding a run's recorded keys for one task (content-addressed under `folder`), so a later
    stage re-applies exactly them without the original file."""
    from judges.atomic import atomic_write_text

    keys = [str(k) for k in rec["keys"]]
    path = folder / f"{digest([dataset_name, *sorted(keys)])}.json"  # the task's name too: tasks share row numbers
    if not path.is_file():
        body = {"emo_tasks_subset": FORMAT, "name": rec.get("name") or "recorded", "rows": {dataset_name: keys},
                "plan": rec.get("plan") or {}}  # fmt: skip
        atomic_write_text(path, json.dumps(body, indent=1) + "\n")
    return path


class SubsetMismatch(ValueError):
    """The subset a stage would use is not the one the run ran on."""


def stage_env(dataset_name: str, config: Mapping[str, Any], env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """The environment a later stage loads a task's rows with: the run's own subset, re-applied from its record.
    An `EMO_SUBSET` that differs from the record (or is set for a full run) is a SubsetMismatch: the answers
    would be mapped to other rows."""
    out = dict(env)
    rec = recorded(config)
    chosen = from_env(env)
    if rec is None:
        if chosen is not None:
            raise SubsetMismatch(
                f"{dataset_name}: {ENV} is set ({chosen.path}) but the run used the full data; unset it"
            )
        return out
    keys = [str(k) for k in rec["keys"]]
    if chosen is not None:
        mine = chosen.keys_for(dataset_name)
        if digest(list(mine)) != digest(keys):
            raise SubsetMismatch(
                f"{dataset_name}: the run ran on subset {rec.get('name')!r} ({len(keys)} rows, digest "
                f"{digest(keys)}), {ENV}={chosen.path} lists {len(mine)} rows (digest {digest(list(mine))}); unset "
                f"{ENV} (the run's own subset is recorded in its results)"
            )
        return out
    out[ENV] = str(materialize(dataset_name, rec, folder))
    return out
