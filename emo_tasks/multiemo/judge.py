"""MultiEmo-Bench's optional LLM-as-a-judge stage, run over saved predictions of several models.

Why a separate stage: the paper's judge variant needs *several* models' (score, reason) answers for the same
(image, emotion), which only exist after each model's own lmms-eval run.  Candidates are shown without model or
file names and in an order shuffled per item (seeded, reproducible) so the judge can favour neither a name nor a
position.  The judged rows are written in the predictions format, so they can be re-scored or judged again.

    python -m emo_tasks.multiemo.judge --data multiemo.jsonl --predictions a.jsonl b.jsonl --out judged.jsonl

Inputs: our `emo_tasks_judge/multiemo_<time>_predictions.jsonl` files or lmms-eval `--log_samples` files
(`*_samples_multiemo*.jsonl`, the record under "precision_ours"); the shape is detected per line.

`emo-tasks judge RUN_DIR --multiemo-judge` runs the same judge over ONE run's answers (`judge_run_predictions`,
the run's model as the only candidate; `plan` is its dry run).  Its metrics are the judge's scores, reported apart
from the model's own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emo_tasks.common import DataError, file_stamp, iter_jsonl, load_yaml
from emo_tasks.results.layout import JUDGE_DIR, SUMMARY_SUFFIX
from emo_tasks.settings import SettingsError, environ
from judges import BatchStats, ImagePart, JudgeRequest, run_batch, user_message
from judges.config import JudgeConfigError
from judges.reasoning import answer_part

from . import scoring
from .baseline import json_safe
from .data import EMOTIONS, data_file, image_result, load_images
from .run_state import loaded
from .settings import MultiEmoSettings

PROMPT_FILE = Path(__file__).with_name("judge.yml")
#: Longest candidate reason shown to the judge (a runaway model answer must not swamp the prompt).
REASON_MAX_CHARS = 600
IMAGE_MAX_SIDE = 1024
SAMPLES_KEY = "precision_ours"

Item = tuple[str, str]  # (image_id, emotion)

_FINAL_RE = re.compile(r"final\s+score\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_CONCLUSION_RE = re.compile(r"conclusion\s*\**\s*[:\-]\s*\**", re.IGNORECASE)


def prompt_spec() -> dict[str, str]:
    """The judge prompt, kept as data so its wording can be read and changed without touching code."""
    return load_yaml(str(PROMPT_FILE))


class Predictions(dict):
    """{(image_id, emotion): record} of one model's parsed answers, plus what was skipped (to be counted)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.n_rows = 0
        self.n_unparsed = 0
        self.image_ids: set[str] = set()


