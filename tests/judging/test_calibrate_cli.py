"""`emo-tasks calibrate` through the real CLIs: three models' `lmms-eval --predict_only` runs of the MME-Emotion
sample (the loopback server plays each model, with answers of its own), each judged by `emo-tasks judge` with two
loopback judges, `judge-a` and `judge-b`, that rate alike (different names, the same numbers), and model 0 also by
`judge-harsh`, which calls every recognition wrong.

Why: the fast tests build judged folders by hand; this proves the command reads what the judge stage really
writes (judged/<setup>/ folders, summaries with the judge identity) and that its verdicts and refusals hold there.
"""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import test_judge_stage as stage_tests
from conftest import API_KEY
from fakes import Model

from emo_tasks.results.calibration import judge_identity, load_calibration
from judges.testing import LoopbackServer, Reply

pytestmark = pytest.mark.slow
TASK = "mme_emotion_sample"
JUDGES = ("judge-a", "judge-b")
HARSH = "judge-harsh"


class Judges(Model):
    """The models' answers and the judges': `judge-a` and `judge-b` rate alike; `judge-harsh` rates the last step
    (the recognition) 0."""

    def __call__(self, body: dict, attempt: int) -> object:
        for name in ("model-0", "model-1", "model-2"):
            if body.get("model") == name:
                return Model(name=name, salt=name)(body, attempt)
        reply = super().__call__(body, attempt)
        if body.get("model") == HARSH and isinstance(reply, Reply) and "<score>" in (reply.text or ""):
            return Reply(text=re.sub(r"(Step \d+: )\d+(/\d+)</score>", r"\g<1>0\2</score>", reply.text))
        return reply


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"<model>/<judge>": the judged folder} for models 0-2 x judge-a, judge-b, and model-0/judge-harsh."""
    root = tmp_path_factory.mktemp("calibrate")
    out: dict[str, Path] = {}
    with LoopbackServer(responder=Judges(), expected_api_key=API_KEY) as srv:

        def predict(model: str) -> Path:
            run = root / model
            env = stage_tests._env(root / f"cache_{model}", srv)
            proc = stage_tests._lmms(run, env, srv, "--predict_only", model=model, tasks=TASK)
            assert sorted(run.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]
            return run

        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = list(pool.map(predict, ("model-0", "model-1", "model-2")))
        env = stage_tests._env(root / "cache_judges", srv)
        for run in runs:
            for judge in (*JUDGES, HARSH) if run.name == "model-0" else JUDGES:
                folder = root / "judged" / run.name / judge
                proc = stage_tests.emo(env, "judge", str(run), "--judge-model", judge, "--out", str(folder))
                assert proc.returncode == 0, proc.stderr[-4000:]
                out[f"{run.name}/{judge}"] = folder
    out["root"] = root
    return out


def calibrate(judged: dict[str, Path], *keys: str, out: str = "calibration.json") -> tuple[int, str, str, Path]:
    path = judged["root"] / out
    proc = stage_tests.emo(stage_tests._env(judged["root"] / "cache_cal"), "calibrate",
                           *(str(judged[k]) for k in keys), "--out", str(path), "--resamples", "300")  # fmt: skip
    return proc.returncode, proc.stdout, proc.stderr, path


def test_a_renamed_judge_with_the_same_numbers_is_interchangeable_and_three_models_rank(
    judged: dict[str, Path],
) -> None:
    keys = [f"model-{m}/{j}" for m in range(3) for j in JUDGES]
    code, out, err, path = calibrate(judged, *keys)
    assert code == 1, out + err  # a sample task's 6 paired samples are too few pairs: not interchangeable
    cal = load_calibration(path)
    assert len(cal.shifts) == 27  # (8 sample tasks + their group, pooled) x Rec-S, Rea-S, CoT-S
    assert {s.task for s in cal.shifts if s.n == 48} == {TASK}  # the group: 8 tasks x 6 samples
    assert all(s.shift == 0.0 and s.ci_low == 0.0 and s.ci_high == 0.0 and s.n in (6, 48) for s in cal.shifts)
    assert {s.task for s in cal.shifts if s.interchangeable} == {TASK}  # 48 >= MIN_PAIRED; 6 is too few
    assert "too few pairs (6 < 30): shift +0.00 [+0.00, +0.00]" in out
    assert "Verdict: not interchangeable (24 of 27 headlines):" in out
    notes = out.split("Notes:\n")[1].split("\n\n")[0].splitlines()
    undefined = [n.split(" (")[0] for n in notes if "undefined" in n]  # one line per kind: 19 lines on c0e8d19
    assert len(undefined) == len(set(undefined)) == 5, notes  # spearman, kappa, icc, tau, resamples left out
    summary = json.loads(next((judged["model-0/judge-a"] / "emo_tasks_judge").glob("*_summary.json")).read_text())
    assert cal.reference == judge_identity(summary) and cal.reference["judge_models"]["judge"] == "judge-a"
    assert cal.candidate["judge_models"]["judge"] == "judge-b"
    taus = [r["tau"] for r in cal.data["ranking"] if r["tau"] is not None]
    assert len(cal.data["ranking"]) == 27 and taus and all(t == pytest.approx(1.0) for t in taus)


def test_a_planted_shift_is_not_interchangeable(judged: dict[str, Path]) -> None:
    code, out, err, path = calibrate(judged, "model-0/judge-a", f"model-0/{HARSH}", out="harsh.json")
    assert code == 1, out + err
    cal = load_calibration(path)
    rec = [s for s in cal.shifts if s.metric == "rec_s"]
    assert any(s.shift < 0 for s in rec) and all(s.shift <= 0 for s in rec)
    assert cal.data["verdict"] == "not interchangeable" and "too few pairs (16 < 30): shift -" in out


def test_refusals_exit_2_in_one_line(judged: dict[str, Path]) -> None:
    root = judged["root"]
    copy = root / "copy_of_a"
    shutil.copytree(judged["model-0/judge-a"], copy, dirs_exist_ok=True)
    mixed = root / "mixed"
    shutil.copytree(judged["model-0/judge-a"], mixed, dirs_exist_ok=True)
    for log in (judged["model-0/judge-b"] / "emo_tasks_judge").glob("*_sa_*"):
        target = mixed / "emo_tasks_judge" / log.name.replace("2", "3", 1)  # a later stamp: the newest SA log
        shutil.copy(log, target)
    judged["copy"], judged["mixed"] = copy, mixed
    for keys, said in (
        (("model-0/judge-a", "copy"), "record the same judge"),
        (("model-0/judge-a", "model-1/judge-b"), "judged other answers than"),
        (("model-0/judge-a", "mixed"), "come from more than one judge setup"),
        (("model-0/judge-a", "model-0/judge-b", "model-0/judge-a", "model-0/judge-b"), "is given twice"),
    ):
        code, out, err, path = calibrate(judged, *keys, out="refused.json")
        assert code == 2, out + err
        assert len(err.splitlines()) == 1 and said in err and "Traceback" not in err, err
        assert not path.exists()
