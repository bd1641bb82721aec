"""The calibration file's reader: what `compare`, `report --trend` and `plan-gate` trust before carrying a gate
across a judge change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emo_tasks.results.calibration import (
    CalibrationError,
    Shift,
    calibration_document,
    judge_identity,
    load_calibration,
)

REF = {"judge_models": {"step": "gpt-4.1-2025-04-14", "judge": "gpt-4o-2024-11-20"}, "judge_protocol": "paper"}
CAND = {"judge_models": {"step": "qwen-72b", "judge": "qwen-vl-72b"}, "judge_protocol": "paper"}


def _write(tmp_path: Path, **change: object) -> Path:
    shift = Shift("mme", "mme_emotion_er_lab", "cot", 40, -0.5, -1.25, 0.25, 1.0, False)
    doc = calibration_document({"identity": REF, "runs": ["a"]}, {"identity": CAND, "runs": ["b"]}, [shift],
                               tolerance={"default": 1.0}, rule="r", level=0.95, created="now")  # fmt: skip
    doc.update(change)
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_written_document_reads_back_and_matches_only_its_own_judges(tmp_path: Path) -> None:
    cal = load_calibration(_write(tmp_path))
    assert cal.data["verdict"] == "not interchangeable"
    s = cal.shift("mme_emotion_er_lab", "cot")
    assert s is not None and s.shift == -0.5 and s.half_width() == pytest.approx(0.75)
    assert cal.shift("mme_emotion_er_lab", "rec") is None
    assert cal.mismatch(judge_identity({**REF, "judge_endpoint": "x:1", "judge_mode": "api"}), CAND) is None
    why = cal.mismatch(CAND, REF)
    assert why and "reference judge differs in judge_models" in why and "candidate judge differs" in why
    # compare's rule (issue 42 item 3): a fingerprint recorded on one side only is compared on the other keys;
    # recorded on both sides and different, it is another judge
    assert cal.mismatch({**REF, "judge_fingerprint": {"protocol": "p", "roles": {}}}, CAND) is None
    both = load_calibration(_write(tmp_path, reference={"identity": {**REF, "judge_fingerprint": {"protocol": "p"}},
                                                        "runs": ["a"]}))  # fmt: skip
    why = both.mismatch({**REF, "judge_fingerprint": {"protocol": "q"}}, CAND)
    assert why and "judge_fingerprint" in why


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": "other/1"}, "expected 'emo-tasks/judge-calibration/1'"),
        ({"shifts": []}, "no shifts"),
        ({"reference": {"identity": {}}}, "reference.identity records no judge models"),
        (
            {"shifts": [{"benchmark": "mme", "task": "t", "metric": "m", "n": 3, "shift": "x", "tolerance": 1}]},
            "shifts[0].shift is 'x'",
        ),
    ],
)
def test_a_bad_file_is_refused_naming_what_is_wrong(tmp_path: Path, change: dict, message: str) -> None:
    path = _write(tmp_path, **change)
    with pytest.raises(CalibrationError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        load_calibration(path)
    assert str(path) in str(err.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="no such calibration file"):
        load_calibration(tmp_path / "nope.json")


def _shift_row(**change: object) -> dict:
    """The one shift of `_write`'s file (-0.5 [-1.25, +0.25], n 40, tolerance 1) with `change` applied."""
    row = {"benchmark": "mme", "task": "mme_emotion_er_lab", "metric": "cot", "n": 40, "shift": -0.5,
           "ci_low": -1.25, "ci_high": 0.25, "tolerance": 1.0, "interchangeable": False}  # fmt: skip
    return {**row, **change}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # the shift moved 30 points past its own CI (issue 42: compare exited 0 with it)
        ({"shifts": [_shift_row(shift=30.25)]}, "shift +30.25 lies outside its own CI [-1.25, +0.25]"),
        ({"shifts": [_shift_row(shift=-2.0)]}, "shift -2 lies outside its own CI [-1.25, +0.25]"),
        ({"shifts": [_shift_row(ci_low=0.25, ci_high=-1.25)]}, "its CI is inverted (ci_low +0.25 > ci_high -1.25)"),
        ({"shifts": [_shift_row(n=0)]}, "n is 0: a shift measured on no paired sample"),
        ({"shifts": [_shift_row(ci_high=None)]}, "its CI has one bound only (ci_low -1.25, ci_high None)"),
        ({"shifts": [_shift_row(tolerance=-1.0)]}, "tolerance -1 is negative"),
        ({"shifts": [_shift_row(interchangeable=True)]}, "interchangeable is true, but its CI [-1.25, +0.25]"),
        ({"shifts": [_shift_row(), _shift_row(shift=0.0)]}, "shifts[0] already calibrates mme_emotion_er_lab cot"),
    ],
)
def test_a_file_that_contradicts_itself_is_refused_naming_the_shift(tmp_path: Path, change: dict, message: str) -> None:
    path = _write(tmp_path, **change)
    with pytest.raises(CalibrationError) as err:
        load_calibration(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: shifts[")
    assert "(mme_emotion_er_lab cot) contradicts itself: " in text and message in text, text
    assert "emo-tasks calibrate" in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shifts": [_shift_row(n=-3)]}, "shifts[0].n is -3, not a count"),
        ({"shifts": [_shift_row(n=2.5)]}, "shifts[0].n is 2.5, not a count"),
        ({"shifts": [_shift_row(n=True)]}, "shifts[0].n is True, not a count"),
        ({"shifts": [_shift_row(ci_low=float("nan"))]}, "shifts[0].ci_low is nan, not a finite number"),
        ({"shifts": [_shift_row(ci_high=float("inf"))]}, "shifts[0].ci_high is inf, not a finite number"),
        ({"shifts": [_shift_row(shift=float("-inf"))]}, "shifts[0].shift is -inf, not a finite number"),
        ({"level": 95}, "level is 95, not a confidence level in (0, 1)"),
        ({"level": float("nan")}, "level is nan, not a confidence level in (0, 1)"),
        ({"verdict": "interchangeable"}, "verdict 'interchangeable' contradicts its shifts (mme_emotion_er_lab cot"),
    ],
)
def test_a_bad_count_number_level_or_verdict_is_refused(tmp_path: Path, change: dict, message: str) -> None:
    """n negative or not an integer, a number that is not finite (JSON's NaN and Infinity, which Python reads), a
    level that is no confidence level, an overall verdict its shifts contradict."""
    path = _write(tmp_path, **change)
    with pytest.raises(CalibrationError) as err:
        load_calibration(path)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_a_consistent_file_with_edge_values_reads(tmp_path: Path) -> None:
    """The shift on its CI's bound (a percentile may equal the mean), a zero-width CI, no CI from one sample, and an
    interchangeable shift whose CI touches ±tolerance all read."""
    rows = [
        _shift_row(task="a", shift=-1.25),
        _shift_row(task="b", shift=0.0, ci_low=0.0, ci_high=0.0, interchangeable=True),
        _shift_row(task="c", n=1, ci_low=None, ci_high=None),
        _shift_row(task="d", shift=0.0, ci_low=-1.0, ci_high=1.0, interchangeable=True),
    ]
    cal = load_calibration(_write(tmp_path, shifts=rows, verdict="not interchangeable"))
    assert [s.task for s in cal.shifts] == ["a", "b", "c", "d"]
