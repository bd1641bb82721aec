"""emo_tasks: MME-Emotion, MVEI and MultiEmo-Bench for lmms-eval.

Importing this package is cheap and offline: it only makes sure that `judges` is emo-tasks' own judge engine
and not the unrelated PyPI package of the same name (a clash fails loudly here, with the fix).
"""

from __future__ import annotations

__version__ = "0.1.0"


def _require_own_judges() -> None:
    import judges

    if getattr(judges, "__emo_tasks_judges__", False) is not True:
        where = getattr(judges, "__file__", "?")
        raise ImportError(
            f"`import judges` found {where}, which is not emo-tasks' judge engine (the unrelated PyPI package "
            "'judges' shares the name). Use separate environments, or run: "
            "pip uninstall -y judges && pip install --force-reinstall --no-deps emo-tasks"
        )


_require_own_judges()
