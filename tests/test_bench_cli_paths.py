"""The measuring parts of `benchmarks/judge_cli_paths.py` (issue 24): the phase figures it prints, computed by hand
from a server's call record; the CPU split of a py-spy profile; and its judge, `benchmarks/judge_server.py`, a
process of its own that the real openai SDK talks to.  The benchmark measures; these tests show what it measures is
computed as its docstring says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("judge_cli_paths", BENCH / "judge_cli_paths.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def test_phase_figures_by_hand() -> None:
    # concurrency 2, latency 0.5: five judge calls in three waves, and an evaluated-model call left out
    calls = [
        [10.0, 10.5, "judge", 4],
        [10.0, 10.5, "step", 0],
        [10.5, 11.0, "judge", 4],
        [10.5, 11.0, "step", 0],
        [11.0, 11.6, "judge", 4],
        [9.5, 9.6, bench.EVAL_MODEL, 0],
    ]
    fig = bench.phase_figures(calls, since=9.0, latency=0.5, concurrency=2)
    assert fig["calls"] == 5
    assert fig["to_first_s"] == pytest.approx(1.0)  # 9.0 -> the first judge request at 10.0
    # saturated window: first request + latency (10.5) .. last request sent (11.0); 4 answers end in it, over 0.5 s
    assert fig["saturated_rps"] == pytest.approx(8.0)
    assert fig["tail_s"] == pytest.approx(0.6)  # last sent 11.0 -> last answer 11.6
    assert fig["phase_s"] == pytest.approx(2.6)
    assert fig["bound_s"] == pytest.approx(5 * 0.5 / 2)
    assert fig["ratio"] == pytest.approx(2.6 / 1.25)
    assert fig["bound_rps"] == pytest.approx(4.0)
    assert bench.phase_figures([[1.0, 1.1, bench.EVAL_MODEL, 0]], 0.0, 0.5, 2) == {"calls": 0}


def test_cpu_split_names_where_each_sample_went(tmp_path: Path) -> None:
    raw = tmp_path / "p.pyspy"
    raw.write_text(
        "\n".join(
            [
                # innermost frame outside the standard library decides: the SDK's post
                "process 1;<module> (emo_tasks/cli.py:3);post (openai/_base_client.py:9);dumps (json/__init__.py:2) 30",
                # a benchmark module as lmms-eval puts it on sys.path: a bare file name of ours
                "process 1;process_results (hooks.py:40) 10",
                "process 1;render (av/container.py:1) 5",
                "process 1;_find_and_load (<frozen importlib._bootstrap>:1);x (numpy/core.py:1) 7",
                "process 1;select (selectors.py:1) 2",
                "a line that is not a sample",
            ]
        )
    )
    split = dict(bench.cpu_split(raw, calls=10))
    # 100 Hz: a sample is 10 ms; per call = samples * 10 / calls
    assert split["HTTP client (openai SDK, httpx, aiohttp)"] == pytest.approx(30.0)
    assert split["emo_tasks hooks, data, scoring"] == pytest.approx(10.0)
    assert split["frames: decode, JPEG, frame cache"] == pytest.approx(5.0)
    assert split["imports (start-up)"] == pytest.approx(7.0)
    assert split["python itself (stdlib, threads, event loop)"] == pytest.approx(2.0)
    assert sum(split.values()) == pytest.approx(54.0)


@pytest.mark.slow
def test_the_judge_server_is_a_process_of_its_own_that_the_openai_sdk_talks_to() -> None:
    import openai

    proc = subprocess.Popen(
        [sys.executable, str(BENCH / "judge_server.py"), "--latency", "1.5"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-bench-0000", max_retries=0)

        def ask(model: str, text: str) -> tuple[str, float]:
            t0 = time.perf_counter()
            out = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])
            return out.choices[0].message.content or "", time.perf_counter() - t0

        answer, fast = ask(bench.EVAL_MODEL, "Which emotion? candidate labels: anger, joy")
        # the evaluated model answers at once (well under the judge's 1.5 s, with room for a loaded machine)
        assert "Answer:" in answer and fast < 0.75
        _, slow = ask("judge-a", "Rating Requirements: the answer has 2 step(s).")
        assert slow >= 1.5  # a judge answers after --latency

        def control(path: str, method: str = "GET") -> dict:
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())

        stats = control("/_stats")
        assert [c[2] for c in stats["calls"]] == [bench.EVAL_MODEL, "judge-a"]
        assert stats["calls"][1][1] - stats["calls"][1][0] >= 0.3 and stats["cpu_s"] > 0
        control("/_reset", "POST")
        assert control("/_stats")["calls"] == []
        assert proc.poll() is None  # a process of its own, still serving
    finally:
        proc.terminate()
        proc.wait(timeout=10)
