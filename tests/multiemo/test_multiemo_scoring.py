"""MultiEmo-Bench scoring: answer parsing, dominant-emotion precision, distribution metrics, human split-half.

Expected numbers are hand-computed literals where the arithmetic is short; otherwise each metric is checked
against the scipy function the module's docstring names, one pair of vectors at a time.
"""

from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import pytest
from scipy.spatial import distance
from scipy.stats import entropy, pearsonr, spearmanr, wasserstein_distance

from emo_tasks.multiemo.scoring import (
    DISTRIBUTION_METRICS,
    EMOTIONS,
    LOWER_IS_BETTER,
    SMOOTHING_EPS,
    SPLIT_HALF_METRICS,
    TABLE,
    ImageResult,
    ScoreParse,
    distribution_metrics,
    dominant_set,
    parse_score,
    precision_credit,
    score_distribution,
    score_images,
    score_sample,
    single_label_reference,
    split_half_baseline,
    task_metrics,
    vote_distribution,
)

EPS = SMOOTHING_EPS


# ------------------------------------------------------------------------------------------------ constants
def test_constants() -> None:
    assert EMOTIONS == ("amusement", "anger", "awe", "contentment", "disgust", "excitement", "fear", "sadness")
    assert SMOOTHING_EPS == 1e-6
    assert DISTRIBUTION_METRICS == ("cheb", "canberra", "wasserstein", "kl", "js", "cosine", "srcc", "plcc")
    assert [m for m in DISTRIBUTION_METRICS if LOWER_IS_BETTER[m]] == ["cheb", "canberra", "wasserstein", "kl", "js"]
    assert set(LOWER_IS_BETTER) == set(DISTRIBUTION_METRICS)
    assert SPLIT_HALF_METRICS == ("cheb", "canberra", "wasserstein", "cosine", "srcc", "plcc")


# ------------------------------------------------------------------------------------------------ parse_score
PARSE_TABLE = [
    ("Score: 70", "parsed", 70.0, None),
    ("Score: 70. Reason: calm colours.", "parsed", 70.0, "calm colours."),
    ("70/100", "parsed", 70.0, None),
    ("70 / 100", "parsed", 70.0, None),
    ("I give it 65 out of 100.", "parsed", 65.0, None),
    ("I'd say 70.", "parsed", 70.0, None),
    ('{"score": 70, "reason": "x"}', "parsed", 70.0, "x"),
    ('```json\n{"score": 35, "reason": "dark storm clouds"}\n```', "parsed", 35.0, "dark storm clouds"),
    ('Here you go: {"Score": 12.5, "Reason": " grey sky "}', "parsed", 12.5, "grey sky"),
    ('{"score": "80/100", "reason": "r"}', "parsed", 80.0, "r"),
    ("**Score:** 85", "parsed", 85.0, None),
    ("**Score:** 85\n**Reason:** a smiling child.", "parsed", 85.0, "a smiling child."),
    ("Score: 40. Reason: 3 people and 2 dogs", "parsed", 40.0, "3 people and 2 dogs"),
    ("Reason: 3 people and 2 dogs. Score: 40", "parsed", 40.0, "3 people and 2 dogs."),
    ("72.5", "parsed", 72.5, None),
    ("Score (0-100): 55", "parsed", 55.0, None),
    ("Score (out of 100): 55", "parsed", 55.0, None),
    ("On a scale of 0 to 100, I'd give 60.", "parsed", 60.0, None),
    ("The rating is 90 because of the 2 puppies.", "parsed", 90.0, None),
    ("0", "parsed", 0.0, None),
    ("Score: 100", "parsed", 100.0, None),
    ("Score: 120", "out_of_range", None, None),
    ("Score: 120. Reason: very scary.", "out_of_range", None, "very scary."),
    ("-5", "out_of_range", None, None),
    ("Score: -5", "out_of_range", None, None),
    ('{"score": 101}', "out_of_range", None, None),
    ("no idea", "missing", None, None),
    ("", "missing", None, None),
    (None, "missing", None, None),
    ('{"score": null, "reason": "cannot tell"}', "missing", None, "cannot tell"),
    ('{"score": true}', "missing", None, None),
    ("Reason: 3 dogs on a beach.", "missing", None, "3 dogs on a beach."),
]


