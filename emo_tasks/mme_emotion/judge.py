"""MME-Emotion's multi-agent judge on the shared engine: step agent -> (audio agent) -> multimodal judge.

Runs in the aggregation (rank 0) or the judge stage, through one call: `judge(task, held=...)`.  The first
aggregation judges every task the process holds in one pipeline and keeps the others' judgements until their own
aggregations ask; the pipeline is one call into `judges/` (`prepare_media`, then `run_agents` with `_judge_row`
per record).  This module builds the requests (`step_request`, `audio_request`, `judge_request`: their prompts
filled here from `protocol.yml`, their answers read by `parsers`) and only judges: every sample ends as a
`Judgement` holding what the agents answered and what that parsed to, or the stage and reason it failed at;
turning judgements into numbers is `scoring.score_sample`'s job.  Its result carries the judge setup's fingerprint
(`Judged.fingerprint`), made once where the judge ran.  Everything it needs (judge protocol, clue mode, the role
models, the engine and media settings) comes in through `MMESettings`: nothing here reads the environment.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from judges import (
    AudioPart,
    BatchStats,
    JudgeRequest,
    Lane,
    VideoFramesPart,
    answer_part,
    get_engine,
    prepare_media,
    run_agents,
    split_reasoning,
    text_message,
    user_message,
)
from judges.fingerprint import fingerprint, shutdown_dates
from judges.shutdown import record as shutdown_record
from judges.shutdown import warn_shutdowns

from .data import video_identity
from .parsers import parse_scores, parse_steps, per_task_rule_differs, score_validator, step_validator
from .protocol import DEFAULT_JUDGE_PROTOCOL, JUDGE_PROTOCOLS, TaskSpec, prompt_hashes, protocol, spec_for
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
    #: per stage (step_agent | audio_clue | judge), the whole answer of an agent that reasoned (`<think>…`), whose
    #: answer part is `step_text` / `audio_clue` / `judge_text`; {} when no agent reasoned
    raw: dict[str, str] = field(default_factory=dict)
    ratings: list[tuple[int, int]] = field(default_factory=list)
    failed_stage: str | None = None
    failure_reason: str | None = None
    failure_detail: str | None = None
    cached: dict[str, bool] = field(default_factory=dict)
    #: the official per-task script of a single-label task reads the judge's answer differently (`: d/1` only;
    #: `parsers.per_task_rule_differs`): counted in the summary, never hidden
    rule_differs: bool = False

    @property
    def ok(self) -> bool:
        return self.failed_stage is None

    @property
    def truncated(self) -> bool:
        """Failed because an agent's answer was cut off inside its reasoning (`n_judge_truncated`)."""
        return self.failure_reason == TRUNCATED

    def fail(self, stage: str, reason: str | None, detail: str | None) -> None:
        self.failed_stage, self.failure_reason, self.failure_detail = stage, reason, detail


#: The failure reason of an agent whose answer was cut off inside its reasoning (`judges.reasoning`), counted as
#: `n_judge_truncated` apart from the other failures.
TRUNCATED = "truncated"


def agent_answer(text: str | None) -> str | None:
    """What the next agent is given and the parsers read of an agent's answer: its part after the reasoning (the
    text itself without a reasoning tag; None when cut off inside its reasoning).  One rule for the run and the dry
    run, so both build the same judge requests."""
    return answer_part(text)


def _read(j: Judgement, stage: str, res: Any) -> str | None:
    """The answer part of an agent's usable answer, keeping the whole answer in `j.raw` when it reasoned; None
    (and `j` failed as truncated) when it was cut off inside its reasoning (a cached answer from before this rule
    can be)."""
    split = split_reasoning(res.text)
    if split.reasoned:
        j.raw[stage] = res.text
    if split.answer is None:
        j.fail(stage, TRUNCATED, "cut off inside its reasoning")
    return split.answer


def _judgement(record: dict[str, Any]) -> Judgement:
    return Judgement(
        task=record["mme_task"],
        row=int(record["row"]),
        video_id=record["video_id"],
        label=record["label"],
        answer=record["answer"],
        audio_clue=record.get("audio_clue"),
    )


