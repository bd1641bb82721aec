"""What the task auto-registration hook costs: interpreter start-up and `TaskManager()` construction.

Why: `emo_tasks-autoregister.pth` runs in *every* Python process of the environment (pip, pytest, anything),
so its start-up cost must be negligible; and every lmms-eval run pays for indexing our task directory. This
script measures both with the hook on (default) and off (`EMO_TASKS_AUTOREGISTER=0`; the .pth line still
imports `_emo_tasks_autoload`, which then returns at once):

1. start-up: wall time of `python -c pass`, and the `-X importtime` self/cumulative time of
   `_emo_tasks_autoload` itself;
2. lmms-eval: in a fresh interpreter, the time to import `lmms_eval.tasks` and to construct `TaskManager()`
   (which indexes lmms-eval's ~2000 YAMLs plus ours), and how many of our tasks it lists;
3. the hook's own work at that moment, piece by piece, timed directly (the on/off difference in 2 is small
   next to the noise of two ~10 s figures).

How to run (from anywhere, with the environment's python; offline):

    python benchmarks/registration_startup.py            # 5 repetitions per condition, about 2-3 minutes
    python benchmarks/registration_startup.py --quick    # 2 repetitions

It prints medians, differences and ratios; the exit code is 0 whatever the numbers (a measurement, not a test).
Runs alternate between the two conditions so that machine drift affects both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

SWITCH = "EMO_TASKS_AUTOREGISTER"
CONDITIONS = {"hook on": {}, "hook off": {SWITCH: "0"}}
STARTUP_RUNS_PER_REPEAT = 20  # `python -c pass` is ~20 ms: many runs for a stable median

TASK_MANAGER_PROBE = """
import json, time
t0 = time.perf_counter()
from lmms_eval.tasks import TaskManager
t1 = time.perf_counter()
tm = TaskManager()
t2 = time.perf_counter()
ours = [t for t in tm.all_tasks if t.startswith("mme_emotion")]
print(json.dumps({"import": t1 - t0, "construct": t2 - t1, "tasks": len(tm.all_tasks), "ours": len(ours)}))
"""

# Hook off, so nothing is done or cached in advance; then each piece of the hook's work is timed directly
# (the on/off difference of [2] is a difference of two ~10 s figures, so it carries their noise).
HOOK_WORK_PROBE = """
import json, time
import _emo_tasks_autoload as hook
import lmms_eval.tasks
from lmms_eval.tasks import TaskManager
tm = TaskManager(include_defaults=False)
t0 = time.perf_counter()
hook.patch(lmms_eval.tasks)
t1 = time.perf_counter()
hook.apply_adaptations()
t2 = time.perf_counter()
ours = hook.tasks_dir()
t3 = time.perf_counter()
index = tm._get_task_and_group(ours)
t4 = time.perf_counter()
print(json.dumps({"patch": t1 - t0, "adaptations": t2 - t1, "tasks_dir": t3 - t2, "index": t4 - t3, "n": len(index)}))
"""


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (SWITCH, "LMMS_EVAL_PLUGINS")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def _run(args: list[str], extra: dict[str, str], cwd: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], env=_env(extra), cwd=cwd, capture_output=True, text=True, timeout=600
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, proc


def _last_json(proc: subprocess.CompletedProcess) -> dict:
    """The probe's JSON: the last stdout line (lmms-eval may log to stdout before it)."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _importtime(stderr: str, module: str) -> tuple[float, float]:
    """(self, cumulative) seconds for `module` from `-X importtime` output; (0, 0) if it was not imported."""
    pattern = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s*" + re.escape(module) + r"$")
    for line in stderr.splitlines():
        match = pattern.match(line.rstrip())
        if match:
            return int(match.group(1)) / 1e6, int(match.group(2)) / 1e6
    return 0.0, 0.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def _compare(label: str, on: list[float], off: list[float], unit: str = "s") -> None:
    m_on, m_off = statistics.median(on), statistics.median(off)
    ratio = m_on / m_off if m_off else float("nan")
    fmt = _ms if unit == "ms" else (lambda s: f"{s:8.3f} s")
    print(
        f"  {label:34s} on {fmt(m_on)}   off {fmt(m_off)}   diff {fmt(m_on - m_off)}   ratio {ratio:6.3f}"
        f"   (n={len(on)}/{len(off)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per condition (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 repetitions")
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat
    cwd = tempfile.mkdtemp(prefix="emo_reg_bench_")  # not the checkout: measure the installed package
    began = time.perf_counter()

    print("task registration start-up benchmark")
    print(f"  python {platform.python_version()}, {os.cpu_count()} cores, {sys.executable}")
    print(f"  {repeat} repetitions per condition; start-up: {repeat * STARTUP_RUNS_PER_REPEAT} runs per condition")

    walls: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    own_self: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    own_cum: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    site_cum: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    for _ in range(repeat * STARTUP_RUNS_PER_REPEAT):
        for name, extra in CONDITIONS.items():
            walls[name].append(_run(["-c", "pass"], extra, cwd)[0])
    for _ in range(repeat * 4):
        for name, extra in CONDITIONS.items():
            stderr = _run(["-X", "importtime", "-c", "pass"], extra, cwd)[1].stderr
            self_s, cum_s = _importtime(stderr, "_emo_tasks_autoload")
            own_self[name].append(self_s)
            own_cum[name].append(cum_s)
            site_cum[name].append(_importtime(stderr, "site")[1])
    if not any(own_cum["hook on"]):
        print("  WARNING: _emo_tasks_autoload was not imported at start-up: is emo-tasks installed here?")

    print("\n[1] interpreter start-up (`python -c pass`)")
    _compare("wall time", walls["hook on"], walls["hook off"], "ms")
    _compare("_emo_tasks_autoload import, self", own_self["hook on"], own_self["hook off"], "ms")
    _compare("_emo_tasks_autoload import, cumul.", own_cum["hook on"], own_cum["hook off"], "ms")
    _compare("`site` import (all .pth files)", site_cum["hook on"], site_cum["hook off"], "ms")

    results: dict[str, list[dict]] = {name: [] for name in CONDITIONS}
    totals: dict[str, list[float]] = {name: [] for name in CONDITIONS}
    for _ in range(repeat):
        for name, extra in CONDITIONS.items():
            wall, proc = _run(["-c", TASK_MANAGER_PROBE], extra, cwd)
            results[name].append(_last_json(proc))
            totals[name].append(wall)

    print("\n[2] lmms-eval `TaskManager()` in a fresh interpreter")

    def column(name: str, key: str) -> list[float]:
        return [r[key] for r in results[name]]

    _compare("import lmms_eval.tasks", column("hook on", "import"), column("hook off", "import"))
    _compare("TaskManager() construction", column("hook on", "construct"), column("hook off", "construct"))
    _compare("whole subprocess (wall)", totals["hook on"], totals["hook off"])
    for name in CONDITIONS:
        last = results[name][-1]
        print(f"  {name}: {last['tasks']} tasks indexed, {last['ours']} of them mme_emotion*")

    work = [_last_json(_run(["-c", HOOK_WORK_PROBE], {SWITCH: "0"}, cwd)[1]) for _ in range(repeat)]
    print(f"\n[3] the hook's own work when lmms_eval.tasks is imported, timed directly (median of {len(work)})")
    labels = {
        "patch": "wrap TaskManager.initialize_tasks",
        "adaptations": "import emo_tasks (+judges), lmms_patch.apply()",
        "tasks_dir": "find the emo_tasks directory",
        "index": "index our directory (per TaskManager)",
    }
    for key, label in labels.items():
        print(f"  {label:48s} {_ms(statistics.median(w[key] for w in work))}")
    print(f"  ({work[-1]['n']} entries indexed from our directory)")
    print(f"\n({time.perf_counter() - began:.0f}s in all)")


if __name__ == "__main__":
    main()
