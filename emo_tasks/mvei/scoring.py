"""MVEI (Emotion Statement Judgment) scoring: answer parsing, the 3-sample majority vote, and the metrics.

Pure functions, no I/O.  `parse_official` is the published keyword rule (the default, for parity with the paper);
`parse_strict` is a stricter reading whose disagreements with it are reported, never used as the headline number.
`score_sample` turns one pair's answers into its per-sample unit (a `PairResult`), `task_metrics` gives every
metric of `TABLE` (the benchmark's one metric list) for a task's pairs.
`tests/mvei/test_mvei_scoring.py` pins every rule below with hand-computed cases.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from emo_tasks.metrics import Metric, MetricTable

if TYPE_CHECKING:
    from .settings import MVEISettings

CORRECT = "correct"
INCORRECT = "incorrect"
GIVE_UP = "give_up"
DECISIONS = (CORRECT, INCORRECT, GIVE_UP)
LABELS = (CORRECT, INCORRECT)
DIMENSIONS = ("sentiment polarity", "emotion interpretation", "scene context", "perception subjectivity")


# ------------------------------------------------------------------------------------------------ answer segment
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def answer_segment(text: str | None) -> str:
    """The part of a generation the authors' evaluator reads, so that reasoning before the verdict is not parsed.

    As the authors' `extract_answer_str` (EmObserver, evaluate/metrics_calculators/mvei.py): the inside of the
    FIRST complete `<answer>...</answer>` (tags case-insensitive, content may span lines); else everything after
    whichever of the LAST `<answer>` and the LAST `</think>` comes later; else the whole text.  None -> "".
    The segment is returned unstripped.
    """
    if not text:
        return ""
    m = _ANSWER_BLOCK.search(text)
    if m:
        return m.group(1)
    lowered = text.lower()
    idx_answer, idx_think = lowered.rfind("<answer>"), lowered.rfind("</think>")
    cut = max(idx_answer, idx_think)
    if cut >= 0:
        tag = "<answer>" if idx_answer > idx_think else "</think>"
        return text[cut + len(tag) :]
    return text


# ------------------------------------------------------------------------------------------------ official parser
_ISOLATED_LOWER_A = re.compile(r"(?:^|[^A-Za-z])a(?:$|[^A-Za-z])")
_ISOLATED_LOWER_B = re.compile(r"(?:^|[^A-Za-z])b(?:$|[^A-Za-z])")


def parse_official(text: str | None) -> str:
    """The authors' rule (EmObserver `parse_choice`) on `answer_segment(text)`; the default parser, for parity.

    1. contains "incorrect" (any case, substring) -> INCORRECT;
    2. else contains "correct" (any case, substring) -> CORRECT;
    3. else an uppercase "A" anywhere, or an isolated lowercase "a" (no ASCII letter on either side) -> CORRECT;
    4. else the same for "B"/"b" -> INCORRECT;
    5. else GIVE_UP (also for None, "" and whitespace).

    Known weaknesses of the published rule, kept on purpose (`parse_strict` reports how often they matter):
    "not correct" and "I'm not sure it is correct" are CORRECT (no negation handling); any uppercase A counts
    ("Anger", "As an AI, I can't tell" are CORRECT) and so does the article "a" ("this is a cat"); A is tested
    before B, so "A or B" is CORRECT.
    """
    segment = answer_segment(text)
    if not segment.strip():
        return GIVE_UP
    lowered = segment.lower()
    if "incorrect" in lowered:
        return INCORRECT
    if "correct" in lowered:
        return CORRECT
    if "A" in segment or _ISOLATED_LOWER_A.search(segment):
        return CORRECT
    if "B" in segment or _ISOLATED_LOWER_B.search(segment):
        return INCORRECT
    return GIVE_UP


# -------------------------------------------------------------------------------------------------- strict parser
_APOS = r"['\u2019]"  # ASCII and typographic apostrophes
_ADVERB = r"(?:(?:entirely|quite|fully|completely|totally|exactly|really|necessarily)\s+)?"
_NOT = rf"(?:\bnot|\bcannot|n{_APOS}t)(?:\s+be)?"  # "not", "cannot be", "isn't", "can't be"
_NEGATIVE = re.compile(
    rf"{_NOT}\s+{_ADVERB}correct\b"  # not correct, isn't correct, is not entirely correct
    r"|\bincorrect(?:ly)?\b"
    r"|\binaccurate\b"
    rf"|{_NOT}\s+{_ADVERB}accurate\b"  # not accurate, isn't accurate
    rf"|\bdoes\s+not\s+align\b|\bdoesn{_APOS}t\s+align\b"
    rf"|\bdo\s+not\s+align\b|\bdon{_APOS}t\s+align\b",
    re.IGNORECASE,
)
_DOUBLE_NEGATIVE = re.compile(rf"{_NOT}\s+{_ADVERB}(?:incorrect|inaccurate)\b", re.IGNORECASE)
_POSITIVE = re.compile(r"\bcorrect(?:ly)?\b", re.IGNORECASE)
_HEDGE = re.compile(
    rf"\bnot\s+sure\b|\bunsure\b|\bcannot\s+determine\b|\bcan\s+not\s+determine\b|\bcan{_APOS}t\s+determine\b"
    r"|\bunclear\b|\bmaybe\b|\bmight\s+be\b|\bpossibly\b|\bhard\s+to\s+say\b",
    re.IGNORECASE,
)
_LONE_LETTER = re.compile(r"\(?\s*([AB])\s*\)?\s*\.?", re.IGNORECASE)
# "Answer:" / "Final answer:" / "**Answer**:" — the answer's own label; the last one holds the verdict.
_ANSWER_LABEL = re.compile(r"\banswer\b[\s*_]*[:：]", re.IGNORECASE)
_FIRST_WORD_CHAR = re.compile(r"[A-Za-z0-9]")


def parse_strict(text: str | None) -> str:
    """A stricter reading of `answer_segment(text)`, reported next to the official one (never the default), because
    the keyword rule calls negated or hedged answers Correct.

    - empty / whitespace / None -> GIVE_UP;
    - a segment that is exactly one letter, optionally in parentheses and/or with a dot ("A", "(b)", "B.", "A)"):
      A/a -> CORRECT, B/b -> INCORRECT.  Letters anywhere else are ignored (no article quirk: "this is a cat" is
      GIVE_UP);
    - negative verdicts: "incorrect", "inaccurate", negated "correct"/"accurate" ("not correct", "isn't correct",
      "is not entirely correct", "n't correct", "not accurate"), "does not align"/"doesn't align";
      positive verdict: the word "correct" (or "correctly") not inside a negation;
    - the verdict at the start: the first verdict match if it begins at the segment's first letter or digit
      ("Correct. ...", "**Incorrect**, ...", "Not correct: ...");
    - a hedge ("not sure", "unsure", "cannot/can't determine", "unclear", "maybe", "might be", "possibly", "hard to
      say") or a double negative ("not incorrect") -> the verdict at the start, else GIVE_UP;
    - both a positive and a negative verdict -> the verdict at the start, else GIVE_UP;
    - only negative -> INCORRECT; only positive (however often repeated) -> CORRECT; neither -> GIVE_UP;
    - first of all: when the segment has an "Answer:" label ("Final answer:", "**Answer:**"), the text after the
      LAST one is read by the rules above, and its verdict wins ("Correctly identified emotion: joy. Answer:
      Incorrect" -> INCORRECT); only when it gives none (GIVE_UP) is the whole segment read.
    """
    segment = answer_segment(text).strip()
    labels = list(_ANSWER_LABEL.finditer(segment))
    if labels:
        final = _strict_segment(segment[labels[-1].end() :].strip())
        if final != GIVE_UP:
            return final
    return _strict_segment(segment)


def _strict_segment(segment: str) -> str:
    """`parse_strict`'s rules on one segment (without the "Answer:" label rule)."""
    if not segment:
        return GIVE_UP
    letter = _LONE_LETTER.fullmatch(segment)
    if letter:
        return CORRECT if letter.group(1).upper() == "A" else INCORRECT

    negatives = list(_NEGATIVE.finditer(segment))
    negative_spans = [(m.start(), m.end()) for m in negatives]
    positives = [m for m in _POSITIVE.finditer(segment) if not any(s <= m.start() < e for s, e in negative_spans)]
    verdicts = sorted([(m.start(), INCORRECT) for m in negatives] + [(m.start(), CORRECT) for m in positives])
    first_char = _FIRST_WORD_CHAR.search(segment)
    at_start = verdicts[0][1] if verdicts and first_char and verdicts[0][0] == first_char.start() else None

    if _HEDGE.search(segment) or _DOUBLE_NEGATIVE.search(segment):
        return at_start or GIVE_UP
    if positives and negatives:
        return at_start or GIVE_UP
    if negatives:
        return INCORRECT
    if positives:
        return CORRECT
    return GIVE_UP


# ------------------------------------------------------------------------------------------------ decisions
def _check_decision(decision: str) -> None:
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}; expected one of {DECISIONS}")


def majority(decisions: Sequence[str]) -> str:
    """The final decision of a pair asked several times (protocol: 3 samples, the most frequent decision wins).

    Tie rule (ours; the paper does not say): a tie for the top count means no majority, so no answer -> GIVE_UP
    (1-1-1, or 1-1 with two answers).  GIVE_UP can also win outright (2 give-ups + 1 correct -> GIVE_UP).
    Empty -> GIVE_UP.  Each item must be CORRECT, INCORRECT or GIVE_UP (ValueError otherwise; a bare string is
    rejected rather than read as a sequence of characters).
    """
    if isinstance(decisions, str):
        raise TypeError("majority() needs a sequence of decisions, not a single string")
    for d in decisions:
        _check_decision(d)
    if not decisions:
        return GIVE_UP
    ranked = Counter(decisions).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return GIVE_UP
    return ranked[0][0]


def is_consistent(decisions: Sequence[str]) -> bool:
    """True when all samples of a pair agree (self-consistency); False for no samples, which show no agreement."""
    return len(decisions) > 0 and all(d == decisions[0] for d in decisions)


def is_right(decision: str, label: str) -> bool:
    """Whether a decision matches the ground-truth label; GIVE_UP is always wrong (published rule).

    Raises ValueError on an unknown decision or label, so that a typo cannot silently count as wrong.
    """
    _check_decision(decision)
    if label not in LABELS:
        raise ValueError(f"unknown label {label!r}; expected one of {LABELS}")
    return decision == label


@dataclass(frozen=True)
class PairResult:
    """One image-statement pair: its dimension, ground truth, and the parsed decision of every sample under the
    official (`decisions`) and strict (`strict_decisions`) parsers, in the same sample order."""

    dimension: str
    label: str
    decisions: tuple[str, ...]
    strict_decisions: tuple[str, ...]

    @property
    def final(self) -> str:
        """Majority of the official decisions: the pair's scored decision."""
        return majority(self.decisions)

    @property
    def final_strict(self) -> str:
        """Majority of the strict decisions (diagnostic only)."""
        return majority(self.strict_decisions)

    @property
    def right(self) -> bool:
        """Whether the final official decision matches the label."""
        return is_right(self.final, self.label)


# ------------------------------------------------------------------------------------------------ metrics
def _key(dimension: str) -> str:
    return dimension.replace(" ", "_")


def _pct(num: int, den: int) -> float | None:
    return 100.0 * num / den if den else None


def score_pairs(pairs: Sequence[PairResult]) -> dict[str, float | int | None]:
    """Accuracy per dimension and in total plus the bias diagnostics, always reported together (a model that
    answers Correct to everything scores ~50%).

    Percentages (0..100) are over pairs and use each pair's FINAL (majority) official decision, give-up wrong:
    acc_total, acc_<dimension> (spaces -> underscores), positive_ratio (final == CORRECT), give_up_ratio
    (final == GIVE_UP), self_consistency (pairs whose samples all agree).  strict_parser_disagreement is over
    individual answers: strict decision != official decision.  A percentage with nothing to average over is None
    (never 0).  Counts: n_pairs, n_answers, n_<dimension>, n_give_up and n_positive (final decisions).

    Dimension and label must match DIMENSIONS / LABELS exactly (ValueError naming the bad value); a pair whose
    two decision tuples differ in length raises ValueError too.
    """
    for p in pairs:
        if p.dimension not in DIMENSIONS:
            raise ValueError(f"unknown MVEI dimension {p.dimension!r}; expected one of {DIMENSIONS}")
        if p.label not in LABELS:
            raise ValueError(f"unknown MVEI label {p.label!r}; expected one of {LABELS}")
        if len(p.decisions) != len(p.strict_decisions):
            raise ValueError(
                f"pair has {len(p.decisions)} official but {len(p.strict_decisions)} strict decisions; "
                "they must describe the same answers"
            )
        for d in (*p.decisions, *p.strict_decisions):
            _check_decision(d)

    finals = [p.final for p in pairs]
    rights = [is_right(f, p.label) for f, p in zip(finals, pairs, strict=True)]
    n_pairs = len(pairs)
    n_answers = sum(len(p.decisions) for p in pairs)
    n_disagree = sum(o != s for p in pairs for o, s in zip(p.decisions, p.strict_decisions, strict=True))
    n_positive = finals.count(CORRECT)
    n_give_up = finals.count(GIVE_UP)

    out: dict[str, float | int | None] = {"acc_total": _pct(sum(rights), n_pairs)}
    for dim in DIMENSIONS:
        hits = [r for r, p in zip(rights, pairs, strict=True) if p.dimension == dim]
        out[f"acc_{_key(dim)}"] = _pct(sum(hits), len(hits))
    out["positive_ratio"] = _pct(n_positive, n_pairs)
    out["give_up_ratio"] = _pct(n_give_up, n_pairs)
    out["self_consistency"] = _pct(sum(is_consistent(p.decisions) for p in pairs), n_pairs)
    out["strict_parser_disagreement"] = _pct(n_disagree, n_answers)
    out["n_pairs"] = n_pairs
    out["n_answers"] = n_answers
    for dim in DIMENSIONS:
        out[f"n_{_key(dim)}"] = sum(1 for p in pairs if p.dimension == dim)
    out["n_give_up"] = n_give_up
    out["n_positive"] = n_positive
    return out


def score_sample(answers: Sequence[str | None], dimension: str, label: str) -> PairResult:
    """One pair's per-sample unit: every answer read by the official and the strict parser (the majority of the
    official decisions, `final`, is the pair's scored decision; `right` compares it with the label)."""
    return PairResult(
        dimension=dimension,
        label=label,
        decisions=tuple(parse_official(a) for a in answers),
        strict_decisions=tuple(parse_strict(a) for a in answers),
    )


def task_metrics(samples: Sequence[PairResult], settings: MVEISettings | None = None) -> dict[str, float | int | None]:
    """Every metric of TABLE (plus the counts `score_pairs` adds) for one task's pairs.

    `settings`: the task's settings.  No MVEI metric depends on one today; a metric that comes to (a parser
    choice, say) reads it here, not in the hooks."""
    return score_pairs(samples)


# ------------------------------------------------------------------------------------------------ metric table
def _outcome(hit: Callable[[PairResult], bool]) -> Callable[[PairResult], float]:
    return lambda p: 100.0 if hit(p) else 0.0


def _right_in(dimension: str) -> Callable[[PairResult], float | None]:
    """100 * right for the pairs of `dimension`; None (no value) for the others."""
    return lambda p: (100.0 if p.right else 0.0) if p.dimension == dimension else None


_DIMENSION_DOCS = {
    "sentiment polarity": "Accuracy on sentiment-polarity pairs, %.",
    "emotion interpretation": "Accuracy on emotion-interpretation pairs, %.",
    "scene context": "Accuracy on scene-context pairs, %.",
    "perception subjectivity": "Accuracy on perception-subjectivity pairs, %.",
}

#: MVEI's metrics in the task YAML's `metric_list` order.  Per-sample unit: a pair (`PairResult`); the metrics
#: with per-sample values are the report's; acc_total is what `emo-tasks compare` tests by default (headline).
TABLE = MetricTable(
    "mvei",
    "MVEI",
    (
        Metric(
            "acc_total",
            "Accuracy of the majority decision over all pairs, %.",
            headline=True,
            per_sample=_outcome(lambda p: p.right),
            paired=True,
            outcome=True,
            plot=True,
        ),
        *(
            Metric(f"acc_{_key(dim)}", _DIMENSION_DOCS[dim], per_sample=_right_in(dim), outcome=True, plot=True)
            for dim in DIMENSIONS
        ),
        Metric(
            "positive_ratio",
            "Share of majority decisions that are Correct, %.",
            per_sample=_outcome(lambda p: p.final == CORRECT),
            outcome=True,
        ),
        Metric(
            "give_up_ratio",
            "Share of majority decisions that are neither, %.",
            higher_is_better=False,
            per_sample=_outcome(lambda p: p.final == GIVE_UP),
            outcome=True,
        ),
        Metric("self_consistency", "Share of pairs whose 3 decisions agree, %."),
        Metric(
            "strict_parser_disagreement",
            "Share of answers where the strict parser disagrees with the authors' rule, %.",
            higher_is_better=False,
        ),
        Metric("n_pairs", "Pairs evaluated."),
    ),
)
