"""The judge fingerprint and the presets through the real CLIs (issue 34, items 3 and 4): one `--predict_only
--log_samples` lmms-eval run of the MME-Emotion sample (shared, tests/shared_runs.py), one of its tasks judged by
`emo-tasks judge` against a loopback server that answers `/models` as vLLM does.

- the fingerprint is recorded in the judge setup, the judged summary and the export's provenance, the same
  everywhere, and the same on a rerun (which sends 0 chat requests and lands in the same folder);
- a served model changed behind the same name is refused by the judged folder (exit 2, both values named); judged
  into another folder it misses the cache, and `compare` refuses the two results in one short line; with the
  fingerprint missing on one side (a run made before it existed), compare goes on;
- the judged folder is keyed on what was asked (issue 42, item 1): `/models` failing, an endpoint that lists a model
  only once asked, `--batch-file` (which never asks) and a batch collected while `/models` fails all land in the
  folder of the first run, reuse its cached answers and its batch book, and pay nothing twice;
- `EMO_JUDGE_PRESET=open` sends its models and sampling settings; a role model beside a preset is refused (exit 3,
  one line naming both) by the judge and by its dry run, before anything is sent."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, private_copy, run_emo, with_mme_sample
from fakes import Judge
from shared_runs import dummy_mme_predicted_run
from test_batch_stage import kill_once_batches_recorded

from emo_tasks.results.calibration import judge_identity
from judges.testing import LoopbackServer, last_user_text
from judges.testing_batches import BatchServer, Lifecycle

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TASK = "mme_emotion_sample_er_lab"
STEP, JUDGE = "gpt-4.1-2025-04-14", "gpt-4o-2024-11-20"


def vllm(root: str) -> list[dict[str, Any]]:
    """`/models` as vLLM answers it: each served name with its checkpoint (`root`) and context length."""
    return [{"id": m, "owned_by": "vllm", "root": f"{root}/{m}", "max_model_len": 32768} for m in (STEP, JUDGE)]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's copy (its first test judges into it) of the session's shared dummy run of the MME-Emotion sample
    (tests/shared_runs.py, also test_dry_run_cost's): its eight tasks answered, every judge call here names one."""
    root = tmp_path_factory.mktemp("fingerprint")
    out = private_copy(dummy_mme_predicted_run(tmp_path_factory) / "run", root / "run")
    assert sorted(out.rglob(f"*_samples_{TASK}.jsonl"))
    return out


def _judged(run_dir: Path, before: set[Path]) -> Path:
    (folder,) = {p.parent for p in run_dir.glob("judged/*/*_results.json")} - before
    return folder


def _records(folder: Path) -> tuple[dict, dict]:
    """(the judge setup of the newest judged results, the task's newest judged summary)."""
    results = sorted(folder.glob("*_results.json"))[-1]
    summary = sorted(folder.glob("emo_tasks_judge/*_summary.json"))[-1]
    return json.loads(results.read_text())["emo_tasks_judge"]["judge_setup"], json.loads(summary.read_text())


