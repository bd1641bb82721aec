"""`emo-tasks cache list [--cache DIR] [--run RUN ...] [--json]`: what the judge answer cache holds, per judge model
and role: how many verdicts, when the first and the last were stored, the runs (judged folders) they belong to and
the model's shutdown date, where known.

Why: a dated judge model shuts down one day (docs/judges.md#before-your-judge-shuts-down); its cached verdicts are
then the only copy, paid for once.  The list shows which of them to export (`emo-tasks cache export RUN`) before the
date.  The cache does not know runs or dates: with `--run RUN` (repeatable), each judged result under RUN is
re-judged from the cache alone, sending nothing (`cachefile.replay`, the export's own proof), and the keys it reads
name the verdicts of that judged folder; the date is what the result recorded of its judge endpoint
(`judge_shutdown`).  A result the cache cannot re-judge is a note, not a failure.  The counts are read with the
cache opened read-only.

Exit codes: 0 listed; 2 refused (a --run folder without judged results); 3 error (a bad argument, no cache or one
that cannot be read).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from emo_tasks.judging.cachefile import Refused, cache_dir_of, judged_results, replay
from emo_tasks.judging.stage_types import EXIT_ERROR, EXIT_OK, EXIT_REFUSED
from emo_tasks.results.judge_shutdown import KEY as SHUTDOWN_KEY
from emo_tasks.results.judge_shutdown import merged
from emo_tasks.results.layout import MARKER


def _when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cache_listing(cache: Path, runs: Sequence[Path] = ()) -> dict[str, Any]:
    """The document `cache list --json` prints: {"cache", "verdicts", "groups": [{model, role, verdicts,
    first_use, last_use, runs (None: no --run told), shutdown_date}], "notes"}."""
    from judges.cache_transfer import cache_file, holdings

    groups = holdings(cache)
    belongs: dict[tuple[str, str | None], set[str]] = {}
    recorded: list[Any] = []
    notes: list[str] = []
    for run in runs:
        files = judged_results(run)
        if not files:
            raise Refused(f"{run}: no judged results (RUN/judged/<setup>/*_results.json written by `emo-tasks judge`)")
        for results_file in files:
            recorded.append((json.loads(results_file.read_text(encoding="utf-8")).get(MARKER) or {}).get(SHUTDOWN_KEY))
            try:
                keys = replay(results_file, cache)
            except Refused as exc:
                notes.append(f"which verdicts {results_file.parent} holds is not known: {exc}")
                continue
            for g in holdings(cache, keys):
                belongs.setdefault((g["model"], g["role"]), set()).add(str(results_file.parent))
    dates = merged(recorded)
    out = []
    for g in groups:
        out.append({
            "model": g["model"], "role": g["role"], "verdicts": g["verdicts"],
            "first_use": _when(g["first"]), "last_use": _when(g["last"]),
            "runs": sorted(belongs.get((g["model"], g["role"]), ())) if runs else None,
            "shutdown_date": (dates.get(g["model"]) or {}).get("date"),
        })  # fmt: skip
    return {"cache": str(cache_file(cache)), "verdicts": sum(g["verdicts"] for g in groups), "groups": out,
            "notes": notes}  # fmt: skip


def render(doc: Mapping[str, Any]) -> str:
    """The listing as a table, one row per model and role."""
    lines = [f"judge answer cache {doc['cache']}: {doc['verdicts']} verdicts", ""]
    header = ["model", "role", "verdicts", "first use", "last use", "shutdown date", "runs"]
    rows = [[g["model"], g["role"] or "?", str(g["verdicts"]), g["first_use"] or "", g["last_use"] or "",
             g["shutdown_date"] or "not known", "not asked (--run)" if g["runs"] is None else
             (", ".join(g["runs"]) or "none of the runs given")] for g in doc["groups"]]  # fmt: skip
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    lines.extend(f"note: {n}" for n in doc["notes"])
    return "\n".join(lines) + "\n"


def list_cache(cache: Path, runs: Sequence[Path], as_json: bool, out: Any = None) -> int:
    """`emo-tasks cache list`: print the listing (text or JSON); 0."""
    doc = cache_listing(cache, runs)
    (out or sys.stdout).write(json.dumps(doc, indent=2) + "\n" if as_json else render(doc))
    return EXIT_OK


def main_list(args: argparse.Namespace) -> int:
    """`emo-tasks cache list` (the module docstring's exit codes)."""
    from judges.cache_transfer import TransferError

    try:
        return list_cache(cache_dir_of(args.cache), [Path(r) for r in args.run], args.json)
    except Refused as exc:
        print(f"emo-tasks cache list: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (TransferError, OSError, ValueError) as exc:
        print(f"emo-tasks cache list: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
