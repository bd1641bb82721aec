"""`emo-tasks judge` proves what it judges: the run's own answers, each row once, every row (issue 19).

Each test reproduces one way a careful user could make the stage (or report/compare) judge the wrong answers and
exit 0, through the real CLIs on a real lmms-eval run: one `--predict_only --log_samples` run of the three sample
tasks with `--model openai` on a loopback server (answers differ per document; the session's shared run,
tests/shared_runs.py), copied and altered per test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import Model
from shared_runs import predicted_sample_run

from judges.testing import LoopbackServer, Reply

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
DUMMY = "Cues noted. Answer: happiness. Correct. Score: 40. Reason: dummy."
pytestmark = pytest.mark.slow


def _env(cache: Path, srv: LoopbackServer | None = None, **extra: str) -> dict[str, str]:
    fast = {"EMO_JUDGE_BACKOFF_BASE": "0.01", "EMO_JUDGE_BACKOFF_MAX": "0.05", "EMO_JUDGE_MAX_TRIES": "2"}
    return cli_env(cache, srv, **{**fast, **extra})


def emo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_emo(env, *args)


def _lmms(out: Path, env: dict[str, str], *flags: str, model: str = "openai", args: str = "") -> None:
    cmd = [sys.executable, "-m", "lmms_eval", "--model", model, "--model_args", args, "--tasks", TASKS,
           "--batch_size", "1", "--output_path", str(out), *flags]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=out.parent)
    assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `--predict_only` run (which logs samples) of the three sample tasks (the GPU job), answers differing per row:
    the session's shared run (tests/shared_runs.py), read only (`run` below is a test's copy to alter)."""
    return predicted_sample_run(tmp_path_factory) / "run"


@pytest.fixture
def run(base: Path, tmp_path: Path) -> Path:
    """A private copy of the predict-only run, to alter."""
    shutil.copytree(base, tmp_path / "run")
    return tmp_path / "run"


def _log(run: Path, task: str) -> Path:
    (log,) = [p for p in run.rglob(f"*_samples_{task}.jsonl") if "judged" not in p.parts]
    return log


def _judged_results(run: Path) -> dict:
    (folder,) = (run / "judged").iterdir()
    (path,) = folder.glob("*_results.json")
    return json.loads(path.read_text())


def _dry_run(run: Path, cache: Path) -> subprocess.CompletedProcess:
    """`emo-tasks judge RUN --dry-run` with a judge endpoint configured (it sends nothing), so the old code, which
    needed one, reaches the rows: what these tests prove is the row checks, not the endpoint's."""
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = emo(_env(cache, srv), "judge", str(run), "--dry-run")
        assert srv.calls == []
    return proc


def _one_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("emo-tasks")]
    assert lines, proc.stderr[-3000:]
    return lines[-1]


# ------------------------------------------------------------------------------------------------ one run, named
def test_another_runs_answers_are_never_judged(run: Path, tmp_path: Path) -> None:
    """A folder with a predict-only run and a newer EMO_JUDGE=defer run of --model dummy (no --log_samples): the
    stage refuses to guess; --run picks one, and each is judged on its own answers only."""
    cache = with_mme_sample(tmp_path / "cache")
    _lmms(run, _env(cache, EMO_JUDGE="defer"), model="dummy", args=f"response={DUMMY}".replace(",", " "))
    stamps = sorted(p.name[: -len("_results.json")] for p in run.rglob("*_results.json"))
    assert len(stamps) == 2
    old, new = stamps
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        env = _env(cache, srv)
        refused = emo(env, "judge", str(run))
        assert refused.returncode == 2, refused.stderr[-3000:]
        line = _one_line(refused)
        assert old in line and new in line and "--run" in line
        assert not (run / "judged").exists()
        # report and compare pick by the same rule
        assert emo(env, "report", str(run)).returncode == 2
        assert emo(env, "compare", str(run), str(run)).returncode == 2

        picked = emo(env, "judge", str(run), "--run", new, "--tasks", "mme_emotion_sample")
        assert picked.returncode == 0, picked.stderr[-3000:]
        data = _judged_results(run)
        assert Path(data["emo_tasks_judge"]["source_results"]).name == f"{new}_results.json"
        answers = data["emo_tasks_judge"]["answers_files"]
        assert all("emo_tasks_judge" in p and p.endswith("_answers.jsonl") for p in answers.values()), answers
        judged_log = next((run / "judged").rglob("*_samples_mme_emotion_sample_er_lab.jsonl"))
        assert {json.loads(x)["filtered_resps"] for x in judged_log.read_text().splitlines()} == {DUMMY}

        # the dummy run saved no MVEI log: its report has no per-sample values (before: the other run's)
        rep = emo(env, "report", str(run), "--run", f"{new}_results.json", "--format", "json")
        assert rep.returncode == 0, rep.stderr[-3000:]
        mvei = json.loads(rep.stdout)["runs"][0]["metrics"]["mvei_sample"]
        assert all(m.get("ci") in (None, [None, None]) for m in mvei.values()), mvei
        assert "mvei_sample: no per-sample log" in rep.stdout + rep.stderr


