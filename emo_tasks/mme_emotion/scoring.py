"""MME-Emotion scoring: the official metric script's formulas as small pure functions.

No I/O, no globals.  Each function states its edge cases; `tests/test_mme_scoring.py` pins them with hand-computed
cases and the official script's own behaviour (`eval_cot/*/metrics/cal_metrics.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_ALPHA = 0.5


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


def score_sample(values: Sequence[float]) -> SampleScore | None:
    """Rec, Rea and the step count of one sample; None when there are no ratings (official: the sample is left
    out of every average — we count it as a judge failure instead of losing it)."""
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
    own category in ML-ER).  Keys sorted."""
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
