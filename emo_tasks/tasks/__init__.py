"""Exists for lmms-eval's `LMMS_EVAL_PLUGINS=emo_tasks` (deprecated upstream); holds no task YAML on purpose.

With that variable set, lmms-eval 0.7.3 resolves `emo_tasks.tasks` to a directory and adds it to the include
paths, and would crash if the package were missing. Our YAMLs live in `emo_tasks/<benchmark>/` and are indexed
without any variable by `_emo_tasks_autoload` (installed via `emo_tasks-autoregister.pth`), which includes the
whole `emo_tasks` directory.
"""
