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
