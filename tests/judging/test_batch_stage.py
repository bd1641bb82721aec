"""`emo-tasks judge --batch`: the judge stage through the Files and Batches API of a loopback provider.

One `--predict_only` run of the three sample tasks (the real lmms-eval CLI, `--model openai` at a loopback server that
answers per document; the session's shared run, tests/shared_runs.py) is judged once synchronously (the reference
numbers) and then through `judges.testing_batches.BatchServer` in each life cycle a provider has: completed; expired and
cancelled with part of the lines run; failed (refused, then resubmitted; or sent directly with --batch-fallback sync);
lines that come back as errors or unusable answers.  Each time the numbers must equal the synchronous stage's bit for
bit, and the server's counters say what was uploaded, submitted and run.  A `kill -9` between submit and collect, and
answers lost on the wire, must upload and submit nothing twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import Model
from shared_runs import predicted_sample_run
from test_judge_stage import _results, judge_calls, values

from judges.testing import LoopbackServer, Reply, last_user_text
from judges.testing_batches import BatchServer, Lifecycle

pytestmark = pytest.mark.slow
TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
STEP, JUDGE = "gpt-4.1-2025-04-14", "gpt-4o-2024-11-20"


def _env(cache: Path, srv: LoopbackServer, **extra: str) -> dict[str, str]:
    extra = {"EMO_JUDGE_BACKOFF_BASE": "0.01", "EMO_JUDGE_BACKOFF_MAX": "0.05", "TZ": "UTC", **extra}
    return cli_env(cache, srv, **extra)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The predict-only run, and its synchronous stage's numbers (with MultiEmo's judge)."""
    root = tmp_path_factory.mktemp("batch")
    out = predicted_sample_run(tmp_path_factory) / "run"  # the session's shared run, read only (every judge --out)
    assert sorted(out.rglob("*_results.json")) and sorted(out.rglob("*_samples_mvei_sample.jsonl"))
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = run_emo(_env(with_mme_sample(root / "cache_sync"), srv), "judge", str(out), "--out", str(root / "sync"),
                       "--multiemo-judge")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
        sync_calls = len(judge_calls(srv))
    ref = values(_results(root / "sync"))
    assert (
        ref["mme_emotion_sample"]["rea_s,none"] is not None
        and ref["multiemo_sample"].get("judged_srcc,none") is not None
    )
    return {"root": root, "run": out, "ref": ref, "sync_calls": sync_calls}


def batch_judge(
    run: dict[str, Any], name: str, srv: BatchServer, *flags: str, **env: str
) -> subprocess.CompletedProcess:
    """`emo-tasks judge B --multiemo-judge --batch --batch-poll 0 FLAGS` into root/name, cache root/cache_name."""
    root = run["root"]
    env_ = _env(with_mme_sample(root / f"cache_{name}"), srv, **env)
    return run_emo(env_, "judge", str(run["run"]), "--out", str(root / name), "--multiemo-judge", "--batch",
                   "--batch-poll", "0", *flags)  # fmt: skip


def book(run: dict[str, Any], name: str) -> dict[str, Any]:
    return json.loads((run["root"] / name / "emo_tasks_batch" / "state.json").read_text())


def chat_calls(srv: BatchServer) -> int:
    return len([c for c in srv.calls if c.model != "eval-model"])


def test_completed_batches_give_the_synchronous_numbers_and_a_later_synchronous_rerun_sends_nothing(
    run: dict[str, Any],
) -> None:
    with BatchServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = batch_judge(run, "completed", srv)
        counters = srv.counters()
        assert chat_calls(srv) == 0  # nothing went the synchronous way
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert values(_results(run["root"] / "completed")) == run["ref"]
    state = book(run, "completed")
    files = state["files"]
    # rounds: the step agent (with MultiEmo's judge), then MME's judge; one model per file
    assert state["rounds"] == 2 and {f["round"] for f in files} == {1, 2}
    assert {(f["round"], f["model"]) for f in files} == {(1, STEP), (1, JUDGE), (2, JUDGE)}
    assert counters["uploads"] == counters["batches_created"] == len(files)
    assert all(f["collected"] and f["status"] == "completed" and f["batch_id"] for f in files)
    # the lines sent are the requests the synchronous stage sent (each once)
    assert counters["lines_run"] == run["sync_calls"] == sum(f["requests"] for f in files)
    # progress: per batch, its status and counts
    assert "in_progress, " in proc.stderr and " done, 0 failed" in proc.stderr
    folder = run["root"] / "completed" / "emo_tasks_batch"
    assert not list((folder / "requests").glob("*.jsonl"))  # uploaded and answered: removed
    assert all(API_KEY not in p.read_text() for p in folder.rglob("*") if p.is_file())
    # a later synchronous stage on the same cache sends nothing
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as sync:
        again = run_emo(_env(run["root"] / "cache_completed", sync), "judge", str(run["run"]), "--out",
                        str(run["root"] / "completed_sync"), "--multiemo-judge")  # fmt: skip
        assert again.returncode == 0, again.stderr[-3000:]
        assert judge_calls(sync) == []
    assert values(_results(run["root"] / "completed_sync")) == run["ref"]


