"""Shared fixtures: a real loopback OpenAI-compatible server and engines pointed at it, with isolated env."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from judges import EndpointConfig, JudgeCache, JudgeEngine
from judges.testing import LoopbackServer, Reply, last_user_text

API_KEY = "sk-emo-test-7f3a9c2e51d04b8a"

_ENV_VARS = [
    "OPENAI_BASE_URL",
    "OPENAI_API_URL",
    "OPENAI_API_KEY",
    "API_TYPE",
    "AZURE_ENDPOINT",
    "AZURE_API_KEY",
    "API_VERSION",
    "EMO_STEP_MODEL",
    "EMO_JUDGE_MODEL",
    "EMO_AUDIO_MODEL",
    "EMO_JUDGE_PRESET",
    "EMO_JUDGE_CONCURRENCY",
    "EMO_JUDGE_TIMEOUT",
    "EMO_JUDGE_MAX_TRIES",
    "EMO_JUDGE_INVALID_RETRIES",
    "EMO_JUDGE_BACKOFF_BASE",
    "EMO_JUDGE_BACKOFF_MAX",
    "EMO_JUDGE_CACHE",
    "EMO_CACHE_DIR",
    "EMO_PROGRESS",
]


_generated_mme_sample: Path | None = None
_generating_mme_sample = threading.Lock()  # a module fixture may build runs in threads


def with_mme_sample(cache: Path) -> Path:
    """`cache` (an EMO_CACHE_DIR) holding the MME-Emotion sample's generated clips, copied from one generated
    per test session: generating them costs ~1 s, copying a few ms.  The copy is what the package would write
    there (generation is deterministic); tests about generation itself do not use this."""
    import atexit
    import shutil
    import tempfile

    from emo_tasks.mme_emotion.sample import sample_root

    global _generated_mme_sample
    with _generating_mme_sample:
        if _generated_mme_sample is None:
            root = Path(tempfile.mkdtemp(prefix="emo_mme_sample_"))
            atexit.register(shutil.rmtree, root, True)
            sample_root(root)
            _generated_mme_sample = root / "samples"
    if not (Path(cache) / "samples").exists():
        shutil.copytree(_generated_mme_sample, Path(cache) / "samples")
    return Path(cache)


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, built by `build(folder)` once per test session, whichever xdist worker asks first.

    Why: several modules need the same lmms-eval run (same model, tasks, answers and env); each built its own, and
    those runs were most of the suite's time.  The builder runs under a file lock in a folder every worker of the
    session shares (the parent of the workers' temp roots under xdist); the others wait, then read.  The folder is
    read-only by agreement: a test that writes into a run works on `private_copy` of it.  A build that raised is
    removed and retried by the next caller, so a failure is reported by every module that needs it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-of-USER/pytest-N/: shared by the session's workers (popen-gwN is below it)
    folder = base / "built_once" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    done = folder.parent / f"{name}.built"
    with FileLock(str(folder.parent / f"{name}.lock")):
        if done.exists():
            return folder
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        try:
            build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        done.write_text("")
    return folder


def unused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and the kernel will not hand out meanwhile.

    Why: a port the kernel picked (`bind(("127.0.0.1", 0))`) and then released can be handed to another socket at any
    moment, e.g. a connection of the other xdist worker; tests that reuse a port (a response cache keyed on the URL, a
    rendezvous port, a port that must stay closed) would then meet a stranger.  Ports below the kernel's ephemeral
    range are never handed out, and each xdist worker draws from a range of its own."""
    import random
    import socket

    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    start = 20000 + (worker % 8) * 1500
    for port in random.sample(range(start, min(start + 1500, low)), 200):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no unused port in {start}..{min(start + 1500, low)}")


def private_copy(src: Path, dst: Path) -> Path:
    """A copy of a shared run (`build_once`) for a test that writes into it."""
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's keys or cache; the default cache goes to a temp dir."""
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMO_CACHE_DIR", str(tmp_path / "default_cache"))
    monkeypatch.setenv("EMO_PROGRESS", "0")
    yield
    from judges import frames, reset_engine

    reset_engine()
    frames.configure_frame_cache(None)  # process-wide: a test's frame cache must not outlive its temp dir
    frames.shutdown_prerender()


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    def answer(body: dict, attempt: int) -> Reply:
        return Reply(text=f"answer to {last_user_text(body)}")

    with LoopbackServer(responder=answer, expected_api_key=API_KEY) as srv:
        yield srv


def fast_env(base_url: str, **extra: str) -> dict[str, str]:
    env = {
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": API_KEY,
        "EMO_JUDGE_BACKOFF_BASE": "0.01",
        "EMO_JUDGE_BACKOFF_MAX": "0.05",
        "EMO_JUDGE_TIMEOUT": "5",
    }
    env.update(extra)
    return env


@pytest.fixture
def make_engine(tmp_path: Path) -> Iterator[Callable[..., JudgeEngine]]:
    """make_engine(server, cache_dir=None, **env) -> a JudgeEngine on the loopback server with fast backoff."""
    made: list[JudgeEngine] = []

    def factory(srv: LoopbackServer, cache_dir: Path | None | str = "tmp", **env: str) -> JudgeEngine:
        endpoint = EndpointConfig.from_env(fast_env(srv.base_url, **env))
        cache = None if cache_dir is None else JudgeCache(tmp_path / "cache" if cache_dir == "tmp" else cache_dir)
        engine = JudgeEngine(endpoint, cache=cache, progress=False)
        made.append(engine)
        return engine

    yield factory
    for engine in made:
        engine.close()


def env_without_secrets() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _ENV_VARS}


def cli_env(cache: Path, srv: LoopbackServer | None = None, **extra: str) -> dict[str, str]:
    """The environment tests give the real CLIs: no secrets of the caller's, the Hub offline, a cache of the test's
    own, no progress bars, the loopback judge when `srv` is given, then `extra`."""
    env = env_without_secrets()
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", EMO_CACHE_DIR=str(cache), EMO_PROGRESS="0")
    if srv is not None:
        env.update(OPENAI_BASE_URL=srv.base_url, OPENAI_API_KEY=API_KEY)
    env.update(extra)
    return env


def omni_lm(module: str, processor: Any = None) -> Any:
    """An instance of lmms-eval's real Qwen-Omni class in `module` (e.g. "lmms_eval.models.chat.qwen2_5_omni"),
    without loading a model: the route checks read only its type and `processor`."""
    import importlib

    mod = importlib.import_module(module)
    cls = next(v for k, v in vars(mod).items() if k.startswith("Qwen") and getattr(v, "__module__", "") == module)
    lm = cls.__new__(cls)
    lm.processor = processor
    return lm


def assert_omni_refusal(line: str, name: str) -> None:
    """A refusal of lmms-eval's simple `name` class (`emo_tasks.models.omni.route_for`): one line naming the class
    as the user names it and the chat class to run instead."""
    assert "\n" not in line and f"--model {name} --force_simple" in line, line
    assert f"run `--model {name}` (the chat class" in line, line


def run_emo(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m emo_tasks ARGS` in `env`, output captured."""
    return subprocess.run([sys.executable, "-m", "emo_tasks", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def icc21_reference(x: Any) -> float:
    """Shrout & Fleiss ICC(2,1) of an n x k ratings array, written out independently of emo_tasks.results.stats (the
    reference the agreement and report tests check it against)."""
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_err = ((x - grand) ** 2).sum() - ss_rows - ss_cols
    msr, msc, mse = ss_rows / (n - 1), ss_cols / (k - 1), ss_err / ((n - 1) * (k - 1))
    return float((msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n))