@pytest.mark.parametrize(("text", "status", "score", "reason"), PARSE_TABLE)
def test_parse_score_table(text: str | None, status: str, score: float | None, reason: str | None) -> None:
    assert parse_score(text) == ScoreParse(status, score, reason)


def test_parse_score_rule_order() -> None:
    # JSON beats a label in the surrounding prose; a label beats N/100; N/100 beats the first number.
    assert parse_score('Score: 10 {"score": 20}').score == 20.0
    assert parse_score("7 dogs, 50/100, score: 30").score == 30.0
    assert parse_score("7 dogs, 50/100").score == 50.0
    assert parse_score("7 dogs").score == 7.0


def test_parse_score_never_a_silent_zero() -> None:
    for text in ["", "n/a", "I cannot rate this image.", "Score: high", "Reason: 0 people"]:
        parsed = parse_score(text)
        assert parsed.status == "missing"
        assert parsed.score is None


# ------------------------------------------------------------------------------------------------ dominant sets
def test_dominant_set_ties_and_all_equal() -> None:
    assert dominant_set([1, 5, 2, 5, 0, 0, 0, 0]) == frozenset({1, 3})
    assert dominant_set([70, 70.0, 10, 0, 0, 0, 0, 0]) == frozenset({0, 1})
    assert dominant_set([70, 70.0001, 10, 0, 0, 0, 0, 0]) == frozenset({1})
    assert dominant_set([0] * 8) == frozenset(range(8))
    assert dominant_set([50] * 8) == frozenset(range(8))


def test_dominant_set_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError):
        dominant_set([])
    with pytest.raises(ValueError):
        dominant_set([1.0, float("nan")])


def test_precision_credit_hand_cases() -> None:
    assert precision_credit(frozenset({0, 1}), frozenset({1, 2})) == 0.5
    assert precision_credit(frozenset({3}), frozenset({3})) == 1.0
    assert precision_credit(frozenset({3}), frozenset({0, 1, 2, 3})) == 1.0
    assert precision_credit(frozenset(range(8)), frozenset({2, 5})) == 0.25
    assert precision_credit(frozenset({0, 1, 2}), frozenset({5})) == 0.0
    assert precision_credit(frozenset({0}), frozenset()) == 0.0
    with pytest.raises(ValueError):
        precision_credit(frozenset(), frozenset({1}))


