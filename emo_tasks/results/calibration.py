"""A judge calibration file (`calibration.json`, written by `emo-tasks calibrate`): how far a candidate judge's
numbers sit from a reference judge's on the same answers, per benchmark, task and headline metric, and the two
judges' identities, so that `compare`, `report --trend` and `plan-gate` can carry a gate or a trend across a judge
change (docs/judges.md#changing-the-judge).

Why its own module in `results/`: the calibrate command writes it (`judging/`), and the readers sit in `results/`
(trend) and `gate/` (compare, plan-gate); one reader with one validation keeps them agreeing on what a file proves.
Files in, files out: no network.

The document (schema `emo-tasks/judge-calibration/1`):

    {
      "schema": "emo-tasks/judge-calibration/1",
      "created": str,                          # ISO time, for people; never compared
      "reference": Side, "candidate": Side,
      "level": 0.95,                           # the shifts' confidence level
      "tolerance": {"default": float, metric: float, ...},
      "rule": str,                             # the verdict rule in words, as printed
      "shifts": [Shift, ...],                  # one per (benchmark, task, metric) calibrated
      "verdict": "interchangeable" | "not interchangeable",
      ...                                      # agreement, ranking, pairs: the calibrate command's own figures
    }
    Side = {
      "identity": {summary key: value},        # `judge_identity` of the judged results (one value over all tasks)
      "runs": [str, ...]                       # the judged folders read, one per model
    }
    Shift = {
      "benchmark": str, "task": str, "metric": str,
      "n": int,                                # paired samples the shift is measured on
      "shift": float,                          # candidate - reference, in the metric's own units
      "ci_low": float | null, "ci_high": float | null,
      "tolerance": float,
      "interchangeable": bool                  # the CI lies inside [-tolerance, +tolerance]
    }

Read, a file must agree with itself (`contradiction`, `load_calibration`): a shift inside its own CI, the CI not
inverted and with both bounds or none, n >= 1, a tolerance >= 0, "interchangeable" only where the CI lies inside
±tolerance, one shift per (benchmark, task, metric), a stated level in (0, 1) and a verdict that is its shifts'.
A file that does not is refused (CalibrationError, exit 2), never applied: its numbers were not all measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = "emo-tasks/judge-calibration/1"

#: The summary keys that say which judge made a result (models per role, protocol, alpha, audio clues and the
#: judge fingerprint where recorded).  Not the endpoint (the same judge served from another host) nor the mode.
IDENTITY_KEYS = ("judge_models", "judge_protocol", "alpha", "audio_clues", "judge_fingerprint")


class CalibrationError(ValueError):
    """A calibration file that cannot be used; the message names the file and what is wrong (exit 2)."""


def judge_identity(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """The judge identity a benchmark summary records (`IDENTITY_KEYS` with a value); {} for none."""
    summary = summary or {}
    return {k: summary[k] for k in IDENTITY_KEYS if summary.get(k) not in (None, "", {}, [])}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def identity_difference(recorded: Mapping[str, Any], calibrated: Mapping[str, Any]) -> list[str]:
    """The identity keys whose values differ between a run's judge and a calibration side ([]: the same judge), by
    the one rule compare uses too (`same_judge`: "not reported" is never a difference)."""
    from emo_tasks.results.same_judge import identity_difference as differ

    return differ(recorded, calibrated, IDENTITY_KEYS)


@dataclass(frozen=True)
class Shift:
    """One calibrated headline: candidate - reference on the same answers, with its CI."""

    benchmark: str
    task: str
    metric: str
    n: int
    shift: float
    ci_low: float | None
    ci_high: float | None
    tolerance: float
    interchangeable: bool

    def half_width(self) -> float | None:
        """The CI's larger distance from the shift (None without a CI): what a gate across the change adds."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return max(self.shift - self.ci_low, self.ci_high - self.shift)


@dataclass(frozen=True)
class Calibration:
    """A read and checked calibration file."""

    path: Path
    reference: dict[str, Any]
    candidate: dict[str, Any]
    shifts: tuple[Shift, ...]
    rule: str
    data: dict[str, Any]

    def shift(self, task: str, metric: str) -> Shift | None:
        """The calibrated shift of `metric` in `task` (None: not calibrated)."""
        for s in self.shifts:
            if s.task == task and s.metric == metric:
                return s
        return None

    def mismatch(self, reference: Mapping[str, Any], candidate: Mapping[str, Any]) -> str | None:
        """Why this calibration does not carry a result judged as `reference` to one judged as `candidate`
        (identities as `judge_identity` gives them); None when both sides match."""
        parts = []
        for side, recorded, calibrated in (
            ("reference", reference, self.reference),
            ("candidate", candidate, self.candidate),
        ):
            keys = identity_difference(recorded, calibrated)
            if keys:
                parts.append(f"the {side} judge differs in {', '.join(keys)}")
        if not parts:
            return None
        return f"{self.path} does not calibrate these judges: " + "; ".join(parts)


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CalibrationError(f"{where} is {value!r}, not a finite number")
    return float(value)


#: What a self-contradicting file is told to do: the numbers came from somewhere else than `emo-tasks calibrate`.
_REDO = "not applied: write it again with `emo-tasks calibrate` rather than editing it"

#: Float room for a shift that sits on its CI's bound (the bootstrap's percentile may equal the mean).
_EPS = 1e-9


def _near(a: float, b: float) -> float:
    return _EPS * max(1.0, abs(a), abs(b))


