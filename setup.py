"""Ship `emo_tasks-autoregister.pth` at the wheel root, so it lands in site-packages.

All metadata lives in pyproject.toml; this file exists only because setuptools has no declarative way to put a
file at the top of site-packages. The .pth imports `_emo_tasks_autoload` at interpreter start-up, which makes
lmms-eval index our task YAMLs (see that module). Two build paths need it:

* regular wheels (`pip install .`, `python -m build`): `build_py` writes the .pth into build_lib, whose whole
  content becomes the wheel root;
* editable wheels (`pip install -e .`, PEP 660): setuptools assembles those from an "editable strategy" and
  ignores build_lib, so `editable_wheel` wraps that strategy to add the .pth to the editable wheel too.

Either way pip records the file, so `pip uninstall emo-tasks` removes it.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

# Must sort after setuptools' "__editable__.*.pth" (site.py reads .pth files in sorted order): in an editable
# install `_emo_tasks_autoload` is found through the finder that file installs.
PTH_NAME = "emo_tasks-autoregister.pth"
PTH_TEXT = "import _emo_tasks_autoload\n"


class build_py_with_pth(build_py):
    """Also write the .pth into build_lib: bdist_wheel copies build_lib to the wheel root."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            target = Path(self.build_lib, PTH_NAME)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(PTH_TEXT, encoding="utf-8")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if not self.editable_mode:
            outputs.append(str(Path(self.build_lib, PTH_NAME)))
        return outputs


class _StrategyWithPth:
    """Wraps setuptools' editable strategy (finder, static .pth or link tree) and adds our .pth to the wheel."""

    def __init__(self, inner: object, on_written: object) -> None:
        self._inner = inner
        self._on_written = on_written

    def __enter__(self) -> _StrategyWithPth:
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> object:
        return self._inner.__exit__(*exc)

    def __call__(self, wheel: object, files: list[str], mapping: dict[str, str]) -> None:
        self._inner(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_TEXT.encode("utf-8"))
        self._on_written()


class editable_wheel_with_pth(editable_wheel):
    """Editable wheels carry the .pth as well; fails the build loudly if setuptools' internals moved."""

    def _select_strategy(self, *args: object, **kwargs: object) -> object:
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs), self._pth_written)

    def _pth_written(self) -> None:
        self._emo_pth_written = True

    def run(self) -> None:
        self._emo_pth_written = False
        super().run()
        if not self._emo_pth_written:
            raise RuntimeError(
                f"{PTH_NAME} was not added to the editable wheel (setuptools' editable_wheel changed?): "
                "lmms-eval would not find emo-tasks' tasks. Use a regular install (`pip install .`)."
            )


setup(cmdclass={"build_py": build_py_with_pth, "editable_wheel": editable_wheel_with_pth})