# ------------------------------------------------------------------------------------------------ rows
@pytest.mark.parametrize("task", ["mvei_sample", "mme_emotion_sample_er_lab"])
def test_a_row_twice_is_refused_and_changes_the_data_hash(run: Path, base: Path, tmp_path: Path, task: str) -> None:
    log = _log(run, task)
    lines = log.read_text().splitlines()
    log.write_text("\n".join([*lines, lines[1]]) + "\n")
    proc = _dry_run(run, tmp_path / "cache")
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = _one_line(proc)
    doc_id = json.loads(lines[1])["doc_id"]
    assert task in line and f"doc_id {doc_id} (lines 2 and {len(lines) + 1})" in line and "twice" in line

    from emo_tasks.results.reader import data_hash, find_results

    base_results, _ = find_results(base)
    run_results, _ = find_results(run)
    assert data_hash(base, base_results, task) != data_hash(run, run_results, task)


def test_rows_without_target_or_input_are_refused(run: Path, tmp_path: Path) -> None:
    """Two doc_ids swapped and target/input deleted from those lines: nothing is left to prove the mapping."""
    log = _log(run, "mvei_sample")
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    rows[0]["doc_id"], rows[5]["doc_id"] = rows[5]["doc_id"], rows[0]["doc_id"]
    for r in (rows[0], rows[5]):
        del r["target"], r["input"]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = _dry_run(run, tmp_path / "cache")
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = _one_line(proc)
    assert "mvei_sample" in line and "line 1 (doc_id 5)" in line and "no target or input" in line


def test_missing_rows_are_refused_unless_partial(run: Path, tmp_path: Path) -> None:
    log = _log(run, "mvei_sample")
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines()[:12]))
    env = _env(tmp_path / "cache")
    proc = emo(env, "judge", str(run), "--tasks", "mvei_sample")
    assert proc.returncode == 2, proc.stderr[-3000:]
    line = _one_line(proc)
    assert "12 of the 16 rows" in line and "doc_id 12, 13, 14, 15" in line and "--partial" in line

    partial = emo(env, "judge", str(run), "--tasks", "mvei_sample", "--partial")
    assert partial.returncode == 0, partial.stderr[-3000:]
    assert "--partial: mvei_sample: judging 12 of the 16 rows" in partial.stderr
    block = _judged_results(run)["emo_tasks_judge"]
    assert block["partial"] == {"mvei_sample": {"judged": 12, "of": 16, "missing_doc_ids": [12, 13, 14, 15]}}
    assert "mvei_sample: a partial judgement (emo-tasks judge --partial): 12 of the 16 rows" in partial.stdout


def test_a_broken_line_is_named_by_its_real_number(run: Path, tmp_path: Path) -> None:
    log = _log(run, "mvei_sample")
    text = log.read_text()
    log.write_text(text[: len(text) - 40])  # line 16 cut short, as by a full disk
    proc = _dry_run(run, tmp_path / "cache")
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert f"{log.name} line 16: not a JSON object" in _one_line(proc)


# ------------------------------------------------------------------------------------------------ exit codes
def test_unusable_out_is_exit_3_in_one_line(run: Path, tmp_path: Path) -> None:
    afile = tmp_path / "a_file"
    afile.write_text("x")
    env = _env(tmp_path / "cache")
    for out in (afile, afile / "under", tmp_path / ("n" * 300)):
        proc = emo(env, "judge", str(run), "--tasks", "mvei_sample", "--out", str(out))
        assert proc.returncode == 3, (out, proc.stderr[-3000:])
        assert str(out)[:50] in _one_line(proc)


