"""Exists for lmms-eval's `LMMS_EVAL_PLUGINS=emo_tasks` (deprecated upstream), which imports `<plugin>.models`.

lmms-eval 0.7.3 reads `AVAILABLE_MODELS` (model name -> class name in `emo_tasks.models.<name>`) from it and
fails if the module or the attribute is missing. emo-tasks ships benchmarks, not model backends, so it is empty.
`omni.py` holds what lmms-eval's Qwen-Omni classes need from the hooks to hear a video's audio.
"""

from __future__ import annotations

AVAILABLE_MODELS: dict[str, str] = {}