@pytest.mark.parametrize(
    "life",
    [
        Lifecycle(end="expired", answered=2),
        Lifecycle(end="cancelled", answered=1),  # the lines never run are in neither file
        Lifecycle(end="cancelled", answered=0, list_unfinished=True),
    ],
    ids=["expired", "cancelled", "cancelled-listed"],
)
def test_an_expired_or_cancelled_batch_keeps_its_answers_and_resends_the_rest(
    run: dict[str, Any], life: Lifecycle
) -> None:
    name = f"{life.end}{life.answered}"
    with BatchServer(responder=Model(), expected_api_key=API_KEY, lifecycles=[life]) as srv:
        proc = batch_judge(run, name, srv)
        counters = srv.counters()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert values(_results(run["root"] / name)) == run["ref"]
    files = book(run, name)["files"]
    first = files[0]
    assert first["status"] == life.end and first["round"] == 1
    # the lines it ran were kept (each request ran once: nothing paid twice), the others went into a new batch
    assert counters["lines_run"] == run["sync_calls"]
    assert len(files) == counters["batches_created"] >= 4


def test_a_failed_batch_is_refused_naming_the_providers_error_then_the_same_command_resubmits(
    run: dict[str, Any],
) -> None:
    with BatchServer(responder=Model(), expected_api_key=API_KEY, lifecycles=[Lifecycle(end="failed")]) as srv:
        first = batch_judge(run, "failed", srv)
        assert first.returncode == 3, first.stderr[-3000:]
        assert "Enqueued token limit reached" in first.stderr and "--batch-fallback sync" in first.stderr
        assert not list((run["root"] / "failed").rglob("*_results.json"))
        again = batch_judge(run, "failed", srv)
        counters = srv.counters()
    assert again.returncode == 0, again.stderr[-4000:]
    assert values(_results(run["root"] / "failed")) == run["ref"]
    assert counters["lines_run"] == run["sync_calls"]


def test_a_failed_batch_with_fallback_sync_sends_its_requests_directly(run: dict[str, Any]) -> None:
    with BatchServer(responder=Model(), expected_api_key=API_KEY, lifecycles=[Lifecycle(end="failed")]) as srv:
        proc = batch_judge(run, "failed_sync", srv, "--batch-fallback", "sync")
        direct = chat_calls(srv)
        refused = next(f for f in book(run, "failed_sync")["files"] if f["status"] == "failed")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert values(_results(run["root"] / "failed_sync")) == run["ref"]
    assert direct == refused["requests"]  # exactly the refused batch's requests went the synchronous way


class Flaky:
    """The loopback judge, but the first answer to some requests is unusable: a server error for two step-agent
    requests, a judge answer with no score for two judge requests (the validator rejects it), and a 400 (not
    retried) for one more step request when `refuse` is set."""

    def __init__(self, refuse: bool = False) -> None:
        self.model = Model()
        self.refuse = refuse
        self.bad: dict[str, str] = {}

    def __call__(self, body: dict, attempt: int) -> Any:
        text = last_user_text(body)
        model = body.get("model")
        if model in (STEP, JUDGE) and text not in self.bad:
            kinds = list(self.bad.values())
            if model == STEP and kinds.count("500") < 2:
                self.bad[text] = "500"
            elif model == JUDGE and kinds.count("invalid") < 2 and re.search(r"has \d+ step\(s\)", text):
                self.bad[text] = "invalid"
            elif model == STEP and self.refuse and "400" not in kinds:
                self.bad[text] = "400"
        kind = self.bad.get(text)
        if kind == "400":
            return Reply(kind="status", status=400, text="this request is refused")
        if kind and attempt == 1:
            return Reply(kind="status", status=500) if kind == "500" else Reply(text="I cannot score this.")
        return self.model(body, attempt)


