"""The parts that make `emo-tasks view` fast at full scale (benchmarks/view_scale.py measures the speed): files
read once per command (`memo`), thumbnails made in worker processes while the samples are read
(`media.Thumbnailer`).  Here: that they change nothing in what is shown, and when each applies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from emo_tasks.common import once, remembering
from emo_tasks.datafiles import read_jsonl_rows
from emo_tasks.site import media

ROOT = Path(__file__).resolve().parents[2]


def test_once_computes_once_per_block_and_again_when_the_file_changes(tmp_path: Path) -> None:
    f = tmp_path / "rows.jsonl"
    f.write_text('{"a": 1}\n')
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert once("k", f, compute) == 1 and once("k", f, compute) == 2  # outside a block: every time
    with remembering():
        assert once("k", f, compute) == 3 and once("k", f, compute) == 3
        assert once("other", f, compute) == 4  # another kind of value
        with remembering():  # a nested block shares the outer one's values
            assert once("k", f, compute) == 3
        first = read_jsonl_rows(f)
        assert read_jsonl_rows(f) == first == [{"a": 1}]
        f.write_text('{"a": 1}\n{"b": 2}\n')  # changed: another size (and mtime), read again
        assert read_jsonl_rows(f) == [{"a": 1}, {"b": 2}]
        assert once("k", f, compute) == 5
        assert once("k", tmp_path / "missing", compute) == 6  # a file that is not there: no memo
    assert once("k", f, compute) == 7


def _images(folder: Path, n: int) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = folder / f"i{i}.{'png' if i % 3 else 'jpg'}"
        Image.new("RGB", (400 + i, 300), (i * 20 % 256, 80, 160)).save(p)
        out.append(p)
    small = folder / "small.jpg"
    Image.new("RGB", (200, 150), "green").save(small)  # placed as its own bytes
    (folder / "fake.jpg").write_text("not an image")
    return [*out, small, folder / "fake.jpg"]


@pytest.mark.slow
def test_worker_processes_make_the_same_thumbnails_as_the_calling_process(tmp_path: Path) -> None:
    """In a fresh interpreter (a test process may run other tests' threads, and then the workers are threads): the
    first full batch starts worker processes, and they make the very thumbnails this process makes alone."""
    files = _images(tmp_path / "src", 7)
    here = media.thumbnails(files, tmp_path / "one", cache=None, workers=1)  # one worker: no pool, in this process
    script = tmp_path / "workers.py"
    script.write_text(
        "import json, sys\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from pathlib import Path\n"
        "from emo_tasks.site import media\n"
        "media.Thumbnailer.BATCH = 2\n"
        f"files = [Path(p) for p in {[str(f) for f in files]!r}]\n"
        f"with media.Thumbnailer(Path({str(tmp_path / 'many')!r}), Path({str(tmp_path / 'cache')!r}), 2) as pool:\n"
        "    pool.add(files[:4])\n"
        "    assert isinstance(pool._pool, ProcessPoolExecutor), pool._pool\n"
        "    pool.add(files)\n"
        "    names = pool.names()\n"
        "print(json.dumps({str(k): v for k, v in names.items()}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    there = {Path(k): v for k, v in json.loads(proc.stdout).items()}
    assert there == here and here[files[-1]] is None and len({n for n in here.values() if n}) == len(files) - 1
    for name in filter(None, here.values()):
        assert (tmp_path / "many" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
        assert (tmp_path / "cache" / name).is_file() or name == here[files[-2]]  # the small JPEG is not cached


def test_a_process_that_runs_other_threads_thumbnails_in_threads(tmp_path: Path, monkeypatch) -> None:
    """fork copies only the forking thread: with another thread running, the workers are threads."""
    files = _images(tmp_path / "src", 4)
    monkeypatch.setattr(media.Thumbnailer, "BATCH", 2)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with media.Thumbnailer(tmp_path / "t", None, workers=2) as pool:
            pool.add(files)
            assert isinstance(pool._pool, ThreadPoolExecutor)
            names = pool.names()
    finally:
        stop.set()
        other.join()
    assert names == media.thumbnails(files, tmp_path / "one", cache=None, workers=1)


@pytest.mark.slow
def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path: Path) -> None:
    """Worker processes are forked, never spawned: a user's script is not imported again in them (spawn would
    run its top level once per worker, here printing more than one line, or fail)."""
    files = _images(tmp_path / "src", 6)
    script = tmp_path / "user_script.py"
    script.write_text(
        "from pathlib import Path\n"
        "from emo_tasks.site import media\n"
        "media.Thumbnailer.BATCH = 2\n"
        f"files = [Path(p) for p in {[str(f) for f in files]!r}]\n"
        f"names = media.thumbnails(files, Path({str(tmp_path / 'out')!r}), None, workers=2)\n"
        "print('ran', sum(1 for n in names.values() if n))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"ran {len(files) - 1}"], proc.stdout + proc.stderr
