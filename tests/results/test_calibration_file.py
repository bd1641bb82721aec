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
