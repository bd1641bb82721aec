"""lmms-eval finds our task YAMLs after `pip install`, with no --include_path and no environment variable.

The mechanism: `emo_tasks-autoregister.pth` (site-packages) imports `_emo_tasks_autoload` at start-up, which
wraps `TaskManager.initialize_tasks` once `lmms_eval.tasks` is imported. Every check runs in a fresh
interpreter of this environment, because the .pth only acts at start-up.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import env_without_secrets

OUR_TASKS = [
    "mme_emotion_all",
    "mme_emotion_er_lab",
    "mme_emotion_sample",
    "mvei",
    "mvei_sample",
    "multiemo",
    "multiemo_sample",
]
PTH_NAME = "emo_tasks-autoregister.pth"
CONSOLE_SCRIPT = Path(sys.executable).parent / ("lmms-eval.exe" if os.name == "nt" else "lmms-eval")
SWITCH = "EMO_TASKS_AUTOREGISTER"


def _env(**extra: str) -> dict[str, str]:
    env = env_without_secrets()
    for name in (SWITCH, "LMMS_EVAL_PLUGINS", "PYTHONPATH"):
        env.pop(name, None)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def _run(cmd: list[str], cwd: Path, timeout: int = 300, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=_env(**extra_env), cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _python(code: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-c", textwrap.dedent(code)], cwd, **extra_env)


def _json_tail(proc: subprocess.CompletedProcess) -> dict:
    """The last stdout line is the probe's JSON (lmms-eval logs to stdout as well)."""
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def emo_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The installed `emo_tasks` directory as a fresh interpreter outside the checkout sees it."""
    code = "import _emo_tasks_autoload as h, json; print(json.dumps(h.tasks_dir()))"
    found = _json_tail(_python(code, tmp_path_factory.mktemp("where")))
    assert found and Path(found, "__init__.py").is_file(), found
    return found


def _listed(output: str) -> set[str]:
    """Names from lmms-eval's `--tasks list` ("Available Tasks:\n - name" lines)."""
    return {line.strip()[2:].strip() for line in output.splitlines() if line.strip().startswith("- ")}


# -- start-up: the .pth is installed and costs nothing heavy ------------------------------------------------


def test_pth_file_is_in_site_packages() -> None:
    dirs = [Path(d) for d in site.getsitepackages()] + [Path(site.getusersitepackages())]
    found = [d / PTH_NAME for d in dirs if (d / PTH_NAME).is_file()]
    assert found, f"{PTH_NAME} in none of {dirs}: reinstall with `pip install -e .` or `pip install .`"
    assert found[0].read_text().strip() == "import _emo_tasks_autoload"


def test_startup_loads_only_the_tiny_hook(tmp_path: Path) -> None:
    code = """
        import json, sys
        hooks = [type(f).__name__ for f in sys.meta_path if getattr(f, "marker", None)]
        print(json.dumps({"modules": sorted(sys.modules), "hooks": hooks}))
    """
    on = _json_tail(_python(code, tmp_path))
    heavy = {"lmms_eval", "emo_tasks", "judges", "torch", "openai"} & set(on["modules"])
    assert not heavy, f"the .pth imported {heavy} at start-up"
    assert "_emo_tasks_autoload" in on["modules"] and on["hooks"] == ["_PostImportFinder"]
    off = _json_tail(_python(code, tmp_path, **{SWITCH: "0"}))
    assert "_emo_tasks_autoload" in off["modules"] and off["hooks"] == []


def test_legacy_plugin_lookups_resolve(tmp_path: Path) -> None:
    """The two look-ups lmms-eval 0.7.3 makes for LMMS_EVAL_PLUGINS=emo_tasks, done here without lmms-eval."""
    code = """
        import importlib, importlib.util, json, os
        tasks = importlib.util.find_spec("emo_tasks.tasks").submodule_search_locations[0]
        models = importlib.import_module("emo_tasks.models").AVAILABLE_MODELS
        print(json.dumps({"tasks_is_dir": os.path.isdir(tasks), "models": models}))
    """
    assert _json_tail(_python(code, tmp_path)) == {"tasks_is_dir": True, "models": {}}


# -- the hook's mechanics, on a stand-in for lmms_eval.tasks (no lmms-eval import, fast) ---------------------

