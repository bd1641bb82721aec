"""conftest.build_once: a run that several modules share is built once per session, across pytest-xdist workers.

Why: the suite's time was mostly lmms-eval runs built the same way by several modules; they are now built once
and shared (docs/development.md#the-suites-time).  These tests run a real `pytest -n 2` over generated modules that
ask for the same folder, and count the builds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

HEADER = f"""
import importlib.util, os, time
from pathlib import Path

spec = importlib.util.spec_from_file_location("emo_conftest", {str(CONFTEST)!r})
emo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(emo)
"""

MODULE = """
def test_it_reads_the_shared_folder(tmp_path_factory):
    def build(folder):
        time.sleep(1.5)  # long enough that both workers ask while it is being built
        with open(COUNTER, "a") as fh:
            fh.write("built\\n")
        if FAIL_FIRST and Path(COUNTER).read_text().count("built") == 1:
            raise RuntimeError("the first build fails")
        (folder / "run.txt").write_text("answers")

    with open(str(COUNTER) + ".workers", "a") as fh:
        fh.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    folder = emo.build_once(tmp_path_factory, "shared-run", build)
    assert (folder / "run.txt").read_text() == "answers"
"""


def _run(tmp_path: Path, *, fail_first: bool) -> tuple[subprocess.CompletedProcess, list[str]]:
    counter = tmp_path / "builds.txt"
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text(f"{HEADER}\nCOUNTER = {str(counter)!r}\nFAIL_FIRST = {fail_first}\n{MODULE}")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider",
                           "-q", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    return proc, counter.read_text().splitlines() if counter.exists() else []


def test_two_workers_asking_for_the_same_run_build_it_once(tmp_path: Path) -> None:
    proc, builds = _run(tmp_path, fail_first=False)
    assert "2 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = (tmp_path / "builds.txt.workers").read_text().split()
    assert sorted(workers) == ["gw0", "gw1"]  # really two workers, not one running both modules
    assert builds == ["built"]


def test_a_build_that_failed_is_removed_and_built_again_by_the_next_asker(tmp_path: Path) -> None:
    proc, builds = _run(tmp_path, fail_first=True)
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "the first build fails" in proc.stdout
    assert builds == ["built", "built"]