def test_fingerprint_recorded_everywhere_deterministic_and_a_served_change_misses(run_dir: Path, tmp_path: Path):
    cache = with_mme_sample(tmp_path / "cache")
    with LoopbackServer(responder=Judge(), models=vllm("/ckpt/a")) as srv:
        env = cli_env(cache, srv)
        res = run_emo(env, "judge", str(run_dir), "--tasks", TASK)
        assert res.returncode == 0, res.stderr[-3000:]
        first_calls, asks = len(srv.calls), srv.model_asks
        assert first_calls > 0 and asks == 1  # /models asked once in the process, whatever the number of requests
        folder = _judged(run_dir, set())
        setup, summary = _records(folder)
        fingerprint = summary["judge_fingerprint"]
        assert setup["judge_fingerprint"] == {"mme": fingerprint}  # the same in the setup and the summary
        assert fingerprint["roles"]["judge"]["served"] == {
            "id": JUDGE, "root": f"/ckpt/a/{JUDGE}", "max_model_len": 32768}  # fmt: skip
        assert fingerprint["roles"]["step"]["temperature"] == 0.0 and fingerprint["roles"]["step"]["seed"] is None
        text = json.dumps([setup, summary])
        assert "127.0.0.1" not in json.dumps(fingerprint) and env["OPENAI_API_KEY"] not in text

        export = run_emo(env, "export", str(folder), "--format", "mme-official", "--out", str(tmp_path / "export"))
        assert export.returncode == 0, export.stderr[-2000:]
        provenance = json.loads((tmp_path / "export" / "provenance.json").read_text())
        assert provenance["tasks"][TASK]["judge_fingerprint"] == fingerprint

        again = run_emo(env, "judge", str(run_dir), "--tasks", TASK)  # the same setup: all cached
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(srv.calls) == first_calls, "an unchanged fingerprint must hit the cache (0 chat requests)"
        assert _judged(run_dir, set()) == folder  # the same judge setup, the same folder
        setup2, summary2 = _records(folder)
        assert summary2["judge_fingerprint"] == fingerprint and setup2 == setup
        assert judge_identity(summary2) == judge_identity(summary)  # what a calibration file records: the same

        srv.models = vllm("/ckpt/b")  # another checkpoint behind the same names: the folder refuses it
        refused = run_emo(env, "judge", str(run_dir), "--tasks", TASK)
        assert refused.returncode == 2 and len(srv.calls) == first_calls, refused.stderr[-3000:]
        changed = tmp_path / "changed"  # judged into a folder of its own, as the refusal says
        other = run_emo(env, "judge", str(run_dir), "--tasks", TASK, "--out", str(changed))
        assert other.returncode == 0, other.stderr[-3000:]
        assert len(srv.calls) >= 2 * first_calls, "a changed served model must not reuse a cached answer"
    compare = run_emo(env, "compare", str(folder), str(changed))
    assert compare.returncode == 2, compare.stdout + compare.stderr
    lines = [line for line in compare.stderr.splitlines() if "judge fingerprint" in line]
    assert len(lines) == 1 and f"root /ckpt/a/{JUDGE}" in lines[0] and f"root /ckpt/b/{JUDGE}" in lines[0], lines

    # a result recorded before fingerprints existed: compared on its models, protocol, mode and alpha
    for summary_path in folder.glob("emo_tasks_judge/*_summary.json"):
        old = json.loads(summary_path.read_text())
        del old["judge_fingerprint"]
        summary_path.write_text(json.dumps(old))
    compare = run_emo(env, "compare", str(folder), str(changed))
    assert compare.returncode == 0, compare.stdout + compare.stderr


def test_open_preset_sends_its_models_and_sampling(run_dir: Path, tmp_path: Path) -> None:
    bodies: list[dict] = []
    judge = Judge()

    def responder(body: dict, attempt: int) -> Any:
        bodies.append(body)
        return judge(body, attempt)

    with LoopbackServer(responder=responder) as srv:
        env = cli_env(with_mme_sample(tmp_path / "cache"), srv, EMO_JUDGE_PRESET="open")
        res = run_emo(env, "judge", str(run_dir), "--tasks", TASK, "--out", str(tmp_path / "open"))
        assert res.returncode == 0, res.stderr[-3000:]
    assert {b["model"] for b in bodies} == {"Qwen/Qwen2.5-VL-72B-Instruct"}  # step agent and judge: one server
    assert {(b["temperature"], b["max_tokens"], b["seed"]) for b in bodies} == {(0.0, 4096, 1234)}
    (summary,) = (tmp_path / "open").glob("emo_tasks_judge/*_summary.json")
    roles = json.loads(summary.read_text())["judge_fingerprint"]["roles"]
    assert roles["judge"]["served"] == "not reported"  # the loopback lists only "loopback"
    assert (roles["judge"]["model"], roles["judge"]["seed"], roles["judge"]["max_tokens"]) == (
        "Qwen/Qwen2.5-VL-72B-Instruct", 1234, 4096)  # fmt: skip


