"""Packaging: import-time behaviour (no network, nothing heavy, a loud failure on the `judges` name clash), the
licence, and what the sdist and wheel carry (built for real with `python -m build`, like a release)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from conftest import env_without_secrets

ROOT = Path(__file__).resolve().parents[1]

NO_NETWORK = textwrap.dedent(
    """
    import socket, sys
    def refuse(*a, **k):
        raise AssertionError("network connection attempted at import time")
    socket.socket.connect = refuse
    socket.create_connection = refuse
    import judges, judges.lmms_eval_hooks, judges.testing, emo_tasks
    heavy = [m for m in ("openai", "lmms_eval", "PIL", "torch", "tqdm", "httpx") if m in sys.modules]
    assert not heavy, heavy
    assert judges.__emo_tasks_judges__ is True
    print("clean")
    """
)


def _run(code: str, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    env = env_without_secrets()
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_import_opens_no_connection_and_loads_nothing_heavy() -> None:
    proc = _run(NO_NETWORK)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "clean"


def test_pypi_judges_distribution_installed_beside_us_fails_loudly(tmp_path: Path) -> None:
    dist = tmp_path / "judges-0.1.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: judges\nVersion: 0.1.1\n")
    proc = _run("import judges", extra_path=tmp_path)
    assert proc.returncode != 0
    assert "JudgesPackageClash" in proc.stderr and "unrelated" in proc.stderr and "pip uninstall" in proc.stderr


def test_foreign_judges_module_fails_loudly(tmp_path: Path) -> None:
    """What `import judges` finds after the PyPI package overwrote ours (its own __init__, no marker)."""
    foreign = tmp_path / "site" / "judges" / "__init__.py"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("# the unrelated PyPI judges package\n")
    code = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("judges", {str(foreign)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["judges"] = module
        import emo_tasks
        """
    )
    proc = _run(code)
    assert proc.returncode != 0
    assert "not emo-tasks' judge engine" in proc.stderr and str(foreign) in proc.stderr


def test_the_licence_is_an_spdx_expression_with_its_file() -> None:
    """setuptools deprecates the table form (`license = {text = ...}`); the wheel must carry the licence text."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: pytest itself depends on tomli there
        import tomli as tomllib

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (root / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")


# ------------------------------------------------------------------------------------------- sdist and wheel

# The sdist carries the tests and what they need, so `python -m pytest` runs from an unpacked sdist (MANIFEST.in).
SDIST_TREES = ("tests", "docs", "benchmarks")
SDIST_TOP_FILES = ("README.md", "LICENSE", "pyproject.toml", "setup.py", "MANIFEST.in", "_emo_tasks_autoload.py")
PACKAGES = ("emo_tasks", "judges")
# [tool.setuptools.package-data] in pyproject.toml
PACKAGE_DATA_SUFFIXES = (".yaml", ".yml", "_yaml", ".json", ".txt", ".md")


def _is_junk(rel: str) -> bool:
    parts = rel.split("/")
    if parts[:2] == ["tests", "artifacts"]:  # the browser tests' screenshots: outputs, never shipped
        return True
    return "__pycache__" in parts or rel.endswith((".pyc", ".pyo", ".pyd", ".tmp")) or ".sqlite3" in parts[-1]


def _files_under(top: Path, *names: str) -> set[str]:
    """The files below `top`/name for each name, as POSIX paths relative to `top`, junk left out."""
    found = set()
    for name in names:
        for path in (top / name).rglob("*"):
            rel = path.relative_to(top).as_posix()
            if path.is_file() and not _is_junk(rel):
                found.add(rel)
    return found


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`python -m build` on the checkout: the sdist, then the wheel built from that sdist (as a release is made);
    the sdist is unpacked too."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], env=env_without_secrets(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):  # 3.10.12+, 3.11.4+: no links or paths outside `unpacked`
            tar.extractall(unpacked, filter="data")
        else:
            tar.extractall(unpacked)
    (top,) = unpacked.iterdir()
    return {"sdist": sdist, "wheel": wheel, "unpacked": top}


@pytest.mark.slow
def test_the_sdist_carries_the_tests_with_their_data_and_tools_and_the_docs(dists: dict[str, Path]) -> None:
    top = dists["unpacked"]
    carried = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
    missing = (_files_under(ROOT, *SDIST_TREES, *PACKAGES) | set(SDIST_TOP_FILES)) - carried
    assert not missing, f"files of the checkout missing from the sdist: {sorted(missing)}"
    for needed in ("tests/conftest.py", "tests/fakes.py", "tests/tools/tiny_qwen.py", "tests/lmms_probe/utils.py",
                   "tests/data/mme_emotion/LICENSE.txt", "docs/lmms_eval.md", "benchmarks/RESULTS.md"):  # fmt: skip
        assert needed in carried, needed
    junk = sorted(rel for rel in carried if _is_junk(rel) or rel.split("/")[0].startswith((".venv", ".ci_out", ".git")))
    assert not junk, f"the sdist carries junk: {junk}"


def _in_sdist(top: Path, *args: str) -> subprocess.CompletedProcess:
    """`python ARGS` in the unpacked sdist, importing its emo_tasks and judges (not the checkout's)."""
    env = {**env_without_secrets(), "PYTHONPATH": str(top)}
    return subprocess.run([sys.executable, *args], cwd=top, env=env, capture_output=True, text=True, timeout=300)


def _collected(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_pytest_collects_the_same_tests_from_the_unpacked_sdist_and_its_docs_check_passes(
    dists: dict[str, Path],
) -> None:
    """Every test module imports there (conftest, fakes, tools); the docs' links resolve inside the sdist."""
    top = dists["unpacked"]
    where = _in_sdist(top, "-c", "import emo_tasks, judges; print(emo_tasks.__file__); print(judges.__file__)")
    assert [Path(line).parents[1] for line in where.stdout.split()] == [top, top], where.stdout + where.stderr
    collect = ("-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q")
    in_sdist = _collected(_in_sdist(top, *collect))
    in_checkout = _collected(subprocess.run([sys.executable, *collect], cwd=ROOT, env=env_without_secrets(),
                                            capture_output=True, text=True, timeout=300))  # fmt: skip
    assert in_sdist and in_sdist == in_checkout
    docs = _in_sdist(top, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests/test_docs.py")
    assert docs.returncode == 0, docs.stdout[-3000:]


@pytest.mark.slow
def test_the_wheel_built_from_the_sdist_installs_the_packages_with_their_data_and_the_start_up_hook(
    dists: dict[str, Path],
) -> None:
    with zipfile.ZipFile(dists["wheel"]) as whl:
        names = set(whl.namelist())
    expected = {
        rel for rel in _files_under(ROOT, *PACKAGES) if rel.endswith(".py") or rel.endswith(PACKAGE_DATA_SUFFIXES)
    }
    expected |= {"_emo_tasks_autoload.py", "emo_tasks-autoregister.pth"}
    missing = expected - names
    assert not missing, f"the wheel lacks: {sorted(missing)}"
    for data in ("emo_tasks/mme_emotion/mme_emotion_sample.yaml", "emo_tasks/mme_emotion/sample_rows.json",
                 "emo_tasks/mme_emotion/protocol.yml", "emo_tasks/mvei/sample_pairs.json"):  # fmt: skip
        assert data in names, data
    assert not [n for n in names if n.split("/")[0] in SDIST_TREES], "tests/docs/benchmarks do not go into the wheel"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