def contradiction(s: Shift) -> str | None:
    """What makes a shift contradict itself (None: consistent): a CI with one bound, an inverted CI, a shift
    outside its own CI, no paired sample, a negative tolerance, or an "interchangeable" its CI does not prove.
    Why: the gate subtracts the shift and widens by the CI; a file whose numbers disagree with each other (edited
    by hand, or written by another tool) would carry a gate on numbers nothing measured, and pass it (issue 42)."""
    lo, hi = s.ci_low, s.ci_high
    if s.n == 0:
        return "n is 0: a shift measured on no paired sample"
    if s.tolerance < 0:
        return f"tolerance {s.tolerance:g} is negative"
    if (lo is None) != (hi is None):
        return f"its CI has one bound only (ci_low {lo!r}, ci_high {hi!r})"
    if lo is not None and hi is not None:
        if lo > hi + _near(lo, hi):
            return f"its CI is inverted (ci_low {lo:+.4g} > ci_high {hi:+.4g})"
        if not lo - _near(lo, s.shift) <= s.shift <= hi + _near(hi, s.shift):
            return f"shift {s.shift:+.4g} lies outside its own CI [{lo:+.4g}, {hi:+.4g}]"
    if s.interchangeable and (lo is None or hi is None or lo < -s.tolerance or hi > s.tolerance):
        ci = "no CI" if lo is None or hi is None else f"CI [{lo:+.4g}, {hi:+.4g}]"
        return f"interchangeable is true, but its {ci} does not lie inside ±{s.tolerance:g}"
    return None


def _check_level(path: Path, data: Mapping[str, Any]) -> None:
    """A level the file states must be a confidence level (absent: 0.95, as `judge_change.level_of` reads it)."""
    if "level" not in data:
        return
    level = data["level"]
    ok = isinstance(level, int | float) and not isinstance(level, bool) and math.isfinite(level) and 0 < level < 1
    if not ok:
        raise CalibrationError(f"{path}: level is {level!r}, not a confidence level in (0, 1); {_REDO}")


def _check_verdict(path: Path, data: Mapping[str, Any], shifts: Sequence[Shift]) -> None:
    """The file's overall verdict must be its shifts' (one not interchangeable: not interchangeable)."""
    verdict = data.get("verdict")
    if verdict is None:
        return
    expected = "interchangeable" if all(s.interchangeable for s in shifts) else "not interchangeable"
    if verdict != expected:
        bad = next((f"{s.task} {s.metric}" for s in shifts if not s.interchangeable), None)
        why = f"{bad} is not interchangeable" if bad else "every shift is interchangeable"
        raise CalibrationError(f"{path}: verdict {verdict!r} contradicts its shifts ({why}); {_REDO}")


def load_calibration(path: str | Path) -> Calibration:
    """Read and check a calibration file; CalibrationError (one line naming the file and the field) otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationError(f"{path}: no such calibration file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path}: not a readable JSON file ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise CalibrationError(f"{path}: schema {got!r}, expected {SCHEMA!r} (written by `emo-tasks calibrate`)")
    sides = {}
    for side in ("reference", "candidate"):
        identity = (data.get(side) or {}).get("identity") if isinstance(data.get(side), dict) else None
        if not isinstance(identity, dict) or not identity.get("judge_models"):
            raise CalibrationError(f"{path}: {side}.identity records no judge models")
        sides[side] = identity
    rows = data.get("shifts")
    if not isinstance(rows, list) or not rows:
        raise CalibrationError(f"{path}: no shifts")
    shifts: list[Shift] = []
    seen: dict[tuple[str, str, str], int] = {}
    for i, row in enumerate(rows):
        where = f"{path}: shifts[{i}]"
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("benchmark", "task", "metric")):
            raise CalibrationError(f"{where} names no benchmark, task and metric")
        shift = _number(row.get("shift"), f"{where}.shift")
        tolerance = _number(row.get("tolerance"), f"{where}.tolerance")
        if shift is None or tolerance is None:
            raise CalibrationError(f"{where} has no shift or no tolerance")
        n = row.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise CalibrationError(f"{where}.n is {n!r}, not a count")
        s = Shift(
            benchmark=row["benchmark"],
            task=row["task"],
            metric=row["metric"],
            n=n,
            shift=shift,
            ci_low=_number(row.get("ci_low"), f"{where}.ci_low"),
            ci_high=_number(row.get("ci_high"), f"{where}.ci_high"),
            tolerance=tolerance,
            interchangeable=bool(row.get("interchangeable")),
        )
        why = contradiction(s)
        if why:
            raise CalibrationError(f"{where} ({s.task} {s.metric}) contradicts itself: {why}; {_REDO}")
        key = (s.benchmark, s.task, s.metric)
        if key in seen:
            raise CalibrationError(
                f"{where} ({s.task} {s.metric}) contradicts itself: shifts[{seen[key]}] already calibrates "
                f"{s.task} {s.metric}; {_REDO}"
            )
        seen[key] = i
        shifts.append(s)
    _check_level(path, data)
    _check_verdict(path, data, shifts)
    return Calibration(
        path=path,
        reference=sides["reference"],
        candidate=sides["candidate"],
        shifts=tuple(shifts),
        rule=str(data.get("rule") or ""),
        data=data,
    )


def calibration_document(
    reference: Mapping[str, Any],
    candidate: Mapping[str, Any],
    shifts: Sequence[Shift],
    *,
    tolerance: Mapping[str, float],
    rule: str,
    level: float,
    created: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document `load_calibration` reads (`reference`/`candidate`: {"identity": ..., "runs": [...]})."""
    return {
        "schema": SCHEMA,
        "created": created,
        "reference": dict(reference),
        "candidate": dict(candidate),
        "level": level,
        "tolerance": dict(tolerance),
        "rule": rule,
        "shifts": [s.__dict__.copy() for s in shifts],
        "verdict": "interchangeable" if all(s.interchangeable for s in shifts) else "not interchangeable",
        **dict(extra or {}),
    }