def test_error_lines_and_unusable_answers_follow_the_engines_retry_policy(run: dict[str, Any]) -> None:
    flaky = Flaky()
    with BatchServer(responder=flaky, expected_api_key=API_KEY) as srv:
        proc = batch_judge(run, "flaky", srv)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sorted(flaky.bad.values()).count("500") == 2
    assert values(_results(run["root"] / "flaky")) == run["ref"]  # retried in new batches, then answered
    outcomes = [o for per in book(run, "flaky")["outcomes"].values() for o in per.values()]
    assert outcomes.count("retry") == 2 and outcomes.count("invalid") == sorted(flaky.bad.values()).count("invalid")


def test_a_request_refused_for_good_is_counted_as_a_failure_not_dropped(run: dict[str, Any]) -> None:
    flaky = Flaky(refuse=True)
    with BatchServer(responder=flaky, expected_api_key=API_KEY) as srv:
        proc = batch_judge(run, "refused", srv, "--max-failure-share", "1")
        first = srv.counters()["lines_run"]
        # run again, as after exit 4: only the failure is sent again (and fails again here)
        again = batch_judge(run, "refused", srv, "--max-failure-share", "1")
        assert again.returncode == 0, again.stderr[-3000:]
        assert srv.counters()["lines_run"] == first + 1
        assert "sending again what failed when this stage last finished: 1 request(s)" in again.stderr
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = values(_results(run["root"] / "refused"))
    failed = book(run, "refused")["failed"]
    assert [f["error"] for f in failed.values()] == ["http_400"]
    mme = [t for t in res if t.startswith("mme_emotion_sample_")]
    assert sum(res[t]["n_judge_failed,none"] for t in mme) >= 1  # counted in the results, as the engine counts it


def test_submit_only_then_the_same_command_collects_round_by_round(run: dict[str, Any]) -> None:
    quick = Lifecycle(in_progress=1, finalizing=0)  # each command looks once: created, in progress, completed
    with BatchServer(responder=Model(), expected_api_key=API_KEY, default_lifecycle=quick) as srv:
        codes = []
        for _ in range(8):
            proc = batch_judge(run, "submit_only", srv, "--batch-submit-only")
            codes.append(proc.returncode)
            if proc.returncode == 0:
                break
            assert "run the same command to collect" in proc.stderr, proc.stderr[-3000:]
            assert not list((run["root"] / "submit_only").rglob("*_results.json"))
        counters = srv.counters()
    assert codes[0] == 5 and codes[-1] == 0, codes
    assert values(_results(run["root"] / "submit_only")) == run["ref"]
    assert counters["uploads"] == counters["batches_created"] == len(book(run, "submit_only")["files"])