# ------------------------------------------------------------------------------------------- the prompts
# The judge agents' texts, filled from protocol.yml (the official wording) where their requests are built.
_TAG = re.compile(r"<\s*(/?)\s*(step|score)\s*>", re.IGNORECASE)


def neutralise_tags(text: str) -> str:
    """`<score>`/`<step>` tags inside quoted text become `[score]`/`[step]`: the parsers and a judge that
    copies the first block it sees can then never mistake the quoted text's blocks for real ones."""
    return _TAG.sub(lambda m: f"[{m.group(1)}{m.group(2).lower()}]", text)


def step_messages(spec: TaskSpec, answer: str, judge_protocol: str = DEFAULT_JUDGE_PROTOCOL) -> list[dict[str, Any]]:
    """The step agent's chat messages for one model answer (official wording).

    Guarded protocol: `<step>`/`<score>` tags in the answer are neutralised first (the rest is verbatim)."""
    if judge_protocol not in JUDGE_PROTOCOLS:
        raise ValueError(f"judge protocol must be one of {JUDGE_PROTOCOLS}, got {judge_protocol!r}")
    proto = protocol()
    s = spec.step
    if judge_protocol == "guarded":
        answer = neutralise_tags(answer)
    examples = "".join(
        proto["step_example_template"].format(number=i, answer=a, result=r)
        for i, (a, r) in enumerate(s["examples"], start=2)
    )
    slots = {k: v for k, v in s.items() if k != "examples"}  # subject, target, example_state, example_final
    text = proto["step_template"].format(**slots, answer=answer, examples=examples)
    return [{"role": "system", "content": proto["step_system"]}, {"role": "user", "content": text}]


def judge_text(
    spec: TaskSpec,
    *,
    audio_clue: str,
    ground_truth: str,
    steps_text: str,
    n_steps: int,
    judge_protocol: str = DEFAULT_JUDGE_PROTOCOL,
) -> str:
    """The judge's text part (the frames follow as image parts).

    `steps_text` is what the official script pastes: the step agent's whole answer.  Guarded: it is fenced with a
    marker derived from its own hash (so the text cannot contain the closing marker), its tags neutralised, and
    the expected number of ratings stated.
    """
    proto = protocol()
    if judge_protocol == "official":
        prediction = proto["prediction_official"].format(steps=steps_text)
    elif judge_protocol == "guarded":
        safe = neutralise_tags(steps_text)
        fence = hashlib.sha256(safe.encode("utf-8")).hexdigest()[:12]
        prediction = "\n" + proto["prediction_guarded"].format(steps=safe, fence=fence, n_steps=n_steps)
    else:
        raise ValueError(f"judge protocol must be one of {JUDGE_PROTOCOLS}, got {judge_protocol!r}")
    # spec.judge holds the per-task slots: topic, labels_phrase, rule_1..3, output_format, label_field, example_output
    return proto["judge_template"].format(
        **spec.judge, audio_clue=audio_clue, ground_truth=ground_truth, prediction=prediction
    )


def audio_prompt(spec: TaskSpec) -> str:
    """The live audio agent's prompt (ours; see protocol.yml)."""
    return protocol()["audio_template"].format(target=spec.target)


# ------------------------------------------------------------------------------------------- the requests
# One builder per agent, used by both `judge` (the real run) and `plan` (the dry run), so that the dry run's
# requests, and so their cache keys, are exactly the ones a run sends.
def step_request(record: dict[str, Any], settings: MMESettings) -> JudgeRequest:
    """The step agent's request for one record (doc + answer): the answer only (no question, no video), official
    wording."""
    guarded = settings.judge_protocol == "guarded"
    return JudgeRequest(
        messages=step_messages(spec_for(record["mme_task"]), record["answer"], settings.judge_protocol),
        role="step",
        model=settings.judge_models["step"],
        **sampling(settings, "step"),
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
        model=settings.judge_models["audio"],
        **sampling(settings, "audio"),
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
        model=settings.judge_models["judge"],
        **sampling(settings, "judge"),
        validate=score_validator(n_steps if guarded else None),
        sample_id=f"{record['mme_task']}:{record['row']}",
    )


