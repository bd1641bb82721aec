"""EmoBench-M scoring: reading a label out of an answer, the authors' rule-based metrics, the generation metrics.

Pure functions, no I/O.  The metrics reproduce `EmoBench-M_eval.py` (Emo-gml/EmoBench-M at 8916147, Apache-2.0):
- classification (`evaluate_classification`): expected and predicted value `.strip().lower()`; a sample whose
  either value is empty is left out; accuracy and precision / recall / F1 averaged `weighted` (by each true
  label's support) with `zero_division=0`, over the union of true and predicted labels (scikit-learn's rules);
- joint emotion + intent (`evaluate_joint`, MC-EIU): the same on `"<emotion>_<intent>"` strings, a sample left out
  when any of its four values is empty;
- generation (`evaluate_generation`, SMILE): per-sample BLEU (nltk `sentence_bleu` on whitespace tokens), ROUGE-L
  F (rouge-score, stemmer on) and BERTScore F1 (bert-score, `lang='en'`), averaged over samples with both texts.
`tests/emobench_m/test_emobench_m_scoring.py` runs the authors' functions and these on the same predictions.

The authors' script takes the predicted label as given: reading it out of a model's answer is left to each user.
Ours (`read_label`, `read_joint`) is documented in docs/emobench_m.md; an answer that names no label keeps its own
text as the predicted value (so it counts as wrong, never left out) and only an empty answer is left out, as their
script leaves out an empty predicted value.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from emo_tasks.metrics import Metric, MetricTable

CLASSIFICATION, JOINT, GENERATION = "classification", "joint", "generation"
KINDS = (CLASSIFICATION, JOINT, GENERATION)


def norm(value: Any) -> str:
    """A value as the authors' script compares it: `str(...).strip().lower()` (None -> "")."""
    return "" if value is None else str(value).strip().lower()


# ------------------------------------------------------------------------------------------------ reading answers
_PAIR = re.compile(r"""['"]([^'"]{1,60})['"]\s*:\s*['"]([^'"]{0,60})['"]""")
_TRIM = " \t\r\n.,;:!'\"`*{}()[]"


def _pairs(answer: str) -> list[tuple[str, str]]:
    """The `'key': 'value'` pairs of an answer in the requested format (`{'emotion': 'label'}`), normalised."""
    return [(norm(k), norm(v)) for k, v in _PAIR.findall(answer)]


def _spans(text: str, labels: Sequence[str]) -> list[tuple[int, int, str]]:
    """Every whole-word occurrence of a label in `text` (lowercase), a label inside a longer one's match dropped
    ("negative" inside "weak negative"), in order of position."""
    found = []
    for label in sorted(set(labels), key=len, reverse=True):
        for m in re.finditer(rf"(?<![a-z]){re.escape(label)}(?![a-z])", text):
            if not any(s <= m.start() and m.end() <= e for s, e, _ in found):
                found.append((m.start(), m.end(), label))
    return sorted(found)


def read_label(answer: str | None, labels: Sequence[str]) -> str | None:
    """The label an answer names, else None.  In order: a `'key': 'label'` pair (the requested format); the
    whole answer being a label (trimmed of quotes, braces and punctuation); the label that appears first as a
    whole word (a label inside a longer one does not count: "weak negative" is not "negative")."""
    text = norm(answer)
    labels = [norm(x) for x in labels]
    for _key, value in _pairs(text):
        if value in labels:
            return value
    if text.strip(_TRIM) in labels:
        return text.strip(_TRIM)
    spans = _spans(text, labels)
    return spans[0][2] if spans else None


def read_joint(answer: str | None, emotions: Sequence[str], intents: Sequence[str]) -> tuple[str | None, str | None]:
    """(emotion, intent) an answer names (None for each it does not).  The requested format first
    (`{'emotion label': ..., 'intent label': ...}`: a key naming "emotion" / "intent"); else the first emotion
    label and the first intent label at another place in the text ("neutral" is in both lists)."""
    text = norm(answer)
    emotions, intents = [norm(x) for x in emotions], [norm(x) for x in intents]
    emotion = intent = None
    for key, value in _pairs(text):
        if emotion is None and "emotion" in key and value in emotions:
            emotion = value
        if intent is None and "intent" in key and value in intents:
            intent = value
    if emotion is not None and intent is not None:
        return emotion, intent
    e_spans, i_spans = _spans(text, emotions), _spans(text, intents)
    if emotion is None and e_spans:
        emotion = e_spans[0][2]
        i_spans = [s for s in i_spans if s[0] != e_spans[0][0]]
    if intent is None and i_spans:
        intent = i_spans[0][2]
    return emotion, intent


