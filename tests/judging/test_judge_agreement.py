"""`emo-tasks agreement RUN_A RUN_B`: judge-vs-judge calibration on two hand-built judged run folders.

Every number is checked against an independent reference: scipy's spearmanr, sklearn's cohen_kappa_score, an
ICC(2,1) written out here, numpy means, and Rec-S / Rea-S / CoT-S computed by hand from the raw ratings.  The
runs hold two tasks (16 samples), different ratings, one rating-count mismatch, one judge failure, one sample
judged only in A and one whose answer differs; run A also holds an older judged result that must be ignored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import env_without_secrets, icc21_reference

from emo_tasks import cli
from emo_tasks.judging import agreement_report

FAILED = "judge_failed"
ANSWER = "Step 1: the face ... Step 2: so the emotion is {}"

# (task key, row) -> (A's ratings, B's ratings); FAILED marks a judge failure, None "not judged in that run".
ER_LAB = "mme_emotion_er_lab"
SA = "mme_emotion_sa"
DATA: dict[tuple[str, int], tuple] = {
    ("ER-Lab", 0): ([[1, 1], [1, 1], [1, 1]], [[1, 1], [0, 1], [1, 1]]),
    ("ER-Lab", 1): ([[0, 1], [1, 1], [0, 1]], [[0, 1], [1, 1], [0, 1]]),
    ("ER-Lab", 2): ([[1, 1], [0, 1]], [[1, 1], [1, 1]]),
    ("ER-Lab", 3): ([[1, 1], [1, 1], [0, 1], [1, 1]], [[1, 1], [1, 1], [1, 1]]),  # count mismatch
    ("ER-Lab", 4): ([[1, 1], [1, 1]], FAILED),
    ("ER-Lab", 5): ([[0, 1], [0, 1], [0, 1]], [[0, 1], [1, 1], [0, 1]]),
    ("ER-Lab", 6): ([[1, 1], [1, 1], [1, 1]], [[1, 1], [1, 1], [1, 1]]),
    ("ER-Lab", 7): ([[1, 1], [0, 1]], [[0, 1], [0, 1]]),
    ("ER-Lab", 8): ([[1, 1]], None),  # only in A
    ("ER-Lab", 9): ([[1, 1], [1, 1]], [[0, 1], [1, 1]]),  # B judged a different answer
    ("SA", 0): ([[1, 2], [1, 1]], [[1, 1], [1, 1]]),
    ("SA", 1): ([[2, 3], [0, 1]], [[1, 3], [0, 1]]),
    ("SA", 2): ([[1, 1], [1, 1], [1, 1]], [[1, 1], [1, 2], [1, 1]]),
    ("SA", 3): ([[0, 0], [1, 1]], [[0, 1], [1, 1]]),  # den 0 -> 0
    ("SA", 4): ([[1, 1], [0, 1]], [[1, 1], [1, 1]]),
    ("SA", 5): ([[1, 2], [1, 2]], [[1, 2], [0, 1]]),
    ("SA", 6): ([[1, 1]], [[1, 1]]),  # one rating: Rea 0
}
LEAF = {"ER-Lab": ER_LAB, "SA": SA}
ALPHA_A = {ER_LAB: 0.5, SA: 0.5}
ALPHA_B = {ER_LAB: 0.7, SA: None}  # B's SA summary is missing: alpha 0.5
MODELS_A = {"step": "gpt-4o", "judge": "gpt-4o"}
MODELS_B = {"step": "Qwen2.5-VL-72B", "judge": "Qwen2.5-VL-72B"}


def _value(r: list[int]) -> float:
    return 0.0 if r[1] == 0 else r[0] / r[1]


def _log_row(key: str, row: int, ratings, answer: str) -> dict:
    """One judge-log line as emo_tasks.mme_emotion.hooks.log_row writes it."""
    base = {"task": key, "row": row, "video_id": f"{key}/{row}.mp4", "label": "happy", "answer": answer}
    if ratings == FAILED:
        return {**base, "status": FAILED, "failed_stage": "judge", "ratings": [], "recognition": None,
                "reasoning": None, "n_steps": None}  # fmt: skip
    vals = [_value(r) for r in ratings]
    rea = sum(vals[:-1]) / (len(vals) - 1) if len(vals) > 1 else 0.0
    return {**base, "status": "scored", "failed_stage": None, "ratings": ratings, "recognition": vals[-1],
            "reasoning": rea, "n_steps": len(vals)}  # fmt: skip


def _write_result(folder: Path, side: int, stamp: str, alpha: dict, models: dict, data=DATA) -> None:
    logs = folder / "emo_tasks_judge"
    logs.mkdir(parents=True, exist_ok=True)
    for leaf in sorted({LEAF[k] for k, _ in data}):
        lines = []
        for (key, row), pair in data.items():
            ratings = pair[side]
            if LEAF[key] != leaf or ratings is None:
                continue
            answer = ANSWER.format("joy" if side == 1 and (key, row) == ("ER-Lab", 9) else "happy")
            lines.append(json.dumps(_log_row(key, row, ratings, answer)))
        (logs / f"{leaf}_{stamp}_judge.jsonl").write_text("\n".join(lines) + "\n")
        if alpha.get(leaf) is not None:
            summary = {"benchmark": "MME-Emotion", "judge_mode": "api", "judge_protocol": "paper",
                       "judge_models": models, "alpha": alpha[leaf]}  # fmt: skip
            (logs / f"{leaf}_{stamp}_summary.json").write_text(json.dumps(summary))


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run A: an old judged result at its top (all ratings swapped, must be ignored) and the newest one under
    judged/; run B: one judged result, plus an older ER-Lab log in the same folder (the newest per task wins)."""
    a, b = tmp_path / "run_a", tmp_path / "run_b"
    swapped = {k: (v[1], v[0]) for k, v in DATA.items() if v[1] not in (None, FAILED)}
    _write_result(a, 0, "20250101T000000", ALPHA_A, MODELS_A, swapped)
    _write_result(a / "judged" / "judge=gpt-4o,step=gpt-4o", 0, "20250301T120000", ALPHA_A, MODELS_A)
    _write_result(b, 1, "20250302T120000", ALPHA_B, MODELS_B)
    old = b / "emo_tasks_judge" / f"{ER_LAB}_20250201T000000_judge.jsonl"
    old.write_text("this older log is not JSON and must not be read\n")
    return a, b


