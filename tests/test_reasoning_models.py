"""A reasoning model through the real lmms-eval CLI (`--model openai` on a loopback server): its answers carry a
reasoning block full of decoys (the other verdict, a wrong label, "Score: 5") before the answer
(`fakes.ReasoningModel`).

Three runs of the three sample tasks, made once: A the same answers without reasoning (`fakes.Model`; the session's
shared judged run, tests/shared_runs.py), R the
reasoning model with lmms-eval's default `--reasoning_tags` (think and analysis stripped), N the reasoning model
with `--reasoning_tags none` (docs/lmms_eval.md#reasoning-models says what our readers then do).
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import API_KEY, cli_env, run_emo, with_mme_sample
from fakes import ReasoningModel
from shared_runs import TASKS, judged_sample_run

from judges.testing import LoopbackServer

REASONING = ("<think>", "</think>", "<analysis>", "</analysis>")
pytestmark = pytest.mark.slow


def _env(cache: Path, srv: LoopbackServer) -> dict[str, str]:
    return cli_env(cache, srv, EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05", TZ="UTC")


def _results(folder: Path) -> dict:
    files = sorted(folder.rglob("*_results.json"), key=lambda p: p.name)
    assert files, f"no results under {folder}"
    return json.loads(files[-1].read_text())


def values(folder: Path) -> dict[str, dict[str, Any]]:
    """{task: {metric: value}} of a run folder's newest results, without lmms-eval's aliases."""
    return {t: {k: v for k, v in row.items() if k != "alias"} for t, row in _results(folder)["results"].items()}


def metrics(folder: Path) -> dict[str, dict[str, Any]]:
    """`values` without the standard errors."""
    return {t: {k: v for k, v in row.items() if "_stderr" not in k} for t, row in values(folder).items()}


def samples(folder: Path, task: str) -> list[dict]:
    """The sample log lines of `task` (a group: of each of its tasks, by name), the run's own (not a judged copy's)."""
    logs = sorted(p for p in folder.rglob(f"*_samples_{task}*.jsonl") if "judged" not in p.parts)
    assert logs, f"no sample log of {task} under {folder}"
    return [json.loads(line) for log in logs for line in log.read_text().splitlines()]


def flat(value: Any) -> list[str]:
    out: list[str] = []
    for v in value if isinstance(value, list) else [value]:
        out.extend(flat(v) if isinstance(v, list) else [str(v)])
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("reasoning")

    def run(name: str, model: ReasoningModel, *flags: str) -> Path:
        with LoopbackServer(responder=model, expected_api_key=API_KEY) as srv:  # one server per run (MVEI repeats)
            out = root / name
            args = f"model_version=eval-model,base_url={srv.base_url},api_key={API_KEY},max_frames_num=4"
            cmd = [sys.executable, "-m", "lmms_eval", "--model", "openai", "--model_args", args, "--tasks", TASKS,
                   "--batch_size", "1", "--log_samples", "--output_path", str(out), *flags]  # fmt: skip
            env = _env(with_mme_sample(root / f"cache_{name}"), srv)
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=root)
            assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]
        return out

    # A is the session's shared judged run (tests/shared_runs.py, also test_judge_stage's A), read as it is; its
    # server's requests are no test's business here (only R's and N's are read), so `models` has no "A"
    models = {"R": ReasoningModel(), "N": ReasoningModel()}
    with ThreadPoolExecutor(max_workers=3) as pool:
        a = pool.submit(lambda: judged_sample_run(tmp_path_factory) / "run")
        r = pool.submit(run, "R", models["R"])
        n = pool.submit(run, "N", models["N"], "--reasoning_tags", "none")
        return {"A": a.result(), "R": r.result(), "N": n.result(), "root": root, "models": models}


def test_default_tags_give_the_numbers_of_the_same_answers_without_reasoning(runs: dict[str, Any]) -> None:
    assert values(runs["R"]) == values(runs["A"])  # every metric of the three tasks, Avg Token included
    assert values(runs["A"])["mme_emotion_sample"]["rea_s,none"] is not None  # A really was judged
    for task in ("mme_emotion_sample", "mvei_sample", "multiemo_sample"):
        got, plain = samples(runs["R"], task), samples(runs["A"], task)
        raw = flat([s["resps"] for s in got])
        assert all(any(tag in r for tag in REASONING) for r in raw), task  # the model reasoned in every answer
        # (MVEI's three answers arrive in the order the loopback server answered the three requests: as a multiset)
        assert [sorted(flat(s["filtered_resps"])) for s in got] == [sorted(flat(s["filtered_resps"])) for s in plain]
    # the judge saw the answers only: no step-agent request carried the model's reasoning
    assert runs["models"]["R"].judged_reasoning() == 0 and runs["models"]["R"].judge_requests
    tags = _results(runs["R"])["config"]["resolved_cli_args"]["reasoning_tags"]
    assert json.loads(tags) == [["<think>", "</think>"], ["<analysis>", "</analysis>"]]


def test_tags_none_is_the_published_reading_of_the_whole_answer(runs: dict[str, Any]) -> None:
    plain, none = values(runs["A"]), values(runs["N"])
    # MVEI: the authors' rule reads after the last </think>: the numbers of the answers without reasoning
    assert none["mvei_sample"] == plain["mvei_sample"]
    assert all("</think>" in a for s in samples(runs["N"], "mvei_sample") for a in flat(s["filtered_resps"]))
    # MultiEmo-Bench: the protocol's first "Score:" label is the decoy in the reasoning, for every answer
    multi = samples(runs["N"], "multiemo_sample")
    records = [next(v for v in s.values() if isinstance(v, dict) and "predicted_score" in v) for s in multi]
    assert {r["predicted_score"] for r in records} == {5.0} and len(records) == 48
    assert none["multiemo_sample"] != plain["multiemo_sample"]
    # MME-Emotion: the whole answer, reasoning included, goes to the step agent and Avg Token counts it
    steps = [r for r in runs["models"]["N"].judge_requests if "Given the following answer" in r]
    assert steps and all("<analysis>" in r for r in steps)  # every step request (one per distinct answer)
    assert none["mme_emotion_sample"]["avg_token,none"] > plain["mme_emotion_sample"]["avg_token,none"] + 10


def test_the_judge_stage_scores_the_text_process_results_scored(runs: dict[str, Any]) -> None:
    for name in ("R", "N"):
        with LoopbackServer(responder=ReasoningModel(), expected_api_key=API_KEY) as srv:
            env = _env(runs["root"] / f"cache_{name}", srv)  # the run's own cache: the same text sends nothing
            out = runs["root"] / f"{name}_judged"
            proc = run_emo(env, "judge", str(runs[name]), "--out", str(out))
            assert proc.returncode == 0, proc.stderr[-4000:]
            assert [c for c in srv.calls if c.model != "eval-model"] == [], name
        # the metrics (their standard errors are the judge stage's own: not asked of it here)
        assert metrics(out) == metrics(runs[name]), name


def test_compare_refuses_runs_that_read_reasoning_otherwise(runs: dict[str, Any]) -> None:
    env = cli_env(runs["root"] / "cache_compare")
    same = run_emo(env, "compare", str(runs["A"]), str(runs["R"]))
    assert same.returncode == 0, same.stdout[-2000:] + same.stderr[-3000:]
    other = run_emo(env, "compare", str(runs["R"]), str(runs["N"]))
    assert other.returncode == 2, other.stdout[-2000:] + other.stderr[-3000:]
    line = next(x for x in other.stderr.splitlines() if x.strip().startswith("- reasoning:"))
    assert "nothing stripped (--reasoning_tags none)" in line and "mvei_sample" in line, line