# ------------------------------------------------------------------------------------------------ single label
def test_single_label_reference_follows_the_documented_recipe() -> None:
    dom = frozenset({6, 1, 4})
    for image_id in ["img_0001", "fi/amusement_123.jpg", ""]:
        for seed in (0, 7):
            digest = hashlib.sha256(f"{seed}:{image_id}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest, "big"))
            assert single_label_reference(dom, image_id, seed) == [1, 4, 6][int(rng.integers(3))]


def test_single_label_reference_reproducible_in_set_and_seed_dependent() -> None:
    dom = frozenset(range(8))
    ids = [f"img_{i}" for i in range(300)]
    draws0 = [single_label_reference(dom, i, seed=0) for i in ids]
    assert draws0 == [single_label_reference(frozenset(reversed(range(8))), i, seed=0) for i in ids]
    assert all(d in dom for d in draws0)
    draws1 = [single_label_reference(dom, i, seed=1) for i in ids]
    # Independent draws agree with probability 1/8: expect ~38 of 300, far below 100.
    assert sum(a == b for a, b in zip(draws0, draws1, strict=True)) < 100
    assert single_label_reference(frozenset({5}), "x", seed=3) == 5
    with pytest.raises(ValueError):
        single_label_reference(frozenset(), "x")


def test_single_label_reference_is_uniform() -> None:
    draws = [single_label_reference(frozenset({1, 4, 6}), f"id{i}") for i in range(6000)]
    for k in (1, 4, 6):
        assert abs(draws.count(k) / 6000 - 1 / 3) < 0.03  # ~5 standard deviations


# ------------------------------------------------------------------------------------------------ distributions
def test_vote_and_score_distributions() -> None:
    np.testing.assert_array_equal(vote_distribution([10, 5, 0, 0, 0, 0, 0, 20], 20), [0.5, 0.25, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(score_distribution([80, 50, 0, 0, 0, 0, 0, 100]), [0.8, 0.5, 0, 0, 0, 0, 0, 1])
    with pytest.raises(ValueError):
        vote_distribution([21, 0, 0, 0, 0, 0, 0, 0], 20)
    with pytest.raises(ValueError):
        vote_distribution([1] * 7, 20)
    with pytest.raises(ValueError):
        vote_distribution([0] * 8, 0)
    with pytest.raises(ValueError):
        score_distribution([101, 0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError):
        score_distribution([None, 0, 0, 0, 0, 0, 0, 0])  # type: ignore[list-item]


def _reference_metrics(p: np.ndarray, q: np.ndarray) -> dict[str, float | None]:
    """Each metric straight from scipy, one pair at a time (the definitions in the module's docstring)."""
    ps = (p + EPS) / (p + EPS).sum()
    qs = (q + EPS) / (q + EPS).sum()
    pos = np.arange(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        srcc = spearmanr(p, q).statistic
        plcc = pearsonr(p, q).statistic if np.ptp(p) > 0 and np.ptp(q) > 0 else float("nan")
    zero = not p.any() or not q.any()
    return {
        "cheb": distance.chebyshev(p, q),
        "canberra": distance.canberra(p, q),
        "wasserstein": wasserstein_distance(pos, pos, ps, qs),
        "kl": entropy(ps, qs),
        "js": distance.jensenshannon(ps, qs) ** 2,
        "cosine": None if zero else 1.0 - distance.cosine(p, q),
        "srcc": None if math.isnan(srcc) else srcc,
        "plcc": None if math.isnan(plcc) else plcc,
    }


def _random_pair(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
    p = rng.integers(0, 21, 8) / 20
    p[rng.random(8) < 0.4] = 0.0
    if k % 3 == 0:
        q = rng.integers(0, 21, 8) * 5 / 100  # scores in steps of 5, as models tend to answer
    else:
        q = rng.random(8)
    q[rng.random(8) < 0.3] = 0.0
    if k % 25 == 0:
        p = np.zeros(8)  # nobody felt any of the eight
    if k % 25 == 1:
        q = np.full(8, 0.5)  # constant prediction
    if k % 25 == 2:
        q = np.zeros(8)
    return p, q


def test_distribution_metrics_match_scipy_on_random_pairs() -> None:
    rng = np.random.default_rng(12345)
    n_none = 0
    for k in range(200):
        p, q = _random_pair(rng, k)
        ours = distribution_metrics(p, q)
        ref = _reference_metrics(p, q)
        assert list(ours) == list(DISTRIBUTION_METRICS)
        for name in DISTRIBUTION_METRICS:
            if ref[name] is None:
                assert ours[name] is None, (k, name)
                n_none += 1
            else:
                assert ours[name] == pytest.approx(ref[name], abs=1e-9), (k, name, p, q)
    assert n_none > 0  # the undefined paths were exercised


def test_distribution_metrics_identical_vectors() -> None:
    p = [0.5, 0.25, 0, 0, 0.1, 0, 0.05, 0]
    m = distribution_metrics(p, p)
    for name in ("cheb", "canberra", "kl", "js", "wasserstein"):
        assert m[name] == pytest.approx(0.0, abs=1e-15), name
    for name in ("cosine", "srcc", "plcc"):
        assert m[name] == pytest.approx(1.0, abs=1e-12), name


def test_distribution_metrics_one_hot_hand_case() -> None:
    # p = amusement only, q = anger only.  Average ranks [8, 4 x 7] vs [4, 8, 4 x 6]: r = -2 / 14 = -1/7 (same
    # for the raw values).  Smoothed: the CDFs differ by 1/(1+8e) over the single gap 0-1.
    p = [1, 0, 0, 0, 0, 0, 0, 0]
    q = [0, 1, 0, 0, 0, 0, 0, 0]
    m = distribution_metrics(p, q)
    assert m["cheb"] == 1.0
    assert m["canberra"] == 2.0
    assert m["cosine"] == 0.0
    assert m["srcc"] == pytest.approx(-1 / 7, abs=1e-12)
    assert m["plcc"] == pytest.approx(-1 / 7, abs=1e-12)
    assert m["wasserstein"] == pytest.approx(1 / (1 + 8 * EPS), abs=1e-12)
    assert m["kl"] == pytest.approx(math.log((1 + EPS) / EPS) / (1 + 8 * EPS), abs=1e-12)
    # Moving the prediction to sadness (position 7) costs 7 gaps.
    assert distribution_metrics(p, [0, 0, 0, 0, 0, 0, 0, 1])["wasserstein"] == pytest.approx(7 / (1 + 8 * EPS))


def test_distribution_metrics_undefined_values() -> None:
    m = distribution_metrics([0.5, 0.25, 0, 0, 0, 0, 0, 0], [0.3] * 8)
    assert m["srcc"] is None and m["plcc"] is None
    assert m["cosine"] == pytest.approx(0.75 / math.sqrt(0.3125 * 8), abs=1e-12)
    z = distribution_metrics([0] * 8, [0.8, 0.1, 0, 0, 0, 0, 0, 0])
    assert z["cosine"] is None and z["srcc"] is None and z["plcc"] is None
    assert z["cheb"] == pytest.approx(0.8)
    # Nobody felt anything and the model scored everything 0: both become uniform after smoothing.
    both = distribution_metrics([0] * 8, [0] * 8)
    assert both["kl"] == 0.0 and both["js"] == 0.0 and both["wasserstein"] == 0.0
    assert both["cheb"] == 0.0 and both["canberra"] == 0.0
    assert both["cosine"] is None and both["srcc"] is None and both["plcc"] is None


def test_distribution_metrics_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        distribution_metrics([0.1] * 7, [0.1] * 7)
    with pytest.raises(ValueError):
        distribution_metrics([0.1] * 8, [1.5] + [0.1] * 7)
    with pytest.raises(ValueError):
        distribution_metrics([float("nan")] + [0.1] * 7, [0.1] * 8)


# ------------------------------------------------------------------------------------------------ score_images
def _img(image_id: str, votes, label: str, scores, n: int = 20) -> ImageResult:
    return ImageResult(image_id, tuple(votes), n, label, tuple(scores))


def test_score_images_hand_case() -> None:
    a = _img("a", [10, 5, 0, 0, 0, 0, 0, 0], "anger", [80, 80, 10, 0, 0, 0, 0, 0])
    b = _img("b", [0, 0, 6, 6, 0, 0, 0, 0], "awe", [50] * 8)  # constant scores: srcc/plcc undefined
    c = _img("c", [20, 0, 0, 0, 0, 0, 0, 0], "amusement", [90, None, 0, 0, 0, 0, 0, 0])  # a parse failure
    r = score_images([a, b, c])
    # a: P={0,1}; ours G={0} -> 1/2, original {1} -> 1/2, single {0} -> 1/2.
    # b: P=all 8; ours G={2,3} -> 2/8, original {2} -> 1/8, single one of {2,3} -> 1/8.  c is excluded.
    assert r["precision_ours"] == pytest.approx(37.5)
    assert r["precision_original"] == pytest.approx(31.25)
    assert r["precision_single"] == pytest.approx(31.25)
    # a: |p-q| = .3, .55, .1; b: .5 x 6, .2 x 2.
    assert r["cheb"] == pytest.approx((0.55 + 0.5) / 2)
    assert r["canberra"] == pytest.approx((0.3 / 1.3 + 0.55 / 1.05 + 1.0 + (6 + 2 * 0.25)) / 2)
    cos_a = 0.6 / math.sqrt(0.3125 * 1.29)
    cos_b = 0.3 / math.sqrt(0.18 * 2.0)
    assert r["cosine"] == pytest.approx((cos_a + cos_b) / 2)
    pa, qa = np.array([0.5, 0.25, 0, 0, 0, 0, 0, 0]), np.array([0.8, 0.8, 0.1, 0, 0, 0, 0, 0])
    assert r["plcc"] == pytest.approx(pearsonr(pa, qa).statistic, abs=1e-12)  # image a only
    assert r["srcc"] == pytest.approx(spearmanr(pa, qa).statistic, abs=1e-12)
    pb, qb = np.array([0, 0, 0.3, 0.3, 0, 0, 0, 0]), np.full(8, 0.5)
    for name in ("kl", "js", "wasserstein"):
        expect = (_reference_metrics(pa, qa)[name] + _reference_metrics(pb, qb)[name]) / 2
        assert r[name] == pytest.approx(expect, abs=1e-12), name
    assert r["n_images"] == 3
    assert r["n_images_scored"] == 2
    assert r["n_images_incomplete"] == 1
    assert (r["n_srcc_undefined"], r["n_plcc_undefined"], r["n_cosine_undefined"]) == (1, 1, 0)


def test_score_images_all_scores_tie() -> None:
    rng = np.random.default_rng(3)
    images, expected = [], []
    for i in range(200):
        votes = rng.integers(0, 4, 8)  # small counts: many ties, some all-zero rows
        images.append(_img(f"t{i}", votes, EMOTIONS[i % 8], [float(rng.integers(0, 101))] * 8))
        if votes.max() > 0:  # all-zero votes have no dominant emotion: left out of precision_ours
            expected.append(len(dominant_set(votes)) / 8)
    r = score_images(images)
    assert r["precision_ours"] == pytest.approx(100 * float(np.mean(expected)), abs=1e-9)
    assert r["n_images_no_dominant"] == 200 - len(expected)
    assert r["srcc"] is None and r["plcc"] is None  # constant everywhere: no number from nothing
    assert r["n_srcc_undefined"] == 200 and r["n_plcc_undefined"] == 200


def test_all_none_image_gives_no_free_precision() -> None:
    # issue 14 #13: every annotator chose "none" -> no dominant emotion; a constant model must not score 100
    none = _img("none", [0] * 8, "fear", [100, 0, 0, 0, 0, 0, 0, 0])
    real = _img("real", [0, 9, 0, 0, 0, 0, 0, 0], "anger", [100, 0, 0, 0, 0, 0, 0, 0])
    r = score_images([none, real])
    assert r["precision_ours"] == 0.0 and r["precision_single"] == 0.0  # only "real" counts, and it misses
    assert r["precision_original"] == 0.0  # the original label stays a reference for both
    assert r["n_images_no_dominant"] == 1 and r["n_images_scored"] == 2
    alone = score_images([none])
    assert alone["precision_ours"] is None and alone["precision_single"] is None
    assert alone["precision_original"] == 0.0


def test_score_images_nothing_complete() -> None:
    r = score_images([_img("x", [1] * 8, "fear", [None] * 8)])
    assert all(r[m] is None for m in (*DISTRIBUTION_METRICS, "precision_ours", "precision_original"))
    assert (r["n_images"], r["n_images_scored"], r["n_images_incomplete"]) == (1, 0, 1)
    assert score_images([])["n_images"] == 0


def test_score_images_matches_a_per_image_loop() -> None:
    rng = np.random.default_rng(99)
    images = []
    for i in range(400):
        votes = rng.integers(0, 21, 8)
        scores: list[float | None] = list(rng.integers(0, 11, 8) * 10.0)
        if i % 37 == 0:
            scores[i % 8] = None
        if i % 41 == 0:
            votes = np.zeros(8, dtype=int)
        images.append(_img(f"r{i}", votes, EMOTIONS[int(rng.integers(8))], scores))
    r = score_images(images, seed=5)

    per: dict[str, list[float]] = {m: [] for m in DISTRIBUTION_METRICS}
    prec: dict[str, list[float]] = {"ours": [], "original": [], "single": []}
    for im in images:
        if None in im.scores:
            continue
        pred = dominant_set(im.scores)
        dom = dominant_set(im.votes)
        prec["original"].append(precision_credit(pred, frozenset({EMOTIONS.index(im.original_label)})))
        if max(im.votes) > 0:  # all "none": no dominant emotion, no ours/single credit either way
            prec["ours"].append(precision_credit(pred, dom))
            prec["single"].append(precision_credit(pred, frozenset({single_label_reference(dom, im.image_id, 5)})))
        ref = _reference_metrics(np.array(im.votes) / 20, np.array(im.scores) / 100)
        for m in DISTRIBUTION_METRICS:
            if ref[m] is not None:
                per[m].append(ref[m])
    for name, vals in prec.items():
        assert r[f"precision_{name}"] == pytest.approx(100 * np.mean(vals), abs=1e-9), name
    for m in DISTRIBUTION_METRICS:
        assert r[m] == pytest.approx(np.mean(per[m]), abs=1e-9), m
    assert r["n_images_incomplete"] == sum(None in im.scores for im in images) == 11
    assert r["n_images_no_dominant"] == sum(max(im.votes) == 0 and None not in im.scores for im in images) > 0
    assert r["n_cosine_undefined"] == r["n_images_scored"] - len(per["cosine"]) > 0


def test_score_images_independent_of_image_order() -> None:
    rng = np.random.default_rng(1)
    images = [_img(f"o{i}", rng.integers(0, 3, 8), EMOTIONS[i % 8], rng.integers(0, 3, 8) * 50.0) for i in range(300)]
    forward = score_images(images, seed=2)
    backward = score_images(images[::-1], seed=2)
    for key, value in forward.items():
        assert backward[key] == pytest.approx(value, abs=1e-12), key
    assert score_images(images, seed=3)["precision_single"] != forward["precision_single"]


def test_score_images_rejects_bad_input() -> None:
    good = dict(image_id="x", votes=(1,) * 8, n_annotators=20, original_label="fear", scores=(10.0,) * 8)
    assert score_images([ImageResult(**{**good, "original_label": "Fear"})])["n_images_scored"] == 1
    for bad in (
        {"original_label": "joy"},
        {"votes": (21,) + (0,) * 7},
        {"votes": (1,) * 7},
        {"scores": (120.0,) + (0.0,) * 7},
        {"scores": (float("nan"),) * 8},
        {"n_annotators": 0},
    ):
        with pytest.raises(ValueError):
            score_images([ImageResult(**{**good, **bad})])


# ------------------------------------------------------------------------------------------------ split-half
def test_split_half_identical_annotators_agree_exactly() -> None:
    annotations = [
        [["amusement", "awe"]] * 20,
        [["Fear"]] * 20,
        [["anger", "sadness", "none"]] * 7,  # odd count: halves of 3 and 4, same shares
        [[]] * 20,  # nobody felt anything: cosine, srcc and plcc undefined
        [["none of the above"]] * 4,  # likewise
        [list(EMOTIONS)] * 10,  # everything: constant, srcc/plcc undefined, cosine 1
        [["fear", "fear", "FEAR"], ["fear"]],  # a repeated selection counts once
    ]
    r = split_half_baseline(annotations, repeats=3, seed=0)
    assert "kl" not in r and "js" not in r
    for name in ("cheb", "canberra", "wasserstein"):
        assert r[name] == 0.0, name
    for name in ("cosine", "srcc", "plcc"):
        assert r[name] == pytest.approx(1.0, abs=1e-12), name
    assert r["n_images"] == 7 and r["n_repeats"] == 3
    assert (r["n_cosine_undefined"], r["n_srcc_undefined"], r["n_plcc_undefined"]) == (6, 9, 9)


def test_split_half_two_disagreeing_annotators_hand_case() -> None:
    # Any split puts "anger" on one side and "fear" on the other: one-hot vectors 5 positions apart.
    r = split_half_baseline([[["anger"], ["fear"]]] * 5, repeats=4)
    assert r["cheb"] == 1.0
    assert r["canberra"] == 2.0
    assert r["cosine"] == 0.0
    assert r["srcc"] == pytest.approx(-1 / 7, abs=1e-12)
    assert r["plcc"] == pytest.approx(-1 / 7, abs=1e-12)
    assert r["wasserstein"] == pytest.approx(5 / (1 + 8 * EPS), abs=1e-12)


def test_split_half_random_split_is_uniform() -> None:
    # Four annotators fear, fear, anger, anger: half A is pure (cheb 1) in 2 of the 6 equally likely pairs,
    # mixed (cheb 0) otherwise.  Expected cheb 1/3; sd over 3000 images 0.0086.
    r = split_half_baseline([[["fear"], ["fear"], ["anger"], ["anger"]]] * 3000, repeats=1, seed=4)
    assert r["cheb"] == pytest.approx(1 / 3, abs=0.03)
    # Odd: fear, fear, anger -> A has 1 annotator: fear (p 2/3, cheb 1/2) or anger (p 1/3, cheb 1).  Expect 2/3.
    r = split_half_baseline([[["fear"], ["fear"], ["anger"]]] * 3000, repeats=1, seed=4)
    assert r["cheb"] == pytest.approx(2 / 3, abs=0.03)


def _random_annotations(seed: int, n_images: int = 60) -> list[list[list[str]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_images):
        probs = rng.dirichlet(np.full(8, 0.5)) * 1.5
        n = int(rng.choice([19, 20, 20, 20]))
        out.append([[e for e, p in zip(EMOTIONS, probs, strict=True) if rng.random() < p] for _ in range(n)])
    return out


def test_split_half_reproducible_and_seed_dependent() -> None:
    ann = _random_annotations(8)
    a = split_half_baseline(ann, repeats=5, seed=11)
    assert a == split_half_baseline(ann, repeats=5, seed=11)
    b = split_half_baseline(ann, repeats=5, seed=12)
    assert a["cheb"] != b["cheb"]
    assert a["cheb"] > 0.0 and a["canberra"] > 0.0 and a["wasserstein"] > 0.0
    assert 0.0 < a["srcc"] < 1.0 and 0.0 < a["plcc"] < 1.0


def test_split_half_averages_repeats() -> None:
    ann = _random_annotations(9, n_images=30)
    one_by_one = [split_half_baseline(ann, repeats=1, seed=s) for s in range(3)]
    three = split_half_baseline(ann, repeats=3, seed=0)
    assert three["cheb"] != one_by_one[0]["cheb"]  # more than one repeat was drawn
    assert min(r["cheb"] for r in one_by_one) - 0.05 < three["cheb"] < max(r["cheb"] for r in one_by_one) + 0.05


def test_split_half_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        split_half_baseline([[["joy"], ["fear"]]])
    with pytest.raises(ValueError):
        split_half_baseline([[["fear"]]])  # one annotator cannot be split
    with pytest.raises(TypeError):
        split_half_baseline([["fear", "anger"]])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        split_half_baseline([[["fear"], ["anger"]]], repeats=0)
    empty = split_half_baseline([])
    assert empty["n_images"] == 0 and all(empty[m] is None for m in SPLIT_HALF_METRICS)


# ------------------------------------------------------------------------------------------------ per sample, table
def test_score_sample_is_the_image_scored_alone() -> None:
    a = _img("a", [10, 5, 0, 0, 0, 0, 0, 0], "anger", [80, 80, 10, 0, 0, 0, 0, 0])
    assert score_sample(a) == score_images([a])
    numbers = score_sample(a)
    # P={0,1}; ours G={0} -> 1/2, original {1} -> 1/2, single {0} -> 1/2; cheb = max(.3, .55, .1) = .55
    assert (numbers["precision_ours"], numbers["precision_original"], numbers["precision_single"]) == (50.0,) * 3
    assert numbers["cheb"] == pytest.approx(0.55)


def test_task_metrics_adds_the_parse_failures_to_score_images() -> None:
    a = ImageResult("a", (10, 5, 0, 0, 0, 0, 0, 0), 20, "anger", (80, 80, 10, 0, 0, 0, 0, 0))
    b = ImageResult("b", (0, 0, 6, 6, 0, 0, 0, 0), 20, "awe", (50, None, None, 0, 0, 0, 0, 0), n_parse_failed=1)
    metrics = task_metrics([a, b])
    assert {k: v for k, v in metrics.items() if k != "n_parse_failed"} == score_images([a, b])
    assert metrics["n_parse_failed"] == 1  # b's second None is an answer that never came, not a parse failure
    assert list(metrics)[-1] == "n_parse_failed" and set(TABLE.names) <= metrics.keys()


def test_per_sample_values_skip_undefined_and_incomplete_images() -> None:
    a = _img("a", [10, 5, 0, 0, 0, 0, 0, 0], "anger", [80, 80, 10, 0, 0, 0, 0, 0])
    b = _img("b", [0, 0, 6, 6, 0, 0, 0, 0], "awe", [50] * 8)  # constant scores: srcc/plcc undefined
    c = _img("c", [20, 0, 0, 0, 0, 0, 0, 0], "amusement", [90, None, 0, 0, 0, 0, 0, 0])  # incomplete
    values = TABLE.per_sample_values({im.image_id: score_sample(im) for im in (a, b, c)})
    assert set(values) == {m.name for m in TABLE.reported}
    assert values["precision_ours"] == {"a": 50.0, "b": 25.0}
    assert values["precision_original"] == {"a": 50.0, "b": 12.5}
    assert set(values["srcc"]) == set(values["plcc"]) == {"a"}
    assert set(values["cheb"]) == {"a", "b"}


def test_lower_is_better_is_derived_from_the_table() -> None:
    assert LOWER_IS_BETTER == {m: not TABLE[m].higher_is_better for m in DISTRIBUTION_METRICS}
