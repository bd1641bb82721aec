"""lmms-eval hooks for MME-Emotion: thin adapters from a row to the host and back.

- `process_docs` is `load_task` on lmms-eval's placeholder row: it reads and checks the settings
  (`MMESettings.from_env`: a bad value stops the run here, before inference), loads and validates the task's rows
  (the YAML's `dataset_name` says which task and source), and registers both for the aggregation.
- `doc_to_visual` / `doc_to_text` / `doc_to_messages` build the model's input; `doc_to_target` names the row
  (gold label + a hash of its portable content) in lmms-eval's sample logs.
- `process_results` only records the answer (cheap, thread-safe: lmms-eval calls it from 4 threads).
- `evaluate` (behind every `agg_<metric>`, see utils.py) judges a task once (rank 0), memoised on (settings,
  records) so that the eight metrics share one judge phase: one call, `judge.judge`, handed every task's answers
  this process holds, so the first aggregation judges the whole group in one pipeline.  Then it scores with the
  pure `scoring` module and writes the per-sample judge log.  With EMO_JUDGE=defer it judges nothing: it keeps
  the answers and says to run `emo-tasks judge`.
- `plan` is the dry run of `evaluate`'s judge phase: what it would send and what the cache already answers.

The judge stage (`emo-tasks judge RUN_DIR`, emo_tasks/judging/stage.py) calls the same functions on a logged run:
`load_task`, `doc_to_target` / `doc_to_text` (to check the log against the data), `process_results`,
`judge_ahead` (every task's records handed over, as `process_results` keeps them in process), `evaluate` and
`plan`, so a later judgement gives the numbers an in-process one gives.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from emo_tasks import subset
from emo_tasks.common import file_stamp, placeholder_name, row_target, say_if_all_empty
from emo_tasks.metrics import paired_fields
from emo_tasks.models import omni
from emo_tasks.results.layout import ANSWERS_SUFFIX, JUDGE_DIR, JUDGE_LOG_SUFFIX, summary_file
from emo_tasks.settings import (
    CommonSettings,
    environ,
    lmms_eval_predict_only,
    refuse_batch_judge,
    refuse_lmms_flags,
)
from judges import BatchStats, JudgeCache, JudgeEngine, get_engine
from judges.atomic import atomic_write_text

from . import scoring
from .data import DataError, benchmark_root, check_videos_exist, load_task_docs, probe_video
from .judge import Judgement, TaskAnswers, judge, judge_shutdown, judged_identity
from .protocol import model_prompt, prompt_hashes, spec_for
from .remux import model_ready_path
from .run_state import STATE, record_key
from .sample import sample_root
from .scoring import TABLE, SampleResult
from .settings import MMESettings


def parse_source(name: str) -> tuple[str, str]:
    """`dataset_name: mme_emotion/<source>/<Task>` -> (source, task key)."""
    parts = str(name).split("/")
    if len(parts) != 3 or parts[0] != "mme_emotion" or parts[1] not in ("benchmark", "sample"):
        raise DataError(f"dataset_name must be mme_emotion/<benchmark|sample>/<Task>, got {name!r}")
    spec_for(parts[2])
    return parts[1], parts[2]


def load_task(dataset_name: str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Check the settings `env` gives, load and validate the task `dataset_name` names (a YAML's
    `mme_emotion/<benchmark|sample>/<Task>`), register both for the aggregation, and return the docs in the order
    lmms-eval gets them (a sample's `doc_id` is its index here).

    Raises before anything runs: SettingsError / JudgeConfigError for a setting (or no judge where one is
    needed), DataError for the data (missing files, bad rows, missing videos)."""
    source, key = parse_source(dataset_name)
    spec = spec_for(key)
    # fail fast, before inference: a malformed value, or no judge configured for a real run
    refuse_batch_judge(env)  # not the generic "not accepted" list of EMO_JUDGE: name the two-stage flow
    settings = MMESettings.from_env(env, source)
    if settings.judge_mode == "api" and settings.engine.cache_path is not None:
        JudgeCache(settings.engine.cache_path).close()  # a corrupt cache file fails now, naming itself
    if source == "sample":
        root = sample_root(settings.common.cache_dir)
    else:
        root = benchmark_root(settings.common.data_root, settings.hub_id)
    docs = load_task_docs(spec, root, source=source, need_clues=settings.audio_clues != "live")
    docs = subset.restrict(dataset_name, docs, subset_unit, env)  # before the video check: a subset needs its own
    check_videos_exist(docs, spec.task)
    STATE.tasks.register(source, spec.key, settings, docs)
    return docs


