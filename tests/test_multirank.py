"""Real multi-process runs (2 ranks on CPU) of all three sample tasks through lmms-eval, with a loopback judge.

The same evaluation runs three ways: one process, `torchrun --nproc_per_node 2` and `accelerate launch --multi_gpu
--num_processes 2` (ACCELERATE_USE_CPU=1, gloo; `accelerate launch --cpu --num_processes 2` would silently start one
process). `tests/tools/multirank_dummy.py` gives lmms-eval's `dummy` model the `device` the distributed evaluator
needs and records the RANK / WORLD_SIZE every process sees. Checked: both launchers really start two ranks that
split the documents; every metric of every task and group equals the 1-process run's; the MME judge phase runs once
(rank 0's aggregation), so the loopback server sees exactly the 1-process run's requests, never a duplicate from
rank 1; a second 2-rank run on the same judge cache sends nothing, gives the same metrics, and leaves an intact
SQLite cache. lmms-eval exits 0 even when the evaluation raised, so everything is read from the results files.

One module-scoped fixture runs the four launches once (15-40 s each on 2 cores, mostly lmms-eval's start-up; the
wall times are printed and stored as junit suite properties) and the tests only read what it recorded.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import API_KEY, env_without_secrets, unused_port
from test_mme_e2e import FakeJudge

from judges.testing import LoopbackServer, last_user_text

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
WRAPPER = HERE / "tools" / "multirank_dummy.py"
BIN = Path(sys.executable).parent
TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
# `|`-separated alternatives, one chosen per document (see the wrapper); no commas or "=" (--model_args syntax)
RESPONSE = "|".join(
    [
        "The brows are lowered and the voice is loud. Score: 80. Correct. Answer: anger",
        "The voice is soft and slow. Score: 25. Incorrect. Answer: sadness",
        "A wide smile. Score: 60. Correct. Answer: happiness",
        "Score: 40. Incorrect. Answer: neutral",
    ]
)
TIMEOUT_S = 300  # per launch: a rank that dies can leave the other waiting in a collective


@dataclass
class Launch:
    name: str
    results: dict
    n_samples: dict
    records: list[dict]
    calls: list  # the loopback server's Call log for this launch
    step_requests: int
    judge_requests: int
    other_requests: int
    wall_s: float
    cache_dir: Path
    output: str = field(repr=False)


class CountingJudge(FakeJudge):
    """test_mme_e2e's FakeJudge, counting step-agent and judge requests separately."""

    def __init__(self) -> None:
        super().__init__()
        self.counts = {"step": 0, "judge": 0, "other": 0}

    def __call__(self, body: dict, attempt: int):
        text = last_user_text(body)
        kind = (
            "step"
            if text.startswith("Given the following answer")
            else "judge"
            if "Rating Requirements" in text
            else "other"
        )
        self.counts[kind] += 1
        return super().__call__(body, attempt)


def _command(mode: str, out: Path) -> list[str]:
    args = ["--model", "dummy", "--model_args", f"response={RESPONSE}", "--tasks", TASKS, "--batch_size", "1",
            "--output_path", str(out)]  # fmt: skip
    if mode == "single":
        return [sys.executable, str(WRAPPER), *args]
    if mode == "torchrun":
        return [str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_port", str(unused_port()), str(WRAPPER),
                *args]  # fmt: skip
    if mode == "accelerate":
        return [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(unused_port()),
                str(WRAPPER), *args]  # fmt: skip
    raise ValueError(mode)


def _launch(name: str, mode: str, srv: LoopbackServer, judge: CountingJudge, cache_dir: Path, work: Path) -> Launch:
    out = work / f"out_{name}"
    record = work / f"ranks_{name}.jsonl"
    # no developer keys, no stray EMO_* switch, no launcher state inherited from a surrounding distributed job
    launcher_vars = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}
    env = {
        k: v
        for k, v in env_without_secrets().items()
        if not k.startswith(("EMO_", "ACCELERATE_")) and k not in launcher_vars
    }
    env.update(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OPENAI_BASE_URL=srv.base_url,
        OPENAI_API_KEY=API_KEY,
        EMO_CACHE_DIR=str(cache_dir),
        EMO_PROGRESS="0",
        EMO_MULTIRANK_RECORD=str(record),
        EMO_MULTIRANK_SPLIT="1",
        OMP_NUM_THREADS="1",
    )
    if mode == "accelerate":
        env["ACCELERATE_USE_CPU"] = "1"
    srv.reset_log()
    judge.counts = {"step": 0, "judge": 0, "other": 0}
    start = time.monotonic()
    proc = subprocess.run(_command(mode, out), env=env, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work)
    wall = time.monotonic() - start
    srv.wait_idle()
    output = f"$ {mode} exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    # lmms-eval logs an exception raised in the evaluation and still exits 0: the results file is what counts
    files = sorted(out.rglob("*_results.json"))
    assert len(files) == 1, f"{name}: expected one results file under {out}, got {files}\n{output}"
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, output
    records = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    data = json.loads(files[0].read_text())
    return Launch(
        name=name,
        results=data["results"],
        n_samples=data["n-samples"],
        records=records,
        calls=list(srv.calls),
        step_requests=judge.counts["step"],
        judge_requests=judge.counts["judge"],
        other_requests=judge.counts["other"],
        wall_s=wall,
        cache_dir=cache_dir,
        output=output,
    )


