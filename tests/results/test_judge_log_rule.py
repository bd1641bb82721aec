"""One rule picks a task's judge log, for every command: when a newer judge log of the task cannot be read and an
older one, the run's own, can, `report`, `view` and `export` refuse (exit 2), naming both files in one line.

Why: a log that cannot be read cannot be proven to be another run's; taking the older one would be a guess (and
before, `report` and `view` quietly dropped the task's evidence while `export` failed with exit 3 naming one file).
The run is the hand-made judged MME-Emotion run of `tests/results/test_export.py`; each command runs in this
process (`cli.main`, fast tier) and as the real console command (slow tier).  `agreement`'s case is in
`tests/judging/test_agreement_setups.py`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import env_without_secrets
from test_export import JUDGED, STAMP, make_mme_run

from emo_tasks import cli

NEWER = "20260102T000000"  # a later stamp than the run's own log's (STAMP)


@pytest.fixture(params=["in_process", pytest.param("subprocess", marks=pytest.mark.slow)])
def emo(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture, tmp_path: Path) -> Callable:
    """`emo-tasks ARGS...` in this process (cli.main) or as the real console command: (exit code, stdout, stderr)."""

    def run(*args: object) -> tuple[int, str, str]:
        argv = [str(a) for a in args]
        if request.param == "in_process":
            code = cli.main(argv)
            out, err = capsys.readouterr()
            return code, out, err
        env = {**env_without_secrets(), "EMO_CACHE_DIR": str(tmp_path / "cache"), "EMO_PROGRESS": "0",
               "PYTHONIOENCODING": "utf-8"}  # fmt: skip
        res = subprocess.run([sys.executable, "-m", "emo_tasks", *argv], env=env, capture_output=True,
                             encoding="utf-8", timeout=300)  # fmt: skip
        return res.returncode, res.stdout, res.stderr

    return run


@pytest.fixture
def run_with_a_broken_newer_log(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The judged run (its own log, readable) and, beside it, a newer log of the same tasks that is cut off."""
    run = make_mme_run(tmp_path / "run")
    own = run / "emo_tasks_judge" / f"{JUDGED}_{STAMP}_judge.jsonl"
    broken = run / "emo_tasks_judge" / f"{JUDGED}_{NEWER}_judge.jsonl"
    broken.write_text(own.read_text()[:40])  # a write cut short: the first line is not JSON
    return run, own, broken


def _refused_naming_both(code: int, err: str, own: Path, broken: Path) -> None:
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{broken.name} in {broken.parent} cannot be read (line 1: not a JSON object" in err, err
    assert f"an older one, {own.name}, can" in err, err


@pytest.mark.parametrize("command", ["export", "report", "view"])
def test_a_newer_unreadable_judge_log_is_refused_naming_both(
    run_with_a_broken_newer_log: tuple[Path, Path, Path], emo: Callable, tmp_path: Path, command: str
) -> None:
    run, own, broken = run_with_a_broken_newer_log
    out = tmp_path / "out"
    args = {
        "export": ("export", run, "--format", "mme-official", "--out", out),
        "report": ("report", run),
        "view": ("view", run, "--out", out),
    }[command]
    code, stdout, err = emo(*args)
    _refused_naming_both(code, err, own, broken)
    assert stdout == "" and not out.exists()

    broken.unlink()  # the run's own log alone: the command reads it
    code, stdout, err = emo(*args)
    assert code == 0, err
    if command == "report":
        assert "ER-Lab" in stdout and "could not read" not in stdout + err
    else:
        assert out.is_dir()