FAKE_TASKS = """
class TaskManager:
    def __init__(self, include_path=None):
        self.paths = self.initialize_tasks(include_path=include_path)

    def initialize_tasks(self, include_path=None, include_defaults=True):
        return include_path
"""


def _fake_env(tmp_path: Path) -> Path:
    pkg = tmp_path / "fakelmms"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tasks.py").write_text(FAKE_TASKS)
    (pkg / "broken.py").write_text("raise ValueError('broken on purpose')\n")
    (pkg / "adapt.py").write_text("calls = []\ndef apply():\n    calls.append(1)\n")
    (pkg / "bad_adapt.py").write_text("def apply():\n    raise RuntimeError('adaptation failed')\n")
    (pkg / "vlm_dataset.py").write_text("DATASET_CLASSES = []\n")  # stands in for vlmeval.dataset
    (pkg / "vlm_register.py").write_text(
        "calls = []\ndef register():\n    from fakelmms import vlm_dataset\n"
        "    vlm_dataset.DATASET_CLASSES.append('ours')\n    calls.append(1)\n"
    )
    (pkg / "oddsig.py").write_text(
        FAKE_TASKS.replace(
            "(self, include_path=None, include_defaults", "(self, *, include_path=None, include_defaults"
        )
    )
    return pkg


def test_hook_wraps_on_import_then_removes_itself(tmp_path: Path, emo_dir: str) -> None:
    _fake_env(tmp_path)
    code = """
        import json, os, sys
        import _emo_tasks_autoload as hook
        hook.uninstall()
        hook.TARGET, hook.ADAPTATIONS = "fakelmms.tasks", "fakelmms.adapt"
        hook.VLMEVAL_TARGET, hook.VLMEVAL_REGISTER = "fakelmms.vlm_dataset", "fakelmms.vlm_register"
        hook.install()
        hook.install()  # idempotent: still one finder
        count = lambda: sum(1 for f in sys.meta_path if getattr(f, "marker", None))
        finders = count()
        from fakelmms import tasks
        waiting = count()  # still waiting for the VLMEvalKit registry
        from fakelmms import vlm_dataset, vlm_register
        ours = hook.tasks_dir()
        out = {
            "finders_before": finders,
            "finders_waiting": waiting,
            "registered": [vlm_dataset.DATASET_CLASSES, len(vlm_register.calls)],
            "finders_after": count(),
            "loader_clean": "exec_module" not in vars(tasks.__spec__.loader),
            "none": tasks.TaskManager().paths,
            "str": tasks.TaskManager("/elsewhere").paths,
            "list": tasks.TaskManager(["/a", "/b"]).paths,
            "already": tasks.TaskManager([ours + os.sep]).paths,
            "subdir": tasks.TaskManager([os.path.join(ours, "mme_emotion")]).paths,
            "positional": tasks.TaskManager.initialize_tasks(None, "/p", False),
        }
        wrapped = tasks.TaskManager.initialize_tasks
        hook.patch(tasks)  # idempotent: no second wrapper
        out["same_wrapper"] = tasks.TaskManager.initialize_tasks is wrapped
        from fakelmms import adapt
        out["adaptations_applied"] = len(adapt.calls)
        print(json.dumps(out))
    """
    out = _json_tail(_python(code, tmp_path))
    ours = emo_dir
    assert out["finders_before"] == 1 and out["finders_waiting"] == 1 and out["finders_after"] == 0
    assert out["loader_clean"] and out["registered"] == [["ours"], 1]  # registered once, right after the import
    assert out["none"] == [ours]
    assert out["str"] == ["/elsewhere", ours]
    assert out["list"] == ["/a", "/b", ours]
    assert out["already"] == [ours + os.sep]  # the user's own spelling is kept, no duplicate
    assert out["subdir"] == [os.path.join(ours, "mme_emotion"), ours]
    assert out["positional"] == ["/p", ours]
    assert out["same_wrapper"] and out["adaptations_applied"] == 1


