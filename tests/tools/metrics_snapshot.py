"""Before/after guard for refactors: every metric of the three sample tasks, offline and with a loopback judge.

    python tests/tools/metrics_snapshot.py --out before.json           # on the old commit
    python tests/tools/metrics_snapshot.py --compare before.json       # on the new one: exit 1 on any difference
    python tests/tools/metrics_snapshot.py --tasks emobench_m_sample --out before.json   # other sample tasks

Four real `lmms-eval` CLI runs over `mme_emotion_sample,mvei_sample,multiemo_sample`:
  1. `--model dummy`, no judge (MME-Emotion's sample falls back to offline scoring);
  2. `--model dummy` with a loopback judge (guarded protocol) that gives a wrong rating count for some rows;
  3. `--model openai` on the loopback server, answers differing per document and per repeat, judged with the
     official protocol (any rating count accepted) and EMO_MME_ALPHA=0.3;
  4. like 2, with EMO_JUDGE=offline;
  5. through the judge stage: `--model dummy --predict_only --log_samples`, then `emo-tasks judge` with the
     loopback judge of 2 (what the stage wrote: its results.json and the report over the run folder).
What is kept: every value in lmms-eval's results.json (`results`), and `emo-tasks report --format json`'s
per-metric value, CI and n (the CIs are computed from the per-sample values, so they pin those too).
Floats are compared exactly (repr), so "bit for bit" means bit for bit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE.parent))
from fakes import Judge, Model  # noqa: E402

from judges.testing import LoopbackServer  # noqa: E402

TASKS = "mme_emotion_sample,mvei_sample,multiemo_sample"
KEY = "sk-snapshot-0000000000000000"
DUMMY = "The brows are lowered and the voice is loud. Answer: anger. Correct. Score: 70. Reason: tense."


def _report(out: Path, env: dict[str, str]) -> dict[str, Any]:
    """`emo-tasks report --format json` over the run folder: per-metric value, CI and n."""
    report = subprocess.run(
        [sys.executable, "-m", "emo_tasks", "report", str(out), "--format", "json", "--out", str(out / "lb.json")],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if report.returncode != 0:
        raise SystemExit(f"emo-tasks report failed:\n{report.stdout}\n{report.stderr}")
    return json.loads((out / "lb.json").read_text())["runs"][0]["metrics"]


def _run(out: Path, env: dict[str, str], model: str, model_args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "lmms_eval", "--model", model, "--model_args", model_args, "--tasks", TASKS,
           "--batch_size", "1", "--output_path", str(out), "--log_samples"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd=out.parent)
    files = sorted(out.rglob("*_results.json"))
    if not files:
        raise SystemExit(f"no results under {out}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    results = json.loads(files[-1].read_text())["results"]
    return {"results": results, "report": _report(out, env)}


def _stage(out: Path, env: dict[str, str], model_args: str) -> dict[str, Any]:
    """A predict-only run, then `emo-tasks judge` over it: the stage's results and the report of the run folder."""
    cmd = [sys.executable, "-m", "lmms_eval", "--model", "dummy", "--model_args", model_args, "--tasks", TASKS,
           "--batch_size", "1", "--output_path", str(out), "--log_samples", "--predict_only"]  # fmt: skip
    subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, cwd=out.parent)
    judge = subprocess.run([sys.executable, "-m", "emo_tasks", "judge", str(out)], env=env, capture_output=True,
                           text=True, timeout=1200)  # fmt: skip
    files = sorted((out / "judged").rglob("*_results.json"))
    if judge.returncode not in (0, 4) or not files:  # 4: written, but the fake judge fails many on purpose
        raise SystemExit(f"emo-tasks judge failed:\n{judge.stdout[-2000:]}\n{judge.stderr[-4000:]}")
    results = json.loads(files[-1].read_text())["results"]
    return {"results": results, "report": _report(out, env)}


def snapshot(work: Path) -> dict[str, Any]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EMO_", "AZURE_", "API_"))}
    base.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", EMO_CACHE_DIR=str(work / "cache"), EMO_PROGRESS="0",
                EMO_JUDGE_BACKOFF_BASE="0.01", EMO_JUDGE_BACKOFF_MAX="0.05")  # fmt: skip
    dummy_args = f"response={DUMMY}".replace(",", " ")
    snap: dict[str, Any] = {}
    snap["dummy_no_judge"] = _run(work / "a", base, "dummy", dummy_args)
    with LoopbackServer(responder=Judge(wrong_count_every=4), expected_api_key=KEY) as srv:
        env = {**base, "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": KEY}
        snap["dummy_judge_guarded"] = _run(work / "b", env, "dummy", dummy_args)
        snap["dummy_forced_offline"] = _run(work / "d", {**env, "EMO_JUDGE": "offline"}, "dummy", dummy_args)
        snap["dummy_stage_guarded"] = _stage(work / "e", {**env, "EMO_CACHE_DIR": str(work / "cache3")}, dummy_args)
    with LoopbackServer(responder=Model(wrong_count_every=5), expected_api_key=KEY) as srv:
        env = {**base, "OPENAI_BASE_URL": srv.base_url, "OPENAI_API_KEY": KEY, "EMO_MME_JUDGE_PROTOCOL": "official",
               "EMO_MME_ALPHA": "0.3", "EMO_CACHE_DIR": str(work / "cache2")}  # fmt: skip
        args = f"model_version=eval-model,base_url={srv.base_url},api_key={KEY},max_frames_num=4"
        snap["openai_judge_official"] = _run(work / "c", env, "openai", args)
    return json.loads(json.dumps(snap, sort_keys=True, default=repr))


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: only in {'after' if k not in a else 'before'}")
            else:
                out.extend(_diff(a[k], b[k], f"{path}/{k}"))
        return out
    return [] if repr(a) == repr(b) else [f"{path}: {a!r} -> {b!r}"]


def main() -> int:
    global TASKS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the snapshot here")
    ap.add_argument("--compare", type=Path, help="compare with this earlier snapshot; exit 1 on any difference")
    ap.add_argument("--keep", type=Path, help="run in this (new) folder and keep the runs, e.g. to export them")
    ap.add_argument("--tasks", default=TASKS, help=f"the lmms-eval tasks of every run (default: {TASKS})")
    args = ap.parse_args()
    TASKS = args.tasks
    if args.keep:
        args.keep.mkdir(parents=True)
        snap = snapshot(args.keep.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="emo-snapshot-") as tmp:
            snap = snapshot(Path(tmp))
    if args.out:
        args.out.write_text(json.dumps(snap, indent=1, sort_keys=True))
    n_values = sum(len(r) for run in snap.values() for r in run["results"].values())
    print(f"{len(snap)} runs, {n_values} result values")
    if args.compare:
        before = json.loads(args.compare.read_text())
        diffs = _diff(before, snap)
        for d in diffs[:200]:
            print("DIFF", d)
        print(f"{len(diffs)} differences")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
