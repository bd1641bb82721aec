"""The CI gate on a subset, end to end through the real CLIs on the sample tasks: a full judged base run ->
`emo-tasks plan-gate` -> `lmms-eval --predict_only` with EMO_SUBSET -> `emo-tasks judge` -> `emo-tasks compare`
against the full base run (pass for the same model, exit 1 for a worse one), and the refusals: a subset row
dropped, logged twice or taken from other data, another subset at judge time, a key the data lacks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, cli_env, private_copy, run_emo, with_mme_sample
from fakes import Judge
from test_ci_recipe import BAD as RECIPE_BAD
from test_ci_recipe import CONFIG, recipe_folder, recipe_steps
from test_ci_recipe import GOOD as RECIPE_GOOD

from emo_tasks import subset
from emo_tasks.mvei import hooks as mvei
from judges.testing import LoopbackServer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

GOOD = "Correct. Score: 80. Reason: bright. Answer: anger"
BAD = "Score: 10. Reason: dim. Answer: happiness"
MID = "Incorrect. Score: 30. Reason: dim. Answer: joy"  # MVEI: every pair's decision flips against GOOD's
TASKS = "mvei_sample,multiemo_sample,mme_emotion_sample"
PLAN = ("--detect", "80", "--detect", "cheb=0.3")


def lmms(env: dict[str, str], out: Path, response: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={response}",
           "--tasks", TASKS, "--output_path", str(out), "--log_samples", *extra]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def results(folder: Path) -> dict:
    files = sorted(p for p in folder.glob("*_results.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def _plan_gate_part(baseline: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """The recipe's baseline block ran lmms-eval, then `emo-tasks plan-gate baseline --detect 80 --detect cheb=0.3
    --power 0.8 --alpha 0.05 --cost --out gate/subset.json` (PLAN with its defaults spelled out): plan-gate's output is
    its stdout from the plan's first line on (its stderr is mixed with lmms-eval's: not kept)."""
    at = baseline.stdout.rfind("gate plan 'gate-p0.8-all80-cheb0.3'")
    assert baseline.returncode == 0 and at >= 0, baseline.stdout[-3000:]
    return subprocess.CompletedProcess(["emo-tasks", "plan-gate", "base", *PLAN, "--cost"], 0, baseline.stdout[at:], "")


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """base (the full judged run), plan.json and the subset runs new (GOOD) and bad (BAD), each judged: copies of
    test_ci_recipe's runs of docs/ci.md's recipe (`recipe_folder`, built once per session), which are this module's
    commands (`lmms-eval` there, `python -m lmms_eval` here; EMO_SUBSET relative there) with the same model, tasks,
    judge and plan.  Copies, since tests write beside them (site/, export/, strict/).  The loopback judge here
    serves what this module still judges (strict); no test reads the recipe judge's calls."""
    assert (RECIPE_GOOD, RECIPE_BAD, CONFIG["TASKS"], CONFIG["DETECT"].split()) == (GOOD, BAD, TASKS, list(PLAN))
    built = recipe_folder(tmp_path_factory)
    steps = recipe_steps(built)
    work = built / "work"
    root = tmp_path_factory.mktemp("gate")
    cache = with_mme_sample(root / "cache")
    private_copy(work / "baseline", root / "base")
    assert sorted((root / "base").rglob("*_results.json")), "the recipe's baseline run wrote no results"
    shutil.copyfile(work / "gate" / "subset.json", root / "plan.json")
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        env = cli_env(cache, srv)
        out: dict = {"root": root, "env": env, "plan": _plan_gate_part(steps["baseline"]), "srv": srv,
                     "calls_after_base": None}  # fmt: skip
        for name, step in (("new", "200"), ("bad", "400")):
            private_copy(work / "runs" / f"ckpt-{step}", root / name)
            assert sorted((root / name).rglob("*_results.json")), f"the recipe's ckpt-{step} run wrote no results"
            out[f"{name}_judge"] = steps["procs"][step]["judge the answers"]
            assert out[f"{name}_judge"].returncode == 0, out[f"{name}_judge"].stderr[-3000:]
        yield out


def test_the_plan_draws_a_reproducible_stratified_subset_and_states_its_power_and_cost(flow: dict) -> None:
    root, env = flow["root"], flow["env"]
    plan = json.loads((root / "plan.json").read_text())
    text = flow["plan"].stdout
    assert "expected power" in text and "rows:" in text and "judge cost of the subset" in text
    # every key names a row of the data; MME's pooled draw kept fewer than its 16 rows
    full = {d["pair_id"] for d in mvei.load_task("mvei/sample", {"EMO_CACHE_DIR": env["EMO_CACHE_DIR"]})}
    assert set(plan["rows"]["mvei/sample"]) <= full
    mme = [k for name, keys in plan["rows"].items() if name.startswith("mme_emotion/") for k in keys]
    assert len(mme) == plan["plan"]["rows"]["mme_emotion_sample"] < plan["plan"]["population"]["mme_emotion_sample"]
    assert plan["plan"]["detect"]["rec_s"] == 80 and plan["plan"]["detect"]["cheb"] == 0.3
    # the same inputs give the same file (another seed's draw: tests/test_subset.py)
    again = run_emo(env, "plan-gate", str(root / "base"), *PLAN, "--out", str(root / "again.json"))
    assert again.returncode == 0 and json.loads((root / "again.json").read_text())["rows"] == plan["rows"]
    # the subset's dry run counts fewer judge requests than the full run's
    full_part, sub_part = text.split("judge cost of the subset:")

    def requests(part: str) -> int:
        rows = [line.split() for line in part.splitlines() if line.startswith("mme_emotion_sample_")]
        return sum(int(r[3]) for r in rows)

    assert 0 < requests(sub_part) < requests(full_part.split("judge cost of the full run")[1])


def test_the_subset_run_answers_exactly_its_rows_and_records_them(flow: dict) -> None:
    root = flow["root"]
    plan = json.loads((root / "plan.json").read_text())
    data = results(root / "new")
    for task, config in data["configs"].items():
        rec = subset.recorded(config)
        assert rec is not None, task
        assert rec["keys"] == plan["rows"][config["dataset_name"]] and rec["plan"] == plan["plan"]
    env = {"EMO_CACHE_DIR": flow["env"]["EMO_CACHE_DIR"], subset.ENV: str(root / "plan.json")}
    assert data["n-samples"]["mvei_sample"]["effective"] == len(mvei.load_task("mvei/sample", env))
    assert data["n-samples"]["multiemo_sample"]["effective"] == 8 * len(plan["rows"]["multiemo/sample"])


def test_the_gate_passes_the_same_model_on_the_base_runs_own_rows(flow: dict) -> None:
    root = flow["root"]
    proc = run_emo(flow["env"], "compare", str(root / "base"), str(root / "new"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[subset 'gate-p0.8-all80-cheb0.3'" in proc.stdout
    assert "planned (subset 'gate-p0.8-all80-cheb0.3'" in proc.stdout and "power: a pass rules out" in proc.stdout
    # the base column is the base run's mean over the subset's rows, not its full-data value
    line = next(x for x in proc.stdout.splitlines() if x.startswith("mvei_sample ") and " acc_total " in x)
    log = next((root / "base").glob("*_samples_mvei_sample.jsonl"))
    pairs = [json.loads(x)["acc_total"] for x in log.read_text().splitlines()]
    kept = set(json.loads((root / "plan.json").read_text())["rows"]["mvei/sample"])
    values = [100.0 * bool(p["right"]) for p in pairs if p["pair_id"] in kept]
    assert len(values) == len(kept)
    assert float(line.split()[2]) == pytest.approx(sum(values) / len(values), abs=5e-4)


def test_the_gate_catches_a_worse_model_on_the_subset(flow: dict) -> None:
    root = flow["root"]
    proc = run_emo(flow["env"], "compare", str(root / "base"), str(root / "bad"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION" in proc.stdout and "significant drop in mme_emotion_sample:rec_s" in proc.stderr


def _tampered(flow: dict, name: str, task: str, edit) -> Path:  # noqa: ANN001 - a list -> list edit
    copy = flow["root"] / f"new_{name}"
    shutil.copytree(flow["root"] / "new", copy)
    log = next(copy.glob(f"judged/*/*_samples_{task}.jsonl"))
    lines = log.read_text().splitlines()
    log.write_text("\n".join(edit(lines)) + "\n")
    return copy


def _retarget(lines: list[str]) -> list[str]:
    row = json.loads(lines[0])
    row["target"] = row["target"].split("#")[0] + "#000000000000"  # the same gold, another row's content
    return [json.dumps(row), *lines[1:]]


@pytest.mark.parametrize(
    ("name", "task", "edit", "code", "says"),
    [
        ("dropped", "mme_emotion_sample_er_lab", lambda lines: lines[1:], 2, "rows: mme_emotion_sample_er_lab"),
        # a log holding a row twice is malformed input (exit 3), as for any compare: the readers refuse it
        ("twice", "mme_emotion_sample_sa", lambda lines: [*lines, lines[0]], 3, "doc_id 0 is logged twice"),
        ("foreign", "mme_emotion_sample_ir", _retarget, 2, "are not rows of the base run"),
    ],
)
def test_a_subset_row_dropped_twice_or_from_other_data_is_not_comparable(
    flow: dict,
    name: str,
    task: str,
    edit,  # noqa: ANN001
    code: int,
    says: str,
) -> None:
    new = _tampered(flow, name, task, edit)
    proc = run_emo(flow["env"], "compare", str(flow["root"] / "base"), str(new))
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert says in proc.stderr, proc.stderr


def test_a_subset_base_run_is_refused_by_compare_and_by_plan_gate(flow: dict) -> None:
    root = flow["root"]
    proc = run_emo(flow["env"], "compare", str(root / "new"), str(root / "base"))
    assert proc.returncode == 2 and "the base run ran on subset" in proc.stderr, proc.stderr
    plan = run_emo(flow["env"], "plan-gate", str(root / "new"), *PLAN, "--out", str(root / "x.json"))
    assert plan.returncode == 2 and "ran on a subset; plan from a full run" in plan.stderr, plan.stderr


def test_the_judge_stage_refuses_another_subset_and_lmms_eval_a_key_the_data_lacks(flow: dict) -> None:
    root, env = flow["root"], flow["env"]
    other = root / "other.json"
    plan = json.loads((root / "plan.json").read_text())
    plan["rows"]["mvei/sample"] = plan["rows"]["mvei/sample"][1:]
    other.write_text(json.dumps(plan))
    proc = run_emo({**env, "EMO_SUBSET": str(other)}, "judge", str(root / "new"), "--out", str(root / "j2"))
    assert proc.returncode == 2 and "the run ran on subset" in proc.stderr, proc.stderr
    plan["rows"]["mvei/sample"] = ["sample-01", "not-a-pair"]
    other.write_text(json.dumps(plan))
    run = lmms({**env, "EMO_SUBSET": str(other)}, root / "unknown", GOOD, "--predict_only")
    assert not list((root / "unknown").rglob("*_results.json"))
    assert "not-a-pair" in run.stderr and str(other) in run.stderr, run.stderr[-2000:]


def test_the_trend_report_over_the_checkpoints_of_one_subset(flow: dict) -> None:
    root, env = flow["root"], flow["env"]
    proc = run_emo(env, "report", str(root / "new"), str(root / "bad"), "--trend", "given", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    trend = json.loads(proc.stdout)["trend"]
    new, bad = (results(next((root / n / "judged").iterdir()))["results"]["mme_emotion_sample"] for n in ("new", "bad"))
    rec = [t["metrics"]["mme_emotion_sample:rec_s"] for t in trend]
    assert rec[0]["delta"] == 0 and rec[1]["delta"] == pytest.approx(bad["rec_s,none"] - new["rec_s,none"])
    text = run_emo(env, "report", str(root / "new"), str(root / "bad"), "--trend", "given").stdout
    assert "## Trend" in text and "did not answer the same rows" not in text
    # a full run beside subset runs is named: its values are over other rows
    mixed = run_emo(env, "report", str(root / "base"), str(root / "new"), "--trend", "given").stdout
    assert "did not answer the same rows" in mixed and "on subset 'gate-p0.8-all80-cheb0.3'" in mixed


def test_a_subset_run_says_so_in_reports_and_is_never_exported_as_a_leaderboard_entry(flow: dict) -> None:
    root, env = flow["root"], flow["env"]
    doc = json.loads(run_emo(env, "report", str(root / "new"), "--format", "json").stdout)
    plan = json.loads((root / "plan.json").read_text())
    got = doc["runs"][0]["subset"]
    assert got["mvei_sample"]["n"] == len(plan["rows"]["mvei/sample"]) and got["mvei_sample"]["name"] == plan["name"]
    assert any("ran on a gate subset" in n for n in doc["runs"][0]["notes"])
    assert json.loads(run_emo(env, "report", str(root / "base"), "--format", "json").stdout)["runs"][0]["subset"] == {}
    proc = run_emo(env, "export", str(root / "new"), "--format", "mvei-official", "--out", str(root / "export"))
    assert proc.returncode == 2 and "a leaderboard export needs a run on the whole data" in proc.stderr, proc.stderr
    assert not (root / "export").exists() or not any((root / "export").iterdir())


def test_the_viewer_shows_a_subset_run_beside_its_base(flow: dict) -> None:
    root = flow["root"]
    proc = run_emo(flow["env"], "view", str(root / "base"), str(root / "new"), "--out", str(root / "site"))
    assert proc.returncode == 0, proc.stderr
    assert (root / "site" / "index.html").is_file()
    assert "ran on a gate subset" in (root / "site" / "data" / "site.js").read_text()  # the run's notes say so


#: a plan asking more than the sample's 16 MVEI pairs can give: a drop of 30 points with power 0.95
STRICT = ("--tasks", "mvei_sample", "--detect", "30", "--power", "0.95", "--name", "strict")


@pytest.fixture(scope="module")
def strict(flow: dict) -> Path:
    """`plan-gate` with STRICT (the whole data is too small: it takes every pair and says so), then a subset run of
    another model on it (every decision flipped: no mean change, the largest spread), judged."""
    root, env = flow["root"], flow["env"]
    plan = run_emo(env, "plan-gate", str(root / "base"), *STRICT, "--out", str(root / "strict.json"))
    assert plan.returncode == 0 and "too small for power 0.95 in: mvei_sample acc_total" in plan.stdout, plan.stdout
    run = lmms({**env, "EMO_SUBSET": str(root / "strict.json")}, root / "strict", MID, "--predict_only", "--tasks",
               "mvei_sample")  # fmt: skip
    assert (root / "strict").is_dir(), run.stderr[-3000:]
    judged = run_emo(env, "judge", str(root / "strict"))
    assert judged.returncode == 0, judged.stderr[-3000:]
    return root / "strict"


def _acc(log: Path) -> dict[str, float]:
    """MVEI's per-pair acc_total (0 or 100) from a sample log, by pair_id."""
    rows = [json.loads(x)["acc_total"] for x in log.read_text().splitlines()]
    return {r["pair_id"]: 100.0 * bool(r["right"]) for r in rows}


def test_a_pass_on_too_few_rows_states_the_power_they_reach_below_the_plan(flow: dict, strict: Path) -> None:
    """compare prints the power the subset's rows reach for the planned drop, from their observed paired spread
    (computed here from the two sample logs by the formula of docs/ci.md), and says plainly that it is below the
    0.95 the plan asked for; it never claims that a pass rules the drop out with the plan's power."""
    from statistics import NormalDist, stdev

    root = flow["root"]
    proc = run_emo(flow["env"], "compare", str(root / "base"), str(strict))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # no mean change: the gate passes
    base = _acc(next((root / "base").glob("*_samples_mvei_sample.jsonl")))
    new = _acc(next(strict.glob("judged/*/*_samples_mvei_sample.jsonl")))
    diffs = [new[k] - base[k] for k in new]
    changed = [abs(d) for d in diffs if d]
    assert len(diffs) == 16 and changed  # every pair of the sample, paired
    sd, step, drop = stdev(diffs), sum(changed) / len(changed), 30.0
    z = NormalDist().inv_cdf(0.975)
    power = NormalDist().cdf(drop * len(diffs) ** 0.5 / (sd**2 + step * drop) ** 0.5 - z)
    assert power < 0.95
    assert "a pass means no drop" not in proc.stdout  # the plan's power was stated as if reached
    expected = json.loads((root / "strict.json").read_text())["plan"]["expected_power"]["mvei_sample:acc_total"]
    assert (f"planned (subset 'strict', `emo-tasks plan-gate`): to catch a drop of 30 in acc_total with power 0.95 at "
            f"alpha 0.05 (expected when planned, from the base run's spread: mvei_sample:acc_total {expected:.2f})"
            ) in proc.stdout  # fmt: skip
    assert "power these rows reach for the planned drops, at alpha 0.05 (from their observed paired spread):" in (
        proc.stdout
    )
    assert (f"  mvei_sample acc_total: power {power:.2f} to catch a drop of 30: BELOW the 0.95 asked; a pass does not "
            "rule out a drop of 30 with that power (with power 0.95 it rules out ") in proc.stdout  # fmt: skip
    assert (f"the subset's rows reach less power than planned for mvei_sample acc_total ({power:.2f} < 0.95)"
            in proc.stderr)  # fmt: skip
