"""What a results viewer (`emo-tasks view`) shows of each MME-Emotion sample of a run: one `SampleView` per row of
the run's own judge log, with the judge's evidence beside its values: the frames the judge is sent (JPEG files),
the extracted steps each with its rating, the judge's text, the audio clue, the label set, why it failed.

Why here: the viewer knows no benchmark, and only MME-Emotion knows which judge log is the run's, what its rows
mean and how its judge samples a video.  It reads what `results.read_samples` reads, by the same functions
(`own_judge_log`, `log_values`), so a sample's values are the report's; the run's sample log gives each row its
lmms-eval doc id and prompt; the data the environment names (as for `emo-tasks judge`: the bundled sample under
the emo-tasks cache, or EMO_DATA_ROOT / the Hub snapshot already on this machine) gives the label set and the video.

The frames are never a different frame: they are the bytes the judge's request carries, by the judge's own code.
`judge.frames_part` names the video (its content identity: the whole file's hash, `data.video_identity`) and the
sampling (1 fps, the first 10, JPEG quality 95); `VideoFramesPart.frames_jpeg` takes them from the frame cache
(`judges.frames`: one packed file per video, keyed by that identity and every sampling parameter), or, when the
cache lacks them, renders them with the judge's sampler and stores them there.  The view writes them out as
JPEG files under `frames_dir/<key[:2]>/<key>/NN.jpg` (key: the frame-cache key), once: a later view of any run
judged on the same video finds them there and reads nothing else (no decode, no cache read; the video is still
hashed once per process, for its identity).  Without data or video, `media` is the video id and `details["frames"]`
says why; nothing here stops the viewer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from emo_tasks.benchmarks import SampleView
from emo_tasks.datafiles import media_roots as data_media_roots
from emo_tasks.datafiles import read_sample_log, sample_log
from judges import media_caches
from judges.frames import frame_cache_key, render_stats
from judges.media import VideoFramesPart, hash_files

from .judge import FRAME_INTERVAL_S, MAX_FRAMES, frames_part
from .registry import TITLES, log_values, logged_record, own_judge_log

DETAILS = ("step_text", "judge_text", "audio_clue", "failed_stage", "failure_reason", "failure_detail",
           "predicted_labels", "n_steps")  # fmt: skip
#: A reasoning agent's whole answer (the judge log's `raw_answers`, by stage) -> its detail's name.
RAW_DETAILS = {"step_agent": "step_raw", "audio_clue": "audio_raw", "judge": "judge_raw"}
#: Where the frames' JPEG files go when the caller names no folder: `<emo-tasks cache>/view_frames`.
VIEW_FRAMES = "view_frames"
_SAMPLING = f"one per {FRAME_INTERVAL_S:g} s, the first {MAX_FRAMES}"
#: What the viewer says of each field (`emo-tasks view` reads it, optionally, from the view module).
FIELD_DOCS = {
    "media": f"The video frames the judge was sent ({_SAMPLING}); the video id when the video is not on this machine.",
    "prompt": "The question the model was asked, as the run logged it (lmms-eval's sample log, or a VLMEvalKit run's).",
    "answers": "The model's answer (its reasoning steps end with the predicted label).",
    "gold": "The correct label(s) of the clip.",
    "verdict": "scored: the judge rated every step; judge_failed: a judge agent gave no usable answer (see "
    "failed_stage); offline: label matching only, no judge.",
    "frames": "Where the frames shown came from (the judge's frame cache, or its own sampler), or why none are shown.",
    "label_set": "The labels the model could choose from.",
    "steps": "The answer's reasoning steps as the step agent extracted them, each with the judge's rating n/d "
    "(value = n/d): the last step is the prediction, rated on the correct label(s) (Rec); each other step 0 only "
    "when it clearly contradicts the video or audio, else 1 (their mean is Rea).",
    "steps_note": "Set when the judge gave another number of ratings than there are steps.",
    "step_text": "The step agent's raw answer (a reasoning agent's: its part after the reasoning, what was parsed).",
    "judge_text": "The judge's raw answer (its <score> block holds the ratings; a reasoning judge's: its part after "
    "the reasoning, what was parsed).",
    "step_raw": "A reasoning step agent's whole answer, its reasoning (<think>…</think>) included.",
    "audio_raw": "A reasoning audio agent's whole answer, its reasoning included.",
    "judge_raw": "A reasoning judge's whole answer, its reasoning (<think>…</think>) included.",
    "audio_clue": "What the audio agent heard in the clip; the judge gets it with the frames.",
    "failed_stage": "The agent that gave no usable answer: step_agent, audio_clue or judge.",
    "failure_reason": "Why that agent's answer could not be used.",
    "failure_detail": "The start of the unusable answer or error.",
    "predicted_labels": "The candidate labels the answer's last step names.",
    "n_steps": "How many reasoning steps were rated.",
}


def media_roots(env: Mapping[str, str]) -> list[Path]:
    """Where MME-Emotion's media may come from besides the run folder (`emo-tasks view` shows no other): the
    frames this module writes (`<cache>/view_frames`, made only from the data's own videos), the bundled sample,
    EMO_DATA_ROOT/mme_emotion and the Hub cache's copy of EMO_MME_HUB_ID."""
    from emo_tasks.settings import cache_dir

    from .data import HUB_ID
    from .sample import SAMPLE_VERSION

    roots = data_media_roots(env, sample=f"mme_emotion-{SAMPLE_VERSION}", folder="mme_emotion",
                             hub_variable="EMO_MME_HUB_ID", hub_default=HUB_ID)  # fmt: skip
    return [cache_dir(env) / VIEW_FRAMES, *roots]


def view_samples(
    run_dir: Path, results_file: Path, task: str, frames_dir: str | Path | None = None
) -> list[SampleView]:
    """One view per judge-log row of a leaf task ([] when no judge log is this run's: the report notes why).

    `frames_dir`: where the judge's frames are written as JPEG files (default `<emo-tasks cache>/view_frames`,
    shared by every view of every run, so each video's frames are written once)."""
    pick = own_judge_log(run_dir, results_file, task)
    if pick.log is None or pick.content is None:
        return []
    rows = pick.content
    values = log_values(pick.log, rows, task, pick.summary).values
    lines: dict[int, dict[str, Any]] = {}
    samples = sample_log(Path(results_file).parent, Path(results_file), task)
    for line in read_sample_log(samples) if samples else []:
        rec = logged_record(line)
        if rec is not None:
            lines[int(rec["row"])] = line
    docs, settings, why = task_data(task)
    judged = [r.get("video_identity") for r in rows]
    frames = judge_frames([docs.get(r.get("video_id")) for r in rows], settings, frames_dir, why, judged)
    views = []
    for r, (media, frames_note) in zip(rows, frames, strict=True):
        unit, line = (task, int(r["row"])), lines.get(int(r["row"])) or {}
        doc = docs.get(r.get("video_id")) or {}
        details: dict[str, Any] = {"frames": frames_note, "label_set": doc.get("label_set")}
        details["steps"], note = step_ratings(r.get("steps") or [], r.get("ratings") or [])
        if note:
            details["steps_note"] = note
        details.update({k: r.get(k) for k in DETAILS})
        raw = r.get("raw_answers") or {}
        details.update({key: raw[stage] for stage, key in RAW_DETAILS.items() if raw.get(stage)})
        views.append(
            SampleView(
                task=task,
                doc_id=line.get("doc_id"),
                unit=unit,
                media=media or ((r["video_id"],) if r.get("video_id") else ()),
                prompt=line.get("input"),
                answers=(r.get("answer") or "",),
                gold=r.get("label"),
                verdict=r.get("status"),
                predicted=",".join(r.get("predicted_labels") or []) or None,  # as the gold label writes several
                values={m: v[unit] for m, v in values.items() if unit in v},
                details=details,
            )
        )
    return views


def step_ratings(steps: Sequence[str], ratings: Sequence[Sequence[int]]) -> tuple[list[dict[str, Any]], str | None]:
    """Each extracted step beside its rating, in order: `{"step", "rating": "n/d", "value": n/d}`; when the counts
    differ, the unpaired ones are kept (a step without rating, or a rating without step: None) and the note says
    so (None when they agree)."""
    out = []
    for i in range(max(len(steps), len(ratings))):
        n, d = ratings[i] if i < len(ratings) else (None, None)
        out.append({
            "step": steps[i] if i < len(steps) else None,
            "rating": None if n is None else f"{n}/{d}",
            "value": float(n) / float(d) if n is not None and d else None,
        })  # fmt: skip
    if len(steps) == len(ratings):
        return out, None
    return out, f"{len(steps)} extracted steps, {len(ratings)} ratings: paired in order, the rest left unpaired"


# ----------------------------------------------------------------------------------------------------- the data
def task_data(task: str) -> tuple[dict[str, dict[str, Any]], Any, str | None]:
    """(video_id -> data row with its `video_path` and `label_set`, the task's MMESettings, why there is none) for
    a leaf task, from the data the environment names now, as the judge stage finds it (`hooks.load_task`), except
    that nothing is generated or downloaded: the sample must be there already, the Hub snapshot on this machine."""
    from emo_tasks.settings import environ

    from .data import benchmark_root, load_task_docs
    from .sample import SAMPLE_VERSION
    from .settings import MMESettings

    source = "sample" if task.startswith("mme_emotion_sample_") else "benchmark"
    settings = None
    try:
        settings = MMESettings.from_env({**environ(), "EMO_JUDGE": "defer"}, source)  # values only, no endpoint
        if source == "sample":
            from emo_tasks.common import sample_dir

            root = sample_dir(f"mme_emotion-{SAMPLE_VERSION}", settings.common.cache_dir)
        elif settings.common.data_root:
            root = benchmark_root(settings.common.data_root)
        else:
            root = _local_hub_root(settings.hub_id)
        docs = load_task_docs(TITLES[task], root, source=source, need_clues=False)
    except Exception as exc:  # noqa: BLE001 - a bad setting or missing data is shown, never stops the viewer
        return {}, settings, f"no MME-Emotion data here for {task} ({type(exc).__name__}: {exc})"
    return {d["video_id"]: d for d in docs}, settings, None


def _local_hub_root(hub_id: str) -> Path:
    """The Hub snapshot's data folder when the snapshot is on this machine (never a download: raises otherwise)."""
    from huggingface_hub import snapshot_download

    from .data import hub_root

    snapshot_download(repo_id=hub_id, repo_type="dataset", local_files_only=True)  # raises when not here
    return hub_root(hub_id)


# --------------------------------------------------------------------------------------------------- the frames
def judge_frames(
    docs: Sequence[dict[str, Any] | None],
    settings: Any,
    frames_dir: str | Path | None,
    why: str | None = None,
    judged: Sequence[str | None] | None = None,
) -> list[tuple[tuple[str, ...], str]]:
    """Per data row (None: not in the data): (the JPEG files of the frames the judge is sent, in order; a note
    saying where they came from), or ((), why not).  See the module's docstring for how they are found.

    `judged`: per row, the content identity of the video the judge saw, as its judge log records it (None: not
    recorded, logs written before it was); a video whose file changed since is shown without frames, never with
    another file's."""
    if settings is None or why is not None:
        return [((), why or "no MME-Emotion settings")] * len(docs)
    folder = Path(frames_dir) if frames_dir is not None else settings.common.cache_dir / VIEW_FRAMES
    present = [d for d in docs if d is not None and os.path.isfile(d["video_path"])]
    out: list[tuple[tuple[str, ...], str]] = []
    with media_caches(settings.media):  # the frame cache and content-hash store as the judge has them
        hash_files(d["video_path"] for d in present)  # every video's identity once, a few at a time
        for doc, seen in zip(docs, judged or [None] * len(docs), strict=True):
            if doc is None:
                out.append(((), "this video is not in the task's data now"))
            elif not os.path.isfile(doc["video_path"]):
                out.append(((), f"video not found: {doc['video_path']}"))
            elif seen is not None and (part := frames_part(doc)).identity != seen:
                out.append(((), f"the video changed since it was judged ({doc['video_path']}: judged {seen}, now "
                            f"{part.identity}): its frames now are not the ones the judge saw"))  # fmt: skip
            else:
                part = frames_part(doc)
                key = _key(part)
                out.append(_frames_of(part, folder / key[:2] / key))
    return out


def _key(part: VideoFramesPart) -> str:
    """The part's frame-cache key (what `VideoFramesPart.frames_jpeg` looks up)."""
    return frame_cache_key(part.identity, part.interval_s, part.max_frames, part.max_side, part.quality)


def _frames_of(part: VideoFramesPart, target: Path) -> tuple[tuple[str, ...], str]:
    """One video's frames as JPEG files in `target` (written once) and where they came from."""
    if target.is_dir():
        files = tuple(str(p) for p in sorted(target.glob("*.jpg")))
        return files, f"{len(files)} frames the judge is sent ({_SAMPLING}), as written out before"
    try:
        decodes = render_stats().get("decodes", 0)
        frames = part.frames_jpeg()  # the judge's own call: from the frame cache, else its sampler (then cached)
        rendered = render_stats().get("decodes", 0) > decodes
        files = _write_frames(target, frames)
    except (OSError, ValueError) as exc:
        return (), f"the judge's frames could not be shown: {exc}"
    where = "rendered now by the judge's sampler (the frame cache had none)" if rendered else "from the frame cache"
    return tuple(str(p) for p in files), f"{len(files)} frames the judge is sent ({_SAMPLING}), {where}"


def _write_frames(target: Path, frames: list[bytes]) -> list[Path]:
    """Write the frames as `target/00.jpg`, `01.jpg`, ... all at once (a folder renamed into place: a concurrent
    viewer sees all of them or none)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for i, data in enumerate(frames):
            (tmp / f"{i:02d}.jpg").write_bytes(data)
        try:
            os.rename(tmp, target)
        except OSError:  # written meanwhile by another viewer: the same bytes (same key)
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(target.glob("*.jpg"))
