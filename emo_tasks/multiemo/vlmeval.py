"""MultiEmo-Bench in VLMEvalKit: datasets `EmoMultiEmo` (10,344 images) and `EmoMultiEmo_sample` (the sample).

The same rows, prompt and scoring as the lmms-eval tasks `multiemo` / `multiemo_sample`: one row per (image,
emotion), the task's per-emotion question, its score parser and metrics (`emo_tasks.vlmeval.images`).  Greedy
decoding as in the task's YAML (temperature 0) is also VLMEvalKit's API default.
"""

from __future__ import annotations

from functools import cache

from emo_tasks.vlmeval import images

TASK = images.ImageTask(
    names={
        "EmoMultiEmo": ("multiemo", "multiemo/benchmark"),
        "EmoMultiEmo_sample": ("multiemo_sample", "multiemo/sample"),
    },
    hooks="emo_tasks.multiemo.hooks",
    primary="precision_ours",
    columns=("image_id", "emotion"),
)


@cache
def dataset_class() -> type:
    """The VLMEvalKit dataset class (built on first use: it imports vlmeval)."""
    return images.dataset_class(TASK, "EmoMultiEmo", "MultiEmo-Bench (emo_tasks): 0-100 score per emotion and image.")
