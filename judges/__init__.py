"""emo_tasks' shared judge engine: one client, one cache, one retry policy, one place that parses judge text.

Not the unrelated PyPI package also called `judges`: both install a top-level `judges` module, so they cannot
live in one environment.  Importing this package checks for that clash and fails loudly (see README).
Importing it opens no connection and does not import openai, PIL or lmms-eval.
"""

from __future__ import annotations

import importlib.metadata as _md

#: Marker that `emo_tasks` checks to be sure `import judges` found this package, not the PyPI one.
__emo_tasks_judges__ = True
__version__ = "0.1.0"


class JudgesPackageClash(ImportError):
    """The unrelated PyPI distribution `judges` is installed beside emo-tasks' `judges` package."""


def _check_clash() -> None:
    try:
        _md.distribution("judges")
    except _md.PackageNotFoundError:
        return
    raise JudgesPackageClash(
        "The PyPI package 'judges' (an unrelated LLM-judge library) is installed in this environment. It uses "
        "the same import name `judges` as emo-tasks' judge engine, so one overwrites the other. Use separate "
        "environments, or run: pip uninstall -y judges && pip install --force-reinstall --no-deps emo-tasks"
    )


_check_clash()

from .audit import audit_record, write_audit_jsonl  # noqa: E402
from .cache import JudgeCache  # noqa: E402
from .config import EndpointConfig, EngineSettings, JudgeConfigError, MediaSettings, model_for_role  # noqa: E402
from .endpoint import JudgeModelNotFound  # noqa: E402
from .engine import AgentsRun, JudgeEngine, Lane, get_engine, reset_engine, run_agents, run_batch  # noqa: E402
from .frames import media_caches, prepare_media  # noqa: E402
from .media import AudioPart, ImagePart, VideoFramesPart, extract_audio_wav, sample_video_frames  # noqa: E402
from .reasoning import answer_part, split_reasoning  # noqa: E402
from .request import BatchResult, BatchStats, JudgeRequest, JudgeResult, text_message, user_message  # noqa: E402

__all__ = [
    "AgentsRun",
    "AudioPart",
    "VideoFramesPart",
    "extract_audio_wav",
    "sample_video_frames",
    "BatchResult",
    "BatchStats",
    "EndpointConfig",
    "EngineSettings",
    "ImagePart",
    "JudgeCache",
    "JudgeConfigError",
    "JudgeEngine",
    "JudgeModelNotFound",
    "JudgeRequest",
    "JudgeResult",
    "JudgesPackageClash",
    "Lane",
    "MediaSettings",
    "answer_part",
    "audit_record",
    "get_engine",
    "media_caches",
    "model_for_role",
    "prepare_media",
    "reset_engine",
    "run_agents",
    "run_batch",
    "split_reasoning",
    "text_message",
    "user_message",
    "write_audit_jsonl",
]
