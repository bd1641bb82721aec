"""MME-Emotion's multi-agent judge on the shared engine: step agent -> (audio agent) -> multimodal judge.

Runs in the aggregation (rank 0) or the judge stage, as one cached pipeline through `judges/`.  It only judges:
every sample ends as a `Judgement` holding what the agents answered and what that parsed to, or the stage and
reason it failed at; turning judgements into numbers is `scoring.score_sample`'s job.  Everything it needs (judge
protocol, clue mode, the role models, the engine settings) comes in through `MMESettings`: nothing here reads the
environment.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from judges import (
    AudioPart,
    BatchStats,
    JudgeRequest,
    VideoFramesPart,
    get_engine,
    text_message,
    user_message,
)
from judges.engine import Lane, gather_all, progress_bar
from judges.filehash import configure_digest_store
from judges.frames import configure_frame_cache, prerender
from judges.media import hash_files

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


# ------------------------------------------------------------------------------------------- the requests
# One builder per agent, used by both `judge_samples` (the real run) and `plan` (the dry run), so that the dry run's
# requests, and so their cache keys, are exactly the ones a run sends.
def step_request(record: dict[str, Any], settings: MMESettings) -> JudgeRequest:
    """The step agent's request for one record (doc + answer): the answer only (no question, no video), official
    wording."""
    guarded = settings.judge_protocol == "guarded"
    return JudgeRequest(
        messages=step_messages(spec_for(record["mme_task"]), record["answer"], settings.judge_protocol),
        role="step",
        model=settings.model("step"),
        validate=step_validator() if guarded else None,
        sample_id=f"{record['mme_task']}:{record['row']}",
    )


def audio_request(record: dict[str, Any], settings: MMESettings) -> JudgeRequest:
    """The live audio agent's request for one record: the clip's audio track (16 kHz mono WAV, extracted when
    sent)."""
    path = record["video_path"]
    return JudgeRequest(
        messages=[
            user_message(
                audio_prompt(spec_for(record["mme_task"])),
                AudioPart(
                    source=lambda p=path: _wav(p),
                    format="wav",
                    identity=_identity(path, record["video_id"]) + ":audio16k",
                ),
            )
        ],
        role="audio",
        model=settings.model("audio"),
        sample_id=f"{record['mme_task']}:{record['row']}",
    )


def judge_request(
    record: dict[str, Any],
    settings: MMESettings,
    *,
    step_text: str,
    n_steps: int,
    audio_clue: str,
    frames: VideoFramesPart | None = None,
) -> JudgeRequest:
    """The multimodal judge's request for one record: frames (1 fps, first 10), audio clue, label(s), step text."""
    spec = spec_for(record["mme_task"])
    text = judge_text(
        spec,
        audio_clue=audio_clue,
        ground_truth=record["label"],
        steps_text=step_text,
        n_steps=n_steps,
        judge_protocol=settings.judge_protocol,
    )
    frames = frames_part(record) if frames is None else frames
    guarded = settings.judge_protocol == "guarded"
    return JudgeRequest(
        messages=[text_message("system", protocol()["judge_system"]), user_message(text, frames)],
        role="judge",
        model=settings.model("judge"),
        validate=score_validator(n_steps if guarded else None),
        sample_id=f"{record['mme_task']}:{record['row']}",
    )


def frames_part(record: dict[str, Any]) -> VideoFramesPart:
    """The judge's view of a record's video: one frame per second, the first ten (the official sampling)."""
    return VideoFramesPart(
        record["video_path"],
        interval_s=FRAME_INTERVAL_S,
        max_frames=MAX_FRAMES,
        identity=_identity(record["video_path"], record["video_id"]),
    )


#: Rows in the judge pipeline at once: this many per concurrency slot, at least ROW_WINDOW_MIN (`judge_groups`).
ROW_WINDOW_PER_SLOT = 8
ROW_WINDOW_MIN = 512

#: The judge's frame sampling (official: one frame per second, the first ten).
FRAME_INTERVAL_S = 1.0
MAX_FRAMES = 10