def test_hook_patches_at_once_when_target_already_imported(tmp_path: Path, emo_dir: str) -> None:
    _fake_env(tmp_path)
    code = """
        import json, sys
        import _emo_tasks_autoload as hook
        hook.uninstall()
        hook.TARGET, hook.ADAPTATIONS = "fakelmms.tasks", "fakelmms.not_there"  # nothing to adapt: silent
        hook.VLMEVAL_TARGET, hook.VLMEVAL_REGISTER = "fakelmms.vlm_dataset", "fakelmms.vlm_register"
        from fakelmms import tasks, vlm_dataset, vlm_register
        hook.install()
        finders = [f for f in sys.meta_path if getattr(f, "marker", None)]
        print(json.dumps({"paths": tasks.TaskManager().paths, "finders": len(finders),
                          "registered": [vlm_dataset.DATASET_CLASSES, len(vlm_register.calls)]}))
    """
    out = _json_tail(_python(code, tmp_path))
    assert out == {"paths": [emo_dir], "finders": 0, "registered": [["ours"], 1]}


def test_hook_failures_never_break_the_program(tmp_path: Path) -> None:
    _fake_env(tmp_path)
    code = """
        import json
        import _emo_tasks_autoload as hook
        hook.uninstall()
        hook.TARGET, hook.ADAPTATIONS = "fakelmms.tasks", "fakelmms.bad_adapt"
        hook.VLMEVAL_TARGET = "fakelmms.never_imported"
        hook.install()
        def boom():
            raise OSError("disk on fire")
        hook.tasks_dir = boom
        from fakelmms import tasks
        first, second = tasks.TaskManager(["/mine"]).paths, tasks.TaskManager().paths
        hook.TARGET = "fakelmms.broken"
        hook.install()
        try:
            import fakelmms.broken
        except ValueError as exc:
            error = str(exc)
        print(json.dumps({"first": first, "second": second, "error": error}))
    """
    proc = _python(code, tmp_path)
    out = _json_tail(proc)
    # lmms-eval's own behaviour, user's include paths intact; a module's own import error is not hidden.
    assert out == {"first": ["/mine"], "second": None, "error": "broken on purpose"}
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("emo-tasks:")]
    assert warnings == [
        "emo-tasks: lmms-eval hook skipped: fakelmms.bad_adapt.apply() failed (RuntimeError: adaptation failed)",
        "emo-tasks: lmms-eval hook skipped: OSError: disk on fire",
    ], proc.stderr


def test_unknown_signature_or_missing_module_are_left_alone(tmp_path: Path) -> None:
    _fake_env(tmp_path)
    code = """
        import json
        import _emo_tasks_autoload as hook
        hook.uninstall()
        hook.TARGET, hook.ADAPTATIONS = "fakelmms.oddsig", "fakelmms.adapt"
        hook.VLMEVAL_TARGET = "fakelmms.never_imported"
        hook.install()
        from fakelmms import oddsig
        wrapped = getattr(oddsig.TaskManager.initialize_tasks, "__emo_tasks_autoregister__", False)
        paths = oddsig.TaskManager(include_path=["/mine"]).paths
        hook.TARGET = "fakelmms.missing"
        hook.install()
        try:
            import fakelmms.missing
        except ModuleNotFoundError as exc:
            missing = exc.name
        print(json.dumps({"wrapped": wrapped, "paths": paths, "missing": missing}))
    """
    proc = _python(code, tmp_path)
    assert _json_tail(proc) == {"wrapped": False, "paths": ["/mine"], "missing": "fakelmms.missing"}
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("emo-tasks:")]
    assert len(warnings) == 1 and "could not wrap" in warnings[0] and "unexpected signature" in warnings[0], warnings


# -- end to end: the real lmms-eval 0.7.3, through its three doors ------------------------------------------

API_PROBE = f"""
    import json, sys
    import _emo_tasks_autoload
    from lmms_eval.tasks import TaskManager
    ours = {OUR_TASKS!r}
    emo = _emo_tasks_autoload.tasks_dir()
    default = TaskManager()
    only_ours = TaskManager(include_defaults=False)
    own_dir = TaskManager(include_path=emo, include_defaults=False)
    bench_dir = TaskManager(include_path=[emo + "/mme_emotion"], include_defaults=False)
    print(json.dumps({{
        "adaptations": "emo_tasks.lmms_patch" in sys.modules,
        "default": [t for t in ours if t in default.all_tasks],
        "builtin_kept": "mme" in default.all_tasks,
        "only_ours": [t for t in ours if t in only_ours.all_tasks],
        "own_dir": [t for t in ours if t in own_dir.all_tasks],
        "bench_dir": [t for t in ours if t in bench_dir.all_tasks],
        "wrapped": getattr(TaskManager.initialize_tasks, "__emo_tasks_autoregister__", False),
    }}))
"""