def sampling(settings: MMESettings, role: str) -> dict[str, Any]:
    """A role's `JudgeRequest` sampling arguments under the preset: {} without one (the request's temperature 0, no
    max_tokens, no other parameter: the requests, and so the cache keys, of the published protocol)."""
    rest = settings.sampling_for(role)
    if not rest:
        return {}
    out: dict[str, Any] = {"temperature": float(rest.pop("temperature", 0.0))}  # type: ignore[arg-type]
    if rest.get("max_tokens") is not None:
        out["max_tokens"] = int(rest.pop("max_tokens"))  # type: ignore[call-overload]
    out["params"] = rest
    return out


def judge_fingerprint(settings: MMESettings, listing: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """The fingerprint of MME-Emotion's judge setup (`judges.fingerprint.fingerprint`): per role its model, what
    `listing` (the endpoint's `/models`) says is served under it, and its requests' sampling settings; the judge
    protocol and the hash of the agents' prompt templates."""
    hashes = prompt_hashes()
    prompts: dict[str, Any] = {"step_agent": hashes["step_agent"], "judge": hashes["judge"]}
    if settings.audio_clues == "live":
        prompts["audio"] = protocol()["audio_template"]
    roles = {
        role: (model, JudgeRequest([], role=role, model=model, **sampling(settings, role)).payload_params())
        for role, model in settings.models
    }
    name = f"mme-emotion {settings.judge_protocol}, alpha {settings.alpha:g}, audio clues {settings.audio_clues}"
    return fingerprint(roles, protocol=name, prompts=prompts, listing=listing)


def judge_shutdown(settings: MMESettings) -> dict[str, Any]:
    """What the endpoint said of the judge models' shutdown, as the summary records it beside the fingerprint
    (`judges.shutdown.record`: {model: {date, roles}}, {} when it gave no date); only what this process already
    learnt (asked when the judge ran), never part of a key."""
    endpoint = get_engine(settings.engine).endpoint
    return shutdown_record(settings.models, shutdown_dates(endpoint, [m for _, m in settings.models], ask=False))


def frames_part(record: dict[str, Any]) -> VideoFramesPart:
    """The judge's view of a record's video: one frame per second, the first ten (the official sampling)."""
    return VideoFramesPart(
        record["video_path"],
        interval_s=FRAME_INTERVAL_S,
        max_frames=MAX_FRAMES,
        identity=_identity(record["video_path"], record["video_id"]),
    )


#: The judge's frame sampling (official: one frame per second, the first ten).
FRAME_INTERVAL_S = 1.0
MAX_FRAMES = 10


# ------------------------------------------------------------------------------------------------ the run
@dataclass(frozen=True)
class TaskAnswers:
    """One task's records (doc + answer), as its aggregation gets them, with its settings and its name in progress
    bars and logs."""

    items: Sequence[dict[str, Any]]
    settings: MMESettings
    desc: str = "mme_emotion"


class Judged(NamedTuple):
    """A task's judgements, in its records' order, the accounting by agent: "step", "audio" (live clues only),
    "judge" (what a batch per agent over that task reports), and the fingerprint of the judge setup that gave them
    (`judge_fingerprint`, made once where the judge ran: the results carry it as it was)."""

    judgements: list[Judgement]
    stats: dict[str, BatchStats]
    fingerprint: dict[str, Any]


def judge(task: TaskAnswers, *, held: Sequence[TaskAnswers] = (), progress: bool | None = None) -> Judged:
    """The judgements of `task`: the one call an aggregation (in process, or in the judge stage) makes.

    Judged earlier together with another task, for exactly these answers: taken (once).  Else judged now, in one
    pipeline with every other task `held` names (the tasks whose answers this process holds, their aggregations
    still to come) when `held` holds exactly `task`'s answers too, i.e. this process saw every answer (not a
    multi-rank run, where rank 0 aggregates answers other ranks recorded); each of those is kept until its own call
    takes it.  Why: judged one task after another, the request slots drain 2-3 times per task; judged together they
    stay full across tasks and agents, with the same requests and, per task, the same judgements and accounting."""
    kept = _KEPT.take(task)
    if kept is not None:
        return kept
    others = _others(task, held)
    mine, *theirs = judge_tasks([task, *others], progress=progress)
    for other, judged in zip(others, theirs, strict=True):
        _KEPT.put(other, judged)
    return mine


def _others(task: TaskAnswers, held: Sequence[TaskAnswers]) -> list[TaskAnswers]:
    """The tasks of `held` to judge with `task`: the others not judged yet, when `held` holds `task`'s answers."""
    if not any(_key(t) == _key(task) and _same_answers(t, task) for t in held):
        return []
    return [t for t in held if _key(t) != _key(task) and not _KEPT.has(t)]


def judge_tasks(tasks: Sequence[TaskAnswers], *, progress: bool | None = None) -> list[Judged]:
    """Judge several tasks, each record going step agent -> (audio agent) -> judge as soon as its previous agent
    answered: one pipeline per settings (in the order they first appear), every task and agent of it sharing the
    concurrency slots.  Returns each task's `Judged`, in the tasks' order."""
    by_settings: dict[MMESettings, list[int]] = {}
    for i, task in enumerate(tasks):
        by_settings.setdefault(task.settings, []).append(i)
    out: list[Judged | None] = [None] * len(tasks)
    for indices in by_settings.values():
        for i, judged in zip(indices, _pipeline([tasks[i] for i in indices], progress), strict=True):
            out[i] = judged
    return [j for j in out if j is not None]


#: What each agent's progress bar and log line say, in the order the agents answer.
_AGENT_WORDS = {"step": "step agent", "audio": "audio clues", "judge": "judge"}


def _pipeline(tasks: Sequence[TaskAnswers], progress: bool | None) -> list[Judged]:
    """One pipeline through `judges` for tasks of one settings: the videos made ready ahead (`prepare_media`), then
    every row of every task through the agents (`run_agents`, one `_judge_row` per record)."""
    settings = tasks[0].settings
    roles = ["step", "audio", "judge"] if settings.audio_clues == "live" else ["step", "judge"]
    groups = [list(t.items) for t in tasks]

    async def row(lanes: Mapping[str, Lane], item: tuple[dict[str, Any], Future]) -> Judgement:
        return await _judge_row(lanes, item[0], item[1], settings)

    # a judge model the endpoint says shuts down: said once per model per process, before anything is sent
    warn_shutdowns(get_engine(settings.engine).endpoint, settings.models)
    with prepare_media(settings.media, groups, _video_path, frames_part) as parts:
        run = run_agents(
            settings.engine,
            [list(zip(group, ps, strict=True)) for group, ps in zip(groups, parts, strict=True)],
            row,
            agents={role: _AGENT_WORDS[role] for role in roles},
            descs=[t.desc for t in tasks],
            title=tasks[0].desc if len(tasks) == 1 else f"mme_emotion ({len(tasks)} tasks)",
            progress=progress,
        )
    # with what the endpoint said it serves (asked once per process, when the engine first made lanes for it)
    fingerprint = judge_fingerprint(settings, get_engine(settings.engine).served())
    return [Judged(js, st, fingerprint) for js, st in zip(run.results, run.stats, strict=True)]


async def _judge_row(
    lanes: Mapping[str, Lane], record: dict[str, Any], part: Future, settings: MMESettings
) -> Judgement:
    """One record through the agents; its `Judgement` says what each answered and what that parsed to, or the
    stage and reason it failed at."""
    j = _judgement(record)
    # 1. step agent: the answer only (no question, no video), official wording
    res = await lanes["step"].ask(step_request(record, settings))
    j.cached["step_agent"] = res.cached
    j.step_text = res.text
    if not res.ok:
        j.fail("step_agent", res.error, res.detail)
        _keep_raw(j, "step_agent", res.text)
    else:
        j.step_text = _read(j, "step_agent", res)
        j.steps = list(parse_steps(j.step_text).steps)
    # the video's identity and frames part (hashed, and handed to the render pool, by `prepare_media`)
    frames: VideoFramesPart = await asyncio.wrap_future(part)
    # 2. audio clues: the released file, or live from the clip's audio track
    if "audio" in lanes:
        if not j.ok:
            lanes["audio"].skip()
        else:
            res = await lanes["audio"].ask(audio_request(record, settings))
            j.cached["audio_clue"] = res.cached
            if res.ok:
                j.audio_clue = _read(j, "audio_clue", res)
            else:
                j.fail("audio_clue", res.error, res.detail)
    # 3. the multimodal judge: frames (1 fps, first 10), audio clue, label(s), the step text
    if not j.ok:
        lanes["judge"].skip()
        return j
    request = judge_request(
        record, settings, step_text=j.step_text or "", n_steps=len(j.steps), audio_clue=j.audio_clue or "",
        frames=frames,
    )  # fmt: skip
    res = await lanes["judge"].ask(request)
    j.cached["judge"] = res.cached
    j.judge_text = res.text
    if not res.ok:
        j.fail("judge", res.error, res.detail)
        _keep_raw(j, "judge", res.text)
        return j
    j.judge_text = _read(j, "judge", res)
    if not j.ok:
        return j
    parsed = parse_scores(j.judge_text)
    if not parsed.ok:  # only reachable without a validator; kept for safety
        j.fail("judge", f"score_{parsed.status.value}", (j.judge_text or "")[:300])
        return j
    j.ratings = [(r.numerator, r.denominator) for r in parsed.ratings]
    j.rule_differs = per_task_rule_differs(j.judge_text, spec_for(record["mme_task"]).last_step_rule)
    return j


def _keep_raw(j: Judgement, stage: str, text: str | None) -> None:
    """A failed agent's answer as the log shows it: its answer part (None when cut off inside its reasoning), the
    whole answer in `j.raw` when it reasoned."""
    split = split_reasoning(text)
    if split.reasoned and text is not None:
        j.raw[stage] = text
        if stage == "step_agent":
            j.step_text = split.answer
        elif stage == "judge":
            j.judge_text = split.answer


def _video_path(record: Mapping[str, Any]) -> str:
    return record["video_path"]


def _key(task: TaskAnswers) -> tuple[MMESettings, str]:
    return task.settings, task.items[0]["mme_task"] if task.items else ""


def _answer_id(record: Mapping[str, Any]) -> tuple[str, int, str, str]:
    """What makes a record the same answer: its task, row, video and answer."""
    return record["mme_task"], int(record["row"]), record["video_id"], record["answer"]


def _same_answers(a: TaskAnswers, b: TaskAnswers) -> bool:
    """Whether two tasks hold exactly the same answers, each once."""
    ids = {_answer_id(r) for r in a.items}
    return len(ids) == len(a.items) == len(b.items) and ids == {_answer_id(r) for r in b.items}


class _Kept:
    """Tasks judged ahead of their own call (the other tasks `judge` judged), each taken once by the call for
    exactly the same answers, with its accounting."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple[MMESettings, str], tuple[TaskAnswers, Judged]] = {}

    def put(self, task: TaskAnswers, judged: Judged) -> None:
        with self._lock:
            self._done[_key(task)] = (task, judged)

    def has(self, task: TaskAnswers) -> bool:
        with self._lock:
            entry = self._done.get(_key(task))
        return entry is not None and _same_answers(entry[0], task)

    def take(self, task: TaskAnswers) -> Judged | None:
        """`task`'s judgements (in its records' order) and accounting, when judged ahead for exactly these."""
        with self._lock:
            entry = self._done.pop(_key(task), None)
        if entry is None or not _same_answers(entry[0], task):
            return None  # other answers than the ones judged ahead: judged now
        by_id = {_answer_id(r): j for r, j in zip(entry[0].items, entry[1].judgements, strict=True)}
        return Judged([by_id[_answer_id(r)] for r in task.items], entry[1].stats, entry[1].fingerprint)


_KEPT = _Kept()


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
