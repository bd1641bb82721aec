"""The sample size of a CI gate (issue 23, `emo_tasks.gate.power`): hand-computed cases, scipy's normal quantiles as the
reference, and the spread a plan takes from a second run or from the baseline alone."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from emo_tasks.gate.power import expected_power, paired_spread, required_rows


def test_rows_for_a_drop_by_hand_and_by_scipy() -> None:
    # sd 50, drop 5, power 0.8, alpha 0.05: ((1.959964 + 0.841621) * 50 / 5)^2 = 784.89 -> 785 rows
    assert required_rows(50, 5, 0.8, 0.05) == 785
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.9)
    assert required_rows(30, 2, 0.9, 0.05) == math.ceil((z * 30 / 2) ** 2)
    assert required_rows(0, 2) == 1  # no spread: one row tells


def test_the_power_of_the_planned_rows_is_the_power_asked() -> None:
    n = required_rows(38.0, 2.0, 0.8, 0.05)
    assert 0.8 <= expected_power(n, 38.0, 2.0, 0.05) < expected_power(n + 50, 38.0, 2.0, 0.05)
    assert expected_power(n - 1, 38.0, 2.0, 0.05) < 0.8  # the smallest such n
    # by hand: Phi(2 * sqrt(900) / 30 - 1.959964) = Phi(0.040036) = 0.5160
    assert expected_power(900, 30.0, 2.0, 0.05) == pytest.approx(stats.norm.cdf(2.0 - stats.norm.ppf(0.975)))


def test_the_power_compare_states_for_a_drop_is_the_inverse_of_its_detectable_drop() -> None:
    """`Comparison.power_for`: Phi(D sqrt(n) / sqrt(sd^2 + step D) - z), by scipy; the drop `detectable_drop` states
    for a power is the drop with that power; no spread, no power."""
    from emo_tasks.gate.compare import Comparison

    r = Comparison(delta=0.0, low=0.0, high=0.0, p_value=1.0, n=16, method="m", sd_diff=30.0, step=100.0)
    want = stats.norm.cdf(30 * math.sqrt(16) / math.sqrt(30.0**2 + 100.0 * 30) - stats.norm.ppf(0.975))
    assert r.power_for(30, 0.05) == pytest.approx(want)
    for power in (0.5, 0.8, 0.95):
        assert r.power_for(r.detectable_drop(power, 0.05), 0.05) == pytest.approx(power)
    flat = Comparison(delta=0.0, low=0.0, high=0.0, p_value=1.0, n=16, method="m", sd_diff=0.0, step=0.0)
    assert flat.power_for(30) is None and Comparison(0.0, 0.0, 0.0, 1.0, 1, "m").power_for(30) is None


def test_a_second_run_gives_the_spread_of_the_paired_differences() -> None:
    base = {"a": 0.0, "b": 100.0, "c": 100.0, "d": 0.0, "e": 50.0}
    second = {"a": 0.0, "b": 0.0, "c": 100.0, "d": 100.0, "x": 100.0}  # "e" and "x" are in one run only
    spread = paired_spread(base, second)
    # differences 0, -100, 0, 100: sd = sqrt(20000 / 3); the rows that changed moved 100 on average
    assert (spread.n, spread.source) == (4, "second run")
    assert spread.sd == pytest.approx(math.sqrt(20000 / 3)) and spread.step == 100.0
    assert spread.under_drop(2.0) == pytest.approx(math.sqrt(20000 / 3 + 200))


def test_without_a_second_run_the_rows_are_taken_as_independent() -> None:
    base = {i: v for i, v in enumerate([0.0, 100.0, 100.0, 0.0])}
    spread = paired_spread(base)
    assert spread.source == "independence assumption"
    assert spread.sd == pytest.approx(math.sqrt(2) * stats.tstd([0, 100, 100, 0]))
    assert spread.step == 100.0  # each row against the next: 100, 0, -100, 0 -> changes of 100
    # conservative: more rows than a second run that agrees on most rows asks for
    agree = {i: v for i, v in enumerate([0.0, 100.0, 100.0, 100.0])}
    assert required_rows(spread.under_drop(2), 2) > required_rows(paired_spread(base, agree).under_drop(2), 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [((10, 0, 0.8, 0.05), "drop to detect must be positive"), ((10, 2, 1.0, 0.05), "power must be"),
     ((10, 2, 0.8, 0.0), "alpha must be"), ((-1, 2, 0.8, 0.05), "sd of the paired differences")],
)  # fmt: skip
def test_settings_that_plan_nothing_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        required_rows(*args)
    with pytest.raises(ValueError, match="at least 2 per-row values"):
        paired_spread({"a": 1.0})


def test_a_gate_across_a_judge_change_adds_the_calibrations_standard_error() -> None:
    """`extra_se` (the calibrated shift's se, docs/ci.md#moving-a-baseline-to-a-new-judge): detect = z sqrt(sd^2 / n +
    se^2), by scipy; more rows than without; none suffice when the drop is within z x se; compare's stated power and
    detectable drop follow the same rule."""
    from emo_tasks.gate.compare import Comparison

    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    n = required_rows(50, 5, 0.8, 0.05, extra_se=1.0)
    assert n == math.ceil(z**2 * 50**2 / (5**2 - z**2 * 1.0**2)) > required_rows(50, 5, 0.8, 0.05)
    assert expected_power(n, 50, 5, 0.05, extra_se=1.0) >= 0.8 > expected_power(n - 1, 50, 5, 0.05, extra_se=1.0)
    want = stats.norm.cdf(5 / math.sqrt(50**2 / 400 + 1.0) - stats.norm.ppf(0.975))
    assert expected_power(400, 50, 5, 0.05, extra_se=1.0) == pytest.approx(want)
    with pytest.raises(ValueError, match=r"no number of rows catches it with power 0.8 \(the smallest is 2.8\)"):
        required_rows(50, 2.5, 0.8, 0.05, extra_se=1.0)
    r = Comparison(delta=0.0, low=0.0, high=0.0, p_value=1.0, n=16, method="m", sd_diff=30.0, step=100.0, shift_se=4.0)
    plain = Comparison(delta=0.0, low=0.0, high=0.0, p_value=1.0, n=16, method="m", sd_diff=30.0, step=100.0)
    assert r.detectable_drop(0.8) > plain.detectable_drop(0.8)
    assert r.power_for(r.detectable_drop(0.8)) == pytest.approx(0.8)
    want = stats.norm.cdf(30 / math.sqrt((30.0**2 + 100.0 * 30) / 16 + 16.0) - stats.norm.ppf(0.975))
    assert r.power_for(30) == pytest.approx(want)


def test_the_calibrated_test_takes_the_shift_out_and_adds_its_ci_in_quadrature() -> None:
    """`gate.calibrated.across`: delta' = delta - shift, se' = sqrt(se_gate^2 + se_cal^2), p' two-sided normal; a
    drop is oriented by the metric (Rec-S: higher is better)."""
    from emo_tasks.gate.calibrated import across
    from emo_tasks.gate.compare import Comparison
    from emo_tasks.results.calibration import Shift
    from emo_tasks.results.judge_change import Carried

    z95 = stats.norm.ppf(0.975)
    r = Comparison(delta=-12.0, low=-16.0, high=-8.0, p_value=0.001, n=100, method="mcnemar_exact",
                   task="mme_emotion_sample", metric="rec_s", drop=12.0)  # fmt: skip
    shift = Shift("mme_emotion", "mme_emotion_sample", "rec_s", 200, -9.0, -12.0, -6.0, 1.0, False)
    got = across(r, Carried(shift, 3.0 / z95, 0.95))
    se = math.sqrt((4.0 / z95) ** 2 + (3.0 / z95) ** 2)
    assert got.delta == pytest.approx(-3.0) and got.drop == pytest.approx(3.0)
    assert (got.low, got.high) == pytest.approx((-3.0 - 5.0, -3.0 + 5.0))  # sqrt(4^2 + 3^2) = 5
    assert got.p_value == pytest.approx(2 * stats.norm.sf(3.0 / se))
    assert got.judged == (-12.0, -16.0, -8.0, 0.001) and got.shift == -9.0 and "calibrated" in got.method
    exact = across(Comparison(-9.0, -9.0, -9.0, 0.0, 10, "m", task="t", metric="m"), Carried(shift, 0.0, 0.95))
    assert exact.p_value == 1.0 and exact.delta == 0.0  # no spread anywhere: the shifted change is exact
