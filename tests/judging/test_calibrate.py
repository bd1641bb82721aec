"""`emo-tasks calibrate REF CAND ...`: the verdict rule and Kendall's tau pinned by hand, and the command on judged
folders built as the judge stage writes them (`test_agreement_setups.write_judged`): identical numbers from a
differently named judge are interchangeable (shift 0), a planted shift is not (exit 1), three models give a
ranking, and what cannot be calibrated is refused in one line (exit 2).

Why: the calibration file lets `compare` carry a CI gate across a judge change; a wrong verdict, a shift pooled
from mixed judges or from other answers would move a baseline silently.  The run-from-lmms-eval form is
`test_calibrate_cli.py` (slow tier).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau
from test_agreement_setups import GPT, QWEN, write_judged
from test_judge_agreement import ER_LAB, SA

from emo_tasks import cli
from emo_tasks.judging import calibrate
from emo_tasks.results import stats
from emo_tasks.results.calibration import judge_identity, load_calibration

STAMP = "20250301T120000"
SMILE = "emobench_m_sample_smile"


# ------------------------------------------------------------------------------------------- pinned by hand
@pytest.mark.parametrize(
    ("low", "high", "tol", "verdict"),
    [
        (-0.5, 0.9, 1.0, True),
        (-1.0, 1.0, 1.0, True),  # the bounds belong to the tolerance
        (-1.01, 0.2, 1.0, False),
        (0.2, 1.5, 1.0, False),
        (1.5, 2.5, 1.0, False),  # a CI beside the band, shift and all
        (-0.5, 0.9, 0.5, False),
        (None, None, 100.0, False),  # no CI (fewer than 2 pairs): nothing proves it
    ],
)
def test_the_verdict_rule(low: float | None, high: float | None, tol: float, verdict: bool) -> None:
    assert calibrate.interchangeable(low, high, tol) is verdict
    assert calibrate.interchangeable(low, high, tol, n=calibrate.MIN_PAIRED) is verdict
    assert calibrate.interchangeable(low, high, tol, n=calibrate.MIN_PAIRED - 1) is False  # too few pairs


def test_kendall_tau_by_hand() -> None:
    # [1,2,3] vs [1,3,2]: pairs (1,2) and (1,3) concordant, (2,3) discordant: (2 - 1) / 3
    assert calibrate.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert calibrate.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # tau-b with a tie in x: C 2, D 0, ties in x 1 of 3 pairs: 2 / sqrt((3 - 1) * 3)
    assert calibrate.kendall_tau([1, 2, 2], [1, 2, 3]) == pytest.approx(2 / math.sqrt(6))
    assert calibrate.kendall_tau([1, 1, 1], [1, 2, 3]) is None  # one judge ties every model
    assert calibrate.kendall_tau([1], [1]) is None
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 4, (300, 5)), rng.integers(0, 4, (300, 5))  # many ties, some rows all tied
    x[0] = 2
    got = calibrate.kendall_taus(x, y)
    ref = np.array([kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)])
    assert np.isnan(got[0]) and np.array_equal(np.isnan(got), np.isnan(ref))
    assert got[~np.isnan(ref)] == pytest.approx(ref[~np.isnan(ref)])


def test_ranking_is_seeded_and_its_ci_holds_tau() -> None:
    rng = np.random.default_rng(0)
    models = [(rng.normal(m, 1, 40), rng.normal(m, 1, 40)) for m in (0.0, 1.0, 2.0, 3.0)]
    pairs = [(a.tolist(), (b + 0.3).tolist()) for a, b in models]
    first, again = calibrate.ranking(pairs, 300, 7), calibrate.ranking(pairs, 300, 7)
    assert first == again
    assert first["tau"] == pytest.approx(kendalltau(first["reference"], first["candidate"]).statistic)
    assert first["ci_low"] <= first["tau"] <= first["ci_high"] <= 1
    assert calibrate.ranking(pairs[:2], 300, 7)["tau"] is None  # two models: no ranking


def test_the_shift_is_agreements_paired_bootstrap() -> None:
    a, b = [10.0, 20.0, 30.0, 40.0], [12.0, 19.0, 33.0, 44.0]
    shift, _ = calibrate.shift_of("B", "t", "m", a, b, 5.0, 500, 0)
    r = stats.paired_bootstrap(a, b, n_resamples=500, level=0.95, seed=0)
    assert shift.shift == pytest.approx(2.0) and shift.n == 4
    assert (shift.ci_low, shift.ci_high) == (r.low, r.high)
    assert -5 <= r.low and r.high <= 5 and calibrate.interchangeable(r.low, r.high, 5.0)  # the CI is in the band,
    assert not shift.interchangeable  # but 4 paired samples are fewer than MIN_PAIRED: too few pairs
    assert calibrate.verdict_line(shift.__dict__) == "too few pairs (4 < 30): shift +2.00 [+0.00, +3.50]"


# ---------------------------------------------------------------------------------------------- the command
ROWS = 32  # per task: at least calibrate.MIN_PAIRED, so that one model's pair can be interchangeable


def _data(model: int, harsh: bool = False, rows: int = ROWS) -> dict:
    """(task key, row) -> (REF's ratings, CAND's ratings) of one model: model k's recognition is right on the
    first (k+2)/8 of the rows per task (so models rank 0 < 1 < 2), its steps alternate; CAND rates alike, or,
    `harsh`, every recognition 0."""
    out = {}
    for key in ("ER-Lab", "SA"):
        for row in range(rows):
            ratings = [[row % 2, 1], [1, 1], [1 if row < (model + 2) * rows // 8 else 0, 1]]
            cand = [*ratings[:-1], [0, 1]] if harsh else ratings
            out[(key, row)] = (ratings, cand)
    return out


def _pairs(root: Path, n: int, harsh: bool = False, cand_setup: dict = QWEN) -> list[Path]:
    folders = []
    for m in range(n):
        data = _data(m, harsh)
        run = root / f"model{m}" / "judged"
        folders += [write_judged(run / "ref", 0, STAMP, GPT, data, emotion=f"e{m}"),
                    write_judged(run / "cand", 1, STAMP, cand_setup, data, emotion=f"e{m}")]  # fmt: skip
    return folders


def _run(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["calibrate", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_identical_numbers_from_a_renamed_judge_are_interchangeable(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    folders = _pairs(tmp_path, 1)
    out_file = tmp_path / "cal" / "calibration.json"
    code, out, err = _run(capsys, *folders, "--out", out_file, "--resamples", "200")
    assert code == 0, err
    assert err == ""
    cal = load_calibration(out_file)
    assert {(s.task, s.metric) for s in cal.shifts} == {
        (t, m) for t in (ER_LAB, SA) for m in ("rec_s", "rea_s", "cot_s")
    }
    for s in cal.shifts:
        assert (s.shift, s.ci_low, s.ci_high, s.n, s.tolerance) == (0.0, 0.0, 0.0, ROWS, 1.0)
        assert s.interchangeable
    summary = json.loads(next((folders[0] / "emo_tasks_judge").glob("*_summary.json")).read_text())
    assert cal.reference == judge_identity(summary) and cal.candidate["judge_models"] == QWEN["judge_models"]
    assert cal.mismatch(judge_identity(summary), cal.candidate) is None
    assert cal.data["reference"]["runs"] == [str(folders[0])] and cal.data["candidate"]["runs"] == [str(folders[1])]
    assert cal.data["verdict"] == "interchangeable" and cal.data["ranking"] == []
    rec = cal.data["agreement"][0]["recognition"]
    assert rec["cohen_kappa"] == pytest.approx(1.0) and rec["n"] == ROWS
    assert cal.data["agreement"][0]["steps"]["icc"] == pytest.approx(1.0)
    assert "Rule: interchangeable within ±T" in out and "Verdict: interchangeable within ±1 (all 6 headlines)" in out


def test_a_planted_shift_is_not_interchangeable(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """CAND calls every recognition wrong: Rec-S drops to 0 (model 0 is right on 2/8 of the rows: -25 points)."""
    folders = _pairs(tmp_path, 1, harsh=True)
    code, out, err = _run(capsys, *folders, "--out", tmp_path / "c.json", "--resamples", "200")
    assert code == 1, err
    cal = load_calibration(tmp_path / "c.json")
    rec = cal.shift(ER_LAB, "rec_s")
    assert rec.shift == pytest.approx(-25.0) and not rec.interchangeable and rec.ci_low < -1
    assert cal.shift(ER_LAB, "rea_s").interchangeable  # steps other than the last: rated alike
    assert cal.data["verdict"] == "not interchangeable"
    assert f"ER-Lab Rec-S: not interchangeable: shift -25.00 [{rec.ci_low:+.2f}, {rec.ci_high:+.2f}]" in out
    # a per-metric tolerance wide enough: the same shifts pass
    code, out, err = _run(capsys, *folders, "--out", tmp_path / "c2.json", "--resamples", "200",
                          "--tolerance", "rec_s=60", "--tolerance", "cot_s=60")  # fmt: skip
    assert code == 0, out + err
    tol = load_calibration(tmp_path / "c2.json").data["tolerance"]
    assert tol == {"default": 1.0, "rec_s": 60.0, "rea_s": 1.0, "cot_s": 60.0}


def test_three_models_give_kendalls_tau_and_per_pair_shifts(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folders = _pairs(tmp_path, 3, harsh=True)
    code, out, err = _run(capsys, *folders, "--out", tmp_path / "c.json", "--resamples", "200")
    assert code == 1, err
    doc = json.loads((tmp_path / "c.json").read_text())
    assert [p["reference"] for p in doc["pairs"]] == [str(f) for f in folders[0::2]]
    rank = {(r["task"], r["metric"]): r for r in doc["ranking"]}
    # REF ranks the models 0 < 1 < 2 on Rec-S; the harsh CAND gives them all 0: tau undefined, said so
    assert rank[(ER_LAB, "rec_s")]["reference"] == pytest.approx([25.0, 37.5, 50.0])
    assert rank[(ER_LAB, "rec_s")]["tau"] is None and rank[(ER_LAB, "rec_s")]["notes"]
    per_pair = [p for p in doc["pair_shifts"] if p["task"] == ER_LAB and p["metric"] == "rec_s"]
    assert [p["shift"] for p in per_pair] == pytest.approx([-25.0, -37.5, -50.0])
    pooled = load_calibration(tmp_path / "c.json").shift(ER_LAB, "rec_s")
    assert pooled.n == 3 * ROWS and pooled.shift == pytest.approx(-37.5)
    # a candidate that rates alike: the rankings agree, tau 1
    same = _pairs(tmp_path / "same", 3)
    code, out, err = _run(capsys, *same, "--out", tmp_path / "s.json", "--resamples", "200")
    assert code == 0, err
    rank = {(r["task"], r["metric"]): r for r in json.loads((tmp_path / "s.json").read_text())["ranking"]}
    assert rank[(SA, "rec_s")]["tau"] == pytest.approx(1.0) and rank[(SA, "rec_s")]["ci_high"] == pytest.approx(1.0)
    assert "Model ranking, reference vs candidate (Kendall's tau-b" in out


def _refused(capsys: pytest.CaptureFixture, tmp_path: Path, *folders: Path) -> str:
    code, out, err = _run(capsys, *folders, "--out", tmp_path / "refused.json", "--resamples", "50")
    assert code == 2, out + err
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("emo-tasks calibrate: "), err
    assert not (tmp_path / "refused.json").exists()
    return err


def test_what_cannot_be_calibrated_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ref, cand = _pairs(tmp_path / "one", 1)
    # the same judge on both sides
    same = write_judged(tmp_path / "same" / "judged" / "b", 0, STAMP, GPT, _data(0), emotion="e0")
    assert "record the same judge" in _refused(capsys, tmp_path, ref, same)
    # the candidate judged other answers
    other = write_judged(tmp_path / "other" / "judged" / "b", 1, STAMP, QWEN, _data(0), emotion="e9")
    err = _refused(capsys, tmp_path, ref, other)
    assert f"{other} judged other answers than {ref}" in err
    # one model twice
    again = write_judged(tmp_path / "again" / "judged" / "b", 1, STAMP, QWEN, _data(0), emotion="e0")
    again_ref = write_judged(tmp_path / "again" / "judged" / "a", 0, STAMP, GPT, _data(0), emotion="e0")
    assert "judge the same answers: one model twice" in _refused(capsys, tmp_path, ref, cand, again_ref, again)
    # the same folder twice
    assert "is given twice" in _refused(capsys, tmp_path, ref, ref)
    # REF sides of two judges
    m1_ref, m1_cand = _pairs(tmp_path / "two", 2)[2:]
    (m1_ref / "emo_tasks_judge").rename(m1_ref.parent / "moved")
    write_judged(m1_ref, 0, STAMP, {**GPT, "judge_protocol": "strict"}, _data(1), emotion="e1")
    err = _refused(capsys, tmp_path, ref, cand, m1_ref, m1_cand)
    assert f"{m1_ref}: another judge than {ref}" in err and "every REF must be judged by one setup" in err
    # a folder mixing two judges task by task
    mixed = tmp_path / "mixed"
    write_judged(mixed, 1, STAMP, QWEN, {k: v for k, v in _data(0).items() if k[0] == "ER-Lab"}, emotion="e0")
    write_judged(mixed, 1, "20250305T120000", {**QWEN, "alpha": 0.7},
                 {k: v for k, v in _data(0).items() if k[0] == "SA"}, emotion="e0")  # fmt: skip
    assert f"the judge logs read from {mixed} come from more than one" in _refused(capsys, tmp_path, ref, mixed)
    # no summary: nothing proves which judge
    bare = write_judged(tmp_path / "bare", 1, STAMP, None, _data(0), emotion="e0")
    assert "judge is not recorded" in _refused(capsys, tmp_path, ref, bare)
    # a judged variant without per-sample ratings (MultiEmo's)
    judged = tmp_path / "multi" / "judged" / "x" / "emo_tasks_judge"
    judged.mkdir(parents=True)
    (judged / "multiemo_20250301T120000_judged_summary.json").write_text('{"judge_model": "gpt-4o"}')
    assert "no per-sample judge ratings to pair" in _refused(capsys, tmp_path, judged.parent, cand)
    # EmoBench-M judged before its LLM scorer wrote judge logs: no log names the judge, rerun the judge stage
    # (tests/emobench_m/test_emobench_m_agreement.py); an unjudged run of it is unreadable input, as before
    smile = tmp_path / "smile" / "judged" / "x"
    smile.mkdir(parents=True)
    row = {"llm_total,none": 6.0, "n_judge_failed,none": 0}
    (smile / "2025-03-01T12-00-00.000000_results.json").write_text(json.dumps({"results": {SMILE: row}}))
    assert "rerun `emo-tasks judge RUN` with that judge" in _refused(capsys, tmp_path, smile, cand)
    row["n_judge_failed,none"] = None
    (smile / "2025-03-01T12-00-00.000000_results.json").write_text(json.dumps({"results": {SMILE: row}}))
    code, _, err = _run(capsys, smile, cand, "--out", tmp_path / "c.json")
    assert code == 3 and "no MME-Emotion or EmoBench-M judge log" in err


def test_bad_arguments_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ref, cand = _pairs(tmp_path, 1)
    code, out, err = _run(capsys, ref, cand, ref, "--out", tmp_path / "c.json")
    assert code == 3 and "give REF CAND pairs" in err and len(err.splitlines()) == 1
    code, out, err = _run(capsys, ref, cand, "--tolerance", "recs=1", "--out", tmp_path / "c.json")
    assert code == 3 and "--tolerance: no headline metric recs" in err and not (tmp_path / "c.json").exists()
    (tmp_path / "empty").mkdir()
    code, out, err = _run(capsys, tmp_path / "empty", cand, "--out", tmp_path / "c.json")  # no judge log at all
    assert code == 3 and "no MME-Emotion or EmoBench-M judge log" in err


def test_a_candidate_with_another_alpha_is_noted(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Alpha is part of the judge identity, so the pair is calibrated, but the CoT-S shift mixes judge and alpha:
    agreement's remark on the pair says so in the file and the text."""
    folders = _pairs(tmp_path, 1, cand_setup={**QWEN, "alpha": 0.7})
    code, out, err = _run(capsys, *folders, "--out", tmp_path / "c.json", "--resamples", "50")
    assert code == 1, err  # the same ratings: only CoT-S moves, by alpha alone
    cal = load_calibration(tmp_path / "c.json")
    assert {s.metric for s in cal.shifts if not s.interchangeable} == {"cot_s"}
    notes = json.loads((tmp_path / "c.json").read_text())["notes"]
    assert f"pair 0: {ER_LAB}: alpha differs (A 0.5, B 0.7): the CoT-S difference mixes judge and alpha" in notes
    assert "alpha differs" in out


