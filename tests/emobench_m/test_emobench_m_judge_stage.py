"""EmoBench-M's LLM scorer of SMILE's reasons through the judge stage CLI, against the same scorer run in process.

Two real lmms-eval runs of `emobench_m_sample` (`--model dummy`, `--log_samples`), built once per session: U without
a judge (the LLM metrics N/A), J judged in process by a loopback judge (the real openai SDK, 127.0.0.1) that rates
by the reference reason and never rates one answer's multimodal dimension.  `emo-tasks judge U` with the same judge,
synchronously and through the Batch API (`judges.testing_batches.BatchServer`), must give J's numbers for every
task, count the unrated answer in `n_judge_failed`, write each answer's ratings into its sample log (the report's
confidence intervals), and a rerun on the same cache must send nothing.  Each pass writes a judge log; two passes
over U by two judges (`fakes.Judge`, one of them harsher) give `emo-tasks calibrate` the shift computed
by hand.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, build_once, private_copy, run_emo
from fakes import HARSH, Judge, smile_ratings
from shared_runs import stage_env

from emo_tasks.emobench_m.scoring import TABLE
from emo_tasks.results.layout import JUDGE_LOG_SUFFIX
from judges.testing import LoopbackServer, Reply, last_user_text
from judges.testing_batches import BatchServer

pytestmark = pytest.mark.slow
TASK, GROUP = "emobench_m_sample_smile", "emobench_m_sample"
ANSWER = "The audience laughed because the reply was absurdly literal."
LLM = ("llm_logical", "llm_multimodal", "llm_total", "n_judge_failed")


class SmileJudge:
    """The authors' two prompts answered from the reference reason alone (deterministic across runs and modes); the
    multimodal prompt of the reference that mentions "literal" is never rated: a judge failure, counted 0."""

    def __init__(self) -> None:
        self.asked: list[str] = []  # every prompt it answered, in order

    def __call__(self, body: dict, attempt: int) -> Reply:
        text = last_user_text(body)
        self.asked.append(text)
        reference = text.split("Reference Reason: ", 1)[1].split("\n", 1)[0]
        rating = int(hashlib.sha256(reference.encode()).hexdigest()[:6], 16) % 6
        if "**Logical Judgment Dimension:**" in text:
            return Reply(text=f"Logical Judgment Dimension: {rating}")
        if "literal" in reference:
            return Reply(text="I cannot rate this reason.")
        return Reply(text=f"Multimodal Content Association Dimension: {(rating + 2) % 6}")


def _unrated(prompt: str) -> bool:
    """The one prompt the judge never rates (a failure is not cached: a rerun asks it again, and only it)."""
    return "**Multimodal Content Association Dimension:**" in prompt and "literal reply" in prompt


def _lmms(folder: Path, srv: LoopbackServer | None) -> None:
    out = folder / "run"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={ANSWER}", "--tasks",
           GROUP, "--batch_size", "1", "--output_path", str(out), "--log_samples"]  # fmt: skip
    env = stage_env(folder / "cache", srv)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=folder)
    (folder / "lmms.log").write_text(proc.stdout + proc.stderr)
    assert sorted(out.rglob(f"*_samples_{TASK}.jsonl")), proc.stdout[-2000:] + proc.stderr[-4000:]


def _judged_in_process(folder: Path) -> None:
    with LoopbackServer(responder=SmileJudge(), expected_api_key=API_KEY) as srv:
        _lmms(folder, srv)


def _results(folder: Path) -> dict[str, Any]:
    files = sorted(folder.rglob("*_results.json"), key=lambda p: p.name)
    assert files, f"no results under {folder}"
    return json.loads(files[-1].read_text(encoding="utf-8"))["results"]


def _values(folder: Path) -> dict[str, dict[str, Any]]:
    """{task: {metric: value}} of every EmoBench-M task and the group."""
    return {t: {m: row.get(f"{m},none") for m in TABLE.names} for t, row in _results(folder).items()
            if t.startswith("emobench_m")}  # fmt: skip


def _records(folder: Path) -> list[dict[str, Any]]:
    log = sorted(folder.rglob(f"*_samples_{TASK}.jsonl"), key=lambda p: p.name)[-1]
    return [json.loads(x)["accuracy"] for x in log.read_text(encoding="utf-8").splitlines()]


def _chat(srv: LoopbackServer) -> list:
    return [c for c in srv.calls if c.path.endswith("/chat/completions")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """U (no judge) and J (judged in process): the session's, read only (every stage writes to its own --out)."""
    return {
        "U": build_once(tmp_path_factory, "emobench_m_sample_unjudged", lambda f: _lmms(f, None)) / "run",
        "J": build_once(tmp_path_factory, "emobench_m_sample_judged", _judged_in_process) / "run",
        "root": tmp_path_factory.mktemp("emobench_m_stage"),
    }


