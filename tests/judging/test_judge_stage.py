"""`emo-tasks judge`: the judge as a stage of its own, through the real lmms-eval CLI and a loopback server.

The evaluated model is lmms-eval's `--model openai` pointed at the loopback server, which answers differently per
document (and per MVEI repeat), so mapping answers back to rows is really tested; the same server plays the step
agent and the judge (the one thing that cannot exist here).  Three runs of the three sample tasks:
A judged in-process, B `-x` (`--predict_only`), D `EMO_JUDGE=defer` without `--log_samples`; A and B are built
once per test session and shared with other modules (tests/shared_runs.py).
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import API_KEY, private_copy, run_emo, with_mme_sample
from fakes import Model
from shared_runs import TASKS, judged_sample_run, predicted_sample_run, stage_env

from judges.testing import LoopbackServer, Reply

JUDGE_ROLES = ("gpt-4.1-2025-04-14", "gpt-4o-2024-11-20")  # the default step and judge models
pytestmark = pytest.mark.slow


def _env(cache: Path, srv: LoopbackServer | None = None, **extra: str) -> dict[str, str]:
    # TZ=UTC: the machine's clock 8 h from lmms-eval's (UTC+8), so a file named by the local clock shows
    return stage_env(cache, srv, **extra)


def _lmms(
    out: Path, env: dict[str, str], srv: LoopbackServer, *flags: str, model: str = "eval-model", tasks: str = TASKS
) -> subprocess.CompletedProcess:
    args = f"model_version={model},base_url={srv.base_url},api_key={API_KEY},max_frames_num=4"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "openai", "--model_args", args, "--tasks", tasks,
           "--batch_size", "1", "--output_path", str(out), *flags]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=out.parent)


def emo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_emo(env, *args)


def _results(folder: Path) -> dict:
    files = sorted(folder.rglob("*_results.json"), key=lambda p: p.name)
    assert files, f"no results under {folder}"
    return json.loads(files[-1].read_text())


def values(results: dict) -> dict[str, dict[str, object]]:
    """{task: {metric: value}} without lmms-eval's aliases and stderr placeholders."""
    return {
        task: {k: v for k, v in row.items() if k != "alias" and "_stderr" not in k}
        for task, row in results["results"].items()
    }