def test_two_identical_pairs_are_too_few_not_interchangeable(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Issue 42: two paired samples rated alike gave the CI [0, 0] and "interchangeable" (exit 0).  Below
    MIN_PAIRED the verdict is "too few pairs (n)", the file says not interchangeable, and the exit code is 1."""
    data = _data(0, rows=2)
    ref = write_judged(tmp_path / "m" / "judged" / "ref", 0, STAMP, GPT, data, emotion="e0")
    cand = write_judged(tmp_path / "m" / "judged" / "cand", 1, STAMP, QWEN, data, emotion="e0")
    code, out, err = _run(capsys, ref, cand, "--out", tmp_path / "c.json", "--resamples", "100")
    assert code == 1, out + err
    cal = load_calibration(tmp_path / "c.json")  # the file agrees with itself
    assert [(s.n, s.shift, s.ci_low, s.ci_high, s.interchangeable) for s in cal.shifts] == [
        (2, 0.0, 0.0, 0.0, False)
    ] * 6
    assert cal.data["verdict"] == "not interchangeable"
    assert "ER-Lab Rec-S: too few pairs (2 < 30): shift +0.00 [+0.00, +0.00]" in out
    assert "Verdict: not interchangeable (6 of 6 headlines):" in out and "Verdict: interchangeable" not in out
    assert f"from at least {calibrate.MIN_PAIRED} paired samples; fewer: too few pairs (n), not interchangeable" in out


def test_notes_print_one_line_per_kind_of_undefined_statistic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The harsh candidate makes Spearman undefined on every task's recognition and tau undefined on every headline
    (and in some resamples): one line per kind, with how many tasks or headlines, not one per task and metric (a
    sample run printed 19).  The file keeps each task's notes."""
    folders = _pairs(tmp_path, 3, harsh=True)
    code, out, err = _run(capsys, *folders, "--out", tmp_path / "c.json", "--resamples", "200")
    assert code == 1, err
    notes = out.split("Notes:\n")[1].split("\n\n")[0].splitlines()
    undefined = [line for line in notes if "undefined" in line]
    assert len(undefined) == 3, notes
    assert any(line.startswith("  - recognition: spearman undefined: ") and line.endswith("(2 tasks: ER-Lab, SA)")
               for line in undefined), undefined  # fmt: skip
    tau = next(
        line for line in undefined if "ranking: tau undefined: one judge gives every model the same mean" in line
    )
    assert "(6 headlines: ER-Lab Rec-S, ER-Lab Rea-S, ER-Lab CoT-S, SA Rec-S and 2 more)" in tau
    left = next(line for line in undefined if "ranking: resamples left out: tied means, tau undefined" in line)
    assert "ER-Lab Rec-S 200 of 200" in left
    doc = json.loads((tmp_path / "c.json").read_text())
    assert all(r["notes"] for r in doc["ranking"]) and doc["agreement"][0]["recognition"]["notes"]