def test_the_in_process_scorer_records_every_answers_ratings(runs: dict[str, Path]) -> None:
    unjudged, judged = _values(runs["U"]), _values(runs["J"])
    assert all(unjudged[TASK][m] is None for m in LLM)  # no judge: N/A (the rule metrics are there)
    assert unjudged[TASK]["bleu"] is not None
    smile = judged[TASK]
    records = _records(runs["J"])
    assert [r["llm_failed"] for r in records] == [False, True]  # the "literal" reference's multimodal: unrated
    assert records[1]["llm_multimodal"] == 0 and records[1]["llm_errors"]
    # the authors' aggregation: the mean over every answer, a failure counted 0
    for m in ("llm_logical", "llm_multimodal", "llm_total"):
        assert smile[m] == pytest.approx(sum(r[m] for r in records) / 2, abs=1e-12)
    assert smile["n_judge_failed"] == 1 and judged[GROUP]["n_judge_failed"] == 1
    assert judged[GROUP]["llm_total"] == pytest.approx(smile["llm_total"], abs=1e-12)  # SMILE is the only rated one


def _judge(runs: dict[str, Path], name: str, srv: LoopbackServer, *flags: str) -> subprocess.CompletedProcess:
    """`emo-tasks judge U --out root/name FLAGS`, cache root/cache_<name>."""
    root = runs["root"]
    return run_emo(stage_env(root / f"cache_{name}", srv), "judge", str(runs["U"]), "--out", str(root / name),
                   *flags)  # fmt: skip


def test_the_judge_stage_gives_the_in_process_numbers_and_a_rerun_sends_nothing(runs: dict[str, Path]) -> None:
    root = runs["root"]
    with LoopbackServer(responder=SmileJudge(), expected_api_key=API_KEY) as srv:
        proc = _judge(runs, "sync", srv)
        first = len(_chat(srv))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert _values(root / "sync") == _values(runs["J"])  # every task, the group, every metric
    assert [(r["llm_logical"], r["llm_multimodal"], r["llm_failed"]) for r in _records(root / "sync")] == [
        (r["llm_logical"], r["llm_multimodal"], r["llm_failed"]) for r in _records(runs["J"])
    ]
    # two prompts per answer, the unrated one asked again (the engine's invalid-answer retries)
    assert len({c.key for c in _chat(srv)}) == 4 and first > 4
    # a rerun on the same cache: the answer cache gives everything but the failure, which is asked again
    rerun = SmileJudge()
    with LoopbackServer(responder=rerun, expected_api_key=API_KEY) as srv:
        cmd = run_emo(stage_env(root / "cache_sync", srv), "judge", str(runs["U"]), "--out", str(root / "again"))
    assert cmd.returncode == 0, cmd.stderr[-4000:]
    assert _values(root / "again") == _values(runs["J"])
    assert rerun.asked and all(_unrated(t) for t in rerun.asked)
    # the report reads the per-answer ratings: the LLM metrics get confidence intervals, as the others do
    report = run_emo(stage_env(root / "cache_report"), "report", str(root / "sync"), "--format", "json")
    assert report.returncode == 0, report.stderr[-3000:]
    metrics = json.loads(report.stdout)["runs"][0]["metrics"]
    smile = _values(root / "sync")[TASK]
    for task in (TASK, GROUP):  # the group pools its scenarios' samples: SMILE's two
        for m in ("llm_logical", "llm_multimodal", "llm_total"):
            row = metrics[task][m]
            assert row["value"] == pytest.approx(smile[m]) and row["n"] == 2 and row["n_judge_failed"] == 1, row
            assert row["ci_low"] is not None and row["ci_low"] <= row["value"] <= row["ci_high"], row
    # the viewer shows each answer's ratings beside its values
    view = run_emo(stage_env(root / "cache_report"), "view", str(root / "sync"), "--out", str(root / "site"))
    assert view.returncode == 0, view.stderr[-3000:]
    page = "".join(p.read_text(encoding="utf-8") for p in (root / "site" / "data").rglob(f"{TASK}/*.js"))
    assert '"failed":true,"errors":["multimodal: invalid_answer"]' in page and '"llm_total":' in page


def test_the_batch_api_gives_the_same_numbers(runs: dict[str, Path]) -> None:
    root = runs["root"]
    with BatchServer(responder=SmileJudge(), expected_api_key=API_KEY) as srv:
        proc = _judge(runs, "batch", srv, "--batch", "--batch-poll", "0")
        direct = len(_chat(srv))
        counters = srv.counters()
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert direct == 0 and counters["batches_created"] >= 1  # nothing went the synchronous way
    assert _values(root / "batch") == _values(runs["J"])
    assert _values(root / "batch")[TASK]["n_judge_failed"] == 1
    # a synchronous stage on the batch's cache sends only the failure again
    rerun = SmileJudge()
    with LoopbackServer(responder=rerun, expected_api_key=API_KEY) as srv:
        again = run_emo(stage_env(root / "cache_batch", srv), "judge", str(runs["U"]), "--out",
                        str(root / "batch_sync"))  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert rerun.asked and all(_unrated(t) for t in rerun.asked)
    assert _values(root / "batch_sync") == _values(runs["J"])


