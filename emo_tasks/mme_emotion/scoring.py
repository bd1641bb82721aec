"""MME-Emotion scoring: the official metric script's formulas as small pure functions, and the metric table.

No I/O, no environment, no network: `score_sample` turns one judgement (or, offline, one answer) into per-sample
numbers, `task_metrics` turns a task's samples into every metric of `TABLE`, and `TABLE` is the one list of the
metrics (names, directions, headline flags, per-sample values over a judge-log row) that the task YAMLs, the
aggregation functions and the report are checked against or derived from.  Each function states its edge cases;
`tests/mme_emotion/test_mme_scoring.py` pins them with hand-computed cases and the official script's own behaviour
(`eval_cot/*/metrics/cal_metrics.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from emo_tasks.metrics import Metric, MetricTable

from .protocol import DEFAULT_ALPHA  # noqa: F401 - scoring's constant, defined with the protocol

if TYPE_CHECKING:
    from .judge import Judgement
    from .protocol import TaskSpec
    from .settings import MMESettings


# --------------------------------------------------------------------------------------------------- per sample
@dataclass(frozen=True)
class SampleScore:
    """One judged answer. `recognition` is the last rating's value; `reasoning` the mean of the others."""

    recognition: float
    reasoning: float
    steps: int


def recognition(values: Sequence[float]) -> float:
    """The last rating's value (official Rec).  Raises on an empty list: an unscored sample has no Rec."""
    if not values:
        raise ValueError("recognition() needs at least one rating")
    return float(values[-1])


def reasoning(values: Sequence[float]) -> float:
    """Mean of every rating but the last (official Rea).  **0.0 when there is a single rating** (official rule:
    an answer without reasoning steps earns no reasoning credit)."""
    if not values:
        raise ValueError("reasoning() needs at least one rating")
    if len(values) == 1:
        return 0.0
    rest = values[:-1]
    return float(sum(rest) / len(rest))


def score_ratings(values: Sequence[float]) -> SampleScore | None:
    """Rec, Rea and the step count of one sample's rating values; None when there are no ratings (official: the
    sample is left out of every average — we count it as a judge failure instead of losing it)."""
    if not values:
        return None
    return SampleScore(recognition(values), reasoning(values), len(values))