# ------------------------------------------------------------------------------------------------ official metrics
def weighted_prf(targets: Sequence[str], preds: Sequence[str]) -> tuple[float, float, float]:
    """scikit-learn's `precision_score` / `recall_score` / `f1_score` with `average='weighted'`,
    `zero_division=0`: per label of the union of true and predicted labels, P = tp/predicted, R = tp/support,
    F1 = 2tp/(support + predicted) (0 when a denominator is 0), averaged with the supports as weights."""
    labels = sorted(set(targets) | set(preds))
    support = {label: 0 for label in labels}
    predicted = dict(support)
    tp = dict(support)
    for t, p in zip(targets, preds, strict=True):
        support[t] += 1
        predicted[p] += 1
        tp[t] += t == p
    total = sum(support.values())

    def avg(per: Callable[[str], float]) -> float:
        return sum(per(label) * support[label] for label in labels) / total if total else 0.0

    return (
        avg(lambda c: tp[c] / predicted[c] if predicted[c] else 0.0),
        avg(lambda c: tp[c] / support[c] if support[c] else 0.0),
        avg(lambda c: 2 * tp[c] / (support[c] + predicted[c]) if support[c] + predicted[c] else 0.0),
    )


def official_classification(pairs: Sequence[tuple[Any, Any]]) -> dict[str, float] | None:
    """`evaluate_classification`'s numbers (fractions) for (expected, predicted) pairs; None when no pair has
    both values (their script then writes nothing)."""
    kept = [(norm(e), norm(p)) for e, p in pairs if norm(e) and norm(p)]
    if not kept:
        return None
    targets, preds = [e for e, _ in kept], [p for _, p in kept]
    precision, recall, f1 = weighted_prf(targets, preds)
    accuracy = sum(t == p for t, p in kept) / len(kept)
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1_score": f1}


def official_joint(rows: Sequence[tuple[Any, Any, Any, Any]]) -> dict[str, float] | None:
    """`evaluate_joint`'s numbers for (expected emotion, predicted emotion, expected intent, predicted intent)
    rows: the classification metrics on `"<emotion>_<intent>"`, rows with an empty value left out."""
    kept = [tuple(norm(x) for x in row) for row in rows]
    kept = [r for r in kept if all(r)]
    if not kept:
        return None
    m = official_classification([(f"{te}_{ti}", f"{pe}_{pi}") for te, pe, ti, pi in kept])
    assert m is not None
    return {"joint_accuracy": m["accuracy"], "joint_precision": m["precision"], "joint_recall": m["recall"],
            "joint_f1": m["f1_score"], "total": len(kept)}  # fmt: skip


# ------------------------------------------------------------------------------------------------ generation
def bleu(prediction: str, reference: str) -> float | None:
    """nltk's `sentence_bleu([reference.split()], prediction.split())` as the authors call it (4-gram, no
    smoothing); None when nltk is not installed."""
    try:
        from nltk.translate.bleu_score import sentence_bleu
    except ImportError:
        return None
    with warnings.catch_warnings():  # nltk warns on every answer with no 4-gram overlap
        warnings.simplefilter("ignore")
        return float(sentence_bleu([reference.split()], prediction.split()))


def rouge_l(prediction: str, reference: str) -> float | None:
    """rouge-score's ROUGE-L F with the Porter stemmer, as the authors call it; None when rouge-score is not
    installed (`pip install rouge-score`)."""
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        return None
    return float(rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(reference, prediction)["rougeL"].fmeasure)