# ------------------------------------------------------------------------------------------- the reference
def _reference(tasks: tuple[str, ...]) -> dict:
    """Paired values of the given task keys, computed from DATA alone (not from the logs)."""
    steps_a, steps_b, last_a, last_b = [], [], [], []
    scores = {"rec_s": ([], []), "rea_s": ([], []), "cot_s": ([], [])}
    counts = {"n_paired": 0, "n_count_mismatch": 0}
    for (key, row), (ra, rb) in DATA.items():
        if key not in tasks or rb in (None, FAILED) or (key, row) == ("ER-Lab", 9):
            continue
        counts["n_paired"] += 1
        va, vb = [_value(r) for r in ra], [_value(r) for r in rb]
        if len(va) == len(vb):
            steps_a += va
            steps_b += vb
        else:
            counts["n_count_mismatch"] += 1
        last_a.append(va[-1])
        last_b.append(vb[-1])
        for side, vals, alpha in ((0, va, ALPHA_A[LEAF[key]]), (1, vb, ALPHA_B[LEAF[key]] or 0.5)):
            rec = 100 * vals[-1]
            rea = 100 * (sum(vals[:-1]) / (len(vals) - 1) if len(vals) > 1 else 0.0)
            scores["rec_s"][side].append(rec)
            scores["rea_s"][side].append(rea)
            scores["cot_s"][side].append(alpha * rec + (1 - alpha) * rea)
    return {"steps": (steps_a, steps_b), "last_step": (last_a, last_b), "scores": scores, **counts}


def _check_agreement(got: dict, a: list[float], b: list[float]) -> None:
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    x, y = np.array(a), np.array(b)
    assert got["n"] == len(a)
    assert got["spearman"] == pytest.approx(spearmanr(x, y).statistic)
    labels_a, labels_b = ([f"{v:.9f}" for v in z] for z in (x, y))  # sklearn wants discrete labels
    assert got["cohen_kappa"] == pytest.approx(cohen_kappa_score(labels_a, labels_b))
    assert got["icc"] == pytest.approx(icc21_reference(np.column_stack([x, y])))
    assert got["mean_offset"] == pytest.approx(np.mean(y - x))


