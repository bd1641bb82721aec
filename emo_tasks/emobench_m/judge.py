"""The authors' LLM scorer of SMILE's open answers (`LaughterReason_LLMScoring.py`), run through our judge engine.

Why here: the rule metrics (BLEU, ROUGE-L) of a laughter reason say little; the authors rate each reason against
the reference on two 0-5 dimensions with an LLM.  Their prompts and rating labels are data (`protocol.yml`,
`llm_scorer`), sent as one user message each through `judges` (answer cache, retries, batch), so a rerun sends
nothing and `emo-tasks judge RUN_DIR` scores a run later with the same function.  Their aggregation is kept: per
dimension the mean over every answer, a failed rating counted 0 (their `extract_*_score(...) or 0`), the total
being the sum of the two means.  An answer the judge rates outside 0..5, or not at all, is asked again, then
counted in `n_judge_failed` (and rated 0).  An empty answer is rated 0 without asking (their CSV would hold "nan").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from judges import BatchStats, JudgeRequest, run_batch, user_message
from judges.fingerprint import fingerprint
from judges.reasoning import answer_part

from .protocol import protocol
from .settings import EmoBenchMSettings

DIMENSIONS = ("logical", "multimodal")
#: The judge protocol the judge setup records (the fingerprint's and the summary's `judge_protocol`).
PROTOCOL = "emobench_m llm scorer"


def scorer_spec() -> dict[str, Any]:
    """The `llm_scorer` section of protocol.yml (the authors' prompts, labels and scale)."""
    return protocol()["llm_scorer"]


def prompt(dimension: str, reference: str, generated: str) -> str:
    """The authors' prompt for one dimension (`create_prompt_logical` / `create_prompt_multimodal`)."""
    return scorer_spec()["dimensions"][dimension]["template"].format(reference=reference, generated=generated)


def read_rating(dimension: str, text: str | None) -> int | None:
    """The rating the authors' `extract_*_score` reads (`<label>:\\s*(\\d+)`, first match, any case), when it is on
    their scale (0..5); None otherwise.  A reasoning judge's answer is read after its reasoning."""
    label = scorer_spec()["dimensions"][dimension]["label"]
    match = re.search(rf"{re.escape(label)}:\s*(\d+)", answer_part(text) or "", re.IGNORECASE)
    low, high = scorer_spec()["scale"]
    return int(match.group(1)) if match and low <= int(match.group(1)) <= high else None


def _validator(dimension: str) -> Any:
    label = scorer_spec()["dimensions"][dimension]["label"]

    def validate(text: str) -> str | None:
        return None if read_rating(dimension, text) is not None else f"no '{label}: <0-5>' in the answer"

    return validate


def requests_for(records: Sequence[dict[str, Any]], settings: EmoBenchMSettings) -> list[tuple[int, str, JudgeRequest]]:
    """(record index, dimension, request) for every non-empty answer of `records` (SMILE's), two per answer."""
    sampling = dict(settings.judge_sampling)
    temperature = float(sampling.pop("temperature", 0.0))  # type: ignore[arg-type]
    out = []
    for i, rec in enumerate(records):
        if not str(rec.get("answer") or "").strip():
            continue
        for dim in DIMENSIONS:
            text = prompt(dim, str(rec["gold"]), str(rec["answer"]))
            out.append((i, dim, JudgeRequest([user_message(text)], role="judge", model=settings.judge_model,
                                              temperature=temperature, params=sampling, validate=_validator(dim),
                                              sample_id=f"{rec['scenario']}/{rec['row_id']}/{dim}")))  # fmt: skip
    return out


class Rated(NamedTuple):
    """`rate`'s answer: per record its ratings (`rate`), and the batch's accounting (None: nothing was asked)."""

    rows: list[dict[str, Any]]
    stats: BatchStats | None


def rate(records: Sequence[dict[str, Any]], settings: EmoBenchMSettings) -> Rated:
    """Per record: {"logical", "multimodal" (0-5, a failure 0), "failed" (a rating failed), "errors", "asked" (the
    answer was sent: not empty), "ratings" ({dimension: the rating read, None when it failed}), "judge_texts" and
    "cached" (per dimension: the judge's answer, from the cache)}; the judge's answers come from the engine of
    `settings` (cached).  Only the first four make numbers; the rest is what the judge log records."""
    rated: list[dict[str, Any]] = [{"logical": 0, "multimodal": 0, "failed": False, "errors": [], "asked": False,
                                    "ratings": {}, "judge_texts": {}, "cached": {}} for _ in records]  # fmt: skip
    pending = requests_for(records, settings)
    if not pending:
        return Rated(rated, None)
    batch = run_batch([req for _, _, req in pending], desc="emobench_m llm scorer", settings=settings.engine)
    for (i, dim, _), result in zip(pending, batch, strict=True):
        value = read_rating(dim, result.text) if result.ok else None
        if value is None:
            rated[i]["failed"] = True
            rated[i]["errors"].append(f"{dim}: {result.error or 'no rating'}")
        rated[i][dim] = value or 0
        rated[i]["asked"] = True
        rated[i]["ratings"][dim] = value
        rated[i]["judge_texts"][dim] = result.text
        rated[i]["cached"][dim] = result.cached
    return Rated(rated, batch.stats)


def judge_fingerprint(settings: EmoBenchMSettings, listing: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """The fingerprint of the LLM scorer's setup (`judges.fingerprint.fingerprint`): the judge model with what
    `listing` (the endpoint's `/models`) says is served under it, its sampling, the authors' prompts.  One function
    for the judge stage's folder name (`registry.judge_setup`) and the judge log's summary."""
    sampling = dict(settings.judge_sampling)
    params = JudgeRequest([], model=settings.judge_model, temperature=float(sampling.pop("temperature", 0.0)),  # type: ignore[arg-type]
                          params=sampling).payload_params()  # fmt: skip
    return fingerprint({"judge": (settings.judge_model, params)}, protocol=PROTOCOL, prompts=scorer_spec(),
                       listing=listing)  # fmt: skip


def record_ratings(records: Sequence[dict[str, Any]], rated: Sequence[dict[str, Any]]) -> None:
    """Write each answer's ratings into its `process_results` record (`llm_logical`, `llm_multimodal`, `llm_total`,
    `llm_failed`, `llm_errors`): lmms-eval's sample log and the judge stage's hold these dicts, so the report and
    the viewer read per-answer ratings (confidence intervals) whose mean is exactly `aggregate`'s."""
    for record, r in zip(records, rated, strict=True):
        total = r["logical"] + r["multimodal"]
        record.update(llm_logical=r["logical"], llm_multimodal=r["multimodal"], llm_total=total,
                      llm_failed=r["failed"], llm_errors=list(r["errors"]))  # fmt: skip


def aggregate(rated: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The authors' averages (`process_combined_evaluation`): per dimension the mean over all answers, the total the
    mean of the per-answer sums; and the number of answers with a failed rating."""
    n = len(rated)
    logical, multimodal = sum(r["logical"] for r in rated), sum(r["multimodal"] for r in rated)
    return {"llm_logical": (logical, n), "llm_multimodal": (multimodal, n), "llm_total": (logical + multimodal, n),
            "n_judge_failed": sum(r["failed"] for r in rated)}  # fmt: skip
