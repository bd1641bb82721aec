"""A gate across a judge change (`--calibration`), through the real CLIs on the sample tasks: two lmms-eval runs of
the dummy model (right answers, and a planted drop: wrong ones), `--predict_only`, judged by `emo-tasks judge` with
two loopback judges: the reference judge REF and a candidate CAND that calls a known share of right answers wrong
and rates the steps otherwise.  The calibration file is written here with `calibration_document` from the paired
test of the same answers judged by both (what `emo-tasks calibrate` measures).

- compare BASE (REF) SAME (the same answers, CAND): refused without --calibration, passes with it;
- compare BASE BAD (the planted drop, CAND) with it: exit 1, the drop larger than the calibration's CI;
- a calibration of other judges, or without a metric's shift, is refused naming the side, the key or the metric;
- plan-gate --calibration needs more rows; report --trend --calibration draws the trend across the change.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import Judge, _h

from judges.testing import LoopbackServer, Reply, last_user_text

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

GOOD = "Correct. Score: 80. Reason: bright. Answer: anger"
BAD = "Score: 10. Reason: dim. Answer: happiness"
TASKS = "mme_emotion_sample,mvei_sample"
REF, CAND = "judge-ref", "judge-cand"
GROUP = "mme_emotion_sample"
HEADLINES = ("rec_s", "rea_s", "cot_s")


class TwoJudges(Judge):
    """The step agent names the answer's emotion (anger for a right answer); REF calls every anger answer right,
    CAND calls one in three of them wrong (by the request's text) and rates the other steps by its own name."""

    def __call__(self, body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        if text.startswith("Given the following answer"):
            emotion = "anger" if "Reason: bright" in text else "nothing"
            return Reply(text=f"<step>Step 1: cue noted. Step 2: The predicted emotion is {emotion}.</step>")
        if "Rating Requirements" in text:
            m = re.search(r"has (\d+) step\(s\)", text)
            n = int(m.group(1)) if m else 2
            model = str(body.get("model"))
            h = _h(text + model)
            right = "The predicted emotion is anger" in text and not (model == CAND and _h(text) % 3 == 0)
            k = 1 + h % 3
            ratings = [f"{(h >> i) % 2}/1" for i in range(n - 1)] + [f"{k if right else 0}/{k}"]
            return Reply(text="Ratings:\n<score>" + ", ".join(f"Step {i + 1}: {r}" for i, r in enumerate(ratings))
                         + "</score>")  # fmt: skip
        return super().__call__(body, attempt)


def _lmms(env: dict[str, str], outs: dict[Path, str]) -> None:
    """The predict-only runs {folder: response}, in parallel (the judge is not asked: it waits for them)."""
    procs = {}
    for out, response in outs.items():
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={response}",
               "--tasks", TASKS, "--output_path", str(out), "--log_samples", "--predict_only"]  # fmt: skip
        procs[out] = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for out, proc in procs.items():
        _, err = proc.communicate(timeout=900)
        assert sorted(out.rglob("*_results.json")), err[-3000:]


def _judged(run: Path, judge: str) -> Path:
    (folder,) = [p for p in (run / "judged").iterdir() if f"judge={judge}" in p.name]
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("gatecal")
    cache = with_mme_sample(root / "cache")
    with LoopbackServer(responder=TwoJudges(), expected_api_key=API_KEY) as srv:
        env = cli_env(cache, srv, EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")
        _lmms(env, {root / "good": GOOD, root / "bad": BAD})
        for run, judge in (("good", REF), ("good", CAND), ("bad", CAND)):
            done = run_emo(env, "judge", str(root / run), "--judge-model", judge, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
    out = {"root": root, "env": cli_env(cache), "base": _judged(root / "good", REF),
           "same": _judged(root / "good", CAND), "bad": _judged(root / "bad", CAND)}  # fmt: skip
    out["calibration"] = write_calibration(root / "calibration.json", out["base"], out["same"])
    return out


def write_calibration(path: Path, reference: Path, candidate: Path, metrics: tuple[str, ...] = HEADLINES,
                      identity: dict | None = None) -> Path:  # fmt: skip
    """calibration.json from the same answers judged by both judges: per headline of the group, the paired test's
    delta (candidate - reference) and CI; the identities from the runs' summaries unless given ({side: identity})."""
    from emo_tasks.gate.compare import compare_metric
    from emo_tasks.results.calibration import Shift, calibration_document, judge_identity
    from emo_tasks.results.reader import load_run

    ref, cand = load_run(reference), load_run(candidate)
    shifts = []
    for metric in metrics:
        r = compare_metric(ref, cand, GROUP, metric, 1000, 0)
        assert not isinstance(r, str), r
        shifts.append(Shift("mme_emotion", GROUP, metric, r.n, r.delta, r.low, r.high, 1.0, -1 <= r.low <= r.high <= 1))
    sides = {}
    for side, run in (("reference", ref), ("candidate", cand)):
        leaf = next(t for t in run.summaries if judge_identity(run.summaries[t]))
        recorded = (identity or {}).get(side) or judge_identity(run.summaries[leaf])
        sides[side] = {"identity": recorded, "runs": [str(run.path)]}
    doc = calibration_document(sides["reference"], sides["candidate"], shifts, tolerance={"default": 1.0},
                               rule="interchangeable within +-1", level=0.95, created="test")  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def _shift(path: Path, metric: str) -> dict:
    return next(s for s in json.loads(path.read_text())["shifts"] if s["metric"] == metric)


def compare(runs: dict, a: str, b: str, *extra: str) -> subprocess.CompletedProcess:
    return run_emo(runs["env"], "compare", str(runs[a]), str(runs[b]), "--resamples", "500", *extra, timeout=300)


def test_the_judges_really_differ_and_a_judge_change_is_refused_without_a_calibration(runs: dict) -> None:
    rec = _shift(runs["calibration"], "rec_s")
    assert rec["shift"] < 0 and rec["ci_low"] < rec["shift"] < rec["ci_high"]  # CAND calls right answers wrong
    proc = compare(runs, "base", "same")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "judges: mme_emotion_sample_" in proc.stderr and "judge_models" in proc.stderr


def test_the_same_answers_pass_across_the_judge_change_with_the_calibration(runs: dict) -> None:
    proc = compare(runs, "base", "same", "--calibration", str(runs["calibration"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"judge models: judge {REF}" not in out  # (the header names the judges as a list, below)
    assert f"base judged by step gpt-4.1-2025-04-14, judge {REF}, new by step gpt-4.1-2025-04-14, judge {CAND}" in out
    assert f"gated across it with calibration {runs['calibration']}" in out
    assert "rule: delta' = (new - base) - shift" in out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith(f"{GROUP} ")}
    for metric in HEADLINES:  # NEW - BASE is exactly the calibrated shift: nothing left for the model
        assert rows[metric][4] == "+0.000" and rows[metric][-1] == "n.s.", rows[metric]
        assert "calibrated" in " ".join(rows[metric])
    rec = _shift(runs["calibration"], "rec_s")
    assert f"{GROUP} rec_s: as judged {rec['shift']:+.3f}" in out and f"calibrated shift {rec['shift']:+.3f}" in out
    mvei = next(line for line in out.splitlines() if line.startswith("mvei_sample "))
    assert "calibrated" not in mvei  # scored without a judge: gated as always


def test_the_calibrate_commands_own_file_carries_the_group_gate(runs: dict) -> None:
    """`emo-tasks calibrate` writes the group's pooled shift (compare gates the group, not its leaves): the same
    shift as the paired test of the group's samples, and `compare --calibration` takes its file as it is."""
    made = runs["root"] / "made_by_calibrate.json"
    proc = run_emo(runs["env"], "calibrate", str(runs["base"]), str(runs["same"]), "--out", str(made), timeout=300)
    assert proc.returncode in (0, 1) and made.is_file(), proc.stdout + proc.stderr
    doc = json.loads(made.read_text())
    for metric in HEADLINES:
        mine = next(s for s in doc["shifts"] if s["task"] == GROUP and s["metric"] == metric)
        assert mine["shift"] == pytest.approx(_shift(runs["calibration"], metric)["shift"], abs=1e-12)
        assert mine["n"] == _shift(runs["calibration"], metric)["n"]
    gate = compare(runs, "base", "same", "--calibration", str(made))
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert f"{GROUP} rec_s: as judged" in gate.stdout


def test_a_planted_drop_larger_than_the_calibrations_ci_fails(runs: dict) -> None:
    proc = compare(runs, "base", "bad", "--calibration", str(runs["calibration"]))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"significant drop in {GROUP}:rec_s" in proc.stderr
    rec = _shift(runs["calibration"], "rec_s")
    line = next(x for x in proc.stdout.splitlines() if x.startswith(f"  {GROUP} rec_s: as judged"))
    judged = float(line.split("as judged ")[1].split()[0])
    gated = float(line.split("gated on ")[1].split()[0])
    assert gated == pytest.approx(judged - rec["shift"], abs=2e-3)
    assert -gated > rec["ci_high"] - rec["ci_low"]  # the planted drop is larger than the calibration's CI
    row = next(x for x in proc.stdout.splitlines() if x.startswith(f"{GROUP} ") and " rec_s " in x)
    assert row.split()[-1] == "REGRESSION"


def test_a_calibration_of_other_judges_is_refused_naming_the_side_and_the_key(runs: dict, tmp_path: Path) -> None:
    from emo_tasks.results.calibration import load_calibration

    real = load_calibration(runs["calibration"])
    other = {**real.candidate, "judge_models": {**real.candidate["judge_models"], "judge": "judge-other"}}
    wrong = write_calibration(tmp_path / "other.json", runs["base"], runs["same"], identity={"candidate": other})
    proc = compare(runs, "base", "same", "--calibration", str(wrong))
    assert proc.returncode == 2 and proc.stdout.count("\n") == 2, proc.stdout + proc.stderr  # the two run lines
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert f"{wrong} does not calibrate these judges: the candidate judge (the new run's) differs in judge_models" \
        in proc.stderr and "reference" not in proc.stderr.split("these judges:")[1]  # fmt: skip
    # the other way round: BASE is the candidate's, NEW the reference's
    swapped = compare(runs, "same", "base", "--calibration", str(runs["calibration"]))
    assert swapped.returncode == 2 and swapped.stderr.count("\n") == 1, swapped.stderr
    assert "the reference judge (the base run's) differs in judge_models" in swapped.stderr
    assert "the candidate judge (the new run's) differs in judge_models" in swapped.stderr


def test_a_served_identity_one_side_did_not_learn_is_not_another_judge(runs: dict, tmp_path: Path) -> None:
    """Issue 42 item 3: one identity rule for compare and the gate.  The runs' endpoint did not say what it serves
    ("not reported"); a calibration whose judges' endpoint did (a vLLM root) calibrates the same judges."""
    import copy

    from emo_tasks.results.calibration import load_calibration

    real = load_calibration(runs["calibration"])
    sides = {}
    for side, identity in (("reference", real.reference), ("candidate", real.candidate)):
        learnt = copy.deepcopy(identity)
        roles = learnt["judge_fingerprint"]["roles"]
        assert {r["served"] for r in roles.values()} == {"not reported"}  # the loopback lists only "loopback"
        for entry in roles.values():
            entry["served"] = {"id": entry["model"], "root": f"/ckpt/{entry['model']}", "max_model_len": 8192}
        sides[side] = learnt
    served = write_calibration(tmp_path / "served.json", runs["base"], runs["same"], identity=sides)
    proc = compare(runs, "base", "same", "--calibration", str(served))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"gated across it with calibration {served}" in proc.stdout


def test_a_metric_the_calibration_does_not_cover_is_not_gated_silently(runs: dict, tmp_path: Path) -> None:
    partial = write_calibration(tmp_path / "rec_only.json", runs["base"], runs["same"], ("rec_s",))
    proc = compare(runs, "base", "same", "--calibration", str(partial))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for metric in ("rea_s", "cot_s"):
        assert f"judges: {GROUP} {metric} cannot be gated across the judge change: {partial} has no shift" \
            in proc.stderr  # fmt: skip
    only = compare(runs, "base", "same", "--calibration", str(partial), "--metric", f"{GROUP}:rec_s")
    assert only.returncode == 0, only.stdout + only.stderr


def test_plan_gate_across_the_judge_change_needs_more_rows(runs: dict, tmp_path: Path) -> None:
    def plan(*extra: str) -> subprocess.CompletedProcess:
        return run_emo(runs["env"], "plan-gate", str(runs["base"]), "--detect", "60", "--tasks", GROUP,
                       "--out", str(tmp_path / "plan.json"), *extra, timeout=300)  # fmt: skip

    def needed(proc: subprocess.CompletedProcess, metric: str) -> int:
        row = next(x for x in proc.stdout.splitlines() if x.startswith(f"{GROUP} ") and f" {metric} " in x)
        return int(re.split(r"\s{2,}", row)[5])

    plain = plan()
    assert plain.returncode == 0, plain.stdout + plain.stderr
    across = plan("--calibration", str(runs["calibration"]))
    assert across.returncode == 0, across.stdout + across.stderr
    assert f"across the judge change calibrated by {runs['calibration']}" in across.stdout
    for metric in ("rea_s", "cot_s"):  # (every Rec-S of the base is 100: no spread, one row either way)
        assert needed(across, metric) > needed(plain, metric), across.stdout
    assert json.loads((tmp_path / "plan.json").read_text())["plan"]["calibration"]["file"] == str(runs["calibration"])
    # the base run must be the calibration's reference
    wrong = plan("--calibration", str(write_calibration(tmp_path / "c.json", runs["same"], runs["base"])))
    assert wrong.returncode == 2 and "the reference judge (the base run's) differs in judge_models" in wrong.stderr
    # a drop the calibration's CI alone hides cannot be planned for
    rec = _shift(runs["calibration"], "rec_s")
    hidden = (rec["ci_high"] - rec["ci_low"]) / 4
    tiny = plan("--calibration", str(runs["calibration"]), "--detect", f"rec_s={hidden:g}")
    assert tiny.returncode == 2 and "rec_s" in tiny.stderr and "calibration" in tiny.stderr, tiny.stderr


def test_the_trend_is_drawn_across_the_judge_change_with_the_change_marked(runs: dict, tmp_path: Path) -> None:
    order = [str(runs[k]) for k in ("base", "same", "bad")]
    refused = run_emo(runs["env"], "report", *order, "--trend", "given", timeout=300)
    assert refused.returncode == 2 and "judges: judge_models" in refused.stderr, refused.stderr
    png = tmp_path / "trend.png"
    res = run_emo(runs["env"], "report", *order, "--trend", "given", "--calibration", str(runs["calibration"]),
                  "--resamples", "100", "--plot", str(png), timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    md = res.stdout
    assert f"**Judge change (--calibration {runs['calibration']}):**" in md
    table = md.split("### MME-Emotion — Rec-S (mme_emotion_sample)")[1].split("###")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| ")]
    assert rows[0][:2] == ["#", "Run"] and "Adjusted" in rows[0][3]
    assert rows[2][0] == "—" and "judge change" in rows[2][1]
    rec = _shift(runs["calibration"], "rec_s")
    base_value, same_value = float(rows[1][2].split()[0]), float(rows[3][2].split()[0])
    assert same_value == pytest.approx(base_value + rec["shift"], abs=0.01)  # shown as judged
    assert float(rows[3][3].split()[0]) == pytest.approx(base_value, abs=0.01)  # adjusted: on REF's scale
    assert rows[3][4] == "+0.00"  # Δ of the adjusted value: no change of the model
    doc = run_emo(runs["env"], "report", *order, "--trend", "given", "--calibration", str(runs["calibration"]),
                  "--format", "json", "--resamples", "100", timeout=300)  # fmt: skip
    records = json.loads(doc.stdout)["trend"]
    assert [r["judge_change"] is not None for r in records] == [False, True, False]
    assert [r["segment"] for r in records] == [0, 0, 0]
    got = records[1]["metrics"][f"{GROUP}:rec_s"]
    assert got["shift"] == pytest.approx(rec["shift"]) and got["adjusted"] == pytest.approx(base_value, abs=0.01)
    assert png.stat().st_size > 0


def test_an_unusable_calibration_file_is_one_line_naming_it(runs: dict, tmp_path: Path) -> None:
    bad = tmp_path / "calibration.json"
    bad.write_text(json.dumps({**json.loads(runs["calibration"].read_text()), "shifts": []}))
    for command in (["compare", str(runs["base"]), str(runs["same"])],
                    ["plan-gate", str(runs["base"]), "--detect", "60", "--out", str(tmp_path / "p.json")],
                    ["report", str(runs["base"]), str(runs["same"]), "--trend", "given"]):  # fmt: skip
        proc = run_emo(runs["env"], *command, "--calibration", str(bad), timeout=300)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (command, proc.stderr)
        assert f"--calibration: {bad}: no shifts" in proc.stderr, proc.stderr
    alone = run_emo(runs["env"], "report", str(runs["base"]), "--calibration", str(runs["calibration"]))
    assert alone.returncode == 2 and "--calibration draws a --trend" in alone.stderr, alone.stderr


def test_a_calibration_that_contradicts_itself_is_refused_not_applied(runs: dict, tmp_path: Path) -> None:
    """Issue 42 item 6: the Rec-S shift moved 30 points past its own CI (a hand-edited file) passed the gate
    (exit 0); read, the file is checked against itself: exit 2, one line naming the file, the task and metric
    and what is inconsistent, for compare, plan-gate and report --trend alike."""
    doc = json.loads(runs["calibration"].read_text())
    rec = next(s for s in doc["shifts"] if s["metric"] == "rec_s")
    rec["shift"] = rec["ci_high"] + 30
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(doc))
    for command in (["compare", str(runs["base"]), str(runs["same"])],
                    ["plan-gate", str(runs["base"]), "--detect", "60", "--out", str(tmp_path / "p.json")],
                    ["report", str(runs["base"]), str(runs["same"]), "--trend", "given"]):  # fmt: skip
        proc = run_emo(runs["env"], *command, "--calibration", str(bad), timeout=300)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (command, proc.stdout + proc.stderr)
        assert f"{bad}: shifts[0] ({GROUP} rec_s) contradicts itself: shift " in proc.stderr, proc.stderr
        assert "lies outside its own CI" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "p.json").exists()


def test_a_second_calibration_is_refused_by_compare_and_plan_gate(runs: dict, tmp_path: Path) -> None:
    """Issue 42 item 8: argparse kept the last --calibration silently; compare and plan-gate carry one judge
    change with one file, so a repeat is a bad argument (exit 3) naming both, before any run is read."""
    other = write_calibration(tmp_path / "other.json", runs["same"], runs["base"])
    cal = str(runs["calibration"])
    for command in (["compare", str(runs["base"]), str(runs["same"])],
                    ["plan-gate", str(runs["base"]), "--detect", "60", "--out", str(tmp_path / "p.json")]):  # fmt: skip
        proc = run_emo(runs["env"], *command, "--calibration", cal, "--calibration", str(other), timeout=300)
        assert proc.returncode == 3 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
        assert f"argument --calibration: given twice ('{cal}', then '{other}')" in proc.stderr
        assert "a chain of calibrations is drawn by `report --trend` only" in proc.stderr


def test_the_trend_crosses_a_chain_of_judge_changes_one_calibration_each(runs: dict, tmp_path: Path) -> None:
    """Issue 42 item 8: REF -> CAND -> REF (a copy of the base run, judged by REF) with the calibrations REF->CAND
    and CAND->REF: both changes carried, each by its own file; the return to REF is shown as judged.  The same file
    given twice carries one change twice: refused, naming it."""
    import shutil

    back = write_calibration(tmp_path / "back.json", runs["same"], runs["base"])
    copy = tmp_path / "good_again"
    shutil.copytree(runs["root"] / "good", copy)
    order = [str(runs["base"]), str(runs["same"]), str(_judged(copy, REF))]
    res = run_emo(runs["env"], "report", *order, "--trend", "given", "--format", "json", "--resamples", "100",
                  "--calibration", str(runs["calibration"]), "--calibration", str(back), timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    records = json.loads(res.stdout)["trend"]
    assert [r["judge_change"] and r["judge_change"]["calibration"] for r in records] == [
        None, str(runs["calibration"]), str(back)]  # fmt: skip
    rec = _shift(runs["calibration"], "rec_s")
    got = [r["metrics"][f"{GROUP}:rec_s"] for r in records]
    assert got[1]["shift"] == pytest.approx(rec["shift"]) and "shift" not in got[2]  # back on REF: as judged
    assert got[2]["value"] == pytest.approx(got[0]["value"]) and got[2]["delta"] == pytest.approx(0.0)
    for change in (str(runs["calibration"]), str(back)):
        assert f"carried by {change}: judges" in res.stderr
    # the same change carried by two files: refused naming both
    twice = run_emo(runs["env"], "report", *order[:2], "--trend", "given", "--calibration", str(runs["calibration"]),
                    "--calibration", str(runs["calibration"]), timeout=300)  # fmt: skip
    assert twice.returncode == 2 and twice.stderr.count("\n") == 1, twice.stderr
    assert "is carried by 2 files" in twice.stderr