# ------------------------------------------------------------------------------------------------ inputs
def load_predictions(path: str | Path) -> Predictions:
    """One model's parsed (score, reason) per (image_id, emotion); unparsed rows are skipped and counted.

    Accepts our predictions files and lmms-eval `--log_samples` files, detected per line, because a user may have
    either (or both) depending on how the first stage was run.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"predictions file not found: {path}")
    out = Predictions(path)
    seen: dict[Item, int] = {}
    for n, row in iter_jsonl(path):
        where = f"{path} line {n}"
        record = _record_of(row, where)
        key = (record["image_id"], record["emotion"])
        if key in seen:
            raise DataError(f"{where}: {key[0]}/{key[1]} repeats line {seen[key]} (one answer per model expected)")
        seen[key] = n
        out.n_rows += 1
        out.image_ids.add(key[0])
        # predictions files say "score"; lmms-eval sample logs carry our record's "predicted_score"
        score = record.get("score", record.get("predicted_score"))
        if record.get("parse_status") != "parsed" or not _is_score(score):
            out.n_unparsed += 1
            continue
        out[key] = {"score": float(score), "reason": record.get("reason"), "line": n}
    if out.n_rows == 0:
        raise DataError(f"predictions file {path} has no rows")
    return out


def _record_of(row: Any, where: str) -> dict[str, Any]:
    if isinstance(row, dict) and isinstance(row.get(SAMPLES_KEY), dict):
        row = row[SAMPLES_KEY]  # an lmms-eval --log_samples line
    if not isinstance(row, dict) or not isinstance(row.get("image_id"), str) or "emotion" not in row:
        raise DataError(
            f"{where}: neither a predictions row (image_id, emotion, score, reason, parse_status) nor an lmms-eval "
            f"samples line with the record under {SAMPLES_KEY!r}"
        )
    if row["emotion"] not in EMOTIONS:
        raise DataError(f"{where}: emotion {row['emotion']!r} is not one of {', '.join(EMOTIONS)}")
    return row


def _is_score(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100


# ------------------------------------------------------------------------------------------------ requests
def parse_final_score(text: str | None) -> float | None:
    """The last "Final score: N" in the answer when 0 <= N <= 100, else None.  A reasoning judge's answer is read
    after its reasoning (`judges.reasoning.answer_part`); one cut off inside its reasoning has none."""
    matches = _FINAL_RE.findall(answer_part(text) or "")
    if not matches:
        return None
    value = float(matches[-1])
    return value if 0 <= value <= 100 else None


def final_score_validator(text: str) -> str | None:
    """Engine validator: an answer without a usable final score is asked again, then counted as a failure."""
    matches = _FINAL_RE.findall(answer_part(text) or "")
    if not matches:
        return "no 'Final score: <0-100>' line"
    if parse_final_score(text) is None:
        return f"final score {matches[-1]} is outside 0..100"
    return None


def conclusion_of(text: str | None) -> str | None:
    """The judge's conclusion (the text before its final score, after any reasoning), as the judged row's reason."""
    text = answer_part(text)
    if not text:
        return None
    finals = list(_FINAL_RE.finditer(text))
    body = text[: finals[-1].start()] if finals else text
    marks = list(_CONCLUSION_RE.finditer(body))
    if marks:
        body = body[marks[-1].end() :]
    else:  # no "Conclusion:" label: its last paragraph
        paragraphs = [p for p in re.split(r"\n\s*\n", body) if p.strip()]
        body = paragraphs[-1] if paragraphs else ""
    body = " ".join(body.replace("*", " ").split())
    return body or None


def order_for(seed: int, image_id: str, emotion: str, n: int) -> list[int]:
    """A per-item permutation, reproducible from (seed, image, emotion): position bias cannot favour one model."""
    digest = hashlib.sha256(f"{seed}\x00{image_id}\x00{emotion}".encode()).digest()
    order = list(range(n))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


def _format_score(score: float) -> str:
    return f"{score:g}"


def _clean_reason(reason: Any) -> str:
    text = " ".join(str(reason or "").split()).replace('"', "'")
    if not text:
        return prompt_spec()["no_reason"]
    return text if len(text) <= REASON_MAX_CHARS else text[: REASON_MAX_CHARS - 3] + "..."


def prompt_text(emotion: str, candidates: Sequence[dict[str, Any]]) -> str:
    """The judge's text for one item; `candidates` already in their shown order (no model names in them)."""
    spec = prompt_spec()
    lines = [
        spec["candidate"].format(index=i, score=_format_score(c["score"]), reason=_clean_reason(c.get("reason")))
        for i, c in enumerate(candidates, start=1)
    ]
    return spec["template"].format(emotion=emotion, n_candidates=len(lines), candidates="\n".join(lines))


