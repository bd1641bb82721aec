"""A dry run of MME-Emotion's judge phase: what a run would send, what the cache already answers, and what it costs.

Sends nothing and needs no endpoint or key.  The requests are built by the same functions the real run uses
(`judge.step_request`, `judge.audio_request`, `judge.judge_request`), so their cache keys are the real ones and
`JudgeEngine.lookup` tells exactly which are answered already.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from emo_tasks.judging.batch_plan import BYTES_PER_TOKEN, BatchLine, line_bytes, text_bytes
from judges import JudgeEngine, JudgeRequest, JudgeResult
from judges.media import VideoFramesPart, image_tokens

from .judge import agent_answer, audio_request, judge_request, step_request
from .parsers import parse_steps
from .settings import MMESettings

# What one answer of each agent typically costs in completion tokens (o200k_base), for the dry run's cost when no
# max_tokens bound and no cached answer says better (`emo_tasks.judging.dryrun` prefers either).  Estimates, not
# measurements; `tests/judging/test_dry_run_cost.py` re-derives the first two from protocol.yml.
#: step agent: the protocol's own worked example result (protocol.yml `step_template`, Example 1: five concise
#: steps in `<step>` tags), 120 tokens; the paper's models average 4.4-5.1 steps (Table 2), so five is typical.
STEP_ANSWER_TOKENS = 120
#: judge: the protocol's output format at five steps, `<score>Step 1: 1/1, ..., Step 5: 1/1</score>`, 50 tokens
#: (the guarded prompt asks for exactly one rating per step and nothing else).
JUDGE_ANSWER_TOKENS = 50
#: live audio agent: the mean length of the released Qwen2-Audio clues the paper ships (all 6,500 rows of the
#: eight `audio_clue/*_qwen2_audio_clues.json` files: mean 114, median 82 tokens).
AUDIO_ANSWER_TOKENS = 114


@dataclass(frozen=True)
class FramePlan:
    """What the judge's frame sampler would send for one video: `count` frames of `width` x `height` pixels."""

    count: int
    width: int
    height: int


def sampled_frame_count(n_frames: int, fps: float, interval_s: float, max_frames: int) -> int:
    """How many frames `judges.media.sample_video_frames` keeps from a video of `n_frames` decoded frames: every
    `max(1, int(fps * interval_s))`-th frame from the first, at most `max_frames`."""
    if n_frames <= 0:
        return 0
    step = max(1, int(fps * interval_s))
    return min(max_frames, math.ceil(n_frames / step))