def _json(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, dict | None, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


# ---------------------------------------------------------------------------------------------------- tests
def test_every_statistic_matches_the_reference(runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    a, b = runs
    code, doc, err = _json(["agreement", str(a), str(b), "--format", "json", "--resamples", "500"], capsys)
    assert code == 0, err
    assert doc["schema"] == "emo-tasks/judge-agreement/1" and doc["icc_form"] == "ICC(2,1)"
    assert [t["task"] for t in doc["tasks"]] == [ER_LAB, SA] and [t["title"] for t in doc["tasks"]] == ["ER-Lab", "SA"]
    blocks = {ER_LAB: doc["tasks"][0], SA: doc["tasks"][1], "overall": doc["overall"]}
    refs = {ER_LAB: _reference(("ER-Lab",)), SA: _reference(("SA",)), "overall": _reference(("ER-Lab", "SA"))}
    for name, blk in blocks.items():
        ref = refs[name]
        assert blk["n_paired"] == ref["n_paired"] and blk["n_count_mismatch"] == ref["n_count_mismatch"], name
        _check_agreement(blk["steps"], *ref["steps"])
        _check_agreement(blk["last_step"], *ref["last_step"])
        for metric, (va, vb) in ref["scores"].items():
            s = blk["scores"][metric]
            assert s["n"] == len(va) == ref["n_paired"]
            assert s["a"] == pytest.approx(np.mean(va)) and s["b"] == pytest.approx(np.mean(vb)), (name, metric)
            assert s["delta"] == pytest.approx(np.mean(vb) - np.mean(va))
            assert s["ci_low"] <= s["delta"] <= s["ci_high"] and 0 < s["p_value"] <= 1
    er, sa = blocks[ER_LAB], blocks[SA]
    assert (er["n_paired"], er["n_count_mismatch"], er["n_not_scored"]) == (7, 1, 1)
    assert (er["n_only_a"], er["n_only_b"], er["n_answer_mismatch"]) == (1, 0, 1)
    assert er["status"] == {"a": {"scored": 10}, "b": {"judge_failed": 1, "scored": 8}}
    assert (sa["n_paired"], sa["n_count_mismatch"], doc["overall"]["n_paired"]) == (7, 0, 14)
    assert doc["overall"]["steps"]["n"] == 16 + 14 and doc["overall"]["last_step"]["n"] == 14


def test_scores_by_hand(runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    """ER-Lab's Rec/Rea/CoT written out from DATA (pairs 0, 1, 2, 3, 5, 6, 7; alpha A 0.5, B 0.7)."""
    code, doc, _ = _json(["agreement", *map(str, runs), "--format", "json"], capsys)
    assert code == 0
    s = doc["tasks"][0]["scores"]
    rec_a, rec_b = [1, 0, 0, 1, 0, 1, 0], [1, 0, 1, 1, 0, 1, 0]
    rea_a = [1, 0.5, 1, 2 / 3, 0, 1, 1]
    rea_b = [0.5, 0.5, 1, 1, 0.5, 1, 0]
    assert s["rec_s"]["a"] == pytest.approx(100 * 3 / 7) and s["rec_s"]["b"] == pytest.approx(100 * 4 / 7)
    assert s["rea_s"]["a"] == pytest.approx(100 * sum(rea_a) / 7)
    assert s["rea_s"]["b"] == pytest.approx(100 * sum(rea_b) / 7)
    cot_a = 0.5 * 100 * sum(rec_a) / 7 + 0.5 * 100 * sum(rea_a) / 7
    cot_b = 0.7 * 100 * sum(rec_b) / 7 + 0.3 * 100 * sum(rea_b) / 7
    assert s["cot_s"]["a"] == pytest.approx(cot_a) and s["cot_s"]["b"] == pytest.approx(cot_b)
    assert s["cot_s"]["delta"] == pytest.approx(cot_b - cot_a)
    assert any("alpha differs" in n for n in doc["notes"])
    assert doc["runs"]["b"]["alpha"] == {ER_LAB: 0.7, SA: 0.5}


def test_bootstrap_is_seeded_and_paired(runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    from emo_tasks.results import stats

    argv = ["agreement", *map(str, runs), "--format", "json", "--resamples", "300", "--seed", "7"]
    _, first, _ = _json(argv, capsys)
    _, again, _ = _json(argv, capsys)
    assert first == again
    va, vb = _reference(("ER-Lab", "SA"))["scores"]["rea_s"]
    ref = stats.paired_bootstrap(va, vb, n_resamples=300, seed=7)
    got = first["overall"]["scores"]["rea_s"]
    assert (got["ci_low"], got["ci_high"], got["p_value"]) == pytest.approx((ref.low, ref.high, ref.p_value))


def test_newest_result_and_logs_used(runs: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    a, b = runs
    code = cli.main(["agreement", str(a), str(b)])
    out, err = capsys.readouterr()
    assert code == 0, err
    chosen = a / "judged" / "judge=gpt-4o,step=gpt-4o"
    assert f"A: 2 judged results under {a}; using the newest, {chosen}" in err
    assert f"A {ER_LAB}: {chosen / 'emo_tasks_judge' / f'{ER_LAB}_20250301T120000_judge.jsonl'}" in out
    assert f"B {ER_LAB}: {b / 'emo_tasks_judge' / f'{ER_LAB}_20250302T120000_judge.jsonl'}" in out
    for text in ("Rating agreement", "Overall", "Rec-S", "CoT-S", "judge gpt-4o", "judge Qwen2.5-VL-72B"):
        assert text in out
    assert "ER-Lab: left out: 1 only in A, 1 not scored in A or B, 1 with different answers" in out
    assert "no mme_emotion_sa_20250302T120000_summary.json; alpha 0.5" in out


def test_constant_ratings_give_null_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = {("SA", r): ([[1, 1], [1, 1]], [[1, 1], [1, 1]]) for r in range(3)}
    _write_result(tmp_path / "a", 0, "20250101T000000", ALPHA_A, MODELS_A, data)
    _write_result(tmp_path / "b", 1, "20250101T000000", ALPHA_A, MODELS_B, data)
    code, doc, err = _json(["agreement", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json"], capsys)
    assert code == 0, err
    last = doc["overall"]["last_step"]
    assert last["n"] == 3 and last["mean_offset"] == 0.0
    assert last["spearman"] is None and last["cohen_kappa"] is None and last["icc"] is None
    assert any(n.startswith("spearman undefined") for n in last["notes"]) and len(last["notes"]) == 3
    assert doc["overall"]["scores"]["rec_s"]["delta"] == 0.0
    assert cli.main(["agreement", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "n/a" in capsys.readouterr().out
    one = agreement_report.rating_agreement([0.5], [1.0])
    assert one["n"] == 1 and one["mean_offset"] == 0.5 and one["spearman"] is None and one["icc"] is None


def test_no_shared_scored_sample_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    only_failed = {("ER-Lab", 0): ([[1, 1]], FAILED), ("ER-Lab", 1): ([[1, 1]], None)}
    _write_result(tmp_path / "a", 0, "20250101T000000", ALPHA_A, MODELS_A, only_failed)
    _write_result(tmp_path / "b", 1, "20250101T000000", ALPHA_A, MODELS_B, only_failed)
    assert cli.main(["agreement", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "run B has no scored sample (judge_failed 1)" in capsys.readouterr().err
    _write_result(tmp_path / "c", 1, "20250101T000000", ALPHA_A, MODELS_B, {("SA", 0): ([[1, 1]], [[1, 1]])})
    assert cli.main(["agreement", str(tmp_path / "a"), str(tmp_path / "c")]) == 2
    assert "no task is judged in both runs" in capsys.readouterr().err
    assert cli.main(["agreement", str(tmp_path / "a"), str(tmp_path / "a" / "emo_tasks_judge")]) == 2
    assert "A and B are the same judged result" in capsys.readouterr().err


def test_unreadable_input_exits_3(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = runs
    (tmp_path / "empty").mkdir()
    bad = tmp_path / "bad" / "emo_tasks_judge"
    bad.mkdir(parents=True)
    (bad / f"{SA}_20250101T000000_judge.jsonl").write_text('{"task": "SA", "row": 0, "status": "scored"}\n')
    broken = tmp_path / "broken" / "emo_tasks_judge"
    broken.mkdir(parents=True)
    (broken / f"{SA}_20250101T000000_judge.jsonl").write_text("{not json\n")
    cases = {
        str(tmp_path / "missing"): "no such directory",
        str(tmp_path / "empty"): "no MME-Emotion or EmoBench-M judge log",
        str(tmp_path / "bad"): "_judge.jsonl:1: a scored sample needs 'ratings'",
        str(tmp_path / "broken"): "_judge.jsonl:1: not valid JSON",
    }
    for path, message in cases.items():
        assert cli.main(["agreement", str(a), path]) == 3, path
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (path, err)
    ratings = tmp_path / "r.jsonl"
    ratings.write_text('{"item": "x", "rating": 1}\n')
    assert cli.main(["agreement", str(a), str(ratings)]) == 3
    assert "not a run folder" in capsys.readouterr().err
    assert cli.main(["agreement", str(a), str(b), "--resamples", "0"]) == 3
    assert "argument --resamples: '0': expected an integer >= 1" in capsys.readouterr().err


def test_jsonl_form_still_works(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    judge, human = tmp_path / "j.jsonl", tmp_path / "h.jsonl"
    judge.write_text("".join(json.dumps({"item": f"i{i}", "rating": r}) + "\n" for i, r in enumerate([1, 0, 1, 1])))
    human.write_text("".join(json.dumps({"item": f"i{i}", "rating": r}) + "\n" for i, r in enumerate([1, 0, 0, 1])))
    code, doc, err = _json(["agreement", str(judge), str(human), "--format", "json"], capsys)
    assert code == 0, err
    assert doc["n"] == 4 and doc["judge_file"] == str(judge) and "schema" not in doc


@pytest.mark.slow  # a subprocess: not in the fast tier
def test_cli_subprocess_json(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    env = {**env_without_secrets(), "EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_PROGRESS": "0"}
    argv = ["agreement", *map(str, runs), "--format", "json", "--resamples", "200", "--seed", "3"]
    res = subprocess.run([sys.executable, "-m", "emo_tasks", *argv], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    _, in_process, _ = _json(argv, capsys)
    assert json.loads(res.stdout) == in_process