def subset_unit(doc: Mapping[str, Any]) -> str:
    """A row's key in a subset file (`emo_tasks.subset`): its row number in its task, as report pairs runs."""
    return str(int(doc["row"]))


def subset_stratum(doc: Mapping[str, Any]) -> str:
    """The category a gate subset is stratified by within a task (`emo-tasks plan-gate`): the gold label."""
    return str(doc["label"])


def process_docs(dataset: Any) -> Any:
    """lmms-eval's hook: `load_task` for the placeholder row's task, with the process environment (see
    `emo_tasks/lmms_patch.py`).  Under `lmms-eval --predict_only` with EMO_JUDGE unset, judging is deferred: a
    GPU job needs no judge configured to save its answers for `emo-tasks judge`."""
    import datasets

    env = environ()
    if lmms_eval_predict_only() and not (env.get("EMO_JUDGE") or "").strip():
        env["EMO_JUDGE"] = "defer"
    name = placeholder_name(dataset, "MME-Emotion")
    settings = MMESettings.from_env(env, parse_source(name)[0])
    # before inference: lmms-eval flags that would give wrong numbers (--launcher_args when it judges in process)
    refuse_lmms_flags("MME-Emotion", judged_in_process=settings.judge_mode == "api")
    omni.prepare(settings.common.model_audio)  # an omni class that cannot hear the videos' audio is refused here
    return datasets.Dataset.from_list(load_task(name, env))


def lookup_doc(record: dict[str, Any]) -> dict[str, Any]:
    """The full doc behind a `process_results` record (registered by process_docs in this process)."""
    loaded = STATE.tasks.get(*record_key(record))
    doc = loaded.docs.get(int(record["row"]))
    if doc is None:
        key = (*record_key(record), int(record["row"]))
        raise KeyError(f"MME-Emotion doc {key} was not loaded in this process (process_docs did not run?)")
    return doc


# --------------------------------------------------------------------------------------------- model input
def _common(doc: Mapping[str, Any]) -> CommonSettings:
    """The settings of the doc's task (process_docs registered them); read afresh for a doc from elsewhere."""
    loaded = STATE.tasks.find(doc.get("data_source", "benchmark"), doc.get("mme_task", ""))
    return loaded.settings.common if loaded is not None else CommonSettings.from_env(environ())


def doc_to_visual(doc: dict[str, Any]) -> list[str]:
    """`[video_path]`: what lmms-eval's video models (and omni models reading the audio track) take.

    The file is probed (opened, one frame decoded) first, so a corrupt video fails here naming the file.  Containers
    that some model classes do not take as video (.mkv, .webm, ...) are handed over as a cached .mp4 remux
    (see remux.py)."""
    probe_video(doc["video_path"])
    common = _common(doc)
    return [model_ready_path(doc["video_path"], common.cache_dir, common.video_remux)]


