"""lmms-eval runs that several results/gate modules made the same way, each built once per test session
(`conftest.build_once`, across xdist workers) and read-only by agreement: a test that writes into one works on a copy.

- `good_offline_run`: results/test_report_cli.py's "good" and results/test_trend.py's "ckpt-1000".
- docs/ci.md's recipe (test_gate_flow's base, plan, new and bad): `test_ci_recipe.recipe_folder`, beside the recipe
  it runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import build_once, cli_env, with_mme_sample

#: the dummy model's answer: "Correct" answers every MVEI pair (half are right), some Rec-S
GOOD = "Correct. Score: 80. Reason: bright. Answer: anger"
#: the sample tasks, in the order both modules ran them
TASKS = "mvei_sample,multiemo_sample,mme_emotion_sample"


def _build_good_offline(folder: Path) -> None:
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={GOOD}", "--tasks", TASKS,
           "--output_path", str(folder / "ckpt-1000"), "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=cli_env(with_mme_sample(folder / "cache")), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]


def good_offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`lmms-eval --model dummy --model_args response=GOOD --tasks TASKS --log_samples` with no judge (MME-Emotion's
    Rea-S null: offline), into a folder named `ckpt-1000`: test_trend reads the checkpoint from the folder's name;
    test_report_cli reads no name.  Read-only."""
    return build_once(tmp_path_factory, "good_offline", _build_good_offline) / "ckpt-1000"