def thumbnail_size(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """The size `PIL.Image.thumbnail((max_side, max_side))` gives (what `VideoFramesPart` sends with a max_side)."""
    if not max_side or (width <= max_side and height <= max_side):
        return width, height
    aspect = width / height

    def round_aspect(number: float, key: Any) -> int:
        return max(min(math.floor(number), math.ceil(number), key=key), 1)

    x = y = max_side
    if x / y >= aspect:
        x = round_aspect(y * aspect, key=lambda n: abs(aspect - n / y))
    else:
        y = round_aspect(x / aspect, key=lambda n: 0 if n == 0 else abs(aspect - x / n))
    return x, y


@lru_cache(maxsize=4096)
def probe_frames(path: str, interval_s: float, max_frames: int, max_side: int | None) -> FramePlan:
    """The frames the judge would get from `path`, without decoding any: the size and rate from the video stream's
    header, the count from its packets (demuxed, not decoded; an empty packet is no frame), read only as far as
    the sampler looks (the `max_frames`-th kept frame).  When the packets cannot be read, the header's duration
    gives the count (min(max_frames, floor(duration / interval) + 1) without a rate).  A file that cannot be
    opened gives no frames (the real run fails that request, naming the file)."""
    import av

    try:
        with av.open(path) as container:
            if not container.streams.video:
                return FramePlan(0, 0, 0)
            stream = container.streams.video[0]
            width, height = int(stream.codec_context.width), int(stream.codec_context.height)
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            fps = float(rate) if rate else 0.0
            duration = None
            if stream.duration and stream.time_base:
                duration = float(stream.duration * stream.time_base)
            elif container.duration:
                duration = container.duration / 1_000_000
            step = max(1, int(fps * interval_s))
            enough = (max_frames - 1) * step + 1  # the packet holding the last frame the sampler can keep
            n_frames = 0
            try:
                for packet in container.demux(stream):
                    if packet.size:
                        n_frames += 1
                        if n_frames >= enough:
                            break
            except (av.error.FFmpegError, UnicodeDecodeError):
                n_frames = 0
    except (OSError, av.error.FFmpegError, UnicodeDecodeError):
        return FramePlan(0, 0, 0)
    if n_frames > 0:
        count = sampled_frame_count(n_frames, fps, interval_s, max_frames)
    elif duration is not None:
        count = min(max_frames, math.floor(duration / interval_s) + 1)
    else:
        count = 0
    width, height = thumbnail_size(width, height, max_side)
    return FramePlan(count, width, height)


def media_tokens(request: JudgeRequest) -> int:
    """Image input tokens of a request, as the OpenAI API counts them (`judges.media.image_tokens`) for the size
    and detail each frame is sent at.  Audio parts are not counted."""
    total = 0
    for message in request.messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else ():
            if isinstance(part, VideoFramesPart):
                frames = probe_frames(str(part.path), part.interval_s, part.max_frames, part.max_side)
                if frames.count:
                    total += frames.count * image_tokens(frames.width, frames.height, part.detail)
    return total


def request_texts(request: JudgeRequest) -> list[str]:
    """Every text of a request's messages (system strings and text parts)."""
    texts = []
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(p["text"] for p in content if isinstance(p, dict) and p.get("type") == "text")
    return texts


def input_tokens(requests: Sequence[JudgeRequest], extra_text_tokens: Sequence[int] | None = None) -> list[int]:
    """o200k_base tokens of each request's texts plus its image tokens (plus `extra_text_tokens[i]`).  The chat
    framing (a few tokens per message) is not counted."""
    from emo_tasks.judging.tokens import count_tokens

    texts = [request_texts(r) for r in requests]
    counts = count_tokens(t for ts in texts for t in ts)
    out, at = [], 0
    for i, (request, ts) in enumerate(zip(requests, texts, strict=True)):
        n = sum(counts[at : at + len(ts)])
        at += len(ts)
        out.append(n + media_tokens(request) + (extra_text_tokens[i] if extra_text_tokens else 0))
    return out


def _agent(
    agent: str,
    model: str,
    requests: Sequence[JudgeRequest],
    hits: Sequence[JudgeResult | None],
    tokens: Sequence[int],
    keys: Sequence[str | None],
    typical_output: int,
) -> dict[str, Any]:
    """One agent's line of the plan.  `keys[i]` None: an estimated request (its prompt is not known yet), counted
    as one request to send.  `typical_output`: the agent's typical answer length (`*_ANSWER_TOKENS`)."""
    seen: set[str] = set()
    to_send = cached = input_total = cached_output = estimated = 0
    for hit, n, key in zip(hits, tokens, keys, strict=True):
        if key is None:
            estimated += 1
            to_send += 1
            input_total += n
            continue
        if hit is not None:
            cached += 1
        first = key not in seen
        seen.add(key)
        if not first:
            continue
        if hit is not None:
            cached_output += hit.completion_tokens
        else:
            to_send += 1
            input_total += n
    max_tokens = requests[0].max_tokens if requests else None
    return {
        "agent": agent,
        "model": model,
        "requests": len(requests),
        "unique_requests": len(seen) + estimated,
        "cached": cached,
        "to_send": to_send,
        "estimated": estimated,
        "input_tokens": input_total,
        "max_tokens": max_tokens,
        "output_tokens_max": None if max_tokens is None else to_send * max_tokens,
        "output_tokens_cached": cached_output,
        "output_tokens_typical": typical_output,
    }


def plan(
    items: Sequence[dict[str, Any]], settings: MMESettings, engine: JudgeEngine, lines: bool = False
) -> list[dict[str, Any]]:
    """What judging `items` (docs merged with their `process_results` records) would send; sends nothing.

    One dict per agent, in pipeline order: step, audio (live clues only), judge.  Keys:

    - `requests`: the requests of the agent's batch, duplicates included (as `BatchStats.requests`);
      `unique_requests`: distinct ones (a run sends each once); `cached`: requests the answer cache already answers
      (duplicates included, as `BatchStats.cache_hits`, found with `engine.lookup`); `to_send`: distinct requests
      not cached, i.e. the calls a run makes when none fails or is retried.
    - The step agent's (and the audio agent's) requests are exact.  The judge's are exact for the samples whose
      step answer (and live audio clue) is cached, since that text fixes the judge prompt.  For the others they are
      *estimated* (counted in `estimated`): the judge prompt with an empty step text, plus the step agent's
      `max_tokens`, or, when the step agent is unbounded (MME-Emotion's is), the answer's own token count (the step
      agent restates the answer as steps).  A run sends a judge request only for samples whose step agent answered,
      so every sample is assumed to get one.
    - `input_tokens`: over the requests to send, o200k_base tokens of their texts (`emo_tasks.judging.tokens`) plus, for
      every frame, the image tokens the OpenAI API counts for the size and detail it is sent at (the size from the
      video stream's header, the frame count as the sampler picks them; audio is not counted).
    - `max_tokens`: the agent's per-request cap, None when unbounded; `output_tokens_max`: `to_send` x
      `max_tokens`, None when unbounded (say "unbounded"); `output_tokens_cached`: the completion tokens the
      cached answers really took (once per distinct request); `output_tokens_typical`: the agent's typical answer
      length per request (`STEP_ANSWER_TOKENS`, `AUDIO_ANSWER_TOKENS`, `JUDGE_ANSWER_TOKENS`), an estimate for
      the cost when neither a bound nor a cached answer is known.
    - `batch_lines` (only with `lines`: it renders every request's media): the requests to send as
      `emo_tasks.judging.batch_plan.BatchLine`s, each in its round of a batch judging (1 + the requests before it
      in its sample's chain still to send) with the size of its line; an estimated judge request is measured with
      an empty step text (and audio clue, when not known) plus their expected length (`_batch_lines`).
    """
    from emo_tasks.judging.tokens import count_tokens

    items = list(items)
    agents: list[dict[str, Any]] = []

    model = settings.model("step")  # no model (not a judged run): a JudgeConfigError naming the role, first
    step_reqs = [step_request(r, settings) for r in items]
    step_hits = engine.lookup(step_reqs)
    step_keys = [engine.key_of(r, engine.served(ask=False)) for r in step_reqs]
    tokens = input_tokens(step_reqs)
    agents.append(_agent("step", model, step_reqs, step_hits, tokens, step_keys, STEP_ANSWER_TOKENS))

    clues: list[str | None] = [r.get("audio_clue") or "" for r in items]
    if settings.audio_clues == "live":
        model = settings.model("audio")
        audio_reqs = [audio_request(r, settings) for r in items]
        audio_hits = engine.lookup(audio_reqs)
        keys = [engine.key_of(r, engine.served(ask=False)) for r in audio_reqs]
        tokens = input_tokens(audio_reqs)
        agents.append(_agent("audio", model, audio_reqs, audio_hits, tokens, keys, AUDIO_ANSWER_TOKENS))
        clues = [agent_answer(h.text) if h is not None else None for h in audio_hits]  # as the run reads them

    step_max = step_reqs[0].max_tokens if step_reqs else None
    answer_tokens = count_tokens(r["answer"] for r in items) if step_max is None else None
    judge_reqs: list[JudgeRequest] = []
    extra: list[int] = []
    exact: list[bool] = []
    for i, (record, hit) in enumerate(zip(items, step_hits, strict=True)):
        step_text = agent_answer(hit.text) if hit is not None else None  # after a reasoning agent's reasoning
        if step_text is not None and clues[i] is not None:
            steps = parse_steps(step_text).steps
            req = judge_request(record, settings, step_text=step_text, n_steps=len(steps), audio_clue=clues[i])
            judge_reqs.append(req)
            extra.append(0)
            exact.append(True)
        else:
            req = judge_request(record, settings, step_text="", n_steps=1, audio_clue=clues[i] or "")
            judge_reqs.append(req)
            extra.append(step_max if step_max is not None else answer_tokens[i])  # type: ignore[index]
            exact.append(False)
    exact_reqs = [r for r, e in zip(judge_reqs, exact, strict=True) if e]
    exact_hits = iter(engine.lookup(exact_reqs))
    judge_hits = [next(exact_hits) if e else None for e in exact]
    listing = engine.served(ask=False)
    judge_keys = [engine.key_of(r, listing) if e else None for r, e in zip(judge_reqs, exact, strict=True)]
    tokens = input_tokens(judge_reqs, extra)
    model = settings.model("judge")
    agents.append(_agent("judge", model, judge_reqs, judge_hits, tokens, judge_keys, JUDGE_ANSWER_TOKENS))
    if lines:
        chain = [("step", step_reqs, step_hits, step_keys)]
        if settings.audio_clues == "live":
            chain.append(("audio", audio_reqs, audio_hits, keys))
        chain.append(("judge", judge_reqs, judge_hits, judge_keys))
        step_bytes = [text_bytes(r["answer"]) if step_max is None else step_max * BYTES_PER_TOKEN for r in items]
        clue_bytes = AUDIO_ANSWER_TOKENS * BYTES_PER_TOKEN
        missing = [  # what an estimated judge prompt lacks: the step text and (live, not cached) audio clue
            0 if exact[i] else (step_bytes[i] if step_hits[i] is None else 0) + (clue_bytes if clues[i] is None else 0)
            for i in range(len(items))
        ]
        batch = _batch_lines(chain, missing, engine.endpoint.api_type)
        for agent in agents:
            agent["batch_lines"] = [x for x in batch if x.agent == agent["agent"]]
    return agents


def _batch_lines(
    chain: Sequence[tuple[str, Sequence[JudgeRequest], Sequence[JudgeResult | None], Sequence[str | None]]],
    missing: Sequence[int],
    api_type: str,
) -> list[BatchLine]:
    """The requests to send of each sample's chain of agents (step, audio, judge), each in round 1 + the requests
    before it in the chain still to send, with its line's size (`missing[i]`: bytes of sample i's judge prompt
    not known yet, added to its estimated judge request).  A request whose media cannot be read is left out: the
    real run fails it before it goes in a file."""
    out: list[BatchLine] = []
    for i in range(len(missing)):
        pending = 0  # requests of this sample's chain before this one that are still to send
        for agent, requests, hits, keys in chain:
            key = keys[i]
            if key is not None and hits[i] is not None:
                continue  # cached: not sent, and its answer is known from the start
            req = requests[i]
            try:
                size = line_bytes(req, key, api_type, missing[i] if key is None else 0)
            except Exception:  # noqa: BLE001 - a missing or unreadable video: the run fails this request itself
                pending += 1
                continue
            pending += 1
            out.append(BatchLine(pending, req.resolved_model(), key, size, agent))
    return out