def judge_calls(srv: LoopbackServer) -> list:
    return [c for c in srv.calls if c.model != "eval-model"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A and B are the session's shared runs (tests/shared_runs.py): A read as it is, B copied (tests judge into
    B/judged); A's cache copied to root/cache_A (a judge stage on it may write).  D is this module's own: no other
    module makes an EMO_JUDGE=defer run without --log_samples."""
    root = tmp_path_factory.mktemp("stage")

    def run_d() -> Path:
        with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:  # a server of its own: the
            out = root / "D"  # MVEI repeats' attempt counters must not mix between runs
            env = _env(with_mme_sample(root / "cache_D"), None, EMO_JUDGE="defer")
            proc = _lmms(out, env, srv)
            assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]
            (root / "D.log").write_text(proc.stdout + proc.stderr)
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        a = pool.submit(judged_sample_run, tmp_path_factory)
        b = pool.submit(predicted_sample_run, tmp_path_factory)  # `-x`: the judge is deferred all the same
        d = pool.submit(run_d)
        shared_a, shared_b = a.result(), b.result()
        private_copy(shared_a / "cache", root / "cache_A")
        private_copy(shared_b / "run", root / "B")
        for name, shared in (("A", shared_a), ("B", shared_b)):
            shutil.copyfile(shared / "lmms.log", root / f"{name}.log")
        return {"A": shared_a / "run", "B": root / "B", "D": d.result(), "root": root}


def test_predict_only_then_judge_equals_the_in_process_run(runs: dict[str, Path]) -> None:
    a_values = values(_results(runs["A"]))
    assert a_values["mme_emotion_sample"]["rea_s,none"] is not None  # A really was judged
    # each answer takes 0.5 s, as a remote judge's does: the one-pipeline check below compares request times, and
    # with instant answers a step request that a loaded machine (the other xdist worker) started late failed it
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY, latency_s=0.5) as srv:
        # a cache of its own: the numbers do not come from A's
        env = _env(with_mme_sample(runs["root"] / "cache_judge_B"), srv)
        proc = emo(env, "judge", str(runs["B"]))
        assert proc.returncode == 0, proc.stderr[-4000:]
        first = len(judge_calls(srv))
        steps = [c for c in srv.calls if c.model == "gpt-4.1-2025-04-14"]
        judges = [c for c in srv.calls if c.model == "gpt-4o-2024-11-20" and c.images]
        srv.reset_log()
        again = emo(env, "judge", str(runs["B"]))
        assert again.returncode == 0, again.stderr[-3000:]
        assert judge_calls(srv) == [], "a second judge run must be answered from the cache"
    assert 16 < first <= 32  # step agent + judge for 16 MME samples
    # the 8 MME tasks went through one pipeline: every step request was out before the first judge answer came
    # back (one task after another, the last task's step requests would wait for the first task's judge)
    assert steps and judges and max(c.t_start for c in steps) < min(c.t_end for c in judges)
    judged = sorted((runs["B"] / "judged").iterdir())
    assert len(judged) == 1 and judged[0].name.startswith("judge=gpt-4o-2024-11-20")
    b_values = values(_results(judged[0]))
    assert set(b_values) == set(a_values)
    for task in a_values:
        assert b_values[task] == a_values[task], task
    # the answers really differ per document: a shuffled mapping would have changed the numbers
    log = next(p for p in runs["B"].rglob("*_samples_mvei_sample.jsonl") if "judged" not in p.parts)
    answers = {json.dumps(json.loads(line)["filtered_resps"]) for line in log.read_text().splitlines()}
    assert len(answers) > 2
    assert "MME-Emotion — Rec-S" in proc.stdout  # it prints the report's tables


def test_judging_an_in_process_run_sends_nothing(runs: dict[str, Path]) -> None:
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        env = _env(runs["root"] / "cache_A", srv)  # the in-process run's cache
        proc = emo(env, "judge", str(runs["A"]), "--out", str(runs["root"] / "A_judged"))
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert judge_calls(srv) == []
    assert values(_results(runs["root"] / "A_judged")) == values(_results(runs["A"]))


def test_deferred_run_reports_nulls_then_judge_gives_the_in_process_numbers(runs: dict[str, Path]) -> None:
    deferred = values(_results(runs["D"]))
    for task, row in deferred.items():
        if task.startswith("mme_emotion"):
            assert row["rec_s,none"] is None and row["rea_s,none"] is None and row["n_scored,none"] is None, task
            assert row["avg_token,none"] is not None
    log = (runs["root"] / "D.log").read_text()
    assert f"emo-tasks judge {runs['D']}" in log
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = emo(_env(with_mme_sample(runs["root"] / "cache_judge_D"), srv), "judge", str(runs["D"]))
        assert proc.returncode == 0, proc.stderr[-4000:]
    judged = values(_results(next((runs["D"] / "judged").iterdir())))
    expected = values(_results(runs["A"]))
    for task in expected:
        assert judged[task] == expected[task], task


def test_two_judges_side_by_side_name_their_models_and_endpoint(runs: dict[str, Path]) -> None:
    with LoopbackServer(responder=Model(per_model=True), expected_api_key=API_KEY) as srv:
        env = _env(with_mme_sample(runs["root"] / "cache_two"), srv)
        for model in ("judge-a", "judge-b"):
            proc = emo(env, "judge", str(runs["B"]), "--tasks", "mme_emotion_sample", "--judge-model", model)
            assert proc.returncode == 0, proc.stderr[-4000:]
        host = srv.base_url.split("/")[2]
    folders = {p.name.split(",")[0]: p for p in (runs["B"] / "judged").iterdir() if "judge-" in p.name}
    assert set(folders) == {"judge=judge-a", "judge=judge-b"}
    rec = {k: values(_results(p))["mme_emotion_sample"]["rec_s,none"] for k, p in folders.items()}
    assert rec["judge=judge-a"] != rec["judge=judge-b"]  # different judges, different numbers, both kept
    for name, folder in folders.items():
        summaries = [json.loads(p.read_text()) for p in (folder / "emo_tasks_judge").glob("*_summary.json")]
        assert len(summaries) == 8
        for s in summaries:
            assert s["judge_models"]["judge"] == name.split("=")[1]
            assert s["judge_endpoint"] == host and API_KEY not in json.dumps(s)
            assert name.split("=")[1] in s["api_models"]["judge"]
    agreement = emo(_env(runs["root"] / "cache_two"), "agreement", str(folders["judge=judge-a"]),
                    str(folders["judge=judge-b"]))  # fmt: skip
    assert agreement.returncode == 0, agreement.stdout + agreement.stderr


def test_two_judge_stages_started_together_on_a_fresh_cache_both_finish(runs: dict[str, Path]) -> None:
    """Issue 32 item 1: two `emo-tasks judge` opening one fresh EMO_CACHE_DIR at the same moment (one stage
    crashed with exit 3 in 1 of 4 tries, blaming a healthy cache); every try, both judge every row."""
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        for attempt in range(3):
            env = _env(runs["root"] / f"cache_together{attempt}", srv)
            outs = [runs["root"] / f"together{attempt}_{side}" for side in ("a", "b")]
            cmd = [sys.executable, "-m", "emo_tasks", "judge", str(runs["B"]), "--tasks", "mme_emotion_sample"]
            pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
            procs = [subprocess.Popen([*cmd, "--out", str(out)], env=env, **pipes) for out in outs]
            done = [p.communicate(timeout=600) for p in procs]
            for proc, (_, err) in zip(procs, done, strict=True):
                assert proc.returncode == 0, f"try {attempt}: {err[-3000:]}"
                assert "SQLite" not in err and "delete" not in err, err[-3000:]
            got = [values(_results(out))["mme_emotion_sample"] for out in outs]
            assert got[0] == got[1] and got[0]["n_scored,none"] == 16 and got[0]["n_judge_failed,none"] == 0


_STAMP = re.compile(r"(?<!\d)(\d{8})[_T](\d{6})(?!\d)")


def test_one_clock_names_every_file_of_a_run(runs: dict[str, Path]) -> None:
    """Issue 32 item 13: lmms-eval's results, our judge logs and the judge stage's folder, all named on one clock
    (lmms-eval's, UTC+8) on a machine whose own clock is UTC: no stamp 8 h from the others."""
    out = runs["root"] / "clock_judged"
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = emo(_env(with_mme_sample(runs["root"] / "cache_clock"), srv), "judge", str(runs["B"]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    stamps: dict[str, datetime.datetime] = {}
    for folder in (runs["A"], runs["B"], out):
        for path in folder.rglob("*"):
            if (m := _STAMP.search(path.name)) and "judged" not in path.relative_to(folder).parts[:1]:
                stamps[str(path)] = datetime.datetime.strptime("".join(m.groups()), "%Y%m%d%H%M%S")
    kinds = {p.rsplit("/", 2)[-2] for p in stamps}
    assert {"emo_tasks_judge", "eval-model"} <= kinds and any(str(out) in p for p in stamps), sorted(stamps)
    spread = max(stamps.values()) - min(stamps.values())
    assert spread < datetime.timedelta(hours=2), {p: t.isoformat() for p, t in stamps.items()}
    # and that clock is lmms-eval's: the newest stamp is now on UTC+8
    now = datetime.datetime.now(datetime.timezone(datetime.timedelta(hours=8))).replace(tzinfo=None)
    assert abs(now - max(stamps.values())) < datetime.timedelta(hours=1)


def test_dry_run_counts_what_the_real_run_sends(runs: dict[str, Path]) -> None:
    cache = with_mme_sample(runs["root"] / "cache_dry")
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        env = _env(cache, srv)
        dry = emo(env, "judge", str(runs["B"]), "--tasks", "mme_emotion_sample", "--dry-run", "--judge-model",
                  "dry-judge", "--price", "dry-judge=2.5/10")  # fmt: skip
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert srv.calls == []
        planned = _dry_rows(dry.stdout)
        out = runs["root"] / "dry_out"
        real = emo(env, "judge", str(runs["B"]), "--tasks", "mme_emotion_sample", "--judge-model", "dry-judge",
                   "--out", str(out))  # fmt: skip
        assert real.returncode == 0, real.stderr[-3000:]
        sent = {m: len([c for c in srv.calls if c.model == m]) for m in ("gpt-4.1-2025-04-14", "dry-judge")}
        srv.reset_log()
        after = _dry_rows(emo(env, "judge", str(runs["B"]), "--tasks", "mme_emotion_sample", "--dry-run",
                              "--judge-model", "dry-judge").stdout)  # fmt: skip
    step = sum(r["to_send"] for r in planned if r["agent"] == "step")
    judge = sum(r["to_send"] for r in planned if r["agent"] == "judge")
    assert (step, judge) == (sent["gpt-4.1-2025-04-14"], sent["dry-judge"]) and step > 0 and judge > 0
    assert all(r["cached"] == r["requests"] and r["to_send"] == 0 for r in after)
    assert "USD" in dry.stdout


def _dry_rows(text: str) -> list[dict]:
    lines = [line.split() for line in text.splitlines()]
    header = next(i for i, parts in enumerate(lines) if parts[:2] == ["task", "agent"])
    rows = []
    for parts in lines[header + 1 :]:
        if len(parts) < 6 or not parts[3].isdigit():
            continue
        rows.append({"task": parts[0], "agent": parts[1], "requests": int(parts[3]), "cached": int(parts[4]),
                     "to_send": int(parts[5])})  # fmt: skip
    assert rows, text
    return rows


def test_answers_judged_against_changed_data_are_refused(runs: dict[str, Path]) -> None:
    cache = runs["root"] / "cache_changed"
    env = _env(cache)
    from emo_tasks.mvei.sample import sample_file

    data = sample_file(cache)  # the bundled sample as the run saw it, then one label flipped
    doc = json.loads(data.read_text())
    first = next(iter(doc))
    doc[first]["ground_truth"] = "incorrect" if doc[first]["ground_truth"] == "correct" else "correct"
    data.write_text(json.dumps(doc))
    proc = emo(env, "judge", str(runs["B"]), "--tasks", "mvei_sample", "--out", str(runs["root"] / "refused"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "data: mvei_sample" in proc.stderr and "doc_id" in proc.stderr
    assert not (runs["root"] / "refused").exists() or not list((runs["root"] / "refused").rglob("*_results.json"))


def test_a_killed_judge_stage_resumes_without_repeating_answered_requests(runs: dict[str, Path]) -> None:
    import signal
    import time

    with LoopbackServer(responder=Model(), latency_s=0.3, expected_api_key=API_KEY) as srv:
        env = _env(with_mme_sample(runs["root"] / "cache_kill"), srv, EMO_JUDGE_CONCURRENCY="2")
        cmd = [sys.executable, "-m", "emo_tasks", "judge", str(runs["B"]), "--tasks", "mme_emotion_sample",
               "--out", str(runs["root"] / "killed")]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while len(srv.keys_answered()) < 8 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        answered_before = set(srv.keys_answered())
        srv.wait_idle()
        srv.reset_log()
        rerun = emo(env, "judge", str(runs["B"]), "--tasks", "mme_emotion_sample", "--out",
                    str(runs["root"] / "killed"))  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        repeated = answered_before & {c.key for c in srv.calls}
    assert len(answered_before) >= 8
    assert len(repeated) <= 2  # at most the requests in flight when it was killed (concurrency 2)
    assert (
        values(_results(runs["root"] / "killed"))["mme_emotion_sample"]
        == values(_results(runs["A"]))["mme_emotion_sample"]
    )


def test_the_readme_gpu_then_judge_commands_as_written(tmp_path: Path) -> None:
    """README "GPU, then judge": predict-only with the dummy model, then `emo-tasks judge out`, then the report."""
    from fakes import Judge

    env = _env(tmp_path / "cache")
    first = subprocess.run(
        [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--tasks", "mme_emotion_sample", "--predict_only",
         "--log_samples", "--output_path", "out"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert sorted((tmp_path / "out").rglob("*_samples_mme_emotion_sample_ir.jsonl")), first.stderr[-3000:]
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        judged = emo(_env(tmp_path / "cache", srv), "judge", str(tmp_path / "out"))
        assert judged.returncode == 0, judged.stderr[-3000:]
        assert len(srv.calls) > 16
    # the judge's HTTP session is closed before the interpreter exits: no "Unclosed client session" (aiohttp)
    assert "Unclosed" not in judged.stderr and "client_session" not in judged.stderr, judged.stderr[-2000:]
    report = emo(env, "report", str(tmp_path / "out"))
    assert report.returncode == 0, report.stderr
    assert "MME-Emotion — Rea-S" in report.stdout and "judged" in report.stdout  # the judged run, not the bypass
    rea = values(_results(next((tmp_path / "out" / "judged").iterdir())))["mme_emotion_sample"]["rea_s,none"]
    assert rea is not None and f"{rea:.2f}" in report.stdout


def test_multiemo_judge_stage_over_a_run(runs: dict[str, Path]) -> None:
    """`--multiemo-judge`: MultiEmo's LLM-as-a-judge over this run's answers, its metrics beside the model's."""
    out = runs["root"] / "multiemo_judged"
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = emo(_env(runs["root"] / "cache_multi", srv), "judge", str(runs["B"]), "--tasks", "multiemo_sample",
                   "--multiemo-judge", "--out", str(out))  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        judge_requests = [c for c in srv.calls if c.model == "gpt-4o-2024-11-20"]
    row = values(_results(out))["multiemo_sample"]
    assert len(judge_requests) == 6 * 8  # one per image and emotion of the sample
    assert row["judged_n_images,none"] == 6 and row["judged_precision_ours,none"] is not None
    assert row["precision_ours,none"] == values(_results(runs["A"]))["multiemo_sample"]["precision_ours,none"]
    assert list((out / "emo_tasks_judge").glob("*_judged_predictions.jsonl"))


def test_rule_differences_are_counted_in_the_summary_and_the_report(runs: dict[str, Path]) -> None:
    """The six single-label tasks' official per-task scripts read only `: d/1`; answers they read differently from
    our `:\\s*n/d` rule are counted per task (the fake judge gives some `k/2` last ratings on those tasks)."""
    import re

    logs = sorted((runs["A"] / "emo_tasks_judge").glob("*_judge.jsonl"))
    expected: dict[str, int] = {}
    for log in logs:
        for line in log.read_text().splitlines():
            row = json.loads(line)
            if row["status"] != "scored" or row["task"] in ("FG-ER", "ML-ER"):
                continue
            block = re.search(r"<score>(.*?)</score>", row["judge_text"]).group(1)
            ours = [0.0 if int(d) == 0 else int(n) / int(d) for n, d in re.findall(r":\s*(\d+)/(\d+)", block)]
            theirs = [float(d) for d in re.findall(r": (\d)/1", block)]
            expected[row["task"]] = expected.get(row["task"], 0) + (ours != theirs)
    counted = {}
    for summary in (runs["A"] / "emo_tasks_judge").glob("*_summary.json"):
        doc = json.loads(summary.read_text())
        if doc.get("benchmark") == "MME-Emotion":
            counted[doc["tasks"][0]] = doc["n_rule_differs"]
    assert sum(expected.values()) > 0  # the case really occurs here
    from emo_tasks.mme_emotion.protocol import spec_for

    assert {k: v for k, v in counted.items() if v} == {spec_for(k).task: v for k, v in expected.items() if v}
    report = emo(_env(runs["root"] / "cache_A"), "report", str(runs["A"]), "--format", "json")
    assert report.returncode == 0, report.stderr
    board = json.loads(report.stdout)["runs"][0]
    assert sum(v or 0 for v in board["n_rule_differs"].values()) == sum(expected.values())
    assert any("read differently by the official per-task script" in n for n in board["notes"])


def _retired_everywhere(body: dict, attempt: int) -> Reply:
    """A judge endpoint after the shutdown date: every model answers 404 `model_not_found`."""
    text = f"The model `{body.get('model')}` does not exist or you do not have access to it."
    return Reply(kind="status", status=404, code="model_not_found", text=text)


def test_cache_export_then_import_rejudges_elsewhere_after_the_judge_is_retired(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 42 item 12: `emo-tasks cache export RUN` writes the answers RUN's judged results read into a file beside
    it; imported into an empty cache on another machine, `emo-tasks judge` against a retired endpoint gives the
    same results bit for bit and sends no chat request."""
    import gzip

    from emo_tasks.judging.cachefile import DEFAULT_NAME
    from judges import JudgeCache

    run = tmp_path / "here" / "run"
    shutil.copytree(runs["B"], run, ignore=shutil.ignore_patterns("judged"))
    here = with_mme_sample(tmp_path / "cache_here")  # this run's answers only
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = emo(_env(here, srv), "judge", str(run), "--multiemo-judge")
        assert proc.returncode == 0, proc.stderr[-3000:]
    (judged,) = (run / "judged").iterdir()
    # an export from a cache without the answers is refused: the file would not re-judge the run
    empty = tmp_path / "cache_empty"
    empty.mkdir()
    refused = emo(_env(here, OPENAI_API_KEY=API_KEY), "cache", "export", str(run), "--cache", str(empty))
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "gives other numbers" in refused.stderr and not (run / DEFAULT_NAME).exists()
    # the export: no endpoint configured, a key in the environment that must not reach the file
    proc = emo(_env(here, OPENAI_API_KEY=API_KEY), "cache", "export", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = gzip.decompress((run / DEFAULT_NAME).read_bytes()).decode()
    assert API_KEY not in text
    cache = JudgeCache(here)
    try:
        assert len(text.splitlines()) - 2 == len(cache) > 16  # every answer this run read, nothing else
    finally:
        cache.close()
    # another machine: the run (with the file beside it) moved, an empty cache, the judge model shut down
    moved = tmp_path / "there" / "run"
    shutil.copytree(run, moved, ignore=shutil.ignore_patterns("judged"))
    there = tmp_path / "cache_there"
    # the same data there (keys hash the judged media's content; the generated sample's .mkv clips are not
    # byte-for-byte reproducible, a downloaded dataset is)
    shutil.copytree(here / "samples", there / "samples")
    imported = emo(_env(there), "cache", "import", str(moved / DEFAULT_NAME))
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert f"{len(text.splitlines()) - 2} answers added, 0 already there" in imported.stderr
    with LoopbackServer(responder=_retired_everywhere, expected_api_key=API_KEY) as dead:
        proc = emo(_env(there, dead), "judge", str(moved), "--multiemo-judge")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert dead.calls == []  # not one chat request: every answer came from the imported file
    (again,) = (moved / "judged").iterdir()
    assert json.dumps(_results(again)["results"], sort_keys=True) == json.dumps(
        _results(judged)["results"], sort_keys=True
    )