@pytest.fixture(scope="module")
def launches(tmp_path_factory: pytest.TempPathFactory, record_testsuite_property) -> dict[str, Launch]:
    for tool in ("torchrun", "accelerate"):  # torch and accelerate are dependencies: missing is a failure
        assert (BIN / tool).exists(), f"{tool} is not installed beside {sys.executable}"
    work = tmp_path_factory.mktemp("multirank")
    judge = CountingJudge()
    runs: dict[str, Launch] = {}
    with LoopbackServer(responder=judge, expected_api_key=API_KEY) as srv:
        for name, mode, cache in [
            ("single", "single", "cache_single"),
            ("torchrun", "torchrun", "cache_torchrun"),
            ("accelerate", "accelerate", "cache_accelerate"),
            ("torchrun_cached", "torchrun", "cache_torchrun"),  # the second run on the same cache
        ]:
            runs[name] = _launch(name, mode, srv, judge, work / cache, work)
    timings = ", ".join(f"{r.name} {r.wall_s:.1f}s" for r in runs.values())
    print(f"\nmultirank wall times: {timings}")
    for run in runs.values():
        record_testsuite_property(f"multirank_wall_s_{run.name}", f"{run.wall_s:.1f}")
    return runs


# ------------------------------------------------------------------------------------------------- helpers
def _metrics(results: dict) -> dict[tuple[str, str], object]:
    """Every (task or group, metric) -> value, without lmms-eval's own bookkeeping ("alias", sample counts)."""
    out = {}
    for task, row in results.items():
        for key, value in row.items():
            if key == "alias":
                continue
            out[(task, key)] = value
    return out


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-9)
    return a == b


# ------------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", ["torchrun", "accelerate", "torchrun_cached"])
def test_launcher_really_started_two_ranks_that_split_the_documents(launches: dict[str, Launch], name: str) -> None:
    run = launches[name]
    starts = [r for r in run.records if r["event"] == "start"]
    assert len(starts) == 2 and len({r["pid"] for r in starts}) == 2, run.output
    assert sorted(r["rank"] for r in starts) == [0, 1] and {r["world_size"] for r in starts} == {2}
    gens = [r for r in run.records if r["event"] == "generate"]
    # lmms-eval set the ranks on the model too, and each rank answered its own shard
    assert sorted({(r["rank"], r["world_size"]) for r in gens}) == [(0, 2), (1, 2)]
    by_rank = {rank: {d for r in gens if r["rank"] == rank for d in r["docs"]} for rank in (0, 1)}
    assert by_rank[0] and by_rank[1] and not by_rank[0] & by_rank[1]
    # lmms-eval's sharding: rank r answers documents r, r + 2, ... of every task
    assert all(int(d.rsplit("/", 1)[1]) % 2 == rank for rank in (0, 1) for d in by_rank[rank])
    single_docs = {d for r in launches["single"].records if r["event"] == "generate" for d in r["docs"]}
    assert by_rank[0] | by_rank[1] == single_docs


def test_single_process_baseline_is_one_process_and_complete(launches: dict[str, Launch]) -> None:
    run = launches["single"]
    starts = [r for r in run.records if r["event"] == "start"]
    assert len(starts) == 1 and starts[0]["world_size"] == 1 and starts[0]["rank"] == 0
    res = run.results
    expected = {"mme_emotion_sample", "mvei_sample", "multiemo_sample"}
    assert expected <= set(res), sorted(res)
    assert sum(t.startswith("mme_emotion_sample_") for t in res) == 8
    mme = res["mme_emotion_sample"]
    # the judge phase really ran: every sample scored with reasoning metrics, none failed
    assert mme["n_scored,none"] == 16 and mme["n_judge_failed,none"] == 0 and mme["rea_s,none"] is not None
    assert run.judge_requests == 16 and 0 < run.step_requests <= 16 and run.other_requests == 0
    # the varied dummy answers give non-degenerate metrics (a constant answer would leave SRCC undefined)
    assert res["multiemo_sample"]["srcc,none"] is not None
    assert 0 < res["mvei_sample"]["positive_ratio,none"] < 100


@pytest.mark.parametrize("name", ["torchrun", "accelerate", "torchrun_cached"])
def test_two_ranks_give_the_single_process_metrics(launches: dict[str, Launch], name: str) -> None:
    single, run = _metrics(launches["single"].results), _metrics(launches[name].results)
    assert set(run) == set(single), set(run) ^ set(single)
    diff = {k: (single[k], run[k]) for k in single if not _same(single[k], run[k])}
    assert not diff, f"{name} differs from the 1-process run: {diff}\n{launches[name].output}"
    # rank 0 aggregated every rank's items
    assert launches[name].n_samples == launches["single"].n_samples


@pytest.mark.parametrize("name", ["torchrun", "accelerate"])
def test_judge_phase_runs_once_not_once_per_rank(launches: dict[str, Launch], name: str) -> None:
    single, run = launches["single"], launches[name]
    assert run.step_requests == single.step_requests, run.output
    assert run.judge_requests == single.judge_requests, run.output
    assert len(run.calls) == len(single.calls) and run.other_requests == 0
    # the same requests, not just as many (rank 1 sending half would not keep the count by luck)
    assert sorted(c.key for c in run.calls) == sorted(c.key for c in single.calls)


def test_two_processes_do_not_corrupt_the_judge_cache(launches: dict[str, Launch]) -> None:
    cached = launches["torchrun_cached"]
    assert cached.step_requests == 0 and cached.judge_requests == 0 and not cached.calls, cached.output
    for name in ("single", "torchrun", "accelerate", "torchrun_cached"):
        db = launches[name].cache_dir / "judge_cache.sqlite3"
        assert db.exists(), f"{name}: no judge cache at {db}"
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", name
        finally:
            con.close()
