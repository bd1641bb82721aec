"""lmms-eval runs that several test modules need built the same way, each built once per test session.

Why: an lmms-eval run costs 30-60 s of a 2-core CI machine, and the judging modules each made the same runs of the
sample tasks (issue 43).  Each builder here makes one run with `conftest.build_once` and returns its folder:

- `run/`: the lmms-eval `--output_path` folder;
- `cache/`: the EMO_CACHE_DIR the run used (the MME-Emotion sample's clips, and for a judged run the judge's answers);
- `lmms.log`: lmms-eval's stdout and stderr.

The folder is read-only by agreement: a module that writes into a run (a `judged/` folder beside its answers, an
edited summary) or into its cache works on `conftest.private_copy` of it.  Nothing a test asserts on is recorded
only by the loopback server during a build: the runs' servers answer, the tests read the files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import API_KEY, build_once, cli_env, with_mme_sample
from fakes import Model

from judges.testing import LoopbackServer

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
#: What `--model dummy` answers in the dummy run: a label the MME-Emotion step agent can find.
DUMMY_ANSWER = "The brows are lowered and the voice is loud. Answer: anger"


def stage_env(cache: Path, srv: LoopbackServer | None = None, **extra: str) -> dict[str, str]:
    """`cli_env` with fast judge backoff and TZ=UTC (the machine's clock 8 h from lmms-eval's UTC+8, so a file named
    by the local clock would show: test_judge_stage's test_one_clock_names_every_file_of_a_run)."""
    extra = {"EMO_JUDGE_BACKOFF_BASE": "0.01", "EMO_JUDGE_BACKOFF_MAX": "0.05", "TZ": "UTC", **extra}
    return cli_env(cache, srv, **extra)


def _openai_run(folder: Path, *flags: str, judge: bool) -> None:
    """`lmms-eval --model openai` (model_version=eval-model, answers from `fakes.Model` on a loopback server of its
    own: the MVEI repeats' attempt counters must not mix between runs) over the three sample tasks into
    folder/run; with `judge`, the same server is the MME-Emotion judge (OPENAI_BASE_URL), else none is configured."""
    with LoopbackServer(responder=Model(), expected_api_key=API_KEY) as srv:
        out = folder / "run"
        env = stage_env(with_mme_sample(folder / "cache"), srv if judge else None)
        args = f"model_version=eval-model,base_url={srv.base_url},api_key={API_KEY},max_frames_num=4"
        cmd = [sys.executable, "-m", "lmms_eval", "--model", "openai", "--model_args", args, "--tasks", TASKS,
               "--batch_size", "1", "--output_path", str(out), *flags]  # fmt: skip
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=folder)
        (folder / "lmms.log").write_text(proc.stdout + proc.stderr)
        assert sorted(out.rglob("*_results.json")), proc.stdout[-2000:] + proc.stderr[-4000:]


def judged_sample_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three sample tasks, `--log_samples`, MME-Emotion judged in process by the loopback judge (`fakes.Model`).

    Shared by test_judge_stage (run A), test_reasoning_models (run A: the answers without reasoning) and
    test_export's loopback export (which reads only its MME-Emotion and MVEI results)."""
    return build_once(tmp_path_factory, "judged_sample_run", lambda f: _openai_run(f, "--log_samples", judge=True))


def predicted_sample_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three sample tasks with `-x` (`--predict_only`'s short form, which turns `--log_samples` on): the answers
    saved, nothing judged, no judge endpoint configured (a GPU job needs none).

    Shared by test_judge_stage (run B, copied: its tests judge into it), test_batch_stage, test_stage_proof and
    test_view_browser's judged_later (copied).  The model's answers do not depend on the judge's ratings
    (`fakes.Model(per_model=True)` changes only those), so one run serves all four."""
    return build_once(tmp_path_factory, "predicted_sample_run", lambda f: _openai_run(f, "-x", judge=False))


def _dummy_run(folder: Path) -> None:
    out = folder / "run"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={DUMMY_ANSWER}",
           "--tasks", "mme_emotion_sample", "--batch_size", "1", "--output_path", str(out), "--predict_only",
           "--log_samples"]  # fmt: skip
    env = cli_env(with_mme_sample(folder / "cache"))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=folder)
    (folder / "lmms.log").write_text(proc.stdout + proc.stderr)
    assert sorted(out.rglob("*_samples_mme_emotion_sample_*.jsonl")), proc.stdout[-2000:] + proc.stderr[-4000:]


def dummy_mme_predicted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`--model dummy` answering `DUMMY_ANSWER` over the MME-Emotion sample (its eight tasks), `--predict_only
    --log_samples`, no endpoint.  Shared by test_dry_run_cost and test_fingerprint_stage (copied: it judges into
    it; every judge call of that module names one task, `--tasks mme_emotion_sample_er_lab`)."""
    return build_once(tmp_path_factory, "dummy_mme_predicted_run", _dummy_run)