OFF_PROBE = f"""
    import json
    from lmms_eval.tasks import TaskManager
    tasks = TaskManager().all_tasks
    print(json.dumps({{
        "ours": [t for t in {OUR_TASKS!r} if t in tasks],
        "count": len(tasks),
        "wrapped": getattr(TaskManager.initialize_tasks, "__emo_tasks_autoregister__", False),
    }}))
"""


@pytest.fixture(scope="module")
def lmms_runs(tmp_path_factory: pytest.TempPathFactory, emo_dir: str) -> Iterator[dict[str, Future]]:
    """All lmms-eval subprocesses (~10 s each, mostly indexing ~2000 YAMLs), two at a time."""
    cwd = tmp_path_factory.mktemp("lmms_runs")  # not the checkout: `emo_tasks` must come from the install
    py = sys.executable
    jobs = {
        "api": ([py, "-c", textwrap.dedent(API_PROBE)], {}),
        "api_off": ([py, "-c", textwrap.dedent(OFF_PROBE)], {SWITCH: "0"}),
        "module": ([py, "-m", "lmms_eval", "--tasks", "list"], {}),
        "console": ([str(CONSOLE_SCRIPT), "--tasks", "list"], {}),
        # lmms-eval imports emo_tasks.models (AVAILABLE_MODELS) and emo_tasks.tasks' directory: a crash if missing.
        "plugins": ([py, "-m", "lmms_eval", "--tasks", "list"], {"LMMS_EVAL_PLUGINS": "emo_tasks"}),
        "include": ([py, "-m", "lmms_eval", "--tasks", "list", "--include_path", emo_dir], {}),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {name: pool.submit(_run, cmd, cwd, 600, **env) for name, (cmd, env) in jobs.items()}


def _cli_output(future: Future) -> str:
    proc = future.result()
    output = proc.stdout + proc.stderr  # lmms-eval logs through loguru; do not depend on which stream
    assert proc.returncode == 0, output[-4000:]
    assert "Traceback" not in output and "emo-tasks: lmms-eval hook skipped" not in output, output[-4000:]
    return output


@pytest.mark.slow
def test_task_manager_lists_our_tasks_without_include_path(lmms_runs: dict[str, Future]) -> None:
    out = _json_tail(lmms_runs["api"].result())
    assert out["default"] == OUR_TASKS and out["builtin_kept"] and out["wrapped"] and out["adaptations"]
    assert out["only_ours"] == OUR_TASKS
    assert out["own_dir"] == OUR_TASKS  # --include_path of our own directory: indexed once, no crash
    assert set(out["bench_dir"]) >= {"mme_emotion_all", "mme_emotion_er_lab"}


@pytest.mark.slow
def test_switch_off_proves_the_hook_is_what_registers(lmms_runs: dict[str, Future]) -> None:
    out = _json_tail(lmms_runs["api_off"].result())
    assert out["ours"] == [] and not out["wrapped"] and out["count"] > 100


@pytest.mark.slow
def test_python_m_lmms_eval_lists_our_tasks(lmms_runs: dict[str, Future]) -> None:
    assert set(OUR_TASKS) <= _listed(_cli_output(lmms_runs["module"]))


@pytest.mark.slow
def test_console_script_lists_our_tasks(lmms_runs: dict[str, Future]) -> None:
    assert CONSOLE_SCRIPT.is_file(), CONSOLE_SCRIPT
    assert set(OUR_TASKS) <= _listed(_cli_output(lmms_runs["console"]))


@pytest.mark.slow
def test_lmms_eval_plugins_variable_still_works(lmms_runs: dict[str, Future]) -> None:
    assert set(OUR_TASKS) <= _listed(_cli_output(lmms_runs["plugins"]))


@pytest.mark.slow
def test_include_path_of_our_directory_still_works(lmms_runs: dict[str, Future]) -> None:
    assert set(OUR_TASKS) <= _listed(_cli_output(lmms_runs["include"]))