# ------------------------------------------------------------------------------------------------ per sample
@dataclass(frozen=True)
class SampleResult:
    """One sample: what the authors' input JSON holds for it.  `predicted`: the label read from the answer, or
    the answer's own text when it names none (`parsed` False); joint samples add the intents; generation
    samples carry the answer and reference texts and their per-sample scores (None: not computed) and, once the
    LLM scorer rated them (`judge.py`), its two ratings (0-5, a failed rating 0, as the authors count it) and whether
    a rating failed (None: not rated, e.g. no judge configured)."""

    kind: str
    gold: str
    predicted: str
    parsed: bool
    gold_intent: str = ""
    predicted_intent: str = ""
    bleu: float | None = None
    rouge_l: float | None = None
    bert_score: float | None = None
    llm_logical: int | None = None
    llm_multimodal: int | None = None
    llm_failed: bool | None = None

    @property
    def llm_total(self) -> int | None:
        """The two LLM ratings summed (0-10); None unless both were given."""
        if self.llm_logical is None or self.llm_multimodal is None:
            return None
        return self.llm_logical + self.llm_multimodal

    @property
    def scored(self) -> bool:
        """Kept by the authors' script: no empty value (a generation sample: both texts)."""
        values = (self.gold, self.predicted) + ((self.gold_intent, self.predicted_intent) if self.kind == JOINT else ())
        return all(norm(v) for v in values)

    @property
    def right(self) -> bool | None:
        """Whether the prediction matches (joint: both); None for generation samples."""
        if self.kind == GENERATION:
            return None
        same = norm(self.gold) == norm(self.predicted)
        return same and norm(self.gold_intent) == norm(self.predicted_intent) if self.kind == JOINT else same


