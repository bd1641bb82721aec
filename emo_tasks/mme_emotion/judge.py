"""MME-Emotion's multi-agent judge on the shared engine: step agent -> (audio agent) -> multimodal judge.

Runs once per task in the aggregation (rank 0), as concurrent cached batches through `judges/`.  It only judges:
every sample ends as a `Judgement` holding what the agents answered and what that parsed to, or the stage and
reason it failed at; turning judgements into numbers is `scoring.score_sample`'s job.  Everything it needs (judge
protocol, clue mode, the role models, the engine settings) comes in through `MMESettings`: nothing here reads the
environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from judges import AudioPart, JudgeRequest, VideoFramesPart, run_batch, text_message, user_message

from .data import video_identity
from .parsers import parse_scores, parse_steps, score_validator, step_validator
from .protocol import audio_prompt, judge_text, protocol, spec_for, step_messages
from .settings import MMESettings


@dataclass
class Judgement:
    """What the judge pipeline made of one sample.

    `ratings`: the judge's `<score>` ratings as (numerator, denominator), in step order.  `failed_stage`
    (audio_clue | step_agent | judge) is None when every stage answered usably.  `cached`: per stage, whether the
    answer came from the judge cache."""

    task: str
    row: int
    video_id: str
    label: str
    answer: str
    audio_clue: str | None = None
    step_text: str | None = None
    steps: list[str] = field(default_factory=list)
    judge_text: str | None = None
    ratings: list[tuple[int, int]] = field(default_factory=list)
    failed_stage: str | None = None
    failure_reason: str | None = None
    failure_detail: str | None = None
    cached: dict[str, bool] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed_stage is None

    def fail(self, stage: str, reason: str | None, detail: str | None) -> None:
        self.failed_stage, self.failure_reason, self.failure_detail = stage, reason, detail


def _judgement(record: dict[str, Any]) -> Judgement:
    return Judgement(
        task=record["mme_task"],
        row=int(record["row"]),
        video_id=record["video_id"],
        label=record["label"],
        answer=record["answer"],
        audio_clue=record.get("audio_clue"),
    )


def judge_samples(
    records: Sequence[dict[str, Any]],
    settings: MMESettings,
    *,
    progress: bool | None = None,
    desc: str = "mme_emotion",
) -> list[Judgement]:
    """The full pipeline over one task's (or several tasks') records (doc + answer), as concurrent batches."""
    protocol_name = settings.judge_protocol
    guarded = protocol_name == "guarded"
    engine = settings.engine
    judgements = [_judgement(r) for r in records]
    specs = [spec_for(r["mme_task"]) for r in records]

    # 1. step agent: the answer only (no question, no video), official wording
    step_reqs = [
        JudgeRequest(
            messages=step_messages(spec, r["answer"], protocol_name),
            role="step",
            model=settings.model("step"),
            validate=step_validator() if guarded else None,
            sample_id=f"{r['mme_task']}:{r['row']}",
        )
        for spec, r in zip(specs, records, strict=True)
    ]
    step_results = run_batch(step_reqs, desc=f"{desc} step agent", progress=progress, settings=engine)
    for j, res in zip(judgements, step_results, strict=True):
        j.cached["step_agent"] = res.cached
        j.step_text = res.text
        if not res.ok:
            j.fail("step_agent", res.error, res.detail)
            continue
        j.steps = list(parse_steps(res.text).steps)

    # 2. audio clues: the released file, or live from the clip's audio track
    if settings.audio_clues == "live":
        live_idx = [i for i, j in enumerate(judgements) if j.ok]
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
                    model=settings.model("audio"),
                    sample_id=f"{records[i]['mme_task']}:{records[i]['row']}",
                )
            )
        clue_results = run_batch(clue_reqs, desc=f"{desc} audio clues", progress=progress, settings=engine)
        for i, res in zip(live_idx, clue_results, strict=True):
            judgements[i].cached["audio_clue"] = res.cached
            if res.ok:
                judgements[i].audio_clue = res.text
            else:
                judgements[i].fail("audio_clue", res.error, res.detail)

    # 3. the multimodal judge: frames (1 fps, first 10), audio clue, label(s), the step text
    judge_idx = [i for i, j in enumerate(judgements) if j.ok]
    judge_reqs = []
    proto = protocol()
    for i in judge_idx:
        j, spec, record = judgements[i], specs[i], records[i]
        n_steps = len(j.steps)
        text = judge_text(
            spec,
            audio_clue=j.audio_clue or "",
            ground_truth=record["label"],
            steps_text=j.step_text or "",
            n_steps=n_steps,
            judge_protocol=protocol_name,
        )
        frames = VideoFramesPart(
            record["video_path"], interval_s=1.0, max_frames=10, identity=_identity(record["video_path"], j.video_id)
        )
        judge_reqs.append(
            JudgeRequest(
                messages=[text_message("system", proto["judge_system"]), user_message(text, frames)],
                role="judge",
                model=settings.model("judge"),
                validate=score_validator(n_steps if guarded else None),
                sample_id=f"{j.task}:{j.row}",
            )
        )
    judge_results = run_batch(judge_reqs, desc=f"{desc} judge", progress=progress, settings=engine)
    for i, res in zip(judge_idx, judge_results, strict=True):
        j = judgements[i]
        j.cached["judge"] = res.cached
        j.judge_text = res.text
        if not res.ok:
            j.fail("judge", res.error, res.detail)
            continue
        parsed = parse_scores(res.text)
        if not parsed.ok:  # only reachable without a validator; kept for safety
            j.fail("judge", f"score_{parsed.status.value}", (res.text or "")[:300])
            continue
        j.ratings = [(r.numerator, r.denominator) for r in parsed.ratings]
    return judgements


def _identity(path: str, video_id: str) -> str:
    try:
        return video_identity(path, video_id)
    except OSError:  # the request will fail with the file's name when its frames are rendered
        return f"{video_id}:missing"


def _wav(path: str) -> bytes:
    from judges.media import extract_audio_wav

    return extract_audio_wav(path)