def _log_rows(folder: Path) -> list[dict[str, Any]]:
    logs = sorted((folder / "emo_tasks_judge").glob(f"sample_emobench_m_smile_*{JUDGE_LOG_SUFFIX}"))
    assert len(logs) == 1, logs
    return [json.loads(x) for x in logs[0].read_text(encoding="utf-8").splitlines()]


def test_two_judges_of_the_same_run_calibrate_to_the_shift_by_hand(runs: dict[str, Path], tmp_path: Path) -> None:
    """`emo-tasks judge U` twice, by `judge-a` and by `judge-harsh` (`fakes.Judge`: logical one point lower,
    multimodal two), then `emo-tasks calibrate`: per score the shift and CI computed here from the fake judges'
    rule; two pairs are fewer than MIN_PAIRED, so the verdict is "too few pairs" (exit 1).  The in-process run J
    wrote its judge log too, and a copy of J without it (a run judged before the logs) is refused saying to rerun
    the judge stage."""
    # the in-process run's log: one row per answer, the ratings its sample log holds
    rows, records = _log_rows(runs["J"]), _records(runs["J"])
    assert [(r["row_id"], r["llm_logical"], r["llm_multimodal"], r["failed"]) for r in rows] == [
        (x["row_id"], x["llm_logical"], x["llm_multimodal"], x["llm_failed"]) for x in records]  # fmt: skip
    assert [r["status"] for r in rows] == ["scored", "judge_failed"]
    root = tmp_path
    with LoopbackServer(responder=Judge(), expected_api_key=API_KEY) as srv:
        for judge in ("judge-a", f"judge-{HARSH}"):
            proc = run_emo(stage_env(root / "cache", srv), "judge", str(runs["U"]), "--judge-model", judge, "--out",
                           str(root / judge))  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-4000:]
    # by hand: A's and B's ratings of each answer from its reference reason (the gold of U's sample log)
    golds = [r["gold"] for r in _records(runs["U"])]
    a = [smile_ratings(g) for g in golds]
    b = [smile_ratings(g, harsh=True) for g in golds]
    diffs = {"llm_logical": [y[0] - x[0] for x, y in zip(a, b, strict=True)],
             "llm_multimodal": [y[1] - x[1] for x, y in zip(a, b, strict=True)],
             "llm_total": [sum(y) - sum(x) for x, y in zip(a, b, strict=True)]}  # fmt: skip
    assert [(r["ratings"]["logical"], r["ratings"]["multimodal"]) for r in _log_rows(root / "judge-a")] == a
    out = root / "calibration.json"
    proc = run_emo(stage_env(root / "cache_cal"), "calibrate", str(root / "judge-a"), str(root / f"judge-{HARSH}"),
                   "--out", str(out), "--resamples", "300")  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # two pairs: too few, not interchangeable
    doc = json.loads(out.read_text(encoding="utf-8"))
    shifts = {s["metric"]: s for s in doc["shifts"]}
    assert set(shifts) == set(diffs) and {s["task"] for s in doc["shifts"]} == {TASK}
    for metric, d in diffs.items():
        s = shifts[metric]
        # two paired answers: the bootstrap's means are d1, (d1+d2)/2 or d2, so its 95 % CI is [min d, max d]
        assert s["n"] == 2 and s["shift"] == pytest.approx(sum(d) / 2, abs=1e-12), s
        assert (s["ci_low"], s["ci_high"]) == pytest.approx((min(d), max(d)), abs=1e-12), s
        assert not s["interchangeable"], s
    assert shifts["llm_logical"]["shift"] == -1.0  # A's logical is never 0: B is exactly one lower
    assert doc["reference"]["identity"]["judge_models"] == {"judge": "judge-a"}
    assert doc["candidate"]["identity"]["judge_models"] == {"judge": f"judge-{HARSH}"}
    assert "too few pairs (2 < 30): shift -1.00 [-1.00, -1.00]" in proc.stdout
    # a run judged before the scorer wrote judge logs: refused in one line, saying what to run
    old = private_copy(runs["J"], tmp_path / "old")
    shutil.rmtree(old / "emo_tasks_judge")
    refused = run_emo(stage_env(root / "cache_cal"), "calibrate", str(old), str(root / "judge-a"), "--out",
                      str(root / "refused.json"))  # fmt: skip
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "rerun `emo-tasks judge RUN`" in refused.stderr and not (root / "refused.json").exists()