# ------------------------------------------------------------------------------------------------ the run
def judge_samples(
    records: Sequence[dict[str, Any]],
    settings: MMESettings,
    *,
    progress: bool | None = None,
    desc: str = "mme_emotion",
    stats: dict[str, BatchStats] | None = None,
) -> list[Judgement]:
    """The full pipeline over one task's (or several tasks') records (doc + answer); see `judge_groups`.

    `stats`, when given, receives the accounting by agent: "step", "audio" (live clues only), "judge"."""
    (judgements,) = judge_groups(
        [records], settings, progress=progress, descs=[desc], stats=None if stats is None else [stats]
    )
    return judgements


#: What each agent's progress bar and log line say.
_AGENT_WORDS = {"step": "step agent", "audio": "audio clues", "judge": "judge"}


def judge_groups(
    groups: Sequence[Sequence[dict[str, Any]]],
    settings: MMESettings,
    *,
    progress: bool | None = None,
    descs: Sequence[str] | None = None,
    stats: Sequence[dict[str, BatchStats]] | None = None,
) -> list[list[Judgement]]:
    """Judge several groups of records (tasks) in one pipeline: each record goes step agent -> (audio agent) ->
    judge as soon as its previous agent answered, every group and agent sharing the concurrency slots.

    Why: judged as batches, one agent after another and one task after another, the slots drain at the end of
    every batch and the next one starts cold (16 times for the 8 tasks).  The requests are the same ones a batch
    would send, and each group's per-agent accounting (`stats[g]`) is what a batch over that group reports.
    The judgements come back per group, in the records' order."""
    descs = list(descs) if descs is not None else ["mme_emotion"] * len(groups)
    # a second judge model, a changed prompt or a cold answer cache then decodes no video again
    configure_frame_cache(settings.frame_cache_dir, settings.frame_cache_max_bytes)
    configure_digest_store(settings.common.digest_store)  # hashes of unchanged videos from earlier runs
    # the videos' content identities (whole-file hashes) and their frames, in the background and in pipeline order:
    # a row's judge request waits (outside the slots) for its own video only, and the step agent, which needs no
    # video, starts at once (hashing 6,500 videos first held the first request back by 1.5-3 s)
    stop_media = threading.Event()  # set when the pipeline ends: a failed run stops hashing and queueing renders
    media = _prepare_media(groups, settings, stop_media)
    engine = get_engine(settings.engine)
    roles = ["step", "audio", "judge"] if settings.audio_clues == "live" else ["step", "judge"]
    total = sum(len(g) for g in groups)
    show = engine.progress if progress is None else progress
    title = descs[0] if len(groups) == 1 else f"mme_emotion ({len(groups)} tasks)"
    bars = {role: progress_bar(total, f"{title} {_AGENT_WORDS[role]}", show) for role in roles}
    shared: dict = {}  # a request two tasks ask is sent once, the later asker counting a cache hit
    lanes = [
        {
            role: engine.lane(f"{desc} {_AGENT_WORDS[role]}", expected=len(group), bar=bars[role], shared=shared)
            for role in roles
        }
        for desc, group in zip(descs, groups, strict=True)
    ]
    judgements = [[_judgement(r) for r in group] for group in groups]

    async def one(lane: dict[str, Lane], record: dict[str, Any], j: Judgement, part: Future) -> None:
        async with window:
            await agents(lane, record, j, part)

    async def agents(lane: dict[str, Lane], record: dict[str, Any], j: Judgement, part: Future) -> None:
        # 1. step agent: the answer only (no question, no video), official wording
        res = await lane["step"].ask(step_request(record, settings))
        j.cached["step_agent"] = res.cached
        j.step_text = res.text
        if not res.ok:
            j.fail("step_agent", res.error, res.detail)
        else:
            j.steps = list(parse_steps(res.text).steps)
        # the video's identity and frames part (hashed, and handed to the render pool, by `_prepare_media`)
        frames: VideoFramesPart = await asyncio.wrap_future(part)
        # 2. audio clues: the released file, or live from the clip's audio track
        if "audio" in lane:
            if not j.ok:
                bars["audio"].update(1)
            else:
                res = await lane["audio"].ask(audio_request(record, settings))
                j.cached["audio_clue"] = res.cached
                if res.ok:
                    j.audio_clue = res.text
                else:
                    j.fail("audio_clue", res.error, res.detail)
        # 3. the multimodal judge: frames (1 fps, first 10), audio clue, label(s), the step text
        if not j.ok:
            bars["judge"].update(1)
            return
        request = judge_request(
            record,
            settings,
            step_text=j.step_text or "",
            n_steps=len(j.steps),
            audio_clue=j.audio_clue or "",
            frames=frames,
        )
        res = await lane["judge"].ask(request)
        j.cached["judge"] = res.cached
        j.judge_text = res.text
        if not res.ok:
            j.fail("judge", res.error, res.detail)
            return
        parsed = parse_scores(res.text)
        if not parsed.ok:  # only reachable without a validator; kept for safety
            j.fail("judge", f"score_{parsed.status.value}", (res.text or "")[:300])
            return
        j.ratings = [(r.numerator, r.denominator) for r in parsed.ratings]

    # Rows enter the pipeline a window at a time, in order.  Why: when the step answers come from the cache (a
    # re-judge), every row's step answer arrived at once and every row's judge request was built and looked up
    # before the first one was sent (1.5 s of 6,500 rows); a window of many times the concurrency keeps the slots
    # as full as before and sends the first requests at once.  The requests, and so every number, are the same.
    window_size = max(ROW_WINDOW_MIN, ROW_WINDOW_PER_SLOT * engine.endpoint.concurrency)
    window: asyncio.Semaphore

    async def everything() -> None:
        nonlocal window
        window = asyncio.Semaphore(window_size)
        await gather_all(
            [
                one(lane, record, j, part)
                for lane, group, js, ps in zip(lanes, groups, judgements, media, strict=True)
                for record, j, part in zip(group, js, ps, strict=True)
            ]
        )

    try:
        engine.run_pipeline(everything())
    finally:
        stop_media.set()
        for bar in bars.values():
            bar.close()
    for g, lane in enumerate(lanes):
        for role in roles:
            batch = lane[role].finish()
            if stats is not None:
                stats[g][role] = batch
    return judgements


