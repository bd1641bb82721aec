"""MME-Emotion's multi-agent judge on the shared engine: step agent -> (audio agent) -> multimodal judge.

Runs once per task in the aggregation (rank 0), as concurrent cached batches through `judges/`.  Every sample
ends as `scored`, `judge_failed` (with the stage and reason) or, in offline mode, `offline`: nothing is dropped
without a count.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from judges import (
    AudioPart,
    JudgeRequest,
    VideoFramesPart,
    parse_scores,
    parse_steps,
    run_batch,
    score_validator,
    step_validator,
    text_message,
    user_message,
)
from judges.config import EndpointConfig, JudgeConfigError

from . import scoring
from .data import video_identity
from .protocol import (
    DEFAULT_JUDGE_PROTOCOL,
    JUDGE_PROTOCOLS,
    audio_prompt,
    judge_text,
    protocol,
    spec_for,
    step_messages,
)

JUDGE_MODES = ("auto", "api", "offline")
CLUE_MODES = ("released", "live")


def judge_mode(source: str, env: dict[str, str] | None = None) -> str:
    """`api` or `offline` for this run; raises JudgeConfigError (saying what to set) when neither can work.

    EMO_JUDGE=offline: judge-free scoring.  EMO_JUDGE=api: the judge endpoint must be configured.  Unset (auto):
    the judge when an endpoint is configured; otherwise offline for the bundled sample, an error for the benchmark.
    """
    env = dict(os.environ) if env is None else env
    mode = (env.get("EMO_JUDGE") or "auto").strip().lower()
    if mode not in JUDGE_MODES:
        raise JudgeConfigError(f"EMO_JUDGE must be one of {', '.join(JUDGE_MODES)}, got {mode!r}")
    if mode == "offline":
        return "offline"
    configured = True
    try:
        EndpointConfig.from_env(env).check_usable()
    except JudgeConfigError:
        configured = False
    if configured:
        return "api"
    if mode == "auto" and source == "sample":
        return "offline"
    raise JudgeConfigError(
        "MME-Emotion is scored by an LLM judge and none is configured. Set OPENAI_API_KEY (api.openai.com), or "
        "OPENAI_BASE_URL (+ OPENAI_API_KEY) for a vLLM/SGLang/other OpenAI-compatible server, or API_TYPE=azure "
        "with AZURE_ENDPOINT and AZURE_API_KEY. Models: EMO_STEP_MODEL (default gpt-4.1-2025-04-14) and "
        "EMO_JUDGE_MODEL (default gpt-4o-2024-11-20). For a judge-free smoke test set EMO_JUDGE=offline "
        "(recognition by label matching only; not comparable with the paper)."
    )


def judge_protocol(env: dict[str, str] | None = None) -> str:
    """EMO_MME_JUDGE_PROTOCOL: `guarded` (default) or `official` (the original prompt, no rating-count check)."""
    env = dict(os.environ) if env is None else env
    value = (env.get("EMO_MME_JUDGE_PROTOCOL") or DEFAULT_JUDGE_PROTOCOL).strip().lower()
    if value not in JUDGE_PROTOCOLS:
        raise JudgeConfigError(f"EMO_MME_JUDGE_PROTOCOL must be one of {', '.join(JUDGE_PROTOCOLS)}, got {value!r}")
    return value


def clue_mode(env: dict[str, str] | None = None) -> str:
    """EMO_MME_AUDIO_CLUES: `released` (default: the published Qwen2-Audio clues) or `live` (EMO_AUDIO_MODEL)."""
    env = dict(os.environ) if env is None else env
    value = (env.get("EMO_MME_AUDIO_CLUES") or "released").strip().lower()
    if value not in CLUE_MODES:
        raise JudgeConfigError(f"EMO_MME_AUDIO_CLUES must be one of {', '.join(CLUE_MODES)}, got {value!r}")
    return value


@dataclass
class Outcome:
    """What happened to one sample."""

    task: str
    row: int
    video_id: str
    label: str
    answer: str
    status: str = "pending"  # scored | judge_failed | offline
    failed_stage: str | None = None  # audio_clue | step_agent | judge
    failure_reason: str | None = None
    failure_detail: str | None = None
    audio_clue: str | None = None
    step_text: str | None = None
    steps: list[str] = field(default_factory=list)
    judge_text: str | None = None
    ratings: list[list[int]] = field(default_factory=list)
    recognition: float | None = None
    reasoning: float | None = None
    n_steps: int | None = None
    strict_recognition: float | None = None
    predicted_labels: list[str] = field(default_factory=list)
    cached: dict[str, bool] = field(default_factory=dict)

    def fail(self, stage: str, reason: str | None, detail: str | None) -> None:
        self.status, self.failed_stage, self.failure_reason, self.failure_detail = "judge_failed", stage, reason, detail

    @property
    def score(self) -> scoring.SampleScore | None:
        if self.status != "scored" or self.recognition is None:
            return None
        return scoring.SampleScore(self.recognition, self.reasoning or 0.0, self.n_steps or 0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _outcome(record: dict[str, Any]) -> Outcome:
    return Outcome(
        task=record["mme_task"],
        row=int(record["row"]),
        video_id=record["video_id"],
        label=record["label"],
        answer=record["answer"],
        audio_clue=record.get("audio_clue"),
    )


def offline_outcomes(records: Sequence[dict[str, Any]]) -> list[Outcome]:
    """EMO_JUDGE=offline: recognition by label matching (scoring.offline_recognition); no reasoning score."""
    outcomes = []
    for record in records:
        spec = spec_for(record["mme_task"])
        out = _outcome(record)
        match = scoring.offline_recognition(record["answer"], record["label_set"], record["labels"], spec.multi_label)
        out.status = "offline"
        out.recognition = match.value
        out.predicted_labels = list(match.predicted)
        out.strict_recognition = (
            scoring.strict_recognition(match.correct, match.n_gold, len(match.predicted))
            if spec.multi_label
            else match.value
        )
        outcomes.append(out)
    return outcomes


def judge_outcomes(
    records: Sequence[dict[str, Any]],
    *,
    protocol_name: str | None = None,
    clues: str | None = None,
    progress: bool | None = None,
    desc: str = "mme_emotion",
) -> list[Outcome]:
    """The full pipeline over one task's (or several tasks') records, as concurrent batches."""
    protocol_name = protocol_name or judge_protocol()
    clues = clues or clue_mode()
    guarded = protocol_name == "guarded"
    outcomes = [_outcome(r) for r in records]
    specs = [spec_for(r["mme_task"]) for r in records]

    # 1. step agent: the answer only (no question, no video), official wording
    step_reqs = [
        JudgeRequest(
            messages=step_messages(spec, r["answer"], protocol_name),
            role="step",
            validate=step_validator() if guarded else None,
            sample_id=f"{r['mme_task']}:{r['row']}",
        )
        for spec, r in zip(specs, records, strict=True)
    ]
    for out, res in zip(outcomes, run_batch(step_reqs, desc=f"{desc} step agent", progress=progress), strict=True):
        out.cached["step_agent"] = res.cached
        if not res.ok:
            out.fail("step_agent", res.error, res.detail)
            out.step_text = res.text
            continue
        out.step_text = res.text
        parsed = parse_steps(res.text)
        out.steps = list(parsed.steps)

    # 2. audio clues: the released file, or live from the clip's audio track
    if clues == "live":
        live_idx = [i for i, o in enumerate(outcomes) if o.status == "pending"]
        clue_reqs = []
        for i in live_idx:
            path = records[i]["video_path"]
            clue_reqs.append(
                JudgeRequest(
                    messages=[
                        user_message(
                            audio_prompt(specs[i]),
                            AudioPart(
                                source=lambda p=path: _wav(p),
                                format="wav",
                                identity=_identity(path, records[i]["video_id"]) + ":audio16k",
                            ),
                        )
                    ],
                    role="audio",
                    sample_id=f"{records[i]['mme_task']}:{records[i]['row']}",
                )
            )
        for i, res in zip(live_idx, run_batch(clue_reqs, desc=f"{desc} audio clues", progress=progress), strict=True):
            outcomes[i].cached["audio_clue"] = res.cached
            if res.ok:
                outcomes[i].audio_clue = res.text
            else:
                outcomes[i].fail("audio_clue", res.error, res.detail)

    # 3. the multimodal judge: frames (1 fps, first 10), audio clue, label(s), the step text
    judge_idx = [i for i, o in enumerate(outcomes) if o.status == "pending"]
    judge_reqs = []
    proto = protocol()
    for i in judge_idx:
        out, spec, record = outcomes[i], specs[i], records[i]
        n_steps = len(out.steps)
        text = judge_text(
            spec,
            audio_clue=out.audio_clue or "",
            ground_truth=record["label"],
            steps_text=out.step_text or "",
            n_steps=n_steps,
            judge_protocol=protocol_name,
        )
        frames = VideoFramesPart(
            record["video_path"], interval_s=1.0, max_frames=10, identity=_identity(record["video_path"], out.video_id)
        )
        judge_reqs.append(
            JudgeRequest(
                messages=[text_message("system", proto["judge_system"]), user_message(text, frames)],
                role="judge",
                validate=score_validator(n_steps if guarded else None),
                sample_id=f"{out.task}:{out.row}",
            )
        )
    for i, res in zip(judge_idx, run_batch(judge_reqs, desc=f"{desc} judge", progress=progress), strict=True):
        out, spec = outcomes[i], specs[i]
        out.cached["judge"] = res.cached
        out.judge_text = res.text
        if not res.ok:
            out.fail("judge", res.error, res.detail)
            continue
        parsed = parse_scores(res.text)
        if not parsed.ok:  # only reachable without a validator; kept for safety
            out.fail("judge", f"score_{parsed.status.value}", (res.text or "")[:300])
            continue
        values = parsed.values
        score = scoring.score_sample(values)
        assert score is not None
        out.status = "scored"
        out.ratings = [[r.numerator, r.denominator] for r in parsed.ratings]
        out.recognition, out.reasoning, out.n_steps = score.recognition, score.reasoning, score.steps
        last_step = out.steps[-1] if out.steps else (out.step_text or "")
        out.predicted_labels = scoring.find_labels(last_step, records[i]["label_set"])
        if spec.last_step_rule == "fraction":
            last = parsed.ratings[-1]
            out.strict_recognition = scoring.strict_recognition(
                last.numerator, last.denominator, len(out.predicted_labels)
            )
        else:
            out.strict_recognition = score.recognition
    return outcomes


def _identity(path: str, video_id: str) -> str:
    try:
        return video_identity(path, video_id)
    except OSError:  # the request will fail with the file's name when its frames are rendered
        return f"{video_id}:missing"


def _wav(path: str) -> bytes:
    from judges.media import extract_audio_wav

    return extract_audio_wav(path)