@pytest.mark.parametrize("extra", [(), ("--dry-run",)])
def test_a_role_model_beside_a_preset_is_refused(run_dir: Path, tmp_path: Path, extra: tuple[str, ...]) -> None:
    with LoopbackServer(responder=Judge()) as srv:
        env = cli_env(with_mme_sample(tmp_path / "cache"), srv, EMO_JUDGE_PRESET="open", EMO_JUDGE_MODEL="my-vl")
        res = run_emo(env, "judge", str(run_dir), "--tasks", TASK, "--out", str(tmp_path / "x"), *extra)
        flag = run_emo(cli_env(tmp_path / "c2", srv, EMO_JUDGE_PRESET="paper"), "judge", str(run_dir), "--tasks",
                       TASK, "--step-model", "s", "--out", str(tmp_path / "y"), *extra)  # fmt: skip
        assert srv.calls == []
    for proc, named in ((res, "EMO_JUDGE_MODEL='my-vl'"), (flag, "EMO_STEP_MODEL='s'")):
        lines = [line for line in proc.stderr.splitlines() if "EMO_JUDGE_PRESET" in line]
        assert proc.returncode == 3 and len(lines) == 1 and named in lines[0], proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------ issue 42, item 1: one judged folder
def _own_run(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of the module's run without its judged folders, so that this test's judged folders are its own."""
    return Path(shutil.copytree(run_dir, tmp_path / "run", ignore=shutil.ignore_patterns("judged")))


def _folders(run: Path) -> list[Path]:
    return sorted(p for p in (run / "judged").iterdir() if p.is_dir())


def test_models_failing_on_a_rerun_keeps_one_folder_and_its_cache_a_real_change_is_refused(
    run_dir: Path, tmp_path: Path
) -> None:
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    with LoopbackServer(responder=Judge(), models=vllm("/ckpt/a")) as srv:
        env = cli_env(cache, srv)
        first = run_emo(env, "judge", str(run), "--tasks", TASK)
        assert first.returncode == 0, first.stderr[-3000:]
        (folder,) = _folders(run)
        calls = len(srv.calls)

        srv.models_status = 500  # `/models` fails: "not reported", never a new folder nor a new cache key
        again = run_emo(env, "judge", str(run), "--tasks", TASK)
        assert again.returncode == 0, again.stderr[-3000:]
        assert _folders(run) == [folder] and len(srv.calls) == calls  # the folder's answers, from the cache
        setup, summary = _records(folder)
        assert summary["judge_fingerprint"]["roles"]["judge"]["served"]["root"] == f"/ckpt/a/{JUDGE}"  # recorded
        record = json.loads((folder / "judge_setup.json").read_text())["judge_setup"]
        assert record["judge_fingerprint"] == setup["judge_fingerprint"]  # what the folder was judged with
        report = run_emo(env, "report", str(run))
        assert report.returncode == 0, report.stderr[-3000:]

        srv.models_status, srv.models = 200, vllm("/ckpt/b")  # a real change: refused, both values named
        changed = run_emo(env, "judge", str(run), "--tasks", TASK)
        assert changed.returncode == 2 and len(srv.calls) == calls, changed.stderr[-3000:]
        (line,) = [x for x in changed.stderr.splitlines() if "refused" in x]
        assert f"root /ckpt/a/{JUDGE}" in line and f"root /ckpt/b/{JUDGE}" in line, line
        assert _folders(run) == [folder]


def test_an_endpoint_that_lists_a_model_only_once_asked_keeps_one_folder(run_dir: Path, tmp_path: Path) -> None:
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    judge = Judge()
    listed: list[dict] = []

    def responder(body: dict, attempt: int) -> Any:
        listed[:] = [{"id": m} for m in (STEP, JUDGE)]  # listed from now on (OpenAI-style: the id only)
        return judge(body, attempt)

    with LoopbackServer(responder=responder, models=listed) as srv:
        env = cli_env(cache, srv)
        for _ in range(2):
            res = run_emo(env, "judge", str(run), "--tasks", TASK)
            assert res.returncode == 0, res.stderr[-3000:]
        assert srv.model_asks == 2 and listed
        calls = len(srv.calls)
    (folder,) = _folders(run)
    assert len(list(folder.glob("*_results.json"))) == 2
    report = run_emo(env, "report", str(run))
    assert report.returncode == 0, report.stderr[-3000:]
    assert calls == len({c.key for c in srv.calls})  # the second run sent nothing again


def test_batch_file_lands_in_the_folder_of_a_synchronous_run(run_dir: Path, tmp_path: Path) -> None:
    """`--batch-file` never asks `/models` and names a stand-in endpoint: the same request, the same folder (and,
    served as recorded, the same cache keys: nothing to write for `vllm run-batch`)."""
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    with LoopbackServer(responder=Judge(), models=vllm("/ckpt/a")) as srv:
        sync = run_emo(cli_env(cache, srv), "judge", str(run), "--tasks", TASK)
        assert sync.returncode == 0, sync.stderr[-3000:]
    (folder,) = _folders(run)
    files = tmp_path / "vllm_files"
    proc = run_emo(cli_env(cache, None), "judge", str(run), "--tasks", TASK, "--batch-file", str(files))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _folders(run) == [folder] and len(list(folder.glob("*_results.json"))) == 2
    assert not list(files.glob("*.jsonl"))


class Once(Judge):
    """The loopback judge, counting each request text it answers: a line uploaded twice is answered twice."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __call__(self, body: dict, attempt: int) -> Any:
        self.seen.append(f"{body.get('model')}: {last_user_text(body)}")
        return super().__call__(body, attempt)

    def twice(self) -> list[str]:
        return sorted({t[:60] for t in self.seen if self.seen.count(t) > 1})


def _batch(env: dict, run: Path, *flags: str) -> subprocess.CompletedProcess:
    return run_emo(env, "judge", str(run), "--tasks", TASK, "--batch", "--batch-poll", "0", *flags)


def test_a_batch_collected_while_models_fails_uploads_and_submits_nothing_again(run_dir: Path, tmp_path: Path):
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    quick = Lifecycle(in_progress=1, finalizing=0)
    judge = Once()
    with BatchServer(responder=judge, models=vllm("/ckpt/a"), default_lifecycle=quick) as srv:
        env = cli_env(cache, srv, EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")
        first = _batch(env, run, "--batch-submit-only")
        assert first.returncode == 5, first.stderr[-3000:]
        (folder,) = _folders(run)
        srv.models_status = 500  # every later command: "not reported"
        codes = []
        for _ in range(8):
            proc = _batch(env, run, "--batch-submit-only")
            codes.append(proc.returncode)
            if proc.returncode != 5:
                break
        counters = srv.counters()
    assert codes[-1] == 0, (codes, proc.stderr[-3000:])
    assert _folders(run) == [folder]
    files = json.loads((folder / "emo_tasks_batch" / "state.json").read_text())["files"]
    assert counters["uploads"] == counters["batches_created"] == len(files)
    assert counters["lines_run"] == sum(f["requests"] for f in files)
    assert judge.seen and judge.twice() == []  # no request was batched (and paid for) twice


def test_kill_9_during_a_batch_then_models_failing_uploads_nothing_again(run_dir: Path, tmp_path: Path) -> None:
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    slow = Lifecycle(in_progress=50)  # the first batch runs long: the client is waiting when it is killed
    judge = Once()
    with BatchServer(responder=judge, models=vllm("/ckpt/a"), lifecycles=[slow]) as srv:
        env = cli_env(cache, srv, EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")
        cmd = [sys.executable, "-m", "emo_tasks", "judge", str(run), "--tasks", TASK, "--batch", "--batch-poll", "30"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        state = kill_once_batches_recorded(proc, lambda: next(run.glob("judged/*/emo_tasks_batch/state.json"), None))
        before = srv.counters()
        srv.models_status = 500
        look = _batch(env, run, "--batch-submit-only")  # the same command while the batch runs: it only looks
        after = srv.counters()
        assert look.returncode == 5, look.stderr[-3000:]
        assert (after["uploads"], after["batches_created"]) == (before["uploads"], before["batches_created"])
        srv.batches[json.loads(state.read_text())["files"][0]["batch_id"]].lifecycle = Lifecycle()  # let it end
        done = _batch(env, run)
        counters = srv.counters()
    assert done.returncode == 0, done.stderr[-4000:]
    assert _folders(run) == [state.parent.parent]
    files = json.loads(state.read_text())["files"]
    assert counters["uploads"] == counters["batches_created"] == len(files)
    assert judge.seen and judge.twice() == []  # no request was batched (and paid for) twice


# ------------------------------------------------------------------ issue 46: a judge's announced shutdown date
TODAY = "2026-12-05"
IN_10, IN_90 = "2026-12-15", "2027-03-05"


def dated(step: Any = IN_10, judge: Any = IN_90) -> list[dict[str, Any]]:
    """`/models` as OpenAI answers it, each model with its `shutdown_date` ("absent": no such field)."""
    out = []
    for model, value in ((STEP, step), (JUDGE, judge)):
        entry: dict[str, Any] = {"id": model, "owned_by": "system"}
        if value != "absent":
            entry["shutdown_date"] = value
        out.append(entry)
    return out


def _said(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if "shuts down on" in line]


def test_a_shutdown_date_is_said_once_per_model_recorded_and_never_moves_a_folder_or_key(
    run_dir: Path, tmp_path: Path
) -> None:
    """`emo-tasks judge` against an endpoint announcing the step model's shutdown in 10 days and the judge's in 90:
    one line per model (urgent within 30), recorded beside the setup and in the results and summary; the date
    null, absent, garbage or moved: the same folder, every answer a cache hit; garbage: one warning, exit 0.  The
    report and the viewer show it; `cache list --run` names the run's verdicts with their date."""
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    with LoopbackServer(responder=Judge(), models=dated()) as srv:
        env = cli_env(cache, srv, EMO_TODAY=TODAY)
        first = run_emo(env, "judge", str(run), "--tasks", TASK)
        assert first.returncode == 0, first.stderr[-3000:]
        said = _said(first)
        assert len(said) == 2, said
        assert any("URGENT" in x and f"{STEP} (step)" in x and "(10 days left)" in x for x in said), said
        assert any("URGENT" not in x and f"{JUDGE} (judge)" in x and "(90 days left)" in x for x in said), said
        (folder,) = _folders(run)
        calls = len(srv.calls)
        want = {STEP: {"date": IN_10, "roles": ["step"]}, JUDGE: {"date": IN_90, "roles": ["judge"]}}
        record = json.loads((folder / "judge_setup.json").read_text())
        assert record["judge_shutdown"] == want and "shutdown" not in json.dumps(record["judge_setup"])
        results = json.loads(sorted(folder.glob("*_results.json"))[-1].read_text())["emo_tasks_judge"]
        setup, summary = _records(folder)
        assert results["judge_shutdown"] == want and summary["judge_shutdown"] == want
        fingerprint = summary["judge_fingerprint"]
        for value, warned in ((None, 0), ("absent", 0), ("soon", 0), ("2027-06-01", 1), (IN_10, 1)):
            srv.models = dated(step=value)
            again = run_emo(env, "judge", str(run), "--tasks", TASK)
            assert again.returncode == 0, (value, again.stderr[-3000:])
            assert _folders(run) == [folder], value  # the date is no part of the folder's name
            assert len(srv.calls) == calls, value  # nor of a cache key: every answer a hit
            assert _records(folder)[0] == setup and _records(folder)[1]["judge_fingerprint"] == fingerprint
            assert len([x for x in _said(again) if STEP in x]) == warned, (value, _said(again))
            bad = [x for x in again.stderr.splitlines() if "not a date" in x]
            assert len(bad) == (value == "soon"), bad
            if value == "soon":
                assert srv.base_url.split("//")[1].split("/")[0] in bad[0] and '"soon"' in bad[0]

    report = run_emo(env, "report", str(folder))
    assert report.returncode == 0, report.stderr[-3000:]
    assert f"judge shutdown reported: {STEP} (step) on {IN_10} (10 days left)" in report.stdout, report.stdout
    as_json = run_emo(env, "report", str(folder), "--format", "json")
    assert json.loads(as_json.stdout)["runs"][0]["judge_shutdown"] == want
    view = run_emo(env, "view", str(folder), "--out", str(tmp_path / "site"))
    assert view.returncode == 0, view.stderr[-3000:]
    text = (tmp_path / "site" / "data" / "site.js").read_text()  # emoSite.receive("site", {...});
    _, overview = json.loads("[" + text[len("emoSite.receive(") : -3] + "]")
    assert overview["runs"][0]["judge_shutdown"] == [f"{STEP} (step) on {IN_10} (10 days left)",
                                                     f"{JUDGE} (judge) on {IN_90} (90 days left)"]  # fmt: skip

    listed = run_emo(env, "cache", "list", "--run", str(run), "--json")
    assert listed.returncode == 0, listed.stderr[-3000:]
    doc = json.loads(listed.stdout)
    import sqlite3

    conn = sqlite3.connect(cache / "judge_cache.sqlite3")
    direct = {(m, r): n for m, r, n in conn.execute(
        "SELECT model, json_extract(summary, '$.role'), COUNT(*) FROM answers GROUP BY 1, 2")}  # fmt: skip
    conn.close()
    assert {(g["model"], g["role"]): g["verdicts"] for g in doc["groups"]} == direct
    assert set(direct) == {(STEP, "step"), (JUDGE, "judge")}
    by_model = {g["model"]: g for g in doc["groups"]}
    assert by_model[STEP]["shutdown_date"] == IN_10 and by_model[JUDGE]["shutdown_date"] == IN_90
    assert all(g["runs"] == [str(folder)] for g in doc["groups"]), doc


def test_the_gate_warns_within_its_horizon_and_fails_with_the_flag_calibrate_and_batch_say_it(
    run_dir: Path, tmp_path: Path
) -> None:
    """compare and plan-gate on a reference run whose step model shuts down in 10 days: a warning within the
    default 30-day horizon, none with --judge-horizon 5; --fail-on-judge-shutdown turns a pass into exit 4.
    `emo-tasks judge --batch` and `calibrate` say each model once."""
    run, cache = _own_run(run_dir, tmp_path), with_mme_sample(tmp_path / "cache")
    quick = Lifecycle(in_progress=1, finalizing=0)
    with BatchServer(responder=Judge(), models=dated(), default_lifecycle=quick) as srv:
        env = cli_env(cache, srv, EMO_TODAY=TODAY, EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")
        batch = _batch(env, run)
        assert batch.returncode == 0, batch.stderr[-3000:]
        assert len(_said(batch)) == 2, _said(batch)
        (ref,) = _folders(run)
        cand = tmp_path / "cand"
        other = run_emo(env, "judge", str(run), "--tasks", TASK, "--judge-model", "judge-b", "--out", str(cand))
        assert other.returncode == 0, other.stderr[-3000:]
        assert [x for x in _said(other) if STEP in x] and not [x for x in _said(other) if JUDGE in x]
    cal = run_emo(env, "calibrate", str(ref), str(cand), "--out", str(tmp_path / "cal.json"))
    assert cal.returncode in (0, 1), cal.stderr[-3000:]
    said = _said(cal)  # from what the folders recorded: once per model, however many tasks and sides record it
    assert len(said) == 2 and any(STEP in x and "URGENT" in x for x in said), said

    for flags, code, warned in (((), 0, True), (("--judge-horizon", "5"), 0, False),
                                (("--fail-on-judge-shutdown",), 4, True),
                                (("--fail-on-judge-shutdown", "--judge-horizon", "5"), 0, False)):  # fmt: skip
        proc = run_emo(env, "compare", str(ref), str(ref), *flags)
        assert proc.returncode == code, (flags, proc.stdout[-2000:], proc.stderr[-2000:])
        lines = [x for x in proc.stderr.splitlines() if "within --judge-horizon" in x]
        assert len(lines) == warned and (not warned or f"{STEP} (step) on {IN_10}" in lines[0]), proc.stderr
        out = tmp_path / f"plan{len(flags)}{code}.json"
        plan = run_emo(env, "plan-gate", str(ref), "--detect", "60", "--out", str(out), *flags)
        assert plan.returncode == code, (flags, plan.stdout[-2000:], plan.stderr[-2000:])
        assert len([x for x in plan.stderr.splitlines() if "within --judge-horizon" in x]) == warned, plan.stderr
