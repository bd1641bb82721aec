"""The measuring parts of `benchmarks/judge_batch.py` (issue 35): the waiting it subtracts, read from the batch
command's stamped lines as `judges.batch_api` prints them, the client CPU it splits at the waiting, and its Files +
Batches judge (`judge_server.py --batches --queue S`), a process of its own that holds a batch S seconds and
answers a batch line as the chat route answers the same body."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load("judge_batch")


def _said(text: str) -> str:
    """A line exactly as the batch command prints it (BatchAPI.say)."""
    from judges.batch_api import BatchAPI
    from judges.config import EndpointConfig

    out = io.StringIO()
    BatchAPI(EndpointConfig(base_url="http://127.0.0.1:1/v1"), err=out).say(text)
    return out.getvalue().strip()


def test_waiting_is_from_a_rounds_last_submit_to_its_last_end() -> None:
    lines = [
        (10.0, _said("round 1: 5 requests wait for a batch (1 new files, 0 answers read in this pass)")),
        (12.0, _said("r1-m-1: 5 requests (0.1 MB) submitted as batch-1")),
        (13.0, _said("r1-m-1 (batch-1): in_progress, 2 of 5 done, 0 failed")),
        (14.0, _said("r1-m-1 (batch-1): completed, 5 of 5 done, 0 failed")),
        (20.0, _said("round 2: 7 requests wait for a batch (2 new files, 5 answers read in this pass)")),
        (21.0, _said("r2-j-1: 4 requests (210.0 MB) submitted as batch-2")),
        (25.0, _said("r2-j-2: 3 requests (1.0 MB) submitted as batch-3")),
        (27.0, _said("r2-j-1 (batch-2): completed, 4 of 4 done, 0 failed")),
        (29.5, _said("r2-j-2 (batch-3): expired, 1 of 3 done, 2 failed")),
    ]
    waits = bench.waiting(lines)
    assert waits == {1: (12.0, 14.0), 2: (25.0, 29.5)}  # the upload of r2-j-2 (21 -> 25) is the client's own
    run = {"t0": 0.0, "t1": 40.0, "lines": lines}
    parts = [s for _, s in bench.phases(run, waits)]
    assert parts == [10.0, 2.0, 6.0, 5.0, 10.5]
    assert sum(parts) + sum(b - a for a, b in waits.values()) == pytest.approx(40.0)


def test_the_client_cpu_is_split_at_the_waiting_from_samples_of_its_process_tree() -> None:
    """CPU a command's child burns counts (the render workers), and a span gets the samples' difference."""
    paths = _load("judge_cli_paths")
    burner = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    parent = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {burner!r}])\nprint(flush=True)\n"
    parent += "time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # the burner ended
        assert paths.tree_cpu(proc.pid) >= 0.5  # the grandchild's CPU, reaped by its parent: cutime
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    run = {"cpu_samples": [(0.0, 0.0), (0.5, 1.0), (1.0, 1.5), (1.5, 4.0)]}
    assert paths.cpu_between(run, 0.6, 1.6) == 3.0
    assert paths.cpu_between(run, -1.0, 0.4) == 0.0


@pytest.mark.slow
def test_the_batch_judge_answers_a_line_as_the_chat_judge_answers_it() -> None:
    import openai

    sys.path.insert(0, str(BENCH.parent / "tests"))
    from fakes import Model

    proc = subprocess.Popen([sys.executable, str(BENCH / "judge_server.py"), "--batches", "--queue", "3"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench-0000", max_retries=0)
        body = {"model": "judge-a", "messages": [{"role": "user", "content": "Rating Requirements: has 3 step(s)."}]}
        line = {"custom_id": "k1", "method": "POST", "url": "/v1/chat/completions", "body": body}
        up = client.files.create(file=("in.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
        batch = client.batches.create(input_file_id=up.id, endpoint="/v1/chat/completions", completion_window="24h")
        t0 = time.monotonic()
        early = [client.batches.retrieve(batch.id).status for _ in range(5)]
        # --queue 3: held, however polled (5 polls take milliseconds; 3 s leave room for a loaded machine)
        assert time.monotonic() - t0 < 3 and set(early) == {"in_progress"}
        time.sleep(3)
        for _ in range(10):
            batch = client.batches.retrieve(batch.id)
            if batch.status == "completed":
                break
        assert batch.status == "completed" and batch.output_file_id
        out = json.loads(client.files.content(batch.output_file_id).read())
        assert out["custom_id"] == "k1"
        assert out["response"]["body"]["choices"][0]["message"]["content"] == Model(per_model=True)(body, 1).text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stats", timeout=10) as resp:  # JudgeServer.close()
            assert json.loads(resp.read())["cpu_s"] > 0
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
