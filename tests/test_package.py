"""Import-time behaviour: no network, nothing heavy, and a loud failure on the `judges` name clash."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import env_without_secrets

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
    import tomllib

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (root / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