def build_requests(
    images: Sequence[dict[str, Any]],
    predictions_by_model: Sequence[dict[Item, dict[str, Any]]],
    seed: int = 0,
    judge_model: str | None = None,
    sampling: Sequence[tuple[str, object]] = (),
) -> list[tuple[Item, JudgeRequest]]:
    """One judge request per (image, emotion) with at least one parsed prediction, in data then EMOTIONS order.
    `judge_model`: the model to ask (the settings' EMO_JUDGE_MODEL); None leaves it to the engine's "judge" role.
    `sampling`: a preset's sampling settings (`MultiEmoSettings.judge_sampling`); none: temperature 0 only."""
    out: list[tuple[Item, JudgeRequest]] = []
    extra = request_sampling(sampling)
    for img in images:
        for emotion in EMOTIONS:
            key = (img["image_id"], emotion)
            found = [preds[key] for preds in predictions_by_model if key in preds]
            if not found:
                continue
            shown = [found[i] for i in order_for(seed, key[0], emotion, len(found))]
            request = JudgeRequest(
                [user_message(ImagePart(img["image_path"], max_side=IMAGE_MAX_SIDE), prompt_text(emotion, shown))],
                role="judge",
                model=judge_model,
                **extra,
                validate=final_score_validator,
                sample_id=f"{key[0]}/{emotion}",
            )
            out.append((key, request))
    return out


def request_sampling(sampling: Sequence[tuple[str, object]]) -> dict[str, Any]:
    """The `JudgeRequest` sampling arguments for a preset's settings: temperature 0 alone without any (the requests,
    and cache keys, as always)."""
    rest = dict(sampling)
    out: dict[str, Any] = {"temperature": float(rest.pop("temperature", 0.0))}  # type: ignore[arg-type]
    if rest.get("max_tokens") is not None:
        out["max_tokens"] = int(rest.pop("max_tokens"))  # type: ignore[call-overload]
    if rest:
        out["params"] = rest
    return out


def judge_fingerprint(settings: MultiEmoSettings, listing: Any = None) -> dict[str, Any]:
    """The fingerprint of the optional judge's setup (`judges.fingerprint.fingerprint`): its model, what `listing`
    (the endpoint's `/models`) says is served under it, its sampling settings and the hash of judge.yml."""
    from judges.fingerprint import fingerprint

    params = JudgeRequest([], model=settings.judge_model, **request_sampling(settings.judge_sampling)).payload_params()
    return fingerprint(
        {"judge": (settings.judge_model, params)}, protocol="multiemo judge", prompts=prompt_spec(), listing=listing
    )


def judge_rows(
    evaluated: Sequence[dict[str, Any]],
    predictions: Sequence[dict[Item, dict[str, Any]]],
    *,
    seed: int = 0,
    progress: bool | None = None,
    settings: MultiEmoSettings,
    desc: str = "multiemo judge stage",
) -> tuple[list[dict[str, Any]], int, BatchStats]:
    """Ask the judge about every (image, emotion) of `evaluated` that has a candidate, through the engine of
    `settings` (its answer cache), and return (rows, number of requests, the batch's BatchStats).  `rows`: 8 per
    image, in `evaluated` then EMOTIONS order, in the predictions format (`score` None with parse_status
    "judge_failed" or "no_candidates" when there is no usable judged score)."""
    pairs = build_requests(
        evaluated, predictions, seed=seed, judge_model=settings.judge_model, sampling=settings.judge_sampling
    )
    batch = run_batch([req for _, req in pairs], desc=desc, progress=progress, settings=settings.engine)

    judged: dict[Item, dict[str, Any]] = {}
    for (key, _), result in zip(pairs, batch, strict=True):
        n_candidates = sum(key in p for p in predictions)
        score = parse_final_score(result.text) if result.ok else None
        judged[key] = {
            "image_id": key[0],
            "emotion": key[1],
            "score": score,
            "reason": conclusion_of(result.text) if score is not None else None,
            "parse_status": "parsed" if score is not None else "judge_failed",
            "answer": result.text,
            "n_candidates": n_candidates,
            "judge_model": result.model,
            "judge_error": None if score is not None else (result.error or "no final score"),
        }
    rows: list[dict[str, Any]] = []
    for img in evaluated:
        for emotion in EMOTIONS:
            rows.append(
                judged.get((img["image_id"], emotion))
                or {
                    "image_id": img["image_id"],
                    "emotion": emotion,
                    "score": None,
                    "reason": None,
                    "parse_status": "no_candidates",
                    "answer": None,
                    "n_candidates": 0,
                    "judge_model": None,
                    "judge_error": None,
                }
            )
    return rows, len(pairs), batch.stats


