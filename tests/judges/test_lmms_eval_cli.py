"""The judge engine inside a real `lmms-eval` CLI run (`--model dummy`, a local task, a loopback judge)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, env_without_secrets

from judges.testing import LoopbackServer, Reply, last_user_text

HERE = Path(__file__).parent.parent

TASK_YAML = """\
task: emo_judge_probe
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_visual: !function utils.doc_to_visual
doc_to_text: !function utils.doc_to_text
doc_to_target: label
generation_kwargs:
  max_new_tokens: 8
process_results: !function utils.process_results
metric_list:
  - metric: judge_recognition
    aggregation: !function utils.judge_recognition
    higher_is_better: true
"""


def _results(out_dir: Path) -> dict:
    files = sorted(out_dir.rglob("*_results.json"))
    assert files, f"no results file under {out_dir}"
    return json.loads(files[-1].read_text())


@pytest.mark.slow
def test_judge_phase_in_a_real_lmms_eval_run(tmp_path: Path) -> None:
    n_docs = 6
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    shutil.copy(HERE / "lmms_probe" / "utils.py", task_dir / "utils.py")
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"id": i, "question": f"q{i}", "label": "happy"}) + "\n" for i in range(n_docs)))
    (task_dir / "emo_judge_probe.yaml").write_text(TASK_YAML.format(data=data))

    def responder(body: dict, attempt: int) -> Reply:
        doc = int(last_user_text(body).split()[1].rstrip(":"))
        if doc == 0:
            return Reply(text="no verdict")  # never parses: retried once, then left out and counted
        return Reply(text=f"<score>Step 1: {doc % 2}/1</score>")

    stats_file = tmp_path / "stats.jsonl"
    env = env_without_secrets()
    env.update(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        EMO_CACHE_DIR=str(tmp_path / "cache"),
        EMO_PROGRESS="0",
        OPENAI_API_KEY=API_KEY,
        EMO_JUDGE_MODEL="judge-model",
        EMO_PROBE_STATS=str(stats_file),
        PYTHONPATH=str(task_dir),
    )
    with LoopbackServer(responder=responder, expected_api_key=API_KEY) as srv:
        env["OPENAI_BASE_URL"] = srv.base_url
        cmd = [
            sys.executable,
            "-m",
            "lmms_eval",
            "--model",
            "dummy",
            "--model_args",
            "response=The answer is happy",
            "--tasks",
            "emo_judge_probe",
            "--include_path",
            str(task_dir),
            "--batch_size",
            "1",
        ]
        runs = []
        for i in range(2):
            out = tmp_path / f"out{i}"
            proc = subprocess.run(
                cmd + ["--output_path", str(out)], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path
            )
            runs.append((proc, out))
        calls = list(srv.calls)

    for proc, out in runs:
        metric = _results(out)["results"]["emo_judge_probe"]["judge_recognition,none"]
        # docs 1..5 rated 1,0,1,0,1 -> 3/5; doc 0 left out (official rule), not scored 0
        assert metric == pytest.approx(0.6), proc.stderr[-3000:]
        assert API_KEY not in proc.stdout + proc.stderr
    first, second = (json.loads(line) for line in stats_file.read_text().splitlines())
    assert first["calls"] == 5 + 2 and first["failures_by_reason"] == {"invalid_answer": 1}
    assert second["calls"] == 2 and second["cache_hits"] == 5  # rerun: only the unanswerable doc is asked again
    assert len(calls) == 9 and all(c.model == "judge-model" and c.auth_ok for c in calls)
    assert os.path.exists(tmp_path / "cache" / "judge_cache.sqlite3")


def test_lmms_eval_script_is_lmms_evals_own_entry_point() -> None:
    """`lmms_eval` (underscore, what our users type) runs exactly what lmms-eval's `lmms-eval` runs."""
    from importlib.metadata import entry_points

    scripts = {ep.name: ep for ep in entry_points(group="console_scripts")}
    assert scripts["lmms_eval"].value == scripts["lmms-eval"].value
    assert scripts["lmms_eval"].dist.name == "emo-tasks" and scripts["lmms-eval"].dist.name == "lmms_eval"


@pytest.mark.slow
def test_the_used_by_command_typed_literally(tmp_path: Path) -> None:
    """`lmms_eval --model dummy --tasks mme_emotion_sample`, as typed: the script is on the venv's PATH."""
    bindir = Path(sys.executable).parent
    env = env_without_secrets()
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               EMO_CACHE_DIR=str(tmp_path / "cache"), EMO_PROGRESS="0")  # fmt: skip
    proc = subprocess.run(
        "lmms_eval --model dummy --tasks mme_emotion_sample --output_path out",
        shell=True, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = _results(tmp_path / "out")["results"]
    assert results["mme_emotion_sample"]["n_scored,none"] == 16, proc.stderr[-3000:]
