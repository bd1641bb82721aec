"""MultiEmo-Bench scoring: answer parsing, dominant-emotion precision, distribution metrics, human split-half.

Pure functions, no I/O.  The protocol (docs/multiemo.md) fixes what is compared; it leaves open how zeros are
smoothed and what happens to undefined correlations, so those choices are written here once, next to each metric,
and `tests/multiemo/test_multiemo_scoring.py` pins them against scipy and hand-computed cases.

Whole-benchmark aggregation (`score_images`, `split_half_baseline`) is vectorised over images with numpy: the
per-image scipy calls cost about a millisecond per image, and 10,344 images x 10 split-half repeats add up.
`score_sample` gives one image's numbers (its per-sample values), `task_metrics` every metric of `TABLE` (the
benchmark's one metric list) for a task's images.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from emo_tasks.metrics import Metric, MetricTable

if TYPE_CHECKING:
    from .settings import MultiEmoSettings

EMOTIONS = ("amusement", "anger", "awe", "contentment", "disgust", "excitement", "fear", "sadness")
SMOOTHING_EPS = 1e-6
DISTRIBUTION_METRICS = ("cheb", "canberra", "wasserstein", "kl", "js", "cosine", "srcc", "plcc")
# Human baseline: KL and JS need a reference distribution, and neither half of the annotators is one.
SPLIT_HALF_METRICS = ("cheb", "canberra", "wasserstein", "cosine", "srcc", "plcc")
NONE_LABELS = frozenset({"none", "none of the above"})

_N = len(EMOTIONS)
_INDEX = {e: i for i, e in enumerate(EMOTIONS)}


# ------------------------------------------------------------------------------------------------ answer parsing
@dataclass(frozen=True)
class ScoreParse:
    """One parsed model answer.  `score` is set only for status "parsed"; "missing" and "out_of_range" keep None
    so that a failed answer can never enter a mean as 0."""

    status: str  # "parsed" | "missing" | "out_of_range"
    score: float | None
    reason: str | None


_NUMBER = r"-?\d+(?:\.\d+)?"
# A number not glued to a word ("GPT4", "v2") or to a preceding digit/point; a minus counts only when attached.
_FIRST_NUMBER = re.compile(r"(?<![\w.])(?P<num>" + _NUMBER + r")")
# "Score: 70", "**Score:** 85", '"score": 70', "Score (0-100): 70", "rating is 70", "Final score = 70".
_SCORE_LABEL = re.compile(
    r"\b(?:score|rating)\b(?:\s*\([^()]{0,30}\))?[\s*_:：=\"'`–—]*(?:(?:is|of|would be|at)\b[\s*_:：=\"'`]*)?"
    r"(?<![\w.])(?P<num>" + _NUMBER + r")",
    re.IGNORECASE,
)
_OUT_OF_100 = re.compile(r"(?<![\w.])(?P<num>" + _NUMBER + r")\s*(?:/|out\s+of)\s*100(?![\d.]\d)", re.IGNORECASE)
# The scale itself ("0-100", "0 to 100") is not an answer.
_SCALE = re.compile(r"(?<![\w.])0\s*(?:-|–|—|to)\s*100(?![\d.]\d)", re.IGNORECASE)
_REASON_LABEL = re.compile(r"(?<![\w])(?:reason|reasoning|explanation|rationale)\b[\s*_\"'`]*[:：=]", re.IGNORECASE)
# A later "Score:" / "Rating =" (with a colon or equals sign) ends the reason: "Reason: ... Score: 30".
_REASON_END = re.compile(r"(?<![\w])(?:score|rating)\b(?:\s*\([^()]{0,30}\))?[\s*_\"'`]*[:：=]", re.IGNORECASE)
_MAX_JSON_ATTEMPTS = 20


def parse_score(text: str | None) -> ScoreParse:
    """Read a 0-100 score and its reason from one model answer.

    Rules, first that applies wins:
    1. a JSON object with a "score" key (anywhere, so ```json fences work; key case-insensitive).  A numeric value
       is the score; a string value is parsed with rules 2-4; anything else (null, a list) -> "missing".
    2. an explicit "score"/"rating" label followed by a number ("Score: 70", "**Score:** 85", "rating is 70");
    3. "N/100" or "N out of 100";
    4. else the first number in the text.
    Rules 2-4 ignore the reason text (after "Reason:", "Explanation:", ... up to a later "Score:" label), so "Score:
    40. Reason: 3 people and 2 dogs" is 40 and "Reason: 3 dogs" alone is "missing", never 3.  Rules 3-4 also
    ignore a stated scale ("0-100", "0 to 100").  A number outside [0, 100] (or NaN/inf) -> "out_of_range" with
    score None: never clamped.  No number -> "missing".  reason: the JSON "reason" or the stripped text after
    "Reason:", else None.
    """
    text = text or ""
    from_json = _parse_json(text)
    if from_json is not None:
        return from_json

    reason = None
    outside = text
    m = _REASON_LABEL.search(text)
    if m:
        end_m = _REASON_END.search(text, m.end())
        end = end_m.start() if end_m else len(text)
        reason = text[m.end() : end].strip().strip("*").strip() or None
        outside = text[: m.start()] + "\n" + text[end:]
    return _score_from_text(outside, reason)


def _score_from_text(text: str, reason: str | None) -> ScoreParse:
    m = _SCORE_LABEL.search(text)
    if not m:
        unscaled = _SCALE.sub(" ", text)
        m = _OUT_OF_100.search(unscaled) or _FIRST_NUMBER.search(unscaled)
    if not m:
        return ScoreParse("missing", None, reason)
    return _checked(float(m.group("num")), reason)


def _checked(value: float, reason: str | None) -> ScoreParse:
    if not math.isfinite(value) or value < 0.0 or value > 100.0:
        return ScoreParse("out_of_range", None, reason)
    return ScoreParse("parsed", value, reason)


def _parse_json(text: str) -> ScoreParse | None:
    """Rule 1, or None when the text holds no JSON object with a "score" key."""
    if "{" not in text:
        return None
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(_MAX_JSON_ATTEMPTS):
        if start < 0:
            return None
        try:
            obj, _end = decoder.raw_decode(text, start)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            keys = {str(k).lower(): v for k, v in obj.items()}
            if "score" in keys:
                raw_reason = keys.get("reason")
                reason = None if raw_reason is None else (str(raw_reason).strip() or None)
                value = keys["score"]
                if isinstance(value, bool):
                    return ScoreParse("missing", None, reason)
                if isinstance(value, (int, float)):
                    return _checked(float(value), reason)
                if isinstance(value, str):
                    return _score_from_text(value, reason)
                return ScoreParse("missing", None, reason)
        start = text.find("{", start + 1)
    return None


# ------------------------------------------------------------------------------------------ dominant emotions
def dominant_set(values: Sequence[float]) -> frozenset[int]:
    """Indices of the maximum, ties kept (exact equality: 70 and 70.0 tie, 70 and 70.0001 do not).

    All values equal -> every index (a constant answer predicts all eight emotions, so it earns 1/8 per dominant
    emotion it hits).  Not a reference for all-zero votes (every annotator chose "none of the above"): that image
    has no dominant emotion, and "every emotion is dominant" would give any prediction credit 1; `score_images`
    leaves it out of precision_ours and precision_single and counts it in n_images_no_dominant.  Empty input or
    NaN -> ValueError.
    """
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("dominant_set() needs a non-empty 1-D sequence")
    if np.isnan(arr).any():
        raise ValueError("dominant_set() got NaN")
    return frozenset(int(i) for i in np.flatnonzero(arr == arr.max()))


def precision_credit(predicted: frozenset[int], reference: frozenset[int]) -> float:
    """|P ∩ G| / |P|: a correct emotion among k predicted earns 1/k, so predicting every emotion is not free.

    Empty P -> ValueError (a prediction always has an argmax).  Empty G -> 0.0.
    """
    if not predicted:
        raise ValueError("precision_credit() needs a non-empty predicted set")
    return len(predicted & reference) / len(predicted)


def single_label_reference(dominant: frozenset[int], image_id: str, seed: int = 0) -> int:
    """One emotion drawn uniformly from the dominant set, for the protocol's single-label reference.

    Seeded by sha256(f"{seed}:{image_id}") (the whole digest as an integer), so the draw for an image does not
    depend on which other images are scored or in what order.  A one-element set returns its element (what the
    draw would give).  Empty set -> ValueError.
    """
    if not dominant:
        raise ValueError("single_label_reference() needs a non-empty set")
    ordered = sorted(dominant)
    if len(ordered) == 1:
        return ordered[0]
    digest = hashlib.sha256(f"{seed}:{image_id}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "big"))
    return ordered[int(rng.integers(len(ordered)))]


# ------------------------------------------------------------------------------------------ distributions
def vote_distribution(votes: Sequence[int], n_annotators: int) -> np.ndarray:
    """Votes / number of annotators: the share of annotators who felt each emotion (not a probability vector —
    annotators may select several emotions or none).  Needs 8 counts in [0, n_annotators] and n_annotators >= 1."""
    if n_annotators < 1:
        raise ValueError(f"n_annotators must be >= 1, got {n_annotators}")
    arr = np.asarray(votes, dtype=float)
    if arr.shape != (_N,):
        raise ValueError(f"expected {_N} vote counts, got shape {arr.shape}")
    if not np.all((arr >= 0) & (arr <= n_annotators)):
        raise ValueError(f"vote counts must be in [0, {n_annotators}], got {list(votes)}")
    return arr / n_annotators


def score_distribution(scores: Sequence[float]) -> np.ndarray:
    """Scores / 100, the protocol's normalisation by the maximum.  Needs 8 finite scores in [0, 100] (a parse
    failure must be handled by the caller, not turned into a number here)."""
    arr = np.asarray(scores, dtype=float)
    if arr.shape != (_N,):
        raise ValueError(f"expected {_N} scores, got shape {arr.shape}")
    if not np.all(np.isfinite(arr) & (arr >= 0) & (arr <= 100)):
        raise ValueError(f"scores must be finite and in [0, 100], got {list(scores)}")
    return arr / 100.0


def distribution_metrics(p: Sequence[float], q: Sequence[float]) -> dict[str, float | None]:
    """The eight metrics between reference p (votes / n) and prediction q (scores / 100), each 8 values in [0, 1].

    - cheb = max |p - q|.
    - canberra = sum |p - q| / (|p| + |q|), a 0/0 term counts 0 (as scipy.spatial.distance.canberra).
    - kl, js, wasserstein need probability vectors: p' = (p + eps) / sum(p + eps), q' likewise, eps = SMOOTHING_EPS
      (an all-zero vector becomes uniform; a zero entry stays near zero).
      kl = sum p' ln(p'/q') (scipy.stats.entropy(p', q')); js = Jensen-Shannon divergence, natural log
      (scipy.spatial.distance.jensenshannon(p', q') ** 2, the divergence, not the distance); wasserstein = 1-D
      earth mover's distance with the emotions at positions 0..7 in EMOTIONS order, weights p' and q'
      (scipy.stats.wasserstein_distance(range(8), range(8), p', q')).
    - cosine = p.q / (|p||q|) on the unsmoothed vectors; None when either is all zero.
    - srcc = Spearman (average ranks), plcc = Pearson, on the unsmoothed vectors; None when either vector is
      constant (exact equality), where both are undefined.
    Lengths other than 8, values outside [0, 1] or NaN -> ValueError.
    """
    pa = _unit_rows(p, "p")
    qa = _unit_rows(q, "q")
    batch = _batch_metrics(pa, qa, DISTRIBUTION_METRICS)
    return {name: _maybe(batch[name][0]) for name in DISTRIBUTION_METRICS}


def _unit_rows(x: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.shape != (_N,):
        raise ValueError(f"{name} must have {_N} values, got shape {arr.shape}")
    if not np.all(np.isfinite(arr) & (arr >= 0) & (arr <= 1)):
        raise ValueError(f"{name} must be finite and in [0, 1], got {list(x)}")
    return arr[None, :]


def _maybe(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _smooth(x: np.ndarray) -> np.ndarray:
    s = x + SMOOTHING_EPS
    return s / s.sum(axis=1, keepdims=True)


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Pearson r; NaN where either row is constant (checked exactly, before centring, because centring
    a constant row can leave rounding noise that would otherwise give a number from nothing)."""
    const = (x.max(axis=1) == x.min(axis=1)) | (y.max(axis=1) == y.min(axis=1))
    xm = x - x.mean(axis=1, keepdims=True)
    ym = y - y.mean(axis=1, keepdims=True)
    nx = np.sqrt((xm * xm).sum(axis=1))
    ny = np.sqrt((ym * ym).sum(axis=1))
    denom = np.where(const, 1.0, nx * ny)
    r = np.clip((xm * ym).sum(axis=1) / denom, -1.0, 1.0)
    r[const] = np.nan
    return r


def _batch_metrics(p: np.ndarray, q: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The metrics of `distribution_metrics` for n image rows at once (p, q: shape (n, 8), already validated).
    Undefined values are NaN."""
    out: dict[str, np.ndarray] = {}
    diff = np.abs(p - q)
    if "cheb" in names:
        out["cheb"] = diff.max(axis=1)
    if "canberra" in names:
        den = np.abs(p) + np.abs(q)
        out["canberra"] = np.where(den > 0, diff / np.where(den > 0, den, 1.0), 0.0).sum(axis=1)
    if {"kl", "js", "wasserstein"} & set(names):
        ps, qs = _smooth(p), _smooth(q)
        if "kl" in names:
            out["kl"] = (ps * np.log(ps / qs)).sum(axis=1)
        if "js" in names:
            m = 0.5 * (ps + qs)
            out["js"] = 0.5 * (ps * np.log(ps / m)).sum(axis=1) + 0.5 * (qs * np.log(qs / m)).sum(axis=1)
        if "wasserstein" in names:
            # Unit spacing between neighbouring emotions: W1 = sum over the 7 gaps of |CDF_p' - CDF_q'|.
            out["wasserstein"] = np.abs(np.cumsum(ps - qs, axis=1)[:, :-1]).sum(axis=1)
    if "cosine" in names:
        zero = ~p.any(axis=1) | ~q.any(axis=1)
        norms = np.sqrt((p * p).sum(axis=1) * (q * q).sum(axis=1))
        cos = np.clip((p * q).sum(axis=1) / np.where(zero, 1.0, norms), -1.0, 1.0)
        cos[zero] = np.nan
        out["cosine"] = cos
    if "plcc" in names:
        out["plcc"] = _pearson_rows(p, q)
    if "srcc" in names:
        if p.shape[0]:
            from scipy.stats import rankdata  # here: importing scipy.stats costs every emo-tasks command 0.5 s

            out["srcc"] = _pearson_rows(rankdata(p, axis=1), rankdata(q, axis=1))
        else:
            out["srcc"] = np.zeros(0)
    return {name: out[name] for name in names}


def _mean_defined(values: np.ndarray) -> float | None:
    ok = ~np.isnan(values)
    return float(values[ok].mean()) if ok.any() else None


# ------------------------------------------------------------------------------------------ whole benchmark
@dataclass(frozen=True)
class ImageResult:
    """One image: its human votes and a model's eight scores (in EMOTIONS order; None = that answer failed to
    parse, or is absent).  `n_parse_failed`: the image's answers that gave no usable score (counted by
    `task_metrics`; `score_images` reads only the scores)."""

    image_id: str
    votes: tuple[int, ...]
    n_annotators: int
    original_label: str
    scores: tuple[float | None, ...]
    n_parse_failed: int = 0


def score_images(images: Sequence[ImageResult], seed: int = 0) -> dict[str, float | int | None]:
    """Benchmark numbers for one model: three dominant-emotion precisions (x100) and the 8 distribution metrics.

    An image with any None score is incomplete: left out of every metric (an argmax over 7 scores is not the
    model's answer) and counted in n_images_incomplete. Precision: P = dominant_set(scores) against G =
    dominant_set(votes) ("ours"), {original_label} ("original") and {single_label_reference(...)} ("single"), mean
    credit over the complete images; an image whose votes are all zero (every annotator chose "none") has no
    dominant emotion, so it is left out of "ours" and "single" (never free credit) and counted in
    n_images_no_dominant ("original" and the distribution metrics keep it). Distribution metrics: per image, then
    the mean over the images where the metric is defined; None when it is defined for none. n_*_undefined count
    complete images with an undefined value (constant vector: srcc/plcc; all-zero vector: cosine). No complete image
    -> every metric None.
    Malformed input (not 8 votes/scores, votes outside [0, n_annotators], scores outside [0, 100], an unknown
    original label) -> ValueError.
    """
    n = len(images)
    votes = np.zeros((n, _N))
    scores = np.zeros((n, _N))
    n_ann = np.ones(n)
    original = np.zeros(n, dtype=np.int64)
    incomplete = np.zeros(n, dtype=bool)
    for i, im in enumerate(images):
        if len(im.votes) != _N or len(im.scores) != _N:
            raise ValueError(f"image {im.image_id!r}: expected {_N} votes and {_N} scores")
        label = _INDEX.get(im.original_label.strip().lower())
        if label is None:
            raise ValueError(f"image {im.image_id!r}: original label {im.original_label!r} is not one of {EMOTIONS}")
        original[i] = label
        votes[i] = im.votes
        n_ann[i] = im.n_annotators
        if any(s is None for s in im.scores):
            incomplete[i] = True
        else:
            scores[i] = im.scores
    if np.any(n_ann < 1) or np.any((votes < 0) | (votes > n_ann[:, None])):
        raise ValueError("vote counts must be in [0, n_annotators] with n_annotators >= 1")
    if not np.all(np.isfinite(scores) & (scores >= 0) & (scores <= 100)):
        raise ValueError("scores must be finite and in [0, 100]")

    keep = np.flatnonzero(~incomplete)
    v, s = votes[keep], scores[keep]
    result: dict[str, float | int | None] = {}
    if keep.size:
        pred = s == s.max(axis=1, keepdims=True)
        ours = v == v.max(axis=1, keepdims=True)
        n_pred = pred.sum(axis=1)
        orig = np.zeros_like(ours)
        orig[np.arange(keep.size), original[keep]] = True
        has_dominant = v.max(axis=1) > 0  # all-zero votes: no dominant emotion (see dominant_set)
        single = ours.copy()  # a one-emotion dominant set is its own draw; only ties need the seeded draw
        for row in np.flatnonzero((ours.sum(axis=1) > 1) & has_dominant):
            dom = frozenset(int(j) for j in np.flatnonzero(ours[row]))
            single[row] = False
            single[row, single_label_reference(dom, images[keep[row]].image_id, seed)] = True
        credit = {name: (pred & ref).sum(axis=1) / n_pred for name, ref in (("ours", ours), ("single", single))}
        credit = {name: c[has_dominant] for name, c in credit.items()}
        credit["original"] = (pred & orig).sum(axis=1) / n_pred
        for name in ("ours", "original", "single"):
            c = credit[name]
            result[f"precision_{name}"] = float(c.mean() * 100.0) if c.size else None
        n_no_dominant = int((~has_dominant).sum())
    else:
        result.update(precision_ours=None, precision_original=None, precision_single=None)
        n_no_dominant = 0

    batch = _batch_metrics(v / n_ann[keep][:, None], s / 100.0, DISTRIBUTION_METRICS)
    for name in DISTRIBUTION_METRICS:
        result[name] = _mean_defined(batch[name])
    result.update(
        n_images=n,
        n_images_scored=int(keep.size),
        n_images_incomplete=int(incomplete.sum()),
        n_images_no_dominant=n_no_dominant,
        n_srcc_undefined=int(np.isnan(batch["srcc"]).sum()),
        n_plcc_undefined=int(np.isnan(batch["plcc"]).sum()),
        n_cosine_undefined=int(np.isnan(batch["cosine"]).sum()),
    )
    return result


def split_half_baseline(
    annotations: Sequence[Sequence[Sequence[str]]], repeats: int = 10, seed: int = 0
) -> dict[str, float | int | None]:
    """Human baseline: how well one random half of the annotators predicts the other half.

    annotations[image][annotator] = the emotions that annotator selected ("none" / "none of the above" and an
    empty list mean no emotion; case-insensitive; a repeated emotion counts once; an unknown label ->
    ValueError).  Each repeat shuffles every image's annotators (one numpy rng seeded with `seed`, so the result
    is reproducible for the same input order), half A = the first n//2, half B = the rest (odd n: B is one
    larger), each half's distribution = votes / half size.  Metrics as in `distribution_metrics` with A as the
    reference, except KL and JS (see SPLIT_HALF_METRICS).  Per repeat: mean over the images where the metric is
    defined; then the mean over repeats.  Undefined counts are summed over repeats.  An image with fewer than 2
    annotators cannot be split -> ValueError; repeats < 1 -> ValueError; no images -> metrics None.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    selections: list[np.ndarray] = []
    for i, image in enumerate(annotations):
        if len(image) < 2:
            raise ValueError(f"image {i}: {len(image)} annotator(s), a split-half needs at least 2")
        mat = np.zeros((len(image), _N), dtype=np.int32)
        for a, chosen in enumerate(image):
            if isinstance(chosen, str):
                raise TypeError(f"image {i}, annotator {a}: expected a list of emotions, got the string {chosen!r}")
            for label in chosen:
                key = label.strip().lower()
                if key in NONE_LABELS or not key:
                    continue
                idx = _INDEX.get(key)
                if idx is None:
                    raise ValueError(f"image {i}, annotator {a}: unknown emotion {label!r}")
                mat[a, idx] = 1
        selections.append(mat)

    n_images = len(selections)
    groups: dict[int, np.ndarray] = {}  # annotator count -> image indices, so each group is one array
    for size in sorted({m.shape[0] for m in selections}):
        groups[size] = np.array([i for i, m in enumerate(selections) if m.shape[0] == size], dtype=np.int64)
    stacked = {size: np.stack([selections[i] for i in idx]) for size, idx in groups.items()}
    max_n = max(groups, default=0)

    rng = np.random.default_rng(seed)
    per_repeat: dict[str, list[float]] = {name: [] for name in SPLIT_HALF_METRICS}
    undefined = {"srcc": 0, "plcc": 0, "cosine": 0}
    for _ in range(repeats):
        keys = rng.random((n_images, max_n))  # one draw per repeat, independent of how images are grouped
        half_a = np.zeros((n_images, _N))
        half_b = np.zeros((n_images, _N))
        for size, idx in groups.items():
            order = np.argsort(keys[idx, :size], axis=1)
            shuffled = np.take_along_axis(stacked[size], order[:, :, None], axis=1)
            h = size // 2
            first = shuffled[:, :h].sum(axis=1)
            half_a[idx] = first / h
            half_b[idx] = (shuffled.sum(axis=1) - first) / (size - h)
        batch = _batch_metrics(half_a, half_b, SPLIT_HALF_METRICS)
        for name in SPLIT_HALF_METRICS:
            mean = _mean_defined(batch[name])
            if mean is not None:
                per_repeat[name].append(mean)
        for name in undefined:
            undefined[name] += int(np.isnan(batch[name]).sum())

    result: dict[str, float | int | None] = {
        name: (float(np.mean(vals)) if vals else None) for name, vals in per_repeat.items()
    }
    result.update(
        n_images=n_images,
        n_repeats=repeats,
        n_srcc_undefined=undefined["srcc"],
        n_plcc_undefined=undefined["plcc"],
        n_cosine_undefined=undefined["cosine"],
    )
    return result


def score_sample(image: ImageResult, seed: int = 0) -> dict[str, float | int | None]:
    """One image's numbers, scored alone with `score_images` (precisions x100, the 8 distribution metrics; None
    where undefined or when the image is incomplete): the per-sample values of the metric table."""
    return score_images([image], seed=seed)


def task_metrics(
    samples: Sequence[ImageResult], settings: MultiEmoSettings | None = None, seed: int = 0
) -> dict[str, float | int | None]:
    """Every metric of TABLE (plus the counts `score_images` adds) for one task's images: `score_images`, then
    n_parse_failed, the answers without a usable score.

    `settings`: the task's settings.  No MultiEmo-Bench metric depends on one today (the votes are already in the
    samples); a metric that comes to reads it here, not in the hooks."""
    out = dict(score_images(samples, seed=seed))
    out["n_parse_failed"] = sum(im.n_parse_failed for im in samples)
    return out


# ------------------------------------------------------------------------------------------------ metric table
def _number(name: str) -> Callable[[Mapping[str, float | int | None]], float | int | None]:
    """A per-sample value: the metric's entry in one image's `score_sample` numbers (None: undefined)."""
    return lambda numbers: numbers.get(name)


_PRECISION_DOCS = {
    "ours": "Dominant-emotion precision against the annotators' dominant set (ties kept), x100.",
    "original": "Dominant-emotion precision against the image's original single label, x100.",
    "single": "Dominant-emotion precision against one seeded draw from the annotators' dominant set, x100.",
}
_DISTRIBUTION_DOCS = {
    "cheb": ("Chebyshev distance between votes/n and scores/100 (mean over images).", False),
    "canberra": ("Canberra distance between votes/n and scores/100 (mean over images).", False),
    "wasserstein": ("1-D earth mover's distance between the smoothed distributions (mean over images).", False),
    "kl": ("KL divergence of the smoothed scores from the smoothed votes (mean over images).", False),
    "js": ("Jensen-Shannon divergence between the smoothed distributions (mean over images).", False),
    "cosine": ("Cosine similarity of votes/n and scores/100 (mean over images where defined).", True),
    "srcc": ("Spearman correlation of votes and scores (mean over images where defined).", True),
    "plcc": ("Pearson correlation of votes and scores (mean over images where defined).", True),
}

#: MultiEmo-Bench's metrics in the task YAML's `metric_list` order.  Per-sample unit: one image's
#: `score_sample` numbers; the metrics with per-sample values are the report's and what `emo-tasks compare` tests
#: by default (headline); the precisions are plotted, the distribution metrics shown with 4 decimals.
TABLE = MetricTable(
    "multiemo",
    "MultiEmo-Bench",
    (
        *(
            Metric(
                f"precision_{ref}", doc, headline=True, per_sample=_number(f"precision_{ref}"), outcome=True, plot=True
            )
            for ref, doc in _PRECISION_DOCS.items()
        ),
        *(
            Metric(
                name,
                _DISTRIBUTION_DOCS[name][0],
                higher_is_better=_DISTRIBUTION_DOCS[name][1],
                headline=True,
                per_sample=_number(name),
                digits=4,
            )
            for name in DISTRIBUTION_METRICS
        ),
        Metric("n_images", "Images evaluated."),
        Metric(
            "n_images_incomplete",
            "Images left out of every metric because an answer gave no usable score.",
            higher_is_better=False,
        ),
        Metric("n_parse_failed", "Answers without a usable 0-100 score.", higher_is_better=False),
        Metric("n_srcc_undefined", "Scored images whose SRCC is undefined (constant vector).", higher_is_better=False),
        Metric("n_plcc_undefined", "Scored images whose PLCC is undefined (constant vector).", higher_is_better=False),
    ),
)
#: Distribution metric -> lower is better (derived from TABLE).
LOWER_IS_BETTER = {name: name in TABLE.lower_is_better for name in DISTRIBUTION_METRICS}