def test_judge_exits_4_when_the_judge_fails_and_a_rerun_resends_only_the_failures(run: Path, tmp_path: Path) -> None:
    cache = with_mme_sample(tmp_path / "cache")
    garbage = LoopbackServer(responder=lambda body, attempt: Reply(kind="garbage"), expected_api_key=API_KEY)
    with garbage as srv:
        proc = emo(_env(cache, srv), "judge", str(run), "--tasks", "mme_emotion_sample")
    assert proc.returncode == 4, proc.stderr[-3000:]
    line = _one_line(proc)
    assert "16 of 16 judgements failed" in line and "only the failures are sent again" in line
    assert _judged_results(run)["results"]["mme_emotion_sample"]["n_judge_failed,none"] == 16  # written anyway

    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        again = emo(_env(cache, srv), "judge", str(run), "--tasks", "mme_emotion_sample")
        assert again.returncode == 0, again.stderr[-3000:]
        assert srv.calls  # the failures were sent again
        srv.reset_log()
        third = emo(_env(cache, srv), "judge", str(run), "--tasks", "mme_emotion_sample")
        assert third.returncode == 0 and srv.calls == []


def test_two_judges_on_one_run_pay_once(run: Path, base: Path, tmp_path: Path) -> None:
    """Two `emo-tasks judge` processes on the same run and setup: the second waits, then finds the cache."""
    alone = tmp_path / "alone"
    shutil.copytree(base, alone)
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY, latency_s=0.2) as srv:
        one = emo(_env(with_mme_sample(tmp_path / "c1"), srv), "judge", str(alone), "--tasks", "mme_emotion_sample")
        assert one.returncode == 0, one.stderr[-3000:]
        n_alone = len(srv.calls)
        srv.reset_log()
        env = _env(with_mme_sample(tmp_path / "c2"), srv)
        procs: list[subprocess.CompletedProcess] = []

        def judge() -> None:
            procs.append(emo(env, "judge", str(run), "--tasks", "mme_emotion_sample"))

        threads = [threading.Thread(target=judge) for _ in range(2)]
        for t in threads:
            t.start()
            time.sleep(0.3)
        for t in threads:
            t.join()
        assert [p.returncode for p in procs] == [0, 0], [p.stderr[-2000:] for p in procs]
        assert n_alone > 16 and len(srv.calls) == n_alone
        assert any("waiting for it to finish" in p.stderr for p in procs)


# ------------------------------------------------------------------------------------------------ judge folders
def test_each_judge_setup_gets_a_folder_of_its_own(run: Path, tmp_path: Path) -> None:
    cache = with_mme_sample(tmp_path / "cache")
    long_name = "org/" + "very-long-judge-model-name-" * 11  # 300 characters
    seen: dict[str, str] = {}
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        for label, extra, flags in (
            ("default", {}, ()),
            ("official", {"EMO_MME_JUDGE_PROTOCOL": "official"}, ()),
            ("alpha", {"EMO_MME_ALPHA": "0.3"}, ()),
            ("slash", {}, ("--judge-model", "Qwen/Q-72B")),
            ("underscore", {}, ("--judge-model", "Qwen_Q-72B")),
            ("kanji", {}, ("--judge-model", "判定")),
            ("hangul", {}, ("--judge-model", "심사")),
            ("long", {}, ("--judge-model", long_name)),
        ):
            before = set((run / "judged").iterdir()) if (run / "judged").exists() else set()
            proc = emo(_env(cache, srv, **extra), "judge", str(run), "--tasks", "mme_emotion_sample", *flags)
            assert proc.returncode == 0, (label, proc.stderr[-3000:])
            (new,) = set((run / "judged").iterdir()) - before  # never an earlier setup's folder
            seen[label] = new.name
            assert len(new.name) <= 100 and new.name.isascii()
            setup = json.loads(next(new.glob("*_results.json")).read_text())["emo_tasks_judge"]["judge_setup"]
            assert setup["models"]["judge"] == (flags[1] if flags else "gpt-4o-2024-11-20")
    assert len(set(seen.values())) == len(seen)
    assert seen["default"].startswith("judge=gpt-4o-2024-11-20,step=gpt-4.1-2025-04-14-")
    # several setups in one folder: report and compare refuse to pick one silently
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        assert emo(_env(cache, srv), "report", str(run)).returncode == 2
        ok = emo(_env(cache, srv), "report", str(run), "--run", f"judged/{seen['official']}")
        assert ok.returncode == 0, ok.stderr[-3000:]
        assert "judge setup: mode api; step gpt-4.1-2025-04-14, judge gpt-4o-2024-11-20; protocol official" in ok.stderr