def score_sample(kind: str, answer: str | None, gold: str, labels: Sequence[str] = (),
                 intents: Sequence[str] = (), gold_intent: str = "") -> SampleResult:  # fmt: skip
    """One answer as its per-sample unit (see `SampleResult`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown EmoBench-M task kind {kind!r}; expected one of {KINDS}")
    text = "" if answer is None else str(answer)
    if kind == CLASSIFICATION:
        label = read_label(text, labels)
        return SampleResult(kind, norm(gold), label if label is not None else norm(text), label is not None)
    if kind == JOINT:
        emotion, intent = read_joint(text, labels, intents)
        return SampleResult(kind, norm(gold), emotion if emotion is not None else norm(text),
                            emotion is not None and intent is not None, norm(gold_intent),
                            intent if intent is not None else norm(text))  # fmt: skip
    pred, ref = text.strip(), str(gold).strip()
    both = bool(pred and ref)
    return SampleResult(kind, ref, pred, both, bleu=bleu(pred, ref) if both else None,
                        rouge_l=rouge_l(pred, ref) if both else None)  # fmt: skip


# ------------------------------------------------------------------------------------------------ task metrics
class Pooled(float):
    """A mean that a group pools exactly (sum / count over all its subtasks' samples), as `float` its value."""

    total: float
    count: int

    def __new__(cls, total: float, count: int) -> Pooled:
        obj = super().__new__(cls, total / count if count else math.nan)
        obj.total, obj.count = total, count
        return obj


class Count(int):
    """A count that a group sums."""


def _mean(values: Sequence[float]) -> Pooled | None:
    return Pooled(float(sum(values)), len(values)) if values else None


def task_metrics(samples: Sequence[SampleResult]) -> dict[str, Any]:
    """Every metric of TABLE for one task's samples, on a 0-100 scale (the authors' fractions x 100)."""
    kinds = {s.kind for s in samples}
    if len(kinds) > 1:
        raise ValueError(f"one EmoBench-M task holds one kind of sample, got {sorted(kinds)}")
    kind = kinds.pop() if kinds else CLASSIFICATION
    out: dict[str, Any] = {name: None for name in TABLE.names}
    scored = [s for s in samples if s.scored]
    out["n_samples"], out["n_scored"] = Count(len(samples)), Count(len(scored))
    if kind == GENERATION:
        for name in ("bleu", "rouge_l", "bert_score"):
            values = [getattr(s, name) for s in scored]
            out[name] = _mean([100.0 * v for v in values]) if values and None not in values else None
        return out
    if kind == CLASSIFICATION:
        official = official_classification([(s.gold, s.predicted) for s in samples])
    else:
        joint = official_joint([(s.gold, s.predicted, s.gold_intent, s.predicted_intent) for s in samples])
        official = joint and {k: joint[f"joint_{k if k != 'f1_score' else 'f1'}"]
                              for k in ("accuracy", "precision", "recall", "f1_score")}  # fmt: skip
    out["accuracy"] = _mean([100.0 if s.right else 0.0 for s in scored])
    if official is not None:
        out["precision"], out["recall"], out["f1"] = (100.0 * official[k] for k in ("precision", "recall", "f1_score"))
    out["coverage"] = _mean([100.0 if s.parsed else 0.0 for s in samples])
    return out


def group_aggregate(metrics: Sequence[Any], sizes: Sequence[int], weight_by_size: bool = True) -> Any:
    """lmms-eval's group aggregation: pooled means pooled exactly over all the subtasks' samples, counts summed,
    None skipped; the weighted precision / recall / F1 (plain floats) are per scenario only: None for a group."""
    present = [m for m in metrics if m is not None and not (isinstance(m, float) and math.isnan(m))]
    if not present:
        return None
    if all(isinstance(m, Count) for m in present):
        return Count(sum(int(m) for m in present))
    if all(isinstance(m, Pooled) for m in present):
        return Pooled(sum(m.total for m in present), sum(m.count for m in present))
    return None


# ------------------------------------------------------------------------------------------------ metric table
def _outcome(unit: SampleResult) -> float | None:
    return None if unit.right is None or not unit.scored else (100.0 if unit.right else 0.0)


def _generation(name: str) -> Callable[[SampleResult], float | None]:
    def value(unit: SampleResult) -> float | None:
        v = getattr(unit, name)
        return None if v is None or not unit.scored else 100.0 * v

    return value


def _llm(name: str) -> Callable[[SampleResult], float | None]:
    """An LLM rating of every rated answer, an empty or failed one 0: the mean of these is the authors' average."""

    def value(unit: SampleResult) -> float | None:
        v = getattr(unit, name)
        return None if v is None or unit.kind != GENERATION else float(v)

    return value


LLM_NULL = (
    "classification scenarios; no LLM judge configured (EMO_JUDGE=offline, or auto without an endpoint) "
    "or judging deferred: run `emo-tasks judge RUN_DIR` with an endpoint"
)

#: EmoBench-M's metrics in the task YAML's `metric_list` order.  Per-sample unit: a sample (`SampleResult`).
TABLE = MetricTable(
    "emobench_m",
    "EmoBench-M",
    (
        Metric("accuracy", "Accuracy over the samples the authors' script keeps, % (MC-EIU: emotion and intent both "
               "right).", headline=True, per_sample=_outcome, paired=True, outcome=True, plot=True),
        Metric("precision", "Precision averaged over labels weighted by support (the authors' script), %.",
               table=True, null_reason="generation scenarios and groups"),
        Metric("recall", "Recall averaged over labels weighted by support (the authors' script), %.", table=True,
               null_reason="generation scenarios and groups"),
        Metric("f1", "F1 averaged over labels weighted by support (the authors' script), %.", table=True,
               null_reason="generation scenarios and groups"),
        Metric("coverage", "Share of answers that name a label (the rest count as wrong), %.",
               per_sample=lambda u: None if u.kind == GENERATION else (100.0 if u.parsed else 0.0), outcome=True),
        Metric("bleu", "Sentence BLEU-4 (nltk) x 100, averaged over answers.", per_sample=_generation("bleu"),
               null_reason="classification scenarios; nltk not installed"),
        Metric("rouge_l", "ROUGE-L F (rouge-score) x 100, averaged over answers.", per_sample=_generation("rouge_l"),
               null_reason="classification scenarios; rouge-score not installed"),
        Metric("bert_score", "BERTScore F1 x 100, averaged over answers.", per_sample=_generation("bert_score"),
               null_reason="classification scenarios; bert-score or its roberta-large weights absent"),
        Metric("n_samples", "Samples asked."),
        Metric("n_scored", "Samples the authors' script keeps (no empty value)."),
        Metric("llm_logical", "SMILE: the authors' LLM scorer, Logical Judgment Dimension (0-5), mean over answers "
               "(a failed rating counts 0, as theirs).", per_sample=_llm("llm_logical"), table=True,
               null_reason=LLM_NULL),
        Metric("llm_multimodal", "SMILE: the authors' LLM scorer, Multimodal Content Association Dimension (0-5), "
               "mean over answers (a failed rating counts 0).", per_sample=_llm("llm_multimodal"), table=True,
               null_reason=LLM_NULL),
        Metric("llm_total", "SMILE: the two LLM ratings summed (0-10), mean over answers.",
               per_sample=_llm("llm_total"), table=True, null_reason=LLM_NULL),
        Metric("n_judge_failed", "SMILE: answers whose LLM rating failed after retries (rated 0).",
               higher_is_better=False, judge_free=True),
    ),
)  # fmt: skip
