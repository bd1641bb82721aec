"""EMO_JUDGE=defer through the real `lmms-eval` CLI: the model runs, nothing is judged (not even with a judge
configured), the judge-dependent numbers are None, the answers are kept, and one line says what to run next."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, env_without_secrets

from emo_tasks.mme_emotion import hooks
from emo_tasks.mme_emotion.protocol import task_specs
from judges.testing import LoopbackServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SLUGS = ("er_lab", "er_wild", "noise_er", "fg_er", "ml_er", "sa", "fg_sa", "ir")
JUDGE_DEPENDENT = ("rec_s", "rea_s", "cot_s", "rec_s_strict", "avg_step", "n_scored", "n_judge_failed")
ANSWER = "The brows are lowered and the voice is loud. Answer: anger"


@pytest.mark.slow
def test_deferred_sample_run_keeps_the_answers_and_names_the_judge_command(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with LoopbackServer(expected_api_key=API_KEY) as srv:
        env = env_without_secrets()
        env.update(
            HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", EMO_PROGRESS="0",
            EMO_CACHE_DIR=str(tmp_path / "cache"), EMO_JUDGE="defer", OPENAI_BASE_URL=srv.base_url,
            OPENAI_API_KEY=API_KEY,
        )  # fmt: skip
        cmd = [
            sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={ANSWER}",
            "--tasks", "mme_emotion_sample", "--batch_size", "1", "--output_path", str(out),
        ]  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert srv.calls == [], "a deferred run must not ask the judge"
    files = sorted(out.rglob("*_results.json"))
    assert files, f"no results file\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    results = json.loads(files[-1].read_text())["results"]
    for name in [f"mme_emotion_sample_{s}" for s in SLUGS] + ["mme_emotion_sample"]:
        r = results[name]
        assert all(r[f"{m},none"] is None for m in JUDGE_DEPENDENT), (name, r)
        assert r["avg_token,none"] > 0, name
    line = f"emo-tasks: MME-Emotion judging deferred: run  emo-tasks judge {out}"
    assert proc.stderr.count(line) == 1 and proc.stderr.count("emo-tasks judge") == 1, proc.stderr[-3000:]
    # without --log_samples the answers are written beside lmms-eval's files, in its samples file's fields
    folder = out / "emo_tasks_judge"
    answers = sorted(folder.glob("sample_mme_emotion_*_answers.jsonl"))
    assert len(answers) == 8 and not list(folder.glob("*_judge.jsonl"))
    local = {"EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_JUDGE": "offline", "EMO_PROGRESS": "0"}
    by_name = {f"sample_{spec.task}": key for key, spec in task_specs().items()}
    assert sorted(p.name.rsplit("_", 2)[0] for p in answers) == sorted(by_name)
    for path in answers:
        docs = hooks.load_task(f"mme_emotion/sample/{by_name[path.name.rsplit('_', 2)[0]]}", local)
        rows = [json.loads(x) for x in path.read_text().splitlines()]
        assert rows == [
            {"doc_id": i, "target": hooks.doc_to_target(d), "filtered_resps": ANSWER} for i, d in enumerate(docs)
        ]