def n_truncated(rows: Sequence[dict[str, Any]]) -> int:
    """Judged rows whose judge answer was cut off inside its reasoning (counted among the judge failures too)."""
    return sum(r["parse_status"] == "judge_failed" and r["judge_error"] == "truncated" for r in rows)


def judged_images(evaluated: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]) -> list[scoring.ImageResult]:
    """One ImageResult per image from its 8 judged rows (`judge_rows` order); `n_parse_failed`: its rows without a
    usable judged score."""
    n = len(EMOTIONS)
    out = []
    for i, img in enumerate(evaluated):
        scores = [row["score"] for row in rows[i * n : (i + 1) * n]]
        out.append(image_result(img, scores, sum(score is None for score in scores)))
    return out


# ------------------------------------------------------------------------------------------------ the stage
def run_judge_stage(
    data_path: str | Path,
    prediction_paths: Sequence[str | Path],
    seed: int = 0,
    progress: bool | None = None,
    *,
    settings: MultiEmoSettings,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge every (image, emotion) the models answered, then score the judge's finals like a model's answers.
    `settings`: the judge's engine (endpoint, answer cache) and model, read once at the entry point.

    Scored images are those named in any predictions file (a first stage run with --limit covers a subset).
    `seed` only orders the candidates; the single-label precision keeps scoring's default draw, so judged
    metrics stay comparable with each model's own.
    """
    if not prediction_paths:
        raise DataError("no predictions files given")
    images = load_images(Path(data_path))
    by_id = {img["image_id"]: img for img in images}
    predictions = [load_predictions(p) for p in prediction_paths]
    for preds in predictions:
        unknown = sorted(preds.image_ids - by_id.keys())
        if unknown:
            raise DataError(
                f"{preds.path} has {len(unknown)} image ids not in {data_path} (e.g. {unknown[0]!r}): "
                "were these predictions made on another data file?"
            )
    evaluated = [img for img in images if any(img["image_id"] in p.image_ids for p in predictions)]
    rows, n_items, _stats = judge_rows(evaluated, predictions, seed=seed, progress=progress, settings=settings)
    metrics = dict(scoring.score_images(judged_images(evaluated, rows)))
    metrics.update(
        n_models=len(predictions),
        n_items=n_items,
        n_judge_failed=sum(r["parse_status"] == "judge_failed" for r in rows),
        n_judge_truncated=n_truncated(rows),
        n_no_candidates=sum(r["parse_status"] == "no_candidates" for r in rows),
        n_inputs_unparsed=sum(p.n_unparsed for p in predictions),
        judge_model=settings.judge_model,
    )
    return rows, metrics


# ------------------------------------------------------------------------------------------ one run's answers
#: The dry run's name for this stage's one agent.
AGENT = "multiemo_judge"
#: Typical answer length (o200k tokens per request) for the dry run's cost estimate: the prompt (judge_stage.yml)
#: asks, per candidate, one "why it could be correct" and one "why it could be wrong" sentence, then a one- or
#: two-sentence conclusion and "Final score: N"; filled in plainly for the stage's one candidate that is ~100
#: tokens.  An estimate, not a measurement.
TYPICAL_OUTPUT_TOKENS = 100


def run_predictions(records: Sequence[dict[str, Any]]) -> dict[Item, dict[str, Any]]:
    """One run's `process_results` records as the judge's candidates: {(image_id, emotion): {score, reason}} for
    the answers with a usable score (the others get no judge request: their judged score stays missing)."""
    out: dict[Item, dict[str, Any]] = {}
    for r in records:
        if r["parse_status"] == "parsed" and _is_score(r["predicted_score"]):
            out[(r["image_id"], r["emotion"])] = {"score": float(r["predicted_score"]), "reason": r.get("reason")}
    return out


def _run_settings(records: Sequence[dict[str, Any]], settings: MultiEmoSettings | None) -> MultiEmoSettings:
    sources = sorted({r.get("data_source", "benchmark") for r in records}) or ["benchmark"]
    if len(sources) > 1:
        raise ValueError(f"MultiEmo-Bench records of one task expected, got the sources {sources}")
    if settings is None:
        got = loaded(sources[0])
        if got is None:
            raise ValueError(f"no MultiEmo-Bench {sources[0]} data loaded: call hooks.load_task first or pass settings")
        return got.settings
    if settings.source != sources[0]:
        raise ValueError(f"the records are from the {sources[0]} data, the settings are for the {settings.source} data")
    return settings


def _run_images(records: Sequence[dict[str, Any]], settings: MultiEmoSettings) -> list[dict[str, Any]]:
    """The image rows the records answer, in data order: those `load_task` registered for these settings, else
    the data file's."""
    got = loaded(settings.source)
    if got is not None and got.settings == settings:
        by_id = dict(got.images)
    else:
        by_id = {img["image_id"]: img for img in load_images(data_file(settings))}
    ids = {r["image_id"] for r in records}
    unknown = sorted(ids - by_id.keys())
    if unknown:
        raise DataError(
            f"{len(unknown)} answered MultiEmo-Bench image ids are not in the {settings.source} data "
            f"(e.g. {unknown[0]!r}): were these answers made on another data file?"
        )
    return [img for img in by_id.values() if img["image_id"] in ids]


def judge_run_predictions(
    records: Sequence[dict[str, Any]],
    settings: MultiEmoSettings | None,
    out_dir: str | Path,
    *,
    progress: bool | None = None,
) -> dict[str, Any]:
    """The LLM-as-a-judge second stage over ONE run's answers (`emo-tasks judge --multiemo-judge`): the judge sees
    each (image, emotion) with this model's (score, reason) as the only candidate, argues for and against it and
    gives its own final score.  Returns the **judged** metrics: the judge's final scores scored exactly as a
    model's answers are (`scoring.task_metrics`: the same keys as `hooks.evaluate`, named as in the metric table;
    `n_parse_failed` counts the (image, emotion) items without a usable judged score, i.e. judge failures plus
    answers that had no usable score to judge).  They are the judge's scores, not the model's: report them apart.

    `records`: the task's `process_results` records (`hooks.process_results(doc, [filtered_resps])[...]`).
    `settings`: the judge's engine (endpoint, answer cache in the emo-tasks cache folder) and model
    (EMO_JUDGE_MODEL), and the data; None: the settings `hooks.load_task` read for the records' source.
    Writes `<out_dir>/emo_tasks_judge/<multiemo|sample_multiemo>_<time>_judged_predictions.jsonl` (the judged rows,
    readable by `load_predictions`) and `..._judged_summary.json` (the metrics and the judge's accounting),
    atomically.
    """
    from emo_tasks.common import atomic_write_text
    from judges.fingerprint import served_models, shutdown_dates
    from judges.shutdown import record

    settings = _run_settings(records, settings)
    images = _run_images(records, settings)
    predictions = run_predictions(records)
    rows, n_items, stats = judge_rows(
        images, [predictions], progress=progress, settings=settings, desc="multiemo judge (one run)"
    )
    metrics = scoring.task_metrics(judged_images(images, rows), settings)

    folder = Path(out_dir) / JUDGE_DIR  # beside the in-process predictions
    prefix = f"{'sample_multiemo' if settings.source == 'sample' else 'multiemo'}_{file_stamp('%Y%m%dT%H%M%S')}"
    write_rows(folder / f"{prefix}_judged_predictions.jsonl", rows)
    summary = {
        "judged_metrics": metrics,
        "judge_model": settings.judge_model,
        "judge_fingerprint": judge_fingerprint(settings, served_models(settings.engine.endpoint)),
        # what the endpoint said of the judge model's shutdown (a fact beside the fingerprint, never in a key)
        "judge_shutdown": record(
            {"judge": settings.judge_model}, shutdown_dates(settings.engine.endpoint, [settings.judge_model], ask=False)
        ),
        "n_items": n_items,
        "n_judge_failed": sum(r["parse_status"] == "judge_failed" for r in rows),
        "n_judge_truncated": n_truncated(rows),
        "n_no_candidates": sum(r["parse_status"] == "no_candidates" for r in rows),
        "n_inputs_unparsed": len(records) - len(predictions),
        "batch": stats.to_dict(),
    }
    atomic_write_text(folder / f"{prefix}_judged{SUMMARY_SUFFIX}", json.dumps(json_safe(summary), indent=2))
    if summary["n_judge_truncated"]:
        print(
            f"emo-tasks: MultiEmo-Bench judge: {summary['n_judge_truncated']} of {n_items} judge answers were cut off "
            "inside their reasoning (n_judge_truncated, counted as judge failures): give the judge more tokens "
            "(docs/judges.md#reasoning-judges)",
            file=sys.stderr,
            flush=True,
        )
    return metrics


def plan(
    records: Sequence[dict[str, Any]], settings: MultiEmoSettings | None = None, engine: Any = None, lines: bool = False
) -> list[dict[str, Any]]:
    """What `judge_run_predictions` would send, sending nothing (`emo-tasks judge --multiemo-judge --dry-run`): one
    dict for its one agent, in the shape of MME-Emotion's plan: `{"agent": "multiemo_judge", "model", "requests",
    "unique_requests", "cached", "to_send", "estimated", "input_tokens", "max_tokens", "output_tokens_max",
    "output_tokens_cached", "output_tokens_typical"}`.

    Every request is exact (its prompt is the run's own answer), so `estimated` is 0.  `cached`: requests the
    engine's answer cache holds (`engine.lookup`); `to_send`: distinct requests not cached; `input_tokens`: over
    those, o200k text tokens plus each image's tokens at the size it is sent (`judges.media.image_tokens`);
    `max_tokens` / `output_tokens_max`: None, unbounded (these requests set no max_tokens);
    `output_tokens_cached`: the cached answers' completion tokens.  `engine`: a `judges.JudgeEngine` (default: the
    shared one for the settings).  `lines` (it renders every image): also `batch_lines`, the requests to send as
    `emo_tasks.judging.batch_plan.BatchLine`s, all in round 1 (nothing comes before them), with their lines' sizes."""
    from judges import get_engine

    settings = _run_settings(records, settings)
    engine = get_engine(settings.engine) if engine is None else engine
    images = _run_images(records, settings)
    built = build_requests(
        images, [run_predictions(records)], judge_model=settings.judge_model, sampling=settings.judge_sampling
    )
    requests = [req for _, req in built]
    hits = engine.lookup(requests)
    seen: set[str] = set()
    to_send: list[JudgeRequest] = []
    send_keys: list[str] = []
    cached_output = 0
    listing = engine.served(ask=False)
    for req, hit in zip(requests, hits, strict=True):
        key = engine.key_of(req, listing)
        if key in seen:
            continue
        seen.add(key)
        if hit is None:
            to_send.append(req)
            send_keys.append(key)
        else:
            cached_output += hit.completion_tokens
    max_tokens = requests[0].max_tokens if requests else None
    extra: dict[str, Any] = {}
    if lines:
        from emo_tasks.judging.batch_plan import BatchLine, line_bytes

        api_type = engine.endpoint.api_type
        extra["batch_lines"] = [
            BatchLine(1, req.resolved_model(), key, line_bytes(req, key, api_type), AGENT)
            for req, key in zip(to_send, send_keys, strict=True)
        ]
    return [
        {
            "agent": AGENT,
            "model": settings.judge_model,
            "requests": len(requests),
            "unique_requests": len(seen),
            "cached": sum(hit is not None for hit in hits),
            "to_send": len(to_send),
            "estimated": 0,
            "input_tokens": input_tokens(to_send),
            "max_tokens": max_tokens,
            "output_tokens_max": None if max_tokens is None else len(to_send) * max_tokens,
            "output_tokens_cached": cached_output,
            "output_tokens_typical": TYPICAL_OUTPUT_TOKENS,
            **extra,
        }
    ]


def input_tokens(requests: Sequence[JudgeRequest]) -> int:
    """Estimated prompt tokens of `requests`: o200k_base tokens of every text part, plus each image's tokens at the
    size it is sent (its longest side cut to the part's max_side) by `judges.media.image_tokens`.  The chat
    framing (a few tokens per message) is not counted."""
    from emo_tasks.judging.tokens import count_tokens
    from judges.media import image_tokens

    texts: list[str] = []
    image_total = 0
    sizes: dict[str, tuple[int, int]] = {}
    for req in requests:
        for message in req.messages:
            content = message.get("content")
            for part in content if isinstance(content, list) else [content]:
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, dict) and part.get("type") == "text":
                    texts.append(str(part.get("text") or ""))
                elif isinstance(part, ImagePart):
                    key = str(part.source)
                    if key not in sizes:
                        sizes[key] = _sent_size(part)
                    image_total += image_tokens(*sizes[key], part.detail)
    return sum(count_tokens(texts)) + image_total


