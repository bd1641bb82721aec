"""The judge fingerprint and the presets through the real CLIs (issue 34, items 3 and 4): one `--predict_only
--log_samples` lmms-eval run of an MME-Emotion sample task, judged by `emo-tasks judge` against a loopback server
that answers `/models` as vLLM does.

- the fingerprint is recorded in the judge setup, the judged summary and the export's provenance, the same
  everywhere, and the same on a rerun (which sends 0 chat requests and lands in the same folder);
- a served model changed behind the same name misses the cache, and `compare` refuses the two results in one
  short line; with the fingerprint missing on one side (a run made before it existed), compare goes on;
- `EMO_JUDGE_PRESET=open` sends its models and sampling settings; a role model beside a preset is refused (exit 3,
  one line naming both) by the judge and by its dry run, before anything is sent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, run_emo, with_mme_sample
from fakes import Judge

from emo_tasks.results.calibration import judge_identity
from judges.testing import LoopbackServer

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

ANSWER = "The brows are lowered and the voice is loud. Answer: anger"
TASK = "mme_emotion_sample_er_lab"
STEP, JUDGE = "gpt-4.1-2025-04-14", "gpt-4o-2024-11-20"


def vllm(root: str) -> list[dict[str, Any]]:
    """`/models` as vLLM answers it: each served name with its checkpoint (`root`) and context length."""
    return [{"id": m, "owned_by": "vllm", "root": f"{root}/{m}", "max_model_len": 32768} for m in (STEP, JUDGE)]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fingerprint")
    out = root / "run"
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", f"response={ANSWER}", "--tasks",
           TASK, "--batch_size", "1", "--output_path", str(out), "--predict_only", "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=cli_env(with_mme_sample(root / "cache_run")), capture_output=True, text=True,
                          timeout=600, cwd=root)  # fmt: skip
    assert sorted(out.rglob(f"*_samples_{TASK}.jsonl")), proc.stdout[-2000:] + proc.stderr[-4000:]
    return out


def _judged(run_dir: Path, before: set[Path]) -> Path:
    (folder,) = {p.parent for p in run_dir.glob("judged/*/*_results.json")} - before
    return folder


def _records(folder: Path) -> tuple[dict, dict]:
    """(the judge setup of the newest judged results, the task's newest judged summary)."""
    results = sorted(folder.glob("*_results.json"))[-1]
    summary = sorted(folder.glob("emo_tasks_judge/*_summary.json"))[-1]
    return json.loads(results.read_text())["emo_tasks_judge"]["judge_setup"], json.loads(summary.read_text())


def test_fingerprint_recorded_everywhere_deterministic_and_a_served_change_misses(run_dir: Path, tmp_path: Path):
    cache = with_mme_sample(tmp_path / "cache")
    with LoopbackServer(responder=Judge(), models=vllm("/ckpt/a")) as srv:
        env = cli_env(cache, srv)
        res = run_emo(env, "judge", str(run_dir), "--tasks", TASK)
        assert res.returncode == 0, res.stderr[-3000:]
        first_calls, asks = len(srv.calls), srv.model_asks
        assert first_calls > 0 and asks == 1  # /models asked once in the process, whatever the number of requests
        folder = _judged(run_dir, set())
        setup, summary = _records(folder)
        fingerprint = summary["judge_fingerprint"]
        assert setup["judge_fingerprint"] == {"mme": fingerprint}  # the same in the setup and the summary
        assert fingerprint["roles"]["judge"]["served"] == {
            "id": JUDGE, "root": f"/ckpt/a/{JUDGE}", "max_model_len": 32768}  # fmt: skip
        assert fingerprint["roles"]["step"]["temperature"] == 0.0 and fingerprint["roles"]["step"]["seed"] is None
        text = json.dumps([setup, summary])
        assert "127.0.0.1" not in json.dumps(fingerprint) and env["OPENAI_API_KEY"] not in text

        export = run_emo(env, "export", str(folder), "--format", "mme-official", "--out", str(tmp_path / "export"))
        assert export.returncode == 0, export.stderr[-2000:]
        provenance = json.loads((tmp_path / "export" / "provenance.json").read_text())
        assert provenance["tasks"][TASK]["judge_fingerprint"] == fingerprint

        again = run_emo(env, "judge", str(run_dir), "--tasks", TASK)  # the same setup: all cached
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(srv.calls) == first_calls, "an unchanged fingerprint must hit the cache (0 chat requests)"
        assert _judged(run_dir, set()) == folder  # the same judge setup, the same folder
        setup2, summary2 = _records(folder)
        assert summary2["judge_fingerprint"] == fingerprint and setup2 == setup
        assert judge_identity(summary2) == judge_identity(summary)  # what a calibration file records: the same

        srv.models = vllm("/ckpt/b")  # another checkpoint behind the same names
        other = run_emo(env, "judge", str(run_dir), "--tasks", TASK)
        assert other.returncode == 0, other.stderr[-3000:]
        assert len(srv.calls) >= 2 * first_calls, "a changed served model must not reuse a cached answer"
    changed = _judged(run_dir, {folder})
    compare = run_emo(env, "compare", str(folder), str(changed))
    assert compare.returncode == 2, compare.stdout + compare.stderr
    lines = [line for line in compare.stderr.splitlines() if "judge fingerprint" in line]
    assert len(lines) == 1 and f"root /ckpt/a/{JUDGE}" in lines[0] and f"root /ckpt/b/{JUDGE}" in lines[0], lines

    # a result recorded before fingerprints existed: compared on its models, protocol, mode and alpha
    for summary_path in folder.glob("emo_tasks_judge/*_summary.json"):
        old = json.loads(summary_path.read_text())
        del old["judge_fingerprint"]
        summary_path.write_text(json.dumps(old))
    compare = run_emo(env, "compare", str(folder), str(changed))
    assert compare.returncode == 0, compare.stdout + compare.stderr


def test_open_preset_sends_its_models_and_sampling(run_dir: Path, tmp_path: Path) -> None:
    bodies: list[dict] = []
    judge = Judge()

    def responder(body: dict, attempt: int) -> Any:
        bodies.append(body)
        return judge(body, attempt)

    with LoopbackServer(responder=responder) as srv:
        env = cli_env(with_mme_sample(tmp_path / "cache"), srv, EMO_JUDGE_PRESET="open")
        res = run_emo(env, "judge", str(run_dir), "--tasks", TASK, "--out", str(tmp_path / "open"))
        assert res.returncode == 0, res.stderr[-3000:]
    assert {b["model"] for b in bodies} == {"Qwen/Qwen2.5-VL-72B-Instruct"}  # step agent and judge: one server
    assert {(b["temperature"], b["max_tokens"], b["seed"]) for b in bodies} == {(0.0, 4096, 1234)}
    (summary,) = (tmp_path / "open").glob("emo_tasks_judge/*_summary.json")
    roles = json.loads(summary.read_text())["judge_fingerprint"]["roles"]
    assert roles["judge"]["served"] == "not reported"  # the loopback lists only "loopback"
    assert (roles["judge"]["model"], roles["judge"]["seed"], roles["judge"]["max_tokens"]) == (
        "Qwen/Qwen2.5-VL-72B-Instruct", 1234, 4096)  # fmt: skip


@pytest.mark.parametrize("extra", [(), ("--dry-run",)])
def test_a_role_model_beside_a_preset_is_refused(run_dir: Path, tmp_path: Path, extra: tuple[str, ...]) -> None:
    with LoopbackServer(responder=Judge()) as srv:
        env = cli_env(with_mme_sample(tmp_path / "cache"), srv, EMO_JUDGE_PRESET="open", EMO_JUDGE_MODEL="my-vl")
        res = run_emo(env, "judge", str(run_dir), "--tasks", TASK, "--out", str(tmp_path / "x"), *extra)
        flag = run_emo(cli_env(tmp_path / "c2", srv, EMO_JUDGE_PRESET="paper"), "judge", str(run_dir), "--tasks",
                       TASK, "--step-model", "s", "--out", str(tmp_path / "y"), *extra)  # fmt: skip
        assert srv.calls == []
    for proc, named in ((res, "EMO_JUDGE_MODEL='my-vl'"), (flag, "EMO_STEP_MODEL='s'")):
        lines = [line for line in proc.stderr.splitlines() if "EMO_JUDGE_PRESET" in line]
        assert proc.returncode == 3 and len(lines) == 1 and named in lines[0], proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