def _kwargs(lmms_eval_specific_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    return dict(lmms_eval_specific_kwargs or {})


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    """The closed-set prompt. kwargs: `medium` (video | audio | video frames), `prompt` (a replacement
    template), `pre_prompt` / `post_prompt` (text around it)."""
    kw = _kwargs(lmms_eval_specific_kwargs)
    text = model_prompt(spec_for(doc["mme_task"]), doc["label_set"], kw.get("medium") or "video", kw.get("prompt"))
    return f"{kw.get('pre_prompt', '')}{text}{kw.get('post_prompt', '')}"


def doc_to_target(doc: dict[str, Any], model_specific_target_kwargs: Any = None) -> str:
    """`"<label> #<hash>"`: the gold label plus a hash of the row's portable content (task, row, video id, label,
    label set, source, and the released audio clue when the judge uses it), never a path.  lmms-eval logs it
    per sample even with --predict_only, so the judge stage, run later and maybe on another machine with the data
    elsewhere, can check that each answer is mapped back to the same row.  (lmms-eval passes the YAML's
    `model_specific_target_kwargs` when it has some; ours has none.)"""
    content: dict[str, Any] = {
        "task": doc["mme_task"],
        "row": int(doc["row"]),
        "video_id": doc["video_id"],
        "label": doc["label"],
        "label_set": list(doc["label_set"]),
        "data_source": doc.get("data_source", "benchmark"),
    }
    loaded = STATE.tasks.find(doc.get("data_source", "benchmark"), doc["mme_task"])
    if loaded is None or loaded.settings.audio_clues == "released":
        content["audio_clue"] = doc.get("audio_clue")
    return row_target(doc["label"], content)


def doc_to_messages(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> list[dict]:
    """Chat models: one user turn, the video first, then the prompt (audio-only models get the same file as
    audio).  The Qwen-Omni chat classes, which never read a video's own track, also get its audio as a WAV part
    after the video (`emo_tasks.models.omni`; EMO_MODEL_AUDIO=off leaves it out)."""
    kw = _kwargs(lmms_eval_specific_kwargs)
    media_type = "audio" if kw.get("medium") == "audio" else "video"
    video = doc_to_visual(doc)[0]
    content: list[dict[str, Any]] = [{"type": media_type, "url": video}]
    wav = omni.audio_part(doc["video_path"], _common(doc).cache_dir) if media_type == "video" else None
    if wav is not None:
        content.append({"type": "audio", "url": wav})
    content.append({"type": "text", "text": doc_to_text(doc, kw)})
    return [{"role": "user", "content": content}]


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Record the answer with what the judge will need; no network.  The record is also kept in the run state (a
    locked dict: lmms-eval calls this from 4 threads), so that the first aggregation can judge every task of the
    run in one pipeline.  (A one-answer list, as a samples file of an lmms-eval that does not unwrap it holds, is
    the answer.)"""
    answer = results[0] if results else ""
    if isinstance(answer, list | tuple) and len(answer) == 1:
        answer = answer[0]
    if not isinstance(answer, str):
        answer = "" if answer is None else str(answer)
    record = {
        "mme_task": doc["mme_task"],
        "row": int(doc["row"]),
        "video_id": doc["video_id"],
        "label": doc["label"],
        "data_source": doc.get("data_source", "benchmark"),
        "answer": answer,
        # lmms-eval's --baseline reads the sample's CoT-S here; the judge phase fills `score` (`_evaluate`)
        **paired_fields(TABLE, None),
    }
    STATE.tasks.record_answer(record)
    return {metric: record for metric in TABLE.names}


# ------------------------------------------------------------------------------------------------ aggregation
@dataclass
class TaskResult:
    """One judge-and-score pass over a task's records."""

    metrics: dict[str, Any]
    samples: list[SampleResult] = field(default_factory=list)
    judgements: list[Judgement | None] = field(default_factory=list)
    summary: dict[str, Any] | None = None


def settings_for(records: Sequence[Mapping[str, Any]]) -> MMESettings:
    """The settings process_docs checked for the records' task (the first task's, should records mix tasks)."""
    source, key = min({record_key(r) for r in records})
    return STATE.tasks.get(source, key).settings


def evaluate(items: Sequence[dict[str, Any]], args: Any = None) -> dict[str, Any]:
    """Every metric of one task's records: judged and scored once, memoised on (settings, records' content)."""
    return evaluate_task(items, args).metrics


def evaluate_task(items: Sequence[dict[str, Any]], args: Any = None) -> TaskResult:
    """`evaluate` with the per-sample results, judgements and the summary."""
    if not items:
        return TaskResult(dict.fromkeys(TABLE.names))
    settings = settings_for(items)
    key = (settings, tuple((r["mme_task"], r["row"], r["video_id"], r["answer"]) for r in items))
    return STATE.memo.get(key, lambda: _evaluate(list(items), settings, args))


# ------------------------------------------------------------------------------------- the judge phase
def _single_task(records: Sequence[Mapping[str, Any]]) -> bool:
    return bool(records) and len({record_key(r) for r in records}) == 1


def _label(items: Sequence[Mapping[str, Any]]) -> str:
    tasks = sorted({r["mme_task"] for r in items})
    source = items[0].get("data_source", "benchmark")
    return ",".join(spec_for(t).task for t in tasks) + (" [sample]" if source == "sample" else "")


def _answers(records: Sequence[Mapping[str, Any]]) -> TaskAnswers:
    """A task's records as the judge takes them: each with its full row, the task's settings and its name."""
    items = [{**lookup_doc(dict(r)), **r} for r in records]
    return TaskAnswers(items, settings_for(records), _label(items))


def _held(records: Sequence[Mapping[str, Any]]) -> list[TaskAnswers]:
    """Every task whose answers this process holds (`process_results` keeps them; the judge stage hands them over,
    `judge_ahead`), as the judge takes them, each handed over once; none for records that mix tasks."""
    if not _single_task(records):
        return []
    return [_answers(answers) for answers in STATE.tasks.take_answers().values()]


def judge_ahead(groups: Sequence[Sequence[dict[str, Any]]]) -> None:
    """The judge stage's hand-over, before the aggregations: these tasks' records (one task per group, as their
    aggregations will get them) are the answers this process holds, so the first aggregation judges every one of
    them in one pipeline (`_held`, `judge.judge`), as in an in-process run, instead of one task after another."""
    STATE.tasks.hold([records for records in groups if _single_task(records)])


def _evaluate(records: list[dict[str, Any]], settings: MMESettings, args: Any) -> TaskResult:
    started = time.perf_counter()
    task = _answers(records)  # each record with its full row, as the judge and the scoring take them
    items, label, mode = list(task.items), task.desc, settings.judge_mode
    say_if_all_empty(f"MME-Emotion {label}", [r["answer"] for r in items])
    tasks = sorted({r["mme_task"] for r in items})
    source = items[0].get("data_source", "benchmark")
    judgements: list[Judgement | None] = [None] * len(items)
    stats: dict[str, BatchStats] = {}
    fingerprint = None
    if mode == "api":
        held = _held(records)  # every task's answers this process holds: the first aggregation judges them all
        judgements, stats, fingerprint = judge(task, held=held)
    elif mode == "offline":
        logger.warning(
            f"{label}: EMO_JUDGE=offline (or no judge configured for the sample): recognition by label matching, "
            "reasoning not available. Not comparable with the paper."
        )
    samples: list[SampleResult] = []
    if mode != "defer":  # deferred: nothing judged, nothing scored
        samples = [scoring.score_sample(spec_for(r["mme_task"]), r, j) for r, j in zip(items, judgements, strict=True)]
    token_counts = _token_counts(items, label)
    metrics = scoring.task_metrics(samples, settings, token_counts)
    if mode == "defer":  # judged later by `emo-tasks judge`: the answers are kept, avg_token is all there is
        _defer(items, args, tasks, source, label)
        return TaskResult(metrics, [], judgements)
    failures = scoring.failure_counts((j.failed_stage, j.failure_reason) for j in judgements if j and not j.ok)
    api = mode == "api"
    summary = {
        "benchmark": "MME-Emotion",
        "tasks": [spec_for(t).task for t in tasks],
        "data_source": source,
        "judge_mode": mode,
        "judge_protocol": settings.judge_protocol if api else None,
        "audio_clues": settings.audio_clues if api else None,
        "judge_models": settings.judge_models if api else None,
        "judge_fingerprint": fingerprint,  # the judge setup's, as the judge ran (`judge.Judged`)
        "alpha": settings.alpha,
        "prompt_hashes": prompt_hashes(),
        "n_samples": len(items),
        "metrics": {k: (None if v is None else (int(v) if isinstance(v, scoring.Count) else float(v)))
                    for k, v in metrics.items()},
        "judge_failures": failures,
        # judged answers the official per-task script of a single-label task reads differently (`: d/1` only)
        "n_rule_differs": sum(j.rule_differs for j in judgements if j is not None and j.ok),
        "per_category": scoring.category_breakdown(samples, settings),
        "seconds": round(time.perf_counter() - started, 3),
        # judge failures that are answers cut off inside an agent's reasoning (a reasoning judge out of tokens)
        "n_judge_truncated": sum(j.truncated for j in judgements if j and not j.ok) if api else None,
        # what the endpoint said of the judge models' shutdown: a fact about the endpoint recorded with the
        # fingerprint, never in a key (last: the keys before it keep their order)
        "judge_shutdown": judge_shutdown(settings) if api else None,
    }  # fmt: skip
    if api:
        summary.update(judge_accounting(settings, stats))
    _report(label, summary)
    rows = [log_row(item, j, s) for item, j, s in zip(items, judgements, samples, strict=True)]
    for record, row in zip(records, rows, strict=True):  # the records lmms-eval logs: its --baseline reads them
        record.update(paired_fields(TABLE, TABLE.paired.per_sample({**row, "alpha": settings.alpha})))
    _write_logs(args, tasks, source, summary, rows)
    return TaskResult(metrics, samples, judgements, summary)


def _token_counts(items: Sequence[Mapping[str, Any]], label: str) -> list[int] | None:
    from emo_tasks.judging.tokens import TokenizerUnavailable, count_tokens

    try:
        return count_tokens(r["answer"] for r in items)
    except TokenizerUnavailable as exc:
        logger.warning(f"{label}: avg_token not available: {exc}")
        return None


def judge_endpoint(settings: MMESettings) -> str:
    """Where the judge was asked, as host[:port] only (`EndpointConfig.host`: never a key, a user or a path)."""
    return settings.engine.endpoint.host


#: The `usage` fields of the summary, per agent, from that agent's `BatchStats`.
USAGE_FIELDS = ("requests", "unique_requests", "cache_hits", "calls", "prompt_tokens", "completion_tokens")


def judge_accounting(settings: MMESettings, stats: Mapping[str, BatchStats]) -> dict[str, Any]:
    """The summary's api-mode accounting: `judge_endpoint` (host[:port]), `api_models` ({agent: {the model id the
    API reported: answers}}, cached answers included) and `usage` ({agent: requests, unique requests, cache hits,
    HTTP calls, prompt and completion tokens of the calls made}), for the agents that ran: step, audio, judge."""
    roles = [r for r in ("step", "audio", "judge") if r in stats]
    return {
        "judge_endpoint": judge_endpoint(settings),
        "api_models": {r: dict(sorted(stats[r].api_models.items())) for r in roles},
        "usage": {r: {f: getattr(stats[r], f) for f in USAGE_FIELDS} for r in roles},
        # where the answers came from: a cache filled from another endpoint answers this run too
        "answer_endpoints": {r: dict(sorted(stats[r].endpoints.items())) for r in roles},
    }


# ------------------------------------------------------------------------------------------------ deferred
def _defer(items: list[dict[str, Any]], args: Any, tasks: list[str], source: str, label: str) -> None:
    """EMO_JUDGE=defer: no judge now (every judge-dependent metric is None).  The answers are kept (lmms-eval's
    samples file with --log_samples, else our answers file), and one line on stderr per run says what to run
    next."""
    output_path = getattr(args, "output_path", None) if args is not None else None
    log_samples = bool(getattr(args, "log_samples", False)) if args is not None else False
    if output_path and not log_samples:
        path = _write_answers(output_path, tasks, source, items)
        logger.info(f"{label}: judging deferred; the answers are in {path}")
    else:
        logger.info(f"{label}: judging deferred (EMO_JUDGE=defer)")
    _deferred_notice(output_path)


def _deferred_notice(output_path: str | None) -> None:
    """Once per output folder and process (a group's tasks share one line): what to run next, on stderr (seen
    whatever lmms-eval's log level) and in the log."""
    if not STATE.first_notice(None if output_path is None else str(output_path)):
        return
    if output_path:
        line = f"emo-tasks: MME-Emotion judging deferred: run  emo-tasks judge {output_path}"
    else:
        line = (
            "emo-tasks: MME-Emotion judging deferred, but the answers are only kept with --output_path and "
            "--log_samples: rerun with both, then run  emo-tasks judge <output_path>"
        )
    logger.warning(line)
    print(line, file=sys.stderr, flush=True)


def _write_answers(output_path: str, tasks: list[str], source: str, items: Sequence[dict[str, Any]]) -> Path:
    """`<output_path>/emo_tasks_judge/[sample_]<task>_<stamp>_answers.jsonl`: one line per sample with the fields
    of lmms-eval's samples file that the judge stage reads (`doc_id`, `target`, `filtered_resps`: the answer, which
    lmms-eval's samples file also holds unwrapped for one-request documents), for runs without --log_samples."""
    from judges.audit import write_audit_jsonl

    rows = [
        {
            "doc_id": STATE.tasks.get(*record_key(item)).index[int(item["row"])],
            "target": doc_to_target(item),
            "filtered_resps": item["answer"],
        }
        for item in items
    ]
    path = Path(output_path) / JUDGE_DIR / f"{_log_name(tasks, source)}_{file_stamp('%Y%m%dT%H%M%S')}"
    path = path.with_name(path.name + ANSWERS_SUFFIX)
    write_audit_jsonl(path, rows)
    return path


def _log_name(tasks: Sequence[str], source: str) -> str:
    return ("sample_" if source == "sample" else "") + "+".join(spec_for(t).task for t in tasks)


# ------------------------------------------------------------------------------------------------ dry run
def plan(
    records: Sequence[Mapping[str, Any]],
    settings: MMESettings | None = None,
    engine: JudgeEngine | None = None,
    lines: bool = False,
) -> list[dict[str, Any]]:
    """The dry run of `evaluate`'s judge phase over `records` (`process_results` records of loaded tasks): one
    dict per agent (step, audio with live clues, judge) saying how many requests a run would make, how many the
    cache answers and their token counts; sends nothing.  `settings`: the records' task settings
    (`settings_for`) by default; `engine`: the shared engine for them; `lines`: also each request's line in a batch
    judging (`batch_lines`, for `--dry-run --batch`).  See `dry_run.plan` for the keys."""
    from .dry_run import plan as plan_items

    settings = settings_for(records) if settings is None else settings
    engine = get_engine(settings.engine) if engine is None else engine
    return plan_items([{**lookup_doc(dict(r)), **r} for r in records], settings, engine, lines=lines)


def log_row(item: Mapping[str, Any], judgement: Judgement | None, result: SampleResult) -> dict[str, Any]:
    """One line of the per-sample judge log (the fields `results.read_samples` and readers of the log use)."""
    j = judgement
    return {
        "task": item["mme_task"],
        "row": int(item["row"]),
        "video_id": item["video_id"],
        "label": item["label"],
        "answer": item["answer"],
        "status": result.status,
        "failed_stage": j.failed_stage if j else None,
        "failure_reason": j.failure_reason if j else None,
        "failure_detail": j.failure_detail if j else None,
        "audio_clue": j.audio_clue if j else item.get("audio_clue"),
        "step_text": j.step_text if j else None,
        "steps": list(j.steps) if j else [],
        "judge_text": j.judge_text if j else None,
        "ratings": [[n, d] for n, d in j.ratings] if j else [],
        "recognition": result.recognition,
        "reasoning": result.reasoning,
        "n_steps": result.n_steps,
        "strict_recognition": result.strict_recognition,
        "predicted_labels": list(result.predicted_labels),
        "cached": dict(j.cached) if j else {},
        # the content identity of the video the judge saw (whole-file hash, memoised: hashed when judged), so a
        # reader can tell the file now at that path from the one judged (`view.judge_frames`); None unjudged
        "video_identity": judged_identity(item) if j else None,
        # the whole answers of the agents that reasoned (`<think>…`), by stage; their answer parts are above
        "raw_answers": dict(j.raw) if j else {},
    }


def _report(label: str, summary: dict[str, Any]) -> None:
    m = summary["metrics"]

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.2f}"

    logger.info(
        f"{label}: Rec-S {f(m['rec_s'])}, Rea-S {f(m['rea_s'])}, CoT-S {f(m['cot_s'])}, Avg Step {f(m['avg_step'])}, "
        f"scored {m['n_scored']}/{summary['n_samples']}, judge failures {m['n_judge_failed']} "
        f"{summary['judge_failures'] or ''} (judge: {summary['judge_mode']})"
    )
    if summary.get("n_judge_truncated"):
        line = (
            f"emo-tasks: {label}: {summary['n_judge_truncated']} answers of the judge agents were cut off inside "
            "their reasoning (n_judge_truncated, counted as judge failures): give the judge more tokens "
            "(docs/judges.md#reasoning-judges)"
        )
        logger.warning(line)
        print(line, file=sys.stderr, flush=True)


def _write_logs(
    args: Any, tasks: list[str], source: str, summary: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> None:
    """With --output_path: `<output_path>/emo_tasks_judge/<task>_<time>_judge.jsonl` (one line per sample: answer,
    steps, ratings, raw judge text, failure reason) and `..._summary.json`."""
    output_path = getattr(args, "output_path", None) if args is not None else None
    if not output_path:
        return
    from judges.audit import json_text, write_audit_jsonl

    log = Path(output_path) / JUDGE_DIR / f"{_log_name(tasks, source)}_{file_stamp('%Y%m%dT%H%M%S')}{JUDGE_LOG_SUFFIX}"
    write_audit_jsonl(log, rows)  # keys redacted, any string survives
    atomic_write_text(summary_file(log), json_text(summary, indent=2))
