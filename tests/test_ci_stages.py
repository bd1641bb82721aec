"""CI's stage times and the full suite's budget (.ci/stages.sh, sourced by .ci/run), run by the real bash.

Why: the suite's time grew unseen until CI neared its 90-minute limit; .ci/run now prints each stage's time and
fails when the full suite passes its budget. These run the functions .ci/run uses, so breaking them fails here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; . .ci/stages.sh; {script}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def _budget_min() -> int:
    found = re.findall(r"^FULL_SUITE_BUDGET_MIN=(\d+)$", (ROOT / ".ci/stages.sh").read_text(), re.MULTILINE)
    assert len(found) == 1, "the budget is stated once, in .ci/stages.sh"
    return int(found[0])


def test_the_budget_is_stated_once_and_ci_checks_the_full_suite_against_it() -> None:
    budget = _budget_min()
    assert budget == 20
    run = (ROOT / ".ci/run").read_text()
    assert ". .ci/stages.sh" in run and "FULL_SUITE_BUDGET_MIN=" not in run
    assert 'stage "full suite" python -m pytest -ra' in run
    assert 'check_suite_budget "$((SECONDS - suite_start))"' in run


def test_a_suite_over_its_budget_fails_ci_with_what_to_do() -> None:
    budget_s = _budget_min() * 60
    within = _bash(f"check_suite_budget {budget_s}")
    assert within.returncode == 0, within.stderr
    assert f"the full suite took {budget_s} s of its 20 min budget" in within.stdout
    over = _bash(f"check_suite_budget {budget_s + 1}; echo still running")
    assert over.returncode == 1 and "still running" not in over.stdout
    assert f"the full suite took {budget_s + 1} s, over its budget of 20 min" in over.stderr
    assert "--durations=30" in over.stderr


def test_each_stage_prints_its_time_and_status_and_the_summary_lists_all() -> None:
    out = _bash("trap stage_summary EXIT; stage first true; stage second false || true; stage third sh -c 'exit 3'")
    assert out.returncode == 3
    lines = out.stdout.splitlines()
    assert [ln for ln in lines if ln.startswith("stage ")] == [
        "stage first: 0 s (exit 0)",
        "stage second: 0 s (exit 1)",
        "stage third: 0 s (exit 3)",
    ]
    summary = lines[lines.index("CI stage times:") + 1 :]
    assert [s.split()[0] for s in summary[:3]] == ["first", "second", "third"]
    assert [s.split()[-1] for s in summary[:3]] == ["0)", "1)", "3)"]
    assert re.fullmatch(r"CI total: \d+ s", summary[3])
