"""emo_tasks.results.stats against known distributions, hand-computed cases, and scipy/sklearn references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from emo_tasks.results.stats import (
    Agreement,
    Interval,
    PairedResult,
    agreement,
    bootstrap_ci,
    cohen_kappa,
    icc,
    is_binary,
    mcnemar_exact,
    paired_bootstrap,
    spearman,
)

# Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges.
SHROUT_FLEISS = np.array(
    [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]],
    dtype=float,
)


def _coverage(draw, true_mean: float, level: float = 0.95, datasets: int = 400) -> float:
    rng = np.random.default_rng(12345)
    hits = 0
    for i in range(datasets):
        ci = bootstrap_ci(draw(rng), level=level, seed=i)
        hits += ci.low <= true_mean <= ci.high
    return hits / datasets


# --- bootstrap_ci -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("draw", "true_mean"),
    [
        (lambda rng: rng.binomial(1, 0.3, size=50).astype(float), 0.3),
        (lambda rng: rng.normal(5.0, 2.0, size=50), 5.0),
    ],
    ids=["bernoulli0.3", "normal5_2"],
)
def test_bootstrap_ci_95_covers_true_mean_about_95_percent(draw, true_mean):
    coverage = _coverage(draw, true_mean)
    assert 0.90 <= coverage <= 0.99, coverage


def test_bootstrap_ci_level_is_honoured():
    # A 50 % interval must cover about half the time: catches a level that is ignored or mapped to the wrong tails.
    coverage = _coverage(lambda rng: rng.normal(5.0, 2.0, size=50), 5.0, level=0.5)
    assert 0.40 <= coverage <= 0.60, coverage


def test_bootstrap_ci_matches_spec_percentile_bootstrap():
    values = np.random.default_rng(7).normal(size=30)
    ci = bootstrap_ci(values, n_resamples=500, level=0.9, seed=3)
    idx = np.random.default_rng(3).integers(0, 30, size=(500, 30))
    expected = np.quantile(values[idx].mean(axis=1), [0.05, 0.95])
    assert isinstance(ci, Interval)
    assert ci.estimate == pytest.approx(values.mean(), abs=1e-12)
    assert (ci.low, ci.high) == pytest.approx(tuple(expected), abs=1e-12)
    assert (ci.n, ci.level) == (30, 0.9)
    assert ci.low < ci.estimate < ci.high


def test_bootstrap_ci_reproducible_and_seed_sensitive():
    values = np.random.default_rng(1).normal(size=40)
    assert bootstrap_ci(values, seed=5) == bootstrap_ci(values, seed=5)
    a, b = bootstrap_ci(values, seed=5), bootstrap_ci(values, seed=6)
    assert a.estimate == b.estimate
    assert (a.low, a.high) != (b.low, b.high)


def test_bootstrap_ci_vectorised_mean_equals_generic_loop():
    values = np.random.default_rng(2).exponential(size=25)
    fast = bootstrap_ci(values, seed=4)
    slow = bootstrap_ci(values, statistic=lambda x: float(np.mean(x)), seed=4)
    assert (fast.low, fast.high) == pytest.approx((slow.low, slow.high), abs=1e-12)


def test_bootstrap_ci_median_statistic():
    values = np.array([1.0, 2.0, 3.0, 4.0, 100.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    ci = bootstrap_ci(values, statistic=np.median, n_resamples=300, seed=0)
    idx = np.random.default_rng(0).integers(0, 10, size=(300, 10))
    expected = np.quantile(np.median(values[idx], axis=1), [0.025, 0.975])
    assert ci.estimate == 5.5
    assert (ci.low, ci.high) == pytest.approx(tuple(expected), abs=1e-12)
    assert ci.high < 100.0  # the median ignores the outlier that a mean interval would chase


def test_bootstrap_ci_single_value_is_degenerate():
    ci = bootstrap_ci([0.75])
    assert (ci.estimate, ci.low, ci.high, ci.n) == (0.75, 0.75, 0.75, 1)


def test_bootstrap_ci_rejects_empty_nan_and_bad_level():
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], level=95)


# --- paired_bootstrap ---------------------------------------------------------------------------------------------


def test_paired_bootstrap_identical_samples():
    base = np.random.default_rng(3).random(60)
    res = paired_bootstrap(base, base.copy())
    assert isinstance(res, PairedResult)
    assert res.delta == 0.0
    assert res.low <= 0.0 <= res.high
    assert res.p_value >= 0.9
    assert (res.n, res.method) == (60, "paired_bootstrap")


def test_paired_bootstrap_constant_shift():
    base = np.random.default_rng(4).integers(0, 4, size=80) / 3.0
    res = paired_bootstrap(base, base + 1.0, n_resamples=1000)
    assert res.delta == pytest.approx(1.0, abs=1e-12)
    assert (res.low, res.high) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert res.p_value == pytest.approx(2 / 1001)
    assert res.p_value < 0.01


def test_paired_bootstrap_detects_real_difference_and_not_noise():
    rng = np.random.default_rng(5)
    base = rng.binomial(1, 0.5, size=300).astype(float)
    better = np.where(rng.random(300) < 0.3, 1.0, base)  # flips ~15 % of items to correct
    res = paired_bootstrap(base, better)
    assert res.delta == pytest.approx(better.mean() - base.mean())
    assert res.low > 0 and res.p_value < 0.01
    noise = rng.permutation(base)  # same accuracy, unrelated items
    res0 = paired_bootstrap(base, noise)
    assert res0.low < 0 < res0.high and res0.p_value > 0.05


def test_paired_bootstrap_is_antisymmetric():
    rng = np.random.default_rng(6)
    base, new = rng.random(50), rng.random(50) + 0.05
    fwd, back = paired_bootstrap(base, new, seed=9), paired_bootstrap(new, base, seed=9)
    assert back.delta == pytest.approx(-fwd.delta, abs=1e-12)
    assert (back.low, back.high) == pytest.approx((-fwd.high, -fwd.low), abs=1e-12)
    assert back.p_value == pytest.approx(fwd.p_value)


def test_paired_bootstrap_length_mismatch_and_empty_raise():
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_bootstrap([], [])


# --- mcnemar_exact ------------------------------------------------------------------------------------------------


def _pairs(b: int, c: int, both: int = 5, neither: int = 4) -> tuple[list[int], list[int]]:
    """base/new outcomes with b (1, 0) pairs, c (0, 1) pairs and some concordant ones, shuffled."""
    pairs = [(1, 0)] * b + [(0, 1)] * c + [(1, 1)] * both + [(0, 0)] * neither
    order = np.random.default_rng(b * 100 + c).permutation(len(pairs))
    return [pairs[i][0] for i in order], [pairs[i][1] for i in order]


def test_mcnemar_no_discordant_pairs():
    res = mcnemar_exact(*_pairs(0, 0))
    assert res.p_value == 1.0
    assert res.delta == 0.0
    assert res.method == "mcnemar_exact"


def test_mcnemar_one_sided_discordance_exact():
    base, new = _pairs(10, 0)
    res = mcnemar_exact(base, new)
    assert res.p_value == 2 * 0.5**10 == 0.001953125
    assert res.delta == pytest.approx(-10 / 19)
    assert res.n == 19
    assert res.high < 0  # the bootstrap interval agrees that new lost


def test_mcnemar_matches_scipy_binomtest():
    base, new = _pairs(3, 7)
    res = mcnemar_exact(base, new)
    assert res.p_value == pytest.approx(sps.binomtest(3, 10, 0.5).pvalue, abs=1e-12)
    assert res.p_value == pytest.approx(0.34375, abs=1e-12)
    assert res.delta == pytest.approx((7 - 3) / 19)
    assert res.low <= res.delta <= res.high
    boot = paired_bootstrap(base, new)
    assert (res.low, res.high) == (boot.low, boot.high)


@pytest.mark.parametrize("b", [0, 1, 2, 5, 13])
@pytest.mark.parametrize("c", [0, 1, 4, 9, 20])
def test_mcnemar_grid_matches_binomtest(b, c):
    base, new = _pairs(b, c)
    expected = 1.0 if b + c == 0 else sps.binomtest(min(b, c), b + c, 0.5).pvalue
    assert mcnemar_exact(base, new).p_value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    # Swapping the runs swaps b and c: same p, opposite delta.
    swapped = mcnemar_exact(new, base)
    assert swapped.p_value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert swapped.delta == pytest.approx((b - c) / len(base))


def test_mcnemar_accepts_bools_and_rejects_bad_input():
    assert mcnemar_exact([True, True, False], [False, True, True]).p_value == 1.0
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact([0.5, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="length"):
        mcnemar_exact([1, 0, 1], [1, 0])


def test_is_binary():
    assert is_binary([0, 1, 1, 0])
    assert is_binary([True, False])
    assert is_binary(np.array([0.0, 1.0]))
    assert not is_binary([0, 1, 2 / 3])
    assert not is_binary([0, 1, float("nan")])
    assert not is_binary(["0", "1"])
    assert not is_binary([[0, 1], [1, 0]])


# --- agreement measures -------------------------------------------------------------------------------------------


def test_spearman_matches_scipy():
    rng = np.random.default_rng(8)
    a = rng.integers(0, 4, size=40) / 3.0  # heavy ties, like judge step scores
    b = np.clip(a + rng.normal(0, 0.3, size=40), 0, 1)
    assert spearman(a, b) == pytest.approx(sps.spearmanr(a, b).statistic, abs=1e-6)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)


def test_spearman_constant_and_mismatch_raise():
    with pytest.raises(ValueError, match="same rating"):
        spearman([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def test_cohen_kappa_hand_case():
    # 2x2 table [[20, 5], [10, 15]]: p_o = 35/50 = 0.7, p_e = (25*30 + 25*20)/50^2 = 0.5, kappa = 0.2/0.5 = 0.4.
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)


def test_cohen_kappa_matches_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(9)
    labels = ["anger", "joy", "sadness", "fear", "surprise"]
    for _ in range(20):
        a = rng.choice(labels, size=60)
        b = np.where(rng.random(60) < 0.6, a, rng.choice(labels, size=60))
        assert cohen_kappa(a.tolist(), b.tolist()) == pytest.approx(metrics.cohen_kappa_score(a, b), abs=1e-6)


def test_cohen_kappa_edge_cases():
    assert cohen_kappa([0, 1, 2, 0], [0, 1, 2, 0]) == pytest.approx(1.0)
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="single"):
        cohen_kappa(["a", "a"], ["a", "a"])
    with pytest.raises(ValueError):
        cohen_kappa([1, 2], [1])


def _mean_squares(x: np.ndarray) -> tuple[float, float, float, float]:
    """MSR, MSC, MSE, MSW via the classic sums-of-squares identities (independent of the module's residual form)."""
    n, k = x.shape
    correction = x.sum() ** 2 / (n * k)
    ss_total = (x**2).sum() - correction
    ss_rows = (x.sum(axis=1) ** 2).sum() / k - correction
    ss_cols = (x.sum(axis=0) ** 2).sum() / n - correction
    ss_err = ss_total - ss_rows - ss_cols
    return (
        ss_rows / (n - 1),
        ss_cols / (k - 1),
        ss_err / ((n - 1) * (k - 1)),
        (ss_total - ss_rows) / (n * (k - 1)),
    )


def test_icc_shrout_fleiss_published_values():
    assert icc(SHROUT_FLEISS, "ICC(1,1)") == pytest.approx(0.17, abs=0.01)
    assert icc(SHROUT_FLEISS, "ICC(2,1)") == pytest.approx(0.29, abs=0.01)
    assert icc(SHROUT_FLEISS, "ICC(3,1)") == pytest.approx(0.71, abs=0.01)
    assert icc(SHROUT_FLEISS) == icc(SHROUT_FLEISS, "ICC(2,1)")


def test_icc_shrout_fleiss_exact_from_mean_squares():
    msr, msc, mse, msw = _mean_squares(SHROUT_FLEISS)
    # Published mean squares: BMS 11.24, JMS 32.49, EMS 1.02, WMS 6.26.
    assert (msr, msc, mse, msw) == pytest.approx((11.24, 32.49, 1.02, 6.26), abs=0.01)
    n, k = SHROUT_FLEISS.shape
    assert icc(SHROUT_FLEISS, "ICC(1,1)") == pytest.approx((msr - msw) / (msr + (k - 1) * msw), abs=1e-6)
    assert icc(SHROUT_FLEISS, "ICC(2,1)") == pytest.approx(
        (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n), abs=1e-6
    )
    assert icc(SHROUT_FLEISS, "ICC(3,1)") == pytest.approx((msr - mse) / (msr + (k - 1) * mse), abs=1e-6)


def test_icc_absolute_vs_consistency():
    # A rater who adds a constant is perfectly consistent (ICC(3,1) = 1) but not in absolute agreement.
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ratings = np.column_stack([x, x + 2.0])
    assert icc(ratings, "ICC(3,1)") == pytest.approx(1.0)
    assert icc(ratings, "ICC(2,1)") < 0.7


def test_icc_edge_cases():
    assert icc([[1, 1], [2, 2], [3, 3]]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="identical"):
        icc([[2, 2], [2, 2]])
    with pytest.raises(ValueError, match="undefined"):
        icc([[1, 3], [1, 3]], "ICC(3,1)")  # targets do not differ
    with pytest.raises(ValueError, match="form"):
        icc(SHROUT_FLEISS, "ICC(2,k)")
    with pytest.raises(ValueError):
        icc([[1, 2, 3]])
    with pytest.raises(ValueError):
        icc([1, 2, 3])


def test_agreement_perfect():
    ratings = [0.0, 1 / 3, 2 / 3, 1.0, 1.0, 0.0, 2 / 3]
    res = agreement(ratings, list(ratings))
    assert isinstance(res, Agreement)
    assert (res.n, res.icc_form) == (7, "ICC(2,1)")
    assert res.spearman == pytest.approx(1.0)
    assert res.cohen_kappa == pytest.approx(1.0)
    assert res.icc == pytest.approx(1.0)


def test_agreement_fraction_categories_tolerate_float_noise():
    judge = [2 / 3, 1 / 3, 1.0, 0.0]
    human = [1 - 1 / 3, 1 - 2 / 3, 1.0, 0.0]  # equal as fractions, not always bit-for-bit as floats
    assert judge != human
    assert agreement(judge, human).cohen_kappa == pytest.approx(1.0)


def test_agreement_matches_references():
    rng = np.random.default_rng(10)
    human = rng.integers(0, 4, size=50) / 3.0
    judge = np.where(rng.random(50) < 0.7, human, rng.integers(0, 4, size=50) / 3.0)
    res = agreement(judge, human, icc_form="ICC(3,1)")
    assert res.spearman == pytest.approx(sps.spearmanr(judge, human).statistic, abs=1e-6)
    assert res.icc == pytest.approx(icc(np.column_stack([judge, human]), "ICC(3,1)"), abs=1e-12)
    assert res.icc_form == "ICC(3,1)"
    metrics = pytest.importorskip("sklearn.metrics")
    as_labels = [np.round(v * 3).astype(int) for v in (judge, human)]
    assert res.cohen_kappa == pytest.approx(metrics.cohen_kappa_score(*as_labels), abs=1e-6)


def test_agreement_rejects_mismatch():
    with pytest.raises(ValueError):
        agreement([0.0, 1.0, 1.0], [0.0, 1.0])
