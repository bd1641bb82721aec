"""The GPU time a user gets back: an lmms-eval run that defers the judge vs one that judges in-process.

    python benchmarks/defer_vs_inprocess.py [--latency 1.0] [--concurrency 2]

One script, one loopback judge (its latency set, so the judge phase costs what a remote judge would), the three
sample tasks with `--model dummy`:
  1. in-process: `lmms-eval ... --log_samples` with the judge configured (the job holds its GPUs until judged);
  2. deferred: the same with `EMO_JUDGE=defer` (the job ends when inference ends), then `emo-tasks judge` on it.
Each from a cold judge cache.  Prints the wall times, the time the GPU job no longer waits (1 - 2a) and checks
that the deferred-then-judged metrics equal the in-process ones.  Exits 1 when they differ or when the deferred
lmms-eval run is not faster than the in-process one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))
from fakes import Model  # noqa: E402

from judges.testing import LoopbackServer  # noqa: E402

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
KEY = "sk-bench-0000000000000000"
ANSWER = "The brows are lowered and the voice is loud. Answer: anger. Correct. Score: 70. Reason: tense."


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    return time.perf_counter() - started, proc


def _values(folder: Path) -> dict:
    results = json.loads(sorted(folder.rglob("*_results.json"), key=lambda p: p.name)[-1].read_text())["results"]
    return {t: {k: v for k, v in r.items() if k != "alias" and "_stderr" not in k} for t, r in results.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=1.0, help="seconds the loopback judge takes per request")
    ap.add_argument("--concurrency", type=int, default=2, help="EMO_JUDGE_CONCURRENCY")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="emo-defer-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMO_", "AZURE_", "API_"))}
    base.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", EMO_PROGRESS="0",
                EMO_JUDGE_CONCURRENCY=str(args.concurrency))  # fmt: skip
    lmms = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args",
            f"response={ANSWER}".replace(",", " "), "--tasks", TASKS, "--batch_size", "1", "--log_samples"]  # fmt: skip
    with LoopbackServer(responder=Model(), latency_s=args.latency, expected_api_key=KEY) as srv:
        judge_env = {**base, "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": KEY}
        t_in, p_in = _timed([*lmms, "--output_path", str(work / "inproc")],
                            {**judge_env, "EMO_CACHE_DIR": str(work / "c1")}, work)  # fmt: skip
        calls_in = len(srv.calls)
        srv.reset_log()
        t_def, p_def = _timed([*lmms, "--output_path", str(work / "deferred")],
                              {**judge_env, "EMO_CACHE_DIR": str(work / "c2"), "EMO_JUDGE": "defer"}, work)  # fmt: skip
        calls_def = len(srv.calls)
        t_judge, p_judge = _timed([sys.executable, "-m", "emo_tasks", "judge", str(work / "deferred")],
                                  {**judge_env, "EMO_CACHE_DIR": str(work / "c2")}, work)  # fmt: skip
        calls_judge = len(srv.calls) - calls_def
    for name, proc in (("in-process", p_in), ("deferred", p_def), ("judge", p_judge)):
        if proc.returncode != 0:
            print(f"{name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
            return 1
    same = _values(work / "inproc") == _values(next((work / "deferred" / "judged").iterdir()))
    print(f"judge latency {args.latency:.2f} s, concurrency {args.concurrency}, work folder {work}")
    print(f"  in-process lmms-eval run (inference + judge)   {t_in:7.1f} s   judge calls {calls_in}")
    print(f"  deferred lmms-eval run (inference only)        {t_def:7.1f} s   judge calls {calls_def}")
    print(f"  emo-tasks judge on it (anywhere, later)        {t_judge:7.1f} s   judge calls {calls_judge}")
    print(f"  GPU job time given back: {t_in - t_def:.1f} s ({100 * (1 - t_def / t_in):.0f} % of the in-process run)")
    print(f"  metrics of deferred + judge == in-process: {same}")
    ok = same and t_def < t_in and calls_def == 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
