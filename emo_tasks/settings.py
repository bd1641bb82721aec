"""Settings emo-tasks takes from the environment, read and checked in one place.

Why: a typo in an environment variable must stop a run *before inference*, naming the variable, the value and
what is accepted, instead of surfacing after the GPU hours (or silently switching a judge off).  So every
benchmark builds one frozen settings object from `environ()` when its task is loaded (`process_docs`), and passes
it down; no module below reads `os.environ`.  The judge engine's endpoint settings live in `judges.config`, the
engine's own settings module, read the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """An environment variable holds a value emo-tasks cannot use; the message names it and the accepted values."""


def environ() -> dict[str, str]:
    """A copy of the process environment: the one place emo-tasks reads it (settings are built from the copy)."""
    return dict(os.environ)


def lmms_eval_predict_only() -> bool:
    """Whether this process is `lmms-eval ... --predict_only` (no aggregation will run: a judge is not needed)."""
    import sys

    return "--predict_only" in sys.argv


#: `EMO_JUDGE=batch` inside a task run: refused before inference (`refuse_batch_judge`), pointing at the two-stage flow.
BATCH_JUDGE_MESSAGE = (
    "EMO_JUDGE=batch is not a mode of the judge inside lmms-eval (it sends each request at once, never in "
    "batches): run lmms-eval with --predict_only --log_samples (or EMO_JUDGE=defer), then judge the run at the "
    "batch rate with `emo-tasks judge RUN_DIR --batch`"
)


def refuse_batch_judge(env: Mapping[str, str]) -> None:
    """Stop a task load under `EMO_JUDGE=batch` with `BATCH_JUDGE_MESSAGE`.  Why its own check, not the generic
    "not accepted" list: batch judging exists, only not in-process (the judge stage does it, `--batch`), so the
    message names the flow that does it.  Called where each benchmark's task is loaded (`load_task`, lmms-eval's
    `process_docs`); `emo-tasks judge` maps the value to `api` before it loads any task."""
    if (env.get("EMO_JUDGE") or "").strip().lower() == "batch":
        raise SettingsError(BATCH_JUDGE_MESSAGE)


def _raw(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def choice(env: Mapping[str, str], name: str, accepted: Sequence[str], default: str) -> str:
    """`name`'s value, lower-cased, which must be one of `accepted` (unset or empty: `default`)."""
    raw = _raw(env, name)
    if raw is None:
        return default
    value = raw.lower()
    if value not in accepted:
        raise SettingsError(f"{name}={raw!r} is not accepted; use one of: {', '.join(accepted)} (default {default})")
    return value


def number(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    integer: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    """`name` as a number within [minimum, maximum] (unset or empty: `default`)."""
    raw = _raw(env, name)
    if raw is None:
        return default
    bounds = (
        f"a number in [{minimum}, {maximum}]" if minimum is not None and maximum is not None
        else f"a number >= {minimum}" if minimum is not None
        else "a number"
    )  # fmt: skip
    if integer:
        bounds = bounds.replace("a number", "a whole number")
    try:
        value: float = int(raw) if integer else float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not {bounds}; unset it for the default {default}") from None
    if value != value or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise SettingsError(f"{name}={raw!r} is not {bounds}; unset it for the default {default}")
    return value


def flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """An on/off switch: 1/true/yes/on or 0/false/no/off (unset or empty: `default`)."""
    raw = _raw(env, name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise SettingsError(f"{name}={raw!r} is not accepted; use one of: {', '.join(_TRUE + _FALSE)}")


MAX_IMAGE_PIXELS = 150_000_000  # EMO_MAX_IMAGE_PIXELS default (about 12200 x 12200); an image above is a DataError


def max_image_pixels(env: Mapping[str, str] | None = None) -> int:
    """EMO_MAX_IMAGE_PIXELS: the largest image (width x height) a data file may list (`emo_tasks.images`)."""
    env = environ() if env is None else env
    return int(number(env, "EMO_MAX_IMAGE_PIXELS", MAX_IMAGE_PIXELS, integer=True, minimum=1))


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """emo-tasks' cache folder (judge answers, generated samples, remuxed videos, lmms-eval placeholders):
    `EMO_CACHE_DIR`, else the platform's user cache folder + `/emo_tasks`."""
    env = environ() if env is None else env
    if _raw(env, "EMO_CACHE_DIR"):
        return Path(env["EMO_CACHE_DIR"].strip()).expanduser()
    if os.name == "nt" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "emo_tasks" / "Cache"
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "emo_tasks"
    home = Path.home()
    if (home / "Library" / "Caches").is_dir():  # macOS
        return home / "Library" / "Caches" / "emo_tasks"
    return home / ".cache" / "emo_tasks"


@dataclass(frozen=True)
class CommonSettings:
    """What every benchmark shares: where the cache and local data are, progress bars, video remuxing, the largest
    image (pixels) a data file may list, whether media content hashes are kept across runs."""

    cache_dir: Path
    data_root: Path | None
    progress: bool
    video_remux: bool
    max_image_pixels: int = MAX_IMAGE_PIXELS
    #: `EMO_FILE_HASH_MEMO`: keep the media files' content hashes across runs, by stat signature
    #: (`judges.filehash`); off, every run reads every file it names
    file_hash_memo: bool = True

    @property
    def digest_store(self) -> Path | None:
        """Where the content hashes are kept across runs (`<cache>/file_hashes.sqlite3`), None when off."""
        return self.cache_dir / "file_hashes.sqlite3" if self.file_hash_memo else None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CommonSettings:
        env = environ() if env is None else env
        root = _raw(env, "EMO_DATA_ROOT")
        return cls(
            cache_dir=cache_dir(env),
            data_root=Path(root).expanduser() if root else None,
            progress=flag(env, "EMO_PROGRESS", True),
            video_remux=flag(env, "EMO_VIDEO_REMUX", True),
            max_image_pixels=max_image_pixels(env),
            file_hash_memo=flag(env, "EMO_FILE_HASH_MEMO", True),
        )
