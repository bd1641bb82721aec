"""MVEI in VLMEvalKit: datasets `EmoMVEI` (the 3,086 pairs) and `EmoMVEI_sample` (the bundled sample).

The same pairs, prompt and scoring as the lmms-eval tasks `mvei` / `mvei_sample` (`emo_tasks.vlmeval.images`
lays the task's hooks out for VLMEvalKit).  The paper asks each pair three times and keeps the majority: in
lmms-eval that is `repeats: 3`; VLMEvalKit asks the model once per row, so each pair is three rows (index =
3 * doc_id + k) and `evaluate` joins them again.  Sampling is the model's setting in VLMEvalKit (API models
default to temperature 0), not the dataset's: when all three answers are identical on every pair, the results
say that sampling was off (`sampling_off`), as self-consistency 100 % means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from emo_tasks.vlmeval import images

REPEATS = 3
SAMPLING_OFF = (
    "the three answers of every pair are identical: the model did not sample (VLMEvalKit's API models use "
    "temperature 0 unless --temperature is given); MVEI's protocol asks for sampled answers, so self_consistency "
    "is 100 % by construction and the majority is a single answer"
)


def _flags(lines: list[dict[str, Any]]) -> dict[str, Any]:
    same = [len(set(line["filtered_resps"])) == 1 for line in lines]
    off = bool(same) and all(same)
    return {"sampling_off": off, "notes": [SAMPLING_OFF] if off else []}


TASK = images.ImageTask(
    names={"EmoMVEI": ("mvei", "mvei/benchmark"), "EmoMVEI_sample": ("mvei_sample", "mvei/sample")},
    hooks="emo_tasks.mvei.hooks",
    primary="acc_total",
    repeats=REPEATS,
    columns=("pair_id", "statement", "dimension", "label"),
    flags=_flags,
)


def prediction_rows(dataset: str, env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    return images.prediction_rows(TASK, dataset, env)


def score_predictions(
    dataset: str, predictions: Sequence[Mapping[str, Any]], env: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    return images.score(TASK, dataset, predictions, env)


@cache
def dataset_class() -> type:
    """The VLMEvalKit dataset class (built on first use: it imports vlmeval)."""
    return images.dataset_class(TASK, "EmoMVEI", "MVEI (emo_tasks): is an emotion statement Correct for an image?")
