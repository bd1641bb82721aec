"""Make lmms-eval index emo-tasks' task YAMLs with no `--include_path` and no environment variable.

lmms-eval 0.7.3 has no entry-point group for tasks: `TaskManager.initialize_tasks` indexes only
`lmms_eval/tasks` plus the include paths it is given. This module is imported at interpreter start-up by
`emo_tasks-autoregister.pth` (installed into site-packages by `pip install`, editable or not). It stays cheap:
it imports nothing but `sys` and `os` and only puts a finder on `sys.meta_path`. When some program later
imports `lmms_eval.tasks`, the finder lets the normal machinery load it, then wraps
`TaskManager.initialize_tasks` so that the installed `emo_tasks` package directory is appended to
`include_path`. That covers every door: the `lmms-eval` console script, `python -m lmms_eval`, and
`TaskManager()` from Python. At that same moment (never at start-up) it runs `emo_tasks.lmms_patch.apply()`,
emo_tasks' own adaptation of lmms-eval's dataset loading, which our task YAMLs need.

The same finder waits for `vlmeval.dataset` (VLMEvalKit's dataset registry): when a program imports it, our
dataset classes are registered into it (`emo_tasks.vlmeval.register()`), so `python -m vlmeval --data EmoMVEI`
works with no code change, as does any process that imports it.

`EMO_TASKS_AUTOREGISTER=0` switches both off. A failure in here never breaks the program that triggered it:
it prints one warning line to stderr and lmms-eval runs as if the hook did not exist.
"""

# No `from __future__ import annotations`: it is a real import, and this module runs in every interpreter.
import os
import sys

TARGET = "lmms_eval.tasks"
#: VLMEvalKit's dataset registry: our classes are added to it right after it is imported.
VLMEVAL_TARGET = "vlmeval.dataset"
VLMEVAL_REGISTER = "emo_tasks.vlmeval"
PACKAGE = "emo_tasks"
ENV_SWITCH = "EMO_TASKS_AUTOREGISTER"
# emo_tasks' own lmms-eval adaptations (e.g. `dataset_path: emo_tasks`), applied right after TaskManager is wrapped.
ADAPTATIONS = "emo_tasks.lmms_patch"
_MARK = "__emo_tasks_autoregister__"
_warned: set[str] = set()


def _warn(problem: str) -> None:
    """One line on stderr, once per distinct problem: the hook must never be louder than that."""
    if problem not in _warned:
        _warned.add(problem)
        print(f"emo-tasks: lmms-eval hook skipped: {problem}", file=sys.stderr)


def enabled() -> bool:
    """False when the user opted out with EMO_TASKS_AUTOREGISTER=0 (or false/no/off)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def tasks_dir() -> str | None:
    """Absolute directory of the `emo_tasks` that `import emo_tasks` would load, without executing it.

    `find_spec` of a top-level name runs no package code, and it follows whatever the import system would
    use (site-packages, an editable finder, a checkout on sys.path).
    """
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        _warn(f"package {PACKAGE!r} not found on sys.path")
        return None
    return os.path.realpath(locations[0])


def _same_dir(a: object, b: str) -> bool:
    try:
        return os.path.realpath(os.fspath(a)) == os.path.realpath(b)
    except (TypeError, ValueError):
        return False


def with_our_dir(include_path: object, ours: str | None) -> object:
    """The user's include paths (None, a path or a list of them) plus ours, unless it is already there."""
    if ours is None:
        return include_path
    if include_path is None:
        return [ours]
    if isinstance(include_path, (str, os.PathLike)):
        paths = [os.fspath(include_path)]
    else:
        paths = list(include_path)
    if not any(_same_dir(p, ours) for p in paths):
        paths.append(ours)
    return paths


def patch(module: object) -> bool:
    """Wrap `module.TaskManager.initialize_tasks` once; True when the wrapper is in place."""
    import functools
    import inspect

    manager = module.TaskManager
    original = manager.initialize_tasks
    if getattr(original, _MARK, False):
        return True
    # The wrapper passes include_path on as the first argument after self, as lmms-eval 0.7.3 declares it.
    params = list(inspect.signature(original).parameters.values())
    if len(params) < 2 or params[1].name != "include_path" or params[1].kind != params[1].POSITIONAL_OR_KEYWORD:
        raise TypeError(f"unexpected signature initialize_tasks{inspect.signature(original)}")

    @functools.wraps(original)
    def initialize_tasks(self: object, include_path: object = None, *args: object, **kwargs: object) -> object:
        try:
            include_path = with_our_dir(include_path, tasks_dir())
        except Exception as exc:  # noqa: BLE001 - never break lmms-eval because of us
            _warn(f"{type(exc).__name__}: {exc}")
        return original(self, include_path, *args, **kwargs)

    setattr(initialize_tasks, _MARK, True)
    manager.initialize_tasks = initialize_tasks
    return True


