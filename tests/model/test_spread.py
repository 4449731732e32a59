"""Expected run times and remaining times under a lognormal spread (capplan.model.spread)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from capplan.model.spread import MIN_LEFT_S, check_spread, expected_remaining, expected_run_time


def test_exact_belief_is_todays_rule() -> None:
    # sigma 0: the believed run time, and what is left of it, at least a minute
    assert expected_run_time(3600, 0) == 3600
    assert expected_remaining(3600, 600, 0) == 3000
    assert expected_remaining(3600, 3590, 0) == MIN_LEFT_S
    assert expected_remaining(3600, 7200, 0) == MIN_LEFT_S
    assert expected_remaining(3600, -600, 0) == 4200  # admitted 10 minutes from now


def test_expected_run_time_hand_worked() -> None:
    # 3600 x exp(-0.125) = 3600 x 0.882497 = 3176.99; with sigma 1: 3600 x exp(-0.5) = 2183.5
    assert expected_run_time(3600, 0.5) == 3177
    assert expected_run_time(3600, 1.0) == 2184
    assert expected_run_time(1, 2.0) == 1  # at least a second


def test_expected_remaining_hand_worked() -> None:
    # believed 12840 s, sigma 0.5: log D ~ N(log 12840 - 0.25, 0.25); elapsed 10000 s = 12840 exp(-0.25) (to
    # 4e-5 sd), so a = 0 and E[D | D > e] = 12840 exp(-0.125) Phi(0.5) / Phi(0)
    # = 11331.3 x 0.691462 / 0.5 = 15670.2: 5670 s left
    assert abs(expected_remaining(12840, 10000, 0.5) - 5670) <= 1
    # not started: the expected run time (plus the wait until it starts)
    assert expected_remaining(3600, 0, 0.5) == 3177
    assert expected_remaining(3600, -100, 0.5) == 3277


def test_survivors_are_expected_to_run_on() -> None:
    # a run past its believed end is not taken to end in a minute: with believed 1000 s and sigma 0.5, after
    # 2000 s (a = (log 2 + 0.25) / 0.5 = 1.886) E[D | D > e] = 882.5 x Phi(-1.386) / Phi(-1.886)
    # = 882.5 x 0.08283 / 0.02965 = 2465: 465 s left
    assert abs(expected_remaining(1000, 2000, 0.5) - 465) <= 3
    # far in the tail (a = (log 10^4 + 0.25) / 0.5 = 18.9): log D - log e is nearly exponential with mean
    # s / a, so about e s / (a - s) = 10^6 x 0.5 / 18.4 = 27,100 s left
    left = expected_remaining(100, 1_000_000, 0.5)
    assert 26_000 < left < 27_200


def test_remaining_matches_sampling() -> None:
    # the conditional mean checked by sampling: log D ~ N(log d - s^2, s^2), the samples with D > e
    rng = np.random.default_rng(0)
    for d, e, s in [(3600, 1800, 0.5), (3600, 5400, 0.5), (600, 3000, 1.0)]:
        x = np.exp(rng.normal(math.log(d) - s * s, s, 2_000_000))
        kept = x[x > e]
        assert len(kept) > 5000
        assert expected_remaining(d, e, s) == pytest.approx(float(kept.mean()) - e, rel=0.02)


def test_tail_branch_is_continuous() -> None:
    # at a = 30 (the switch to Mills' ratio) the two sides agree: elapsed e with (log e - log d + s^2) / s = 30
    d, s = 1, 0.1
    e_lo, e_hi = (round(math.exp(30 * s - s * s + eps)) for eps in (-1e-3, 1e-3))
    lo, hi = expected_remaining(d, e_lo, s), expected_remaining(d, e_hi, s)
    assert lo >= MIN_LEFT_S and abs(hi - lo) <= 0.01 * lo + 1


@given(st.integers(1, 10**7), st.integers(0, 10**8), st.floats(0.01, 3.0))
def test_remaining_at_least_a_minute_and_grows_past_the_end(d: int, e: int, s: float) -> None:
    left = expected_remaining(d, e, s)
    assert left >= MIN_LEFT_S
    # given survival, the expected end is later than it is believed to be
    assert e + left >= min(expected_run_time(d, s), e + MIN_LEFT_S)


@pytest.mark.parametrize("bad", [-0.1, 3.5, math.nan, math.inf])
def test_bad_spread(bad: float) -> None:
    with pytest.raises(ValueError, match="lognormal sigma"):
        check_spread(bad)
    with pytest.raises(ValueError, match="lognormal sigma"):
        expected_run_time(100, bad)
