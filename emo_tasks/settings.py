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
from typing import Any

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """An environment variable holds a value emo-tasks cannot use; the message names it and the accepted values."""


def environ() -> dict[str, str]:
    """A copy of the process environment: the one place emo-tasks reads it (settings are built from the copy)."""
    return dict(os.environ)


def lmms_eval_predict_only() -> bool:
    """Whether this process is `lmms-eval ... --predict_only` (no aggregation will run: a judge is not needed).
    Read from lmms-eval's own call (`lmms_eval_call`), so `-x`, a `--config` entry and the Python API count too;
    `sys.argv` only where no lmms-eval call is on the stack."""
    import sys

    call = lmms_eval_call()
    if call is not None:
        return bool(call.get("predict_only"))
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
    image (pixels) a data file may list, whether media content hashes are kept across runs, whether omni models
    hear the videos' audio."""

    cache_dir: Path
    data_root: Path | None
    progress: bool
    video_remux: bool
    max_image_pixels: int = MAX_IMAGE_PIXELS
    #: `EMO_FILE_HASH_MEMO`: keep the media files' content hashes across runs, by stat signature
    #: (`judges.filehash`); off, every run reads every file it names
    file_hash_memo: bool = True
    #: `EMO_MODEL_AUDIO`: give omni model classes each video's audio (`emo_tasks.models.omni`); off only on purpose
    model_audio: bool = True

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
            model_audio=flag(env, "EMO_MODEL_AUDIO", True),
        )


# ------------------------------------------------------------------------------ lmms-eval flags our tasks refuse
def lmms_eval_call(function: str = "simple_evaluate", module: str = "lmms_eval.evaluator") -> dict[str, Any] | None:
    """The local variables of lmms-eval's `module.function` when it is what loads our task now (read from the call
    stack), None otherwise (`emo-tasks judge`, VLMEvalKit, a bare `TaskManager()`).  Why the stack, not `sys.argv`:
    it holds what lmms-eval really uses, after its aliases (`-n`, `--num_samples`), abbreviations, `--config`
    files, and for the Python API too."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return dict(frame.f_locals)
        frame = frame.f_back
    return None


#: what each refused lmms-eval 0.7.3 flag would do to our tasks, and what to use instead (docs/lmms_eval.md)
REFUSED_FLAGS = {
    "from_log": "--model from_log: lmms-eval 0.7.3's replay reads only the old log format (a .json with args/logs/"
    "model_configs), which 0.7.3 no longer writes (it writes samples_<task>.jsonl), and it replays only the first "
    "of a document's answers (a task may ask several); re-score saved answers with `emo-tasks judge RUN_DIR` "
    "(lmms-eval --predict_only --log_samples first)",
    "repeats": "--repeats/-n/--num_samples {value}: {benchmark} asks {own} answer(s) per document by its protocol; "
    "lmms-eval would replace that count, and scores only the first answer of a document's repeats unless the task "
    "keeps them (its stability metrics need one request per repeat, which our tasks do not make)",
    "num_fewshot": "--num_fewshot {value}: the benchmarks are zero-shot and have no few-shot split (lmms-eval would "
    "draw examples from the test rows themselves)",
    "system_instruction": "--system_instruction: lmms-eval 0.7.3 glues it to the front of the prompt with no "
    "separator for simple model classes and drops it for chat classes (the logged input still shows it); change "
    "the prompt with the task's lmms_eval_specific_kwargs pre_prompt/post_prompt, which every model class gets",
    "apply_chat_template": "--apply_chat_template: each model class applies its own chat template to our prompt; "
    "lmms-eval's would template it a second time (simple classes) or fail (chat classes have no chat_template)",
    "cache_requests": "--cache_requests true|refresh: lmms-eval 0.7.3's request cache loses the requests' "
    "doc_to_messages on the way (chat model classes then fail: 'NoneType' object is not callable), and its key is "
    "the task name and offset only, not the model (a task's prompt may depend on it), --gen_kwargs, the data or "
    "EMO_SUBSET; leave it off (delete is harmless)",
    "use_cache": "--use_cache with EMO_SUBSET: lmms-eval's response cache is keyed by a document's position, which "
    "a subset changes, so it would hand one row's answer to another; use a cache folder per subset, or no cache",
    "max_tokens": "--max_tokens: lmms-eval 0.7.3's budget does not stop a run cleanly: most model classes ignore "
    "it, the claude class answers '' once it is spent (scored as wrong answers); limit cost with --limit or "
    "EMO_SUBSET",
    "launcher_args": "--launcher_args: lmms-eval 0.7.3 stops the judge server it launched before the aggregation, "
    "and this task's judge runs in the aggregation; start the server yourself and point the judge at it "
    "(OPENAI_BASE_URL=http://HOST:PORT/v1, EMO_JUDGE_MODEL=MODEL; docs/judges.md), or run --predict_only and "
    "`emo-tasks judge`",
}


def refuse_lmms_flags(benchmark: str, *, own_repeats: int = 1, judged_in_process: bool = False) -> None:
    """Stop loading a task under lmms-eval flags that would give it wrong numbers (`REFUSED_FLAGS`), before
    inference, naming every such flag at once.  Called from each benchmark's `process_docs` (lmms-eval only);
    `judged_in_process`: the task's judge runs in lmms-eval's aggregation (MME-Emotion, judge mode api)."""
    call = lmms_eval_call()
    if call is None:
        return
    lm = call.get("lm")
    found = []
    if call.get("model") == "from_log" or type(lm).__name__ == "FromLog":
        found.append(REFUSED_FLAGS["from_log"])
    repeats = call.get("repeats") or 1
    if repeats > 1 and repeats != own_repeats:
        found.append(REFUSED_FLAGS["repeats"].format(value=repeats, benchmark=benchmark, own=own_repeats))
    if call.get("num_fewshot"):
        found.append(REFUSED_FLAGS["num_fewshot"].format(value=call["num_fewshot"]))
    for name in ("system_instruction", "max_tokens"):
        if call.get(name) is not None:
            found.append(REFUSED_FLAGS[name])
    if call.get("apply_chat_template"):
        found.append(REFUSED_FLAGS["apply_chat_template"])
    if call.get("cache_requests"):
        found.append(REFUSED_FLAGS["cache_requests"])
    if call.get("use_cache") is not None and _raw(environ(), "EMO_SUBSET"):
        found.append(REFUSED_FLAGS["use_cache"])
    if judged_in_process and (call.get("launcher_args") is not None or call.get("eval_launcher") is not None):
        found.append(REFUSED_FLAGS["launcher_args"])
    if found:
        listed = "\n- ".join(found)
        raise SettingsError(f"{benchmark} refuses lmms-eval flags that would give it wrong numbers:\n- {listed}")


def refuse_power_analysis(reason: str) -> None:
    """Skip a task in `lmms-eval --power-analysis` (`lmms_eval.cli.power_utils.collect_task_sizes`, which prints
    `reason` and goes on) whose documents are not the independent 0/1 questions that analysis assumes."""
    if lmms_eval_call("collect_task_sizes", "lmms_eval.cli.power_utils") is not None:
        raise SettingsError(reason)
