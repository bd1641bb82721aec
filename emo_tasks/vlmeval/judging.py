"""A judged benchmark's evaluation inside VLMEvalKit: its `evaluate` writes the answers as a predict-only run folder
(`runfolder.write_run`), then runs the judge stage over it (`emo_tasks.judging.stage.judge_run`, the code `emo-tasks
judge` runs), so the answers are proven to be the run's and judged exactly as an lmms-eval run's are, and a judge
failure loses nothing: the folder stays, and `emo-tasks judge FOLDER` judges it later.  `EMO_JUDGE=defer` stops after
the folder is written.

VLMEvalKit's judge settings (`judge_kwargs`, from --judge, --judge-base-url, --judge-key, --judge-api-nproc,
--judge-retry, --judge-timeout and --judge-args) map onto ours (`judge_env`); what they leave out keeps our settings
(the environment, then the paper's judge models).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: --judge-args keys naming one judge role's model (MME-Emotion has two judging agents and an audio one).
ROLE_KWARGS = {"step_model": "EMO_STEP_MODEL", "judge_model": "EMO_JUDGE_MODEL", "audio_model": "EMO_AUDIO_MODEL"}


def judge_env(env: Mapping[str, str], judge_kwargs: Mapping[str, Any]) -> dict[str, str]:
    """The environment our judge settings are read from, with VLMEvalKit's `judge_kwargs` in force: `model` (one
    judge, as VLMEvalKit has: both the step and the judge agent; `step_model` / `judge_model` / `audio_model` in
    --judge-args name each role), `api_base` (its `.../chat/completions` URL: an OpenAI-compatible endpoint),
    `key`, `nproc` (requests in flight), `retry` (tries per request), `timeout` (seconds per request)."""
    out = dict(env)
    jk = {k: v for k, v in judge_kwargs.items() if v is not None and v != ""}
    if "model" in jk:
        out["EMO_STEP_MODEL"] = out["EMO_JUDGE_MODEL"] = str(jk["model"])
    for name, var in ROLE_KWARGS.items():
        if name in jk:
            out[var] = str(jk[name])
    if "api_base" in jk:
        out.update(API_TYPE="openai", OPENAI_BASE_URL=str(jk["api_base"]))
        out.pop("OPENAI_API_URL", None)
    if "key" in jk:
        out["OPENAI_API_KEY"] = str(jk["key"])
    if "nproc" in jk:
        out["EMO_JUDGE_CONCURRENCY"] = str(max(1, int(jk["nproc"])))
    if "retry" in jk:
        out["EMO_JUDGE_MAX_TRIES"] = str(max(1, int(jk["retry"])))
    if "timeout" in jk:
        out["EMO_JUDGE_TIMEOUT"] = str(float(jk["timeout"]))
    return out


def judge_folder(
    folder: Path, tasks: Sequence[str], shown: str, env: Mapping[str, str], judge_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """Judge the run folder's answers with the judge stage (`emo-tasks judge FOLDER`, in this process) and return
    the metrics of `shown` (one of the run's `tasks`, or their group) from its judged results;
    `{"judging_deferred": True}` under EMO_JUDGE=defer.  A refusal or
    an error raises (RuntimeError) naming the folder: VLMEvalKit logs it, and the answers stay there."""
    from emo_tasks.judging import stage

    if (env.get("EMO_JUDGE") or "").strip().lower() == "defer":
        print(f"emo-tasks: {shown}: judging deferred (EMO_JUDGE=defer): run  emo-tasks judge {folder}", file=sys.stderr)
        return {"judging_deferred": True}
    senv = judge_env(env, judge_kwargs)
    out = stage.judged_dir(folder, stage.judge_setup(stage.stage_env(senv, {}), list(tasks)))  # judge_run's default
    code = stage.judge_run(folder, env=senv, out=out)
    if code != stage.EXIT_OK:
        raise RuntimeError(
            f"{shown}: emo-tasks judge exited {code} (its message is above); the answers are kept in {folder}: "
            f"judge them later with  emo-tasks judge {folder}"
        )
    newest = max(out.glob("*_results.json"), key=lambda p: p.name)
    row = json.loads(newest.read_text(encoding="utf-8"))["results"][shown]
    return {k[: -len(",none")]: v for k, v in row.items() if k.endswith(",none") and "_stderr," not in k}