def cot_score(rec: float | None, rea: float | None, alpha: float = DEFAULT_ALPHA) -> float | None:
    """CoT-S = alpha * Rec-S + (1 - alpha) * Rea-S (paper eq. 3).  None if either part is not available."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if rec is None or rea is None:
        return None
    return alpha * rec + (1.0 - alpha) * rea


# --------------------------------------------------------------------------------------------------- aggregates
class MicroMean(float):
    """A mean that remembers its sum and count, so that a group can pool subtasks exactly.

    The official overall score is the micro-average over all scored samples of the 8 tasks (the per-task files
    concatenated), which a size-weighted mean of task scores only equals when no sample is left out.  lmms-eval
    stores this value as a float; `group_aggregate` reads `total` and `count` back.
    """

    total: float
    count: int

    def __new__(cls, total: float, count: int) -> MicroMean:
        if count <= 0:
            raise ValueError("MicroMean needs count >= 1 (use None for 'not available')")
        obj = super().__new__(cls, total / count)
        obj.total = float(total)
        obj.count = int(count)
        return obj

    def __reduce__(self):  # pickling / deepcopy keep the parts
        return (MicroMean, (self.total, self.count))


class Count(int):
    """A count: groups add counts instead of averaging them."""

    def __reduce__(self):
        return (Count, (int(self),))


def micro_mean(values: Iterable[float], scale: float = 1.0) -> MicroMean | None:
    """Mean of `values` times `scale` as a MicroMean; None for no values ("not available", never 0)."""
    vals = [float(v) for v in values]
    if not vals:
        return None
    return MicroMean(sum(vals) * scale, len(vals))


def group_aggregate(metrics: Sequence[Any], sizes: Sequence[int], weight_by_size: bool = True) -> Any:
    """lmms-eval group aggregation for our metrics (called with the subtasks' values and sample counts).

    - MicroMean values: pooled exactly (sum of totals / sum of counts) — the official micro-average.
    - Count values: summed.
    - None values (not available) are skipped; all None -> None.
    - Plain numbers: lmms-eval's size-weighted mean (or plain mean when weight_by_size is false).
    """
    present = [(m, s) for m, s in zip(metrics, sizes, strict=True) if m is not None and not _is_nan(m)]
    if not present:
        return None
    if all(isinstance(m, Count) for m, _ in present):
        return Count(sum(int(m) for m, _ in present))
    if all(isinstance(m, MicroMean) for m, _ in present):
        return MicroMean(sum(m.total for m, _ in present), sum(m.count for m, _ in present))
    weights = [s if weight_by_size else 1 for _, s in present]
    return sum(float(m) * w for (m, _), w in zip(present, weights, strict=True)) / sum(weights)


def _is_nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


@dataclass(frozen=True)
class Aggregate:
    """Task-level numbers, on the paper's scale (x100 for scores)."""

    rec_s: MicroMean | None
    rea_s: MicroMean | None
    cot_s: float | None
    avg_step: MicroMean | None
    n_scored: int


def aggregate(scores: Sequence[SampleScore], alpha: float = DEFAULT_ALPHA) -> Aggregate:
    """Rec-S, Rea-S (means x100), CoT-S and Avg Step over the scored samples (official `cal_metrics.py`).

    With no scored sample every number is None.  CoT-S pools like its parts: a group's CoT-S is recomputed from
    its pooled Rec-S and Rea-S, which equals alpha*Rec + (1-alpha)*Rea of the micro-averages.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    rec = micro_mean((s.recognition for s in scores), 100.0)
    rea = micro_mean((s.reasoning for s in scores), 100.0)
    steps = micro_mean(s.steps for s in scores)
    cot = None
    if rec is not None and rea is not None:
        cot = MicroMean(alpha * rec.total + (1 - alpha) * rea.total, rec.count)
    return Aggregate(rec, rea, cot, steps, len(scores))


def per_category(
    rows: Sequence[tuple[str, SampleScore]], alpha: float = DEFAULT_ALPHA
) -> dict[str, dict[str, float | int | None]]:
    """Breakdown keyed by the ground-truth string (official: `ground_truth` as written, so "anger,fear" is its
    own category in ML-ER; `category_breakdown` passes ER-Wild's merged keys, `category_of`).  Keys sorted."""
    groups: dict[str, list[SampleScore]] = {}
    for category, score in rows:
        groups.setdefault(category, []).append(score)
    out: dict[str, dict[str, float | int | None]] = {}
    for category in sorted(groups):
        agg = aggregate(groups[category], alpha)
        out[category] = {
            "rec_s": _plain(agg.rec_s),
            "rea_s": _plain(agg.rea_s),
            "cot_s": _plain(agg.cot_s),
            "avg_step": _plain(agg.avg_step),
            "n_scored": agg.n_scored,
        }
    return out


def _plain(x: float | None) -> float | None:
    return None if x is None else float(x)


# --------------------------------------------------------------------------------------------- label matching
def find_labels(text: str, label_set: Sequence[str]) -> list[str]:
    """Labels of `label_set` named in `text`, in order of first appearance, each once.

    Case-insensitive, whole words only ("happy" is not found in "unhappy"), longest label first so that
    "weak positive" is not also read as "positive", and a matched span is not reused by a shorter label.
    """
    if not text:
        return []
    lowered = text.lower()
    taken = [False] * len(lowered)
    found: list[tuple[int, str]] = []
    for label in sorted(set(label_set), key=lambda s: (-len(s), s)):
        pattern = re.compile(r"(?<![\w])" + re.escape(label.lower()) + r"(?![\w])")
        for m in pattern.finditer(lowered):
            if any(taken[m.start() : m.end()]):
                continue
            for i in range(m.start(), m.end()):
                taken[i] = True
            found.append((m.start(), label))
    seen: set[str] = set()
    ordered = []
    for _, label in sorted(found):
        if label not in seen:
            seen.add(label)
            ordered.append(label)
    return ordered


_ANSWER_MARK = re.compile(r"answer\s*[:：]", re.IGNORECASE)


def final_answer_segment(answer: str) -> str:
    """The part of a model answer that states its final prediction: the text after the last "Answer:" if there
    is one, else the last non-empty line."""
    answer = answer or ""
    marks = list(_ANSWER_MARK.finditer(answer))
    if marks:
        return answer[marks[-1].end() :].strip()
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class OfflineMatch:
    """Judge-free recognition of one answer (EMO_JUDGE=offline)."""

    value: float  # 0..1
    predicted: tuple[str, ...]
    correct: int  # C: predicted labels among the gold labels
    n_gold: int  # K


def offline_recognition(answer: str, label_set: Sequence[str], gold: Sequence[str], multi_label: bool) -> OfflineMatch:
    """Recognition without a judge, from the answer's final segment (see `final_answer_segment`).

    Single-label tasks: 1 if exactly one candidate label is named there and it is the gold label, else 0 (naming
    two labels is not an answer).  Multi-label tasks: the official C/K rule, C = named labels that are gold,
    K = number of gold labels.  Comparison is case-insensitive.
    """
    predicted = find_labels(final_answer_segment(answer), label_set)
    gold_l = {g.lower() for g in gold}
    correct = sum(1 for p in predicted if p.lower() in gold_l)
    if multi_label:
        value = correct / len(gold_l) if gold_l else 0.0
    else:
        value = 1.0 if len(predicted) == 1 and correct == 1 else 0.0
    return OfflineMatch(value, tuple(predicted), correct, len(gold_l))


def strict_recognition(correct: float, n_gold: int, n_predicted: int) -> float:
    """Companion to the official C/K score that does not reward listing every candidate: C / max(K, P).

    C = correct predicted labels, K = gold labels, P = labels the prediction names.  Equals C/K when the model
    names no more labels than there are gold labels; naming all 26 FG-ER labels for a 2-label row gives 2/26, not
    2/2.  P = 0 (the prediction names no candidate label verbatim) falls back to K, i.e. to the official value.
    """
    if n_gold <= 0:
        return 0.0
    return float(correct) / max(n_gold, n_predicted if n_predicted > 0 else n_gold)


# ------------------------------------------------------------------------------------------- one sample, one task
def rating_value(numerator: int, denominator: int) -> float:
    """num/den; a zero denominator gives 0 (official rule, as `parsers.Rating.value`)."""
    return 0.0 if denominator == 0 else numerator / denominator


#: The official per-category merges (FunAudioLLM/MME-Emotion eval_cot/<task>/metrics/cal_metrics.py): ER-Wild's
#: sources spell some emotions differently, and its script folds these ground-truth strings (exact, case-sensitive)
#: into one category.  Only the summary's per-category breakdown uses it; no metric does.
CATEGORY_MERGES: dict[str, dict[str, str]] = {
    "ER-Wild": {
        "angry": "anger",
        "disgusted": "disgust",
        "happy": "happiness",
        "sad": "sadness",
        "surprised": "surprise",
    },
}


def category_of(spec: TaskSpec, label: str) -> str:
    """The per-category key of a row: its ground-truth string as written, merged as the official script does."""
    return CATEGORY_MERGES.get(spec.key, {}).get(label, label)


@dataclass(frozen=True)
class SampleResult:
    """The per-sample numbers of one answer.  `status`: scored | judge_failed | offline.  `label` is the row's
    ground-truth string; `category` its per-category key (`category_of`; empty: the label)."""

    label: str
    status: str
    recognition: float | None = None
    reasoning: float | None = None
    n_steps: int | None = None
    strict_recognition: float | None = None
    predicted_labels: tuple[str, ...] = ()
    category: str = ""
    #: a judge failure that is an agent's answer cut off inside its reasoning (`n_judge_truncated`)
    truncated: bool = False

    @property
    def score(self) -> SampleScore | None:
        """What `aggregate` averages: the scored samples only."""
        if self.status != "scored" or self.recognition is None:
            return None
        return SampleScore(self.recognition, self.reasoning or 0.0, self.n_steps or 0)


def score_sample(spec: TaskSpec, item: Mapping[str, Any], judgement: Judgement | None = None) -> SampleResult:
    """One sample's numbers.  `item`: the doc plus the model's `answer` (label, labels, label_set, answer).

    With a judgement (api mode): a failed judgement is `judge_failed` with no numbers; otherwise recognition,
    reasoning and the step count come from its ratings (`score_ratings`), the predicted labels are the candidate
    labels named in the last step, and the strict recognition is C/max(K, P) from the last rating (fraction
    tasks: ML-ER, FG-ER) or the recognition itself.  Without one (offline): recognition by label matching on the
    answer (`offline_recognition`), strict C/max(K, P) on multi-label tasks.
    """
    label = item["label"]
    merged = category_of(spec, label)
    category = merged if merged != label else ""  # "": the label itself (most rows)
    if judgement is None:
        match = offline_recognition(item["answer"], item["label_set"], item["labels"], spec.multi_label)
        strict = (
            strict_recognition(match.correct, match.n_gold, len(match.predicted)) if spec.multi_label else match.value
        )
        return SampleResult(label, "offline", match.value, None, None, strict, tuple(match.predicted), category)
    if judgement.failed_stage is not None:
        return SampleResult(label, "judge_failed", category=category, truncated=judgement.truncated)
    score = score_ratings([rating_value(n, d) for n, d in judgement.ratings])
    if score is None:
        raise ValueError(f"{judgement.task}:{judgement.row}: a judgement without a failure must hold ratings")
    last_step = judgement.steps[-1] if judgement.steps else (judgement.step_text or "")
    predicted = find_labels(last_step, item["label_set"])
    if spec.last_step_rule == "fraction":
        num, den = judgement.ratings[-1]
        strict = strict_recognition(num, den, len(predicted))
    else:
        strict = score.recognition
    return SampleResult(
        label, "scored", score.recognition, score.reasoning, score.steps, strict, tuple(predicted), category
    )


def task_metrics(
    samples: Sequence[SampleResult], settings: MMESettings, token_counts: Sequence[int] | None = None
) -> dict[str, Any]:
    """Every metric of `TABLE` for one task's samples (alpha and the judge mode from `settings`).

    Scores are MicroMeans and counts Counts, so that `group_aggregate` pools a group exactly; None means "not
    available" (offline: Rea-S, CoT-S, Avg Step; Avg Token when `token_counts` is None, e.g. no tokenizer).
    Offline, every sample counts as scored.  Deferred (EMO_JUDGE=defer: judged later by `emo-tasks judge`), every
    judge-dependent metric, the counts included, is None; only Avg Token (the answers' length) is computed.
    """
    avg_token = None if token_counts is None else micro_mean(token_counts)
    if settings.judge_mode == "defer":
        return {**dict.fromkeys(TABLE.names), "avg_token": avg_token}
    if settings.judge_mode == "offline":
        return {
            "rec_s": micro_mean((s.recognition for s in samples), 100.0),
            "rea_s": None,
            "cot_s": None,
            "rec_s_strict": micro_mean((s.strict_recognition for s in samples), 100.0),
            "avg_step": None,
            "avg_token": avg_token,
            "n_scored": Count(len(samples)),
            "n_judge_failed": Count(0),
            "n_judge_truncated": Count(0),
        }
    agg = aggregate([s.score for s in samples if s.score is not None], settings.alpha)
    strict = micro_mean(
        (s.strict_recognition for s in samples if s.status == "scored" and s.strict_recognition is not None), 100.0
    )
    return {
        "rec_s": agg.rec_s,
        "rea_s": agg.rea_s,
        "cot_s": agg.cot_s,
        "rec_s_strict": strict,
        "avg_step": agg.avg_step,
        "avg_token": avg_token,
        "n_scored": Count(agg.n_scored),
        "n_judge_failed": Count(sum(1 for s in samples if s.status == "judge_failed")),
        "n_judge_truncated": Count(sum(1 for s in samples if s.status == "judge_failed" and s.truncated)),
    }


def category_breakdown(samples: Sequence[SampleResult], settings: MMESettings) -> dict[str, dict[str, Any]]:
    """The per-category numbers of the judge summary (`per_category` over the scored samples, keyed by each
    sample's category: ER-Wild's label variants merged as the official script merges them); {} offline."""
    if settings.judge_mode == "offline":
        return {}
    return per_category([(s.category or s.label, s.score) for s in samples if s.score is not None], settings.alpha)


def failure_counts(failures: Iterable[tuple[str | None, str | None]]) -> dict[str, int]:
    """{"<stage>:<reason>": count} over the (failed stage, reason) of the failed samples."""
    counts: dict[str, int] = {}
    for stage, reason in failures:
        k = f"{stage}:{reason}"
        counts[k] = counts.get(k, 0) + 1
    return counts


# ------------------------------------------------------------------------------------------------ metric table
# Per-sample values over one judge-log row (`emo_tasks_judge/*_judge.jsonl`).  `results.read_samples` adds
# `alpha` (from the run's summary) and `answer_tokens` (o200k_base count of the answer) to each row.
def _rated(row: Mapping[str, Any]) -> bool:
    return row.get("status") in ("scored", "offline") and row.get("recognition") is not None


def _scored(row: Mapping[str, Any]) -> bool:
    return row.get("status") == "scored" and row.get("recognition") is not None


def _rec_s(row: Mapping[str, Any]) -> float | None:
    return 100.0 * row["recognition"] if _rated(row) else None


def _rea_s(row: Mapping[str, Any]) -> float | None:
    return 100.0 * (row.get("reasoning") or 0.0) if _scored(row) else None


def _cot_s(row: Mapping[str, Any]) -> float | None:
    if not _scored(row):
        return None
    alpha = row.get("alpha", DEFAULT_ALPHA)
    return alpha * (100.0 * row["recognition"]) + (1 - alpha) * (100.0 * (row.get("reasoning") or 0.0))


def _rec_s_strict(row: Mapping[str, Any]) -> float | None:
    if not _rated(row) or row.get("strict_recognition") is None:
        return None
    return 100.0 * row["strict_recognition"]


def _avg_step(row: Mapping[str, Any]) -> float | None:
    return float(row.get("n_steps") or 0) if _scored(row) else None


def _avg_token(row: Mapping[str, Any]) -> float | None:
    tokens = row.get("answer_tokens")
    return None if tokens is None else float(tokens)


_OFFLINE = "offline judge mode: no reasoning score"

TABLE = MetricTable(
    "mme",
    "MME-Emotion",
    (
        Metric("rec_s", "Rec-S: mean recognition x100 over scored samples.", headline=True, title="Rec-S",
               per_sample=_rec_s, outcome=True, plot=True),
        Metric("rea_s", "Rea-S: mean reasoning x100 over scored samples (None offline).", headline=True,
               title="Rea-S", per_sample=_rea_s, outcome=True, plot=True, null_reason=_OFFLINE),
        Metric("cot_s", "CoT-S = alpha*Rec-S + (1-alpha)*Rea-S (None offline).", headline=True, title="CoT-S",
               per_sample=_cot_s, outcome=True, plot=True, null_reason=_OFFLINE, paired=True),
        Metric("rec_s_strict", "C/max(K, P) on ML-ER/FG-ER; equal to Rec-S elsewhere.", per_sample=_rec_s_strict,
               outcome=True, table=False),
        Metric("avg_step", "Mean number of rated steps over scored samples (None offline).", title="Avg Step",
               per_sample=_avg_step, null_reason=_OFFLINE),
        Metric("avg_token", "Mean answer length in o200k_base tokens over all samples.", higher_is_better=False,
               title="Avg Token", per_sample=_avg_token, judge_free=True),
        Metric("n_scored", "Samples with a usable judgement (all samples offline).", judge_free=True),
        Metric("n_judge_failed",
               "Samples whose step agent, audio agent or judge failed after retries (counted, not scored).",
               higher_is_better=False, judge_free=True),
        Metric("n_judge_truncated",
               "Judge failures that are an agent's answer cut off inside its reasoning (counted in n_judge_failed "
               "too): a reasoning judge out of tokens.", higher_is_better=False, judge_free=True),
    ),
)  # fmt: skip