def apply_adaptations() -> None:
    """Run `ADAPTATIONS.apply()`; a missing module is fine (nothing to adapt), any other failure is raised."""
    import importlib

    try:
        module = importlib.import_module(ADAPTATIONS)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (ADAPTATIONS == exc.name or ADAPTATIONS.startswith(exc.name + ".")):
            return
        raise
    module.apply()


def _patch_quietly(module: object) -> None:
    try:
        patch(module)
    except Exception as exc:  # noqa: BLE001
        _warn(f"could not wrap {TARGET}.TaskManager.initialize_tasks ({type(exc).__name__}: {exc})")
    try:
        apply_adaptations()
    except Exception as exc:  # noqa: BLE001
        _warn(f"{ADAPTATIONS}.apply() failed ({type(exc).__name__}: {exc})")


def _register_vlmeval(module: object) -> None:
    """Our VLMEvalKit datasets into `vlmeval.dataset` (a failure: one warning line, VLMEvalKit runs without them)."""
    import importlib

    try:
        importlib.import_module(VLMEVAL_REGISTER).register()
    except Exception as exc:  # noqa: BLE001
        _warn(f"could not register emo_tasks' datasets in {VLMEVAL_TARGET} ({type(exc).__name__}: {exc})")


def _after_import() -> dict:
    """module name -> what to do right after it is imported (read when used: tests point the names elsewhere)."""
    return {TARGET: _patch_quietly, VLMEVAL_TARGET: _register_vlmeval}


class _PostImportFinder:
    """Answers for `lmms_eval.tasks` and `vlmeval.dataset` only, once each: takes the spec the other finders give
    and wraps its loader; leaves sys.meta_path when both have been seen."""

    marker = _MARK

    def __init__(self) -> None:
        self.pending: set = set()
        self.busy = False

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if fullname not in self.pending or self.busy:
            return None
        try:
            self.pending.discard(fullname)
            if not self.pending:
                uninstall()
            self.busy = True
            try:
                spec = None
                for finder in list(sys.meta_path):
                    if finder is self:
                        continue
                    find = getattr(finder, "find_spec", None)
                    if find is not None:
                        spec = find(fullname, path, target)
                        if spec is not None:
                            break
            finally:
                self.busy = False
            if spec is None:
                return None  # not installed here: the import fails as it would without us
            loader = spec.loader
            if loader is None or not hasattr(loader, "exec_module"):
                _warn(f"no loader with exec_module for {fullname}")
                return spec
            original = loader.exec_module
            after = _after_import().get(fullname, _patch_quietly)

            def exec_module(module: object) -> None:
                try:
                    original(module)
                finally:
                    # The loader object is left as it was found, whatever happens.
                    loader.__dict__.pop("exec_module", None)
                after(module)

            loader.exec_module = exec_module
            return spec
        except Exception as exc:  # noqa: BLE001 - returning None lets the normal import go ahead
            _warn(f"{type(exc).__name__}: {exc}")
            return None


def uninstall() -> None:
    """Remove our finder(s) from sys.meta_path."""
    sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "marker", None) != _MARK]


def install() -> None:
    """Arrange for TaskManager to see emo_tasks (and VLMEvalKit our datasets): now for a module already loaded,
    else when it gets imported."""
    try:
        if not enabled():
            return
        module = sys.modules.get(TARGET)
        if module is not None and hasattr(module, "TaskManager"):
            _patch_quietly(module)
        if sys.modules.get(VLMEVAL_TARGET) is not None:
            _register_vlmeval(sys.modules[VLMEVAL_TARGET])
        waiting = {name for name in _after_import() if name not in sys.modules}
        if not waiting:
            return
        finder = next((f for f in sys.meta_path if getattr(f, "marker", None) == _MARK), None)
        if finder is None:
            finder = _PostImportFinder()
            sys.meta_path.insert(0, finder)
        finder.pending |= waiting
    except Exception as exc:  # noqa: BLE001 - this runs in every interpreter of the environment
        _warn(f"{type(exc).__name__}: {exc}")


install()