def kill_once_batches_recorded(proc: subprocess.Popen, find_book: Callable[[], Path | None]) -> Path:
    """kill -9 a waiting `emo-tasks judge --batch` as soon as the batch book it writes (`find_book()`, None while
    there is none) records a batch id for every file: the moment a crash costs the most (paid, not collected)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        book = find_book()
        if book is not None and all(f["batch_id"] for f in json.loads(book.read_text())["files"] or [{}]):
            break
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        time.sleep(0.1)
    else:
        pytest.fail("the batches were never recorded")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return book


def test_kill_9_between_submit_and_collect_uploads_and_submits_nothing_again(run: dict[str, Any]) -> None:
    slow = Lifecycle(in_progress=50)  # the first batch runs long: the client is waiting when it is killed
    with BatchServer(responder=Model(), expected_api_key=API_KEY, lifecycles=[slow]) as srv:
        root = run["root"]
        env = _env(with_mme_sample(root / "cache_killed"), srv)
        cmd = [sys.executable, "-m", "emo_tasks", "judge", str(run["run"]), "--out", str(root / "killed"),
               "--multiemo-judge", "--batch", "--batch-poll", "30"]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        state = root / "killed" / "emo_tasks_batch" / "state.json"
        kill_once_batches_recorded(proc, lambda: state if state.exists() else None)
        before = srv.counters()
        # the same command while the batch still runs: it looks, and sends nothing
        look = batch_judge(run, "killed", srv, "--batch-submit-only")
        after_look = srv.counters()
        assert look.returncode == 5, look.stderr[-3000:]
        assert (after_look["uploads"], after_look["batches_created"]) == (before["uploads"], before["batches_created"])
        srv.batches[json.loads(state.read_text())["files"][0]["batch_id"]].lifecycle = Lifecycle()  # let it end
        done = batch_judge(run, "killed", srv)
        counters = srv.counters()
    assert done.returncode == 0, done.stderr[-4000:]
    assert values(_results(root / "killed")) == run["ref"]
    files = json.loads(state.read_text())["files"]
    assert counters["uploads"] == counters["batches_created"] == len(files)
    assert counters["lines_run"] == run["sync_calls"]


def test_answers_lost_on_the_wire_upload_and_submit_nothing_twice(run: dict[str, Any]) -> None:
    lost = {("upload", 1), ("create", 1), ("content", 1)}

    def fault(route: str, nth: int) -> Reply | None:
        return Reply("lost") if (route, nth) in lost else None

    with BatchServer(responder=Model(), expected_api_key=API_KEY, fault=fault) as srv:
        proc = batch_judge(run, "lost", srv)
        counters = srv.counters()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert values(_results(run["root"] / "lost")) == run["ref"]
    files = book(run, "lost")["files"]
    assert counters["uploads"] == counters["batches_created"] == len(files)


def test_batch_refuses_without_the_answer_cache(run: dict[str, Any]) -> None:
    with BatchServer(responder=Model(), expected_api_key=API_KEY) as srv:
        proc = batch_judge(run, "nocache", srv, EMO_JUDGE_CACHE="0")
        assert srv.counters()["uploads"] == 0
    assert proc.returncode == 3
    assert "EMO_JUDGE_CACHE=0" in proc.stderr


def test_vllm_run_batch_round_trip_gives_the_synchronous_numbers(run: dict[str, Any]) -> None:
    """`--batch-file DIR`, the commands it prints run by a stand-in for `vllm run-batch` (vLLM's output format,
    the loopback judge's answers), then `--batch-results DIR`, round after round; no endpoint is configured."""
    root = run["root"]
    files = root / "vllm_files"
    env = cli_env(with_mme_sample(root / "cache_vllm"), None, TZ="UTC")
    tests_dir = str(Path(__file__).resolve().parent.parent)
    runner_env = {**env, "PYTHONPATH": os.pathsep.join([tests_dir, env.get("PYTHONPATH", "")])}
    base = ["judge", str(run["run"]), "--out", str(root / "vllm"), "--multiemo-judge"]
    proc = run_emo(env, *base, "--batch-file", str(files))
    ran = []
    for _ in range(5):
        if proc.returncode != 5:
            break
        commands = re.findall(r"^\s+vllm run-batch -i (\S+) -o (\S+) --model (\S+)$", proc.stderr, re.MULTILINE)
        assert commands, proc.stderr[-3000:]
        for src, dst, model in commands:
            if not Path(dst).exists():
                cmd = [sys.executable, "-m", "judges.testing_vllm_batch", "-i", src, "-o", dst, "--model", model,
                       "--responder", "fakes:Model"]  # fmt: skip
                done = subprocess.run(cmd, env=runner_env, capture_output=True, text=True, timeout=120)
                assert done.returncode == 0, done.stderr[-2000:]
                ran.append(Path(src).name)
        proc = run_emo(env, *base, "--batch-results", str(files))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert values(_results(root / "vllm")) == run["ref"]
    assert ran[0].startswith("r1-") and any(name.startswith("r2-") for name in ran)
    state = book(run, "vllm")
    assert state["mode"] == "files" and sum(f["requests"] for f in state["files"]) == run["sync_calls"]


def plain_judge(run: dict[str, Any], name: str, srv: LoopbackServer, *flags: str) -> subprocess.CompletedProcess:
    """`emo-tasks judge B --multiemo-judge FLAGS` (no --batch) into root/name, cache root/cache_name."""
    root = run["root"]
    env = _env(with_mme_sample(root / f"cache_{name}"), srv)
    return run_emo(env, "judge", str(run["run"]), "--out", str(root / name), "--multiemo-judge", *flags)


def test_a_plain_judge_after_submit_only_refuses_and_batch_cancel_keeps_what_ran_and_judges_the_rest(
    run: dict[str, Any],
) -> None:
    """Issue 42 item 2: a synchronous `emo-tasks judge` while batches are out would pay for their requests twice."""
    with BatchServer(responder=Model(), expected_api_key=API_KEY) as srv:
        first = batch_judge(run, "out", srv, "--batch-submit-only")
        assert first.returncode == 5, first.stderr[-3000:]
        ids = [f["batch_id"] for f in book(run, "out")["files"]]
        submitted = srv.counters()
        plain = plain_judge(run, "out", srv)
        assert plain.returncode == 2, plain.stderr[-3000:]
        refusal = [line for line in plain.stderr.splitlines() if "refused" in line]
        assert len(refusal) == 1 and f"{len(ids)} batch(es) submitted with --batch are not collected yet" in refusal[0]
        assert all(i in refusal[0] for i in ids) and "--batch to collect" in refusal[0]
        assert "--batch-cancel" in refusal[0]
        assert chat_calls(srv) == 0 and srv.counters() == {**submitted, "hits": srv.counters()["hits"]}
        assert not list((run["root"] / "out").rglob("*_results.json"))
        cancel = plain_judge(run, "out", srv, "--batch-cancel", "--batch-poll", "0")
        counters = srv.counters()
        direct = chat_calls(srv)
    assert cancel.returncode == 0, cancel.stderr[-4000:]
    assert values(_results(run["root"] / "out")) == run["ref"]
    assert counters["cancels"] == len(ids) and counters["uploads"] == counters["batches_created"] == len(ids)
    # what the cancelled batches ran is read from their outputs; only the rest went the synchronous way
    assert 0 < counters["lines_run"] < run["sync_calls"]
    assert direct == run["sync_calls"] - counters["lines_run"]
    files = book(run, "out")["files"]  # the records of the paid batches are kept
    assert [f["batch_id"] for f in files] == ids
    assert all(f["status"] == "cancelled" and f["cancel_requested"] and f["collected"] for f in files)


def test_a_damaged_batch_book_is_refused_naming_it_and_left_as_it_is(run: dict[str, Any]) -> None:
    """Issue 42 item 7: a book that is a JSON list (was exit 3 with a bare AttributeError)."""
    state = run["root"] / "damaged" / "emo_tasks_batch" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text("[]")
    with BatchServer(responder=Model(), expected_api_key=API_KEY) as srv:
        batched = batch_judge(run, "damaged", srv)
        plain = plain_judge(run, "damaged", srv)
        counters = srv.counters()
    for proc in (batched, plain):
        assert proc.returncode == 2, proc.stderr[-3000:]
        (line,) = [ln for ln in proc.stderr.splitlines() if "refused" in ln]
        assert f"{state}: holds a list, not the batch book's object; it is left as it is" in line
        assert "Error" not in proc.stderr
    assert state.read_text() == "[]"
    assert counters["uploads"] == 0 and chat_calls(srv) == 0


def test_a_batch_output_answering_one_request_twice_differently_is_refused(run: dict[str, Any]) -> None:
    """Issue 42 item 4: the same custom_id twice with different answers (the last won silently); a repeat word for
    word is taken once."""
    import openai

    with BatchServer(responder=Model(), expected_api_key=API_KEY) as srv:
        assert batch_judge(run, "dup", srv, "--batch-submit-only").returncode == 5
        client = openai.OpenAI(base_url=srv.base_url, api_key=API_KEY)
        target = next(f for f in book(run, "dup")["files"] if f["model"] == JUDGE)
        for _ in range(10):  # the provider finishes it
            done = client.batches.retrieve(target["batch_id"])
            if done.status == "completed":
                break
        stored = srv.files[done.output_file_id]
        first = stored.data.splitlines()[0]
        other = json.loads(first)
        other["response"]["body"]["choices"][0]["message"]["content"] = "Score: 0"
        stored.data += json.dumps(other).encode() + b"\n"
        refused = batch_judge(run, "dup", srv)
        assert refused.returncode == 2, refused.stderr[-3000:]
        (line,) = [ln for ln in refused.stderr.splitlines() if "refused" in ln]
        assert (
            f"output file {done.output_file_id}" in line and f"custom_id {other['custom_id']} comes back twice" in line
        )
        assert not list((run["root"] / "dup").rglob("*_results.json"))
        # keeping the right line (here: the same line twice) goes on; nothing is sent twice
        copy = run["root"] / "dup" / "emo_tasks_batch" / "outputs" / f"{target['name']}.output.jsonl"
        copy.write_bytes(copy.read_bytes().replace(json.dumps(other).encode(), first))
        done_proc = batch_judge(run, "dup", srv)
        counters = srv.counters()
    assert done_proc.returncode == 0, done_proc.stderr[-4000:]
    assert values(_results(run["root"] / "dup")) == run["ref"]
    assert counters["lines_run"] == run["sync_calls"]