#: Videos hashed and handed to the render pool at a time by `_prepare_media`.
MEDIA_CHUNK = 64


def _prepare_media(
    groups: Sequence[Sequence[dict[str, Any]]], settings: MMESettings, stop: threading.Event
) -> list[list[Future]]:
    """Per record, a future of its `frames_part`: in a thread of its own, a chunk at a time in pipeline order, the
    videos are hashed (several at once: `hash_files`, memo and digest store first), their parts built and their
    frames queued for the render pool (`prerender`: decoded in other processes while the step agent works).
    An error fails every part not yet made, so the pipeline raises it.  `stop` set (the pipeline ended, say on an
    error): no further chunk is hashed or rendered for a run that is gone."""
    futures = [[Future() for _ in group] for group in groups]
    order = [(f, r) for fs, group in zip(futures, groups, strict=True) for f, r in zip(fs, group, strict=True)]

    def work() -> None:
        try:
            for start in range(0, len(order), MEDIA_CHUNK):
                if stop.is_set():
                    return
                chunk = order[start : start + MEDIA_CHUNK]
                hash_files(r["video_path"] for _, r in chunk)
                parts = [(f, frames_part(r)) for f, r in chunk]
                prerender((p for _, p in parts), settings.render_workers)
                for f, p in parts:
                    f.set_result(p)
        except BaseException as exc:  # noqa: BLE001 - handed to the pipeline, which raises it
            for f, _ in order:
                if not f.done():
                    f.set_exception(exc)

    threading.Thread(target=work, name="emo-mme-media", daemon=True).start()
    return futures


def _identity(path: str, video_id: str) -> str:
    """The video's content identity (`data.video_identity`: whole-file hash, memoised per process) for the cache
    keys of its frames, its judge requests and its live audio clue."""
    try:
        return video_identity(path, video_id)
    except OSError:  # the request will fail with the file's name when its frames are rendered
        return f"{video_id}:missing"


def judged_identity(record: Mapping[str, Any]) -> str | None:
    """The content identity the judge named a record's video by (`_identity`), None without a video path."""
    path = record.get("video_path")
    return _identity(path, record["video_id"]) if path else None


def _wav(path: str) -> bytes:
    from judges.media import extract_audio_wav

    return extract_audio_wav(path)
