"""The regression gate (`emo-tasks compare`) and the report against the probes of issue 14: a run that mostly
failed, changed data, a stale or ambiguous run folder, a malformed results file, hidden judge failures, and the
leaderboard's lmms-eval version and notes.

Two real lmms-eval runs (dummy model, MME-Emotion and MVEI samples, --log_samples) judged by a loopback server:
"base" by a judge that always answers, "flaky" by one that answers 5xx or garbage for most requests with
EMO_JUDGE_MAX_TRIES=2.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import API_KEY, cli_env, with_mme_sample
from fakes import Judge

from judges.testing import LoopbackServer, Reply, last_user_text

pytestmark = pytest.mark.slow
TASKS = "mme_emotion_sample,mvei_sample"
ANSWER = "Correct. Score: 80. Reason: bright. Answer: anger"  # ": " inside the model args


class FlakyJudge(Judge):
    """The fake judge, except that most rating requests (by their text, so retries fail too) get a 500 (60 %) or
    garbage (30 %)."""

    def __call__(self, body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        h = int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) % 10
        if "Rating Requirements" not in text:
            return super().__call__(body, attempt)
        if h < 6:
            return Reply(kind="status", status=500, text="internal error")
        if h < 9:
            return Reply(kind="garbage", text="<html>bad gateway</html>")
        return super().__call__(body, attempt)


def _env(cache: Path, srv: LoopbackServer | None = None, **extra: str) -> dict[str, str]:
    fast = {"EMO_JUDGE_BACKOFF_BASE": "0.01", "EMO_JUDGE_BACKOFF_MAX": "0.05", "EMO_JUDGE_TIMEOUT": "5"}
    return cli_env(cache, srv, **{**fast, **extra})


def emo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emo_tasks", *args], env=_env(Path("/nonexistent-cache")),
                          capture_output=True, text=True, timeout=300, cwd=cwd)  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gate")

    def run(name: str, judge: Judge, **extra: str) -> Path:
        with LoopbackServer(responder=judge, expected_api_key=API_KEY) as srv:
            out = root / name
            cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={ANSWER}",
                   "--tasks", TASKS, "--batch_size", "1", "--output_path", str(out), "--log_samples"]  # fmt: skip
            proc = subprocess.run(cmd, env=_env(caches[name], srv, **extra), capture_output=True,
                                  text=True, timeout=900, cwd=root)  # fmt: skip
            assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]
        return out

    caches = {name: with_mme_sample(root / f"cache_{name}") for name in ("base", "flaky")}  # before the threads
    with ThreadPoolExecutor(max_workers=2) as pool:
        base = pool.submit(run, "base", Judge())
        flaky = pool.submit(run, "flaky", FlakyJudge(), EMO_JUDGE_MAX_TRIES="2")
        return {"base": base.result(), "flaky": flaky.result(), "root": root}


def _results_file(run: Path) -> Path:
    return next(run.rglob("*_results.json"))


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _counts(run: Path) -> tuple[int, int]:
    group = json.loads(_results_file(run).read_text())["results"]["mme_emotion_sample"]
    return group["n_scored,none"], group["n_judge_failed,none"]


# ------------------------------------------------------------------------------------------------ 1
def test_gate_refuses_a_run_that_mostly_failed(runs: dict[str, Path]) -> None:
    scored, failed = _counts(runs["flaky"])
    assert failed >= 10 and scored >= 1 and scored + failed == 16, (scored, failed)
    assert _counts(runs["base"]) == (16, 0)
    res = emo("compare", str(runs["base"]), str(runs["flaky"]))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{failed} of 16 judged samples failed in the new run" in res.stderr
    assert "--max-failure-share" in res.stderr and "coverage: mme_emotion_sample rec_s" in res.stderr
    assert f"new {failed} of 16" in res.stderr and "Traceback" not in res.stderr
    # thresholds opened up: it compares, and the table says how few samples were paired
    forced = emo("compare", str(runs["base"]), str(runs["flaky"]), "--max-failure-share", "1", "--min-coverage", "0")
    assert forced.returncode in (0, 1), forced.stdout + forced.stderr
    assert "n paired (base/new)" in forced.stdout and f"{scored} (16/{scored})" in forced.stdout
    assert f"judge failures (judge-failed of judged samples): base 0 of 16, new {failed} of 16" in forced.stdout
    # a clean pair still passes with the defaults
    same = emo("compare", str(runs["base"]), str(runs["base"]))
    assert same.returncode == 0, same.stdout + same.stderr


# ------------------------------------------------------------------------------------------------ 2
def test_gate_names_changed_data_instead_of_blaming_the_model(runs: dict[str, Path], tmp_path: Path) -> None:
    other = _copy(runs["base"], tmp_path / "other")
    log = next(other.rglob("*_samples_mvei_sample.jsonl"))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    gold, row_hash = lines[3]["target"].split(" #")
    lines[3]["target"] = f"{'incorrect' if gold == 'correct' else 'correct'} #{'0' * len(row_hash)}"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = emo("compare", str(runs["base"]), str(other))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "data: mvei_sample used different data (data hash" in res.stderr
    doc = json.loads(emo("report", str(runs["base"]), str(other), "--format", "json").stdout)
    hashes = [r["data_hash"] for r in doc["runs"]]
    assert hashes[0]["mvei_sample"] != hashes[1]["mvei_sample"]
    assert hashes[0]["mme_emotion_sample_sa"] == hashes[1]["mme_emotion_sample_sa"] is not None
    # without sample logs, the gate says that data identity was not checked
    bare = _copy(runs["base"], tmp_path / "bare")
    for f in bare.rglob("*_samples_mme_emotion_*.jsonl"):
        f.unlink()
    res = emo("compare", str(runs["base"]), str(bare), "--metric", "mme_emotion_sample:rec_s")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "data identity could not be checked for mme_emotion_sample_er_lab" in res.stderr


# ------------------------------------------------------------------------------------------------ 3
def test_gate_refuses_a_folder_with_several_runs_and_says_which_file_it_read(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    two = _copy(runs["base"], tmp_path / "two")
    old = _results_file(two)
    stale = old.with_name("20200101_000000_results.json")
    shutil.copy(old, stale)
    res = emo("compare", str(runs["base"]), str(two))
    assert res.returncode == 2 and "holds 2 results files" in res.stderr and "--new-run" in res.stderr, res.stderr
    picked = emo("compare", str(runs["base"]), str(two), "--new-run", old.name[:15])
    assert picked.returncode == 0, picked.stdout + picked.stderr
    assert f"new:  {old}" in picked.stdout and "model dummy" in picked.stdout and "date " in picked.stdout
    assert emo("compare", str(runs["base"]), str(stale)).returncode == 0  # the file itself picks it too
    rep = emo("report", str(two))  # report picks by the same rule: it no longer takes the newest silently
    assert rep.returncode == 2 and "holds 2 results files" in rep.stderr and "--run" in rep.stderr, rep.stderr
    rep = emo("report", str(two), "--run", old.name[:15])
    assert rep.returncode == 0 and str(old) in rep.stderr, rep.stderr

    # one lmms-eval run + one judged result of it: the judged one; + a second judge: ambiguous
    judged = _copy(runs["base"], tmp_path / "judged_run")
    src = _results_file(judged)
    for name in ("judge=a", "judge=b"):
        folder = judged / "judged" / name
        folder.mkdir(parents=True)
        data = json.loads(src.read_text())
        data["emo_tasks_judge"] = {"source_results": str(src)}
        (folder / "20300101T000000_results.json").write_text(json.dumps(data))
        res = emo("compare", str(runs["base"]), str(judged))
        if name == "judge=a":
            assert res.returncode == 0 and "judged/judge=a" in res.stdout, res.stdout + res.stderr
            # judged again (failures resent): the newer result of the same judge folder is the one used
            (folder / "20300102T000000_results.json").write_text(json.dumps(data))
            res = emo("compare", str(runs["base"]), str(judged))
            assert res.returncode == 0 and "judge=a/20300102T000000" in res.stdout, res.stdout + res.stderr
        else:
            assert res.returncode == 2 and "1 lmms-eval run(s), 2 judged" in res.stderr, res.stderr
    res = emo("compare", str(runs["base"]), str(judged), "--new-run", "judged/judge=b")
    assert res.returncode == 0 and "judged/judge=b" in res.stdout, res.stdout + res.stderr


# ------------------------------------------------------------------------------------------------ 4
def test_malformed_results_is_an_error_not_a_regression(runs: dict[str, Path], tmp_path: Path) -> None:
    broken = _copy(runs["base"], tmp_path / "broken")
    f = _results_file(broken)
    f.write_text(f.read_text()[:500])
    for cmd in ("compare", "report"):
        args = [str(runs["base"]), str(broken)] if cmd == "compare" else [str(broken)]
        res = emo(cmd, *args)
        assert res.returncode == 3, res.stdout + res.stderr
        assert "not readable JSON" in res.stderr and str(f) in res.stderr and "Traceback" not in res.stderr
    f.write_text(json.dumps({"results": [1, 2]}))
    res = emo("compare", str(runs["base"]), str(broken))
    assert res.returncode == 3 and "not an lmms-eval results file" in res.stderr, res.stderr
    f.write_text(json.dumps({"results": {"mvei_sample": {"acc_total,none": 50.0}}, "configs": {"mvei_sample": 3}}))
    res = emo("compare", str(runs["base"]), str(broken))
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr
    # a missing run folder is a bad argument (docs/cli.md#exit-codes)
    assert emo("compare", str(runs["base"]), str(tmp_path / "missing")).returncode == 3


# ------------------------------------------------------------------------------------------------ 5
def test_report_shows_judge_failures_and_the_true_reason_for_nulls(runs: dict[str, Path]) -> None:
    flaky = runs["flaky"]
    scored, failed = _counts(flaky)
    res = emo("report", str(flaky))
    assert res.returncode == 0, res.stderr
    assert f"({scored} scored, {failed} failed)" in res.stdout  # beside the overall Rec-S, Rea-S, CoT-S
    assert "samples judge-failed" in res.stdout
    results = json.loads(_results_file(flaky).read_text())["results"]
    all_failed = [t for t, r in results.items() if r.get("n_scored,none") == 0]
    assert all_failed, "some task should have had every sample fail"
    assert "every judged sample failed" in res.stdout
    assert "offline judge mode" not in res.stdout  # the judge was on: offline mode is not the reason
    doc = json.loads(emo("report", str(flaky), "--format", "json").stdout)["runs"][0]
    cell = doc["metrics"]["mme_emotion_sample"]["rec_s"]
    assert (cell["n_scored"], cell["n_judge_failed"]) == (scored, failed)
    assert "n_scored" not in doc["metrics"]["mme_emotion_sample"]["avg_token"]
    assert "n_scored" not in doc["metrics"]["mvei_sample"]["acc_total"]
    assert any(t in n and "every judged sample failed" in n for n in doc["notes"] for t in all_failed)


# ------------------------------------------------------------------------------------------------ 6
def test_leaderboard_version_and_notes_with_colons_in_model_args(runs: dict[str, Path], tmp_path: Path) -> None:
    from importlib.metadata import version

    unknown = _copy(runs["flaky"], tmp_path / "unknown")
    f = _results_file(unknown)
    data = json.loads(f.read_text())
    data["lmms_eval_version"] = "unknown@unknown"
    f.write_text(json.dumps(data))
    doc = json.loads(emo("report", str(unknown), "--format", "json").stdout)["runs"][0]
    assert doc["lmms_eval_version"] == version("lmms_eval")
    assert doc["model_args"] == f"response={ANSWER}"
    assert doc["notes"] and all(n.startswith("mme_emotion_sample") for n in doc["notes"]), doc["notes"]
    assert doc["results_file"] == str(f)