def _sent_size(part: ImagePart) -> tuple[int, int]:
    """(width, height) of an image part as it is sent: PIL's `thumbnail` to max_side, read from the file header."""
    from PIL import Image

    with Image.open(part.source) as img:
        width, height = img.size
    side = part.max_side
    if not side or max(width, height) <= side:
        return width, height
    # PIL's thumbnail((side, side)): keep the aspect ratio, round to the size closest to it, at least 1
    aspect = width / height
    if aspect >= 1:
        return side, _closest(side / aspect, lambda n: abs(aspect - side / n) if n else math.inf)
    return _closest(side * aspect, lambda n: abs(aspect - n / side)), side


def _closest(value: float, key: Any) -> int:
    return max(min(math.floor(value), math.ceil(value), key=key), 1)


def write_rows(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Judged rows as JSON lines (atomically), readable again by `load_predictions`."""
    from judges.audit import write_audit_jsonl

    return write_audit_jsonl(path, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: judged metrics as JSON on stdout; configuration or data problems exit 2 with the fix on stderr."""
    ap = argparse.ArgumentParser(
        prog="python -m emo_tasks.multiemo.judge",
        description="MultiEmo-Bench LLM-as-a-judge stage over several models' saved predictions.",
    )
    ap.add_argument("--data", required=True, type=Path, help="MultiEmo-Bench data file (multiemo.jsonl)")
    ap.add_argument("--predictions", required=True, nargs="+", type=Path, help="predictions or lmms-eval samples files")
    ap.add_argument("--out", type=Path, help="write the judged rows here (predictions format)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the per-item candidate order")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", stream=sys.stderr)
    missing = [str(p) for p in (args.data, *args.predictions) if not p.is_file()]
    if missing:
        print(f"error: file not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        settings = MultiEmoSettings.from_env(environ(), "benchmark", data_file=args.data)
        rows, metrics = run_judge_stage(args.data, args.predictions, seed=args.seed, settings=settings)
    except (SettingsError, JudgeConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        write_rows(args.out, rows)
    print(json.dumps(json_safe(metrics), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
