"""The goodput model (Daly 2006): hand-worked values, τ* three ways, spares, and properties.

Expected values are computed here independently of :mod:`capplan.model.goodput`: from the renewal
equation by numeric integration, from the Lambert-W closed form of τ* (SciPy), by brute-force grids,
and by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import lambertw

from capplan.model.goodput import (
    Interruptible,
    auto_spares,
    evaluate,
    goodput,
    optimal_interval,
    segment_time,
    spare_probability,
)

H = 3600.0


def _renewal_segment_time(length: float, restart: float, lam: float) -> float:
    """E[wall time] to finish ``length`` of uninterrupted run, each interruption costing a restart
    (itself interruptible) and the lost progress: T = (L e^{-λL} + ∫_0^L t λe^{-λt} dt + (1 − e^{-λL}) R') e^{λL},
    with R' = (e^{λR} − 1)/λ, the integral by the trapezoid rule."""
    t = np.linspace(0.0, length, 200_001)
    f = t * lam * np.exp(-lam * t)
    integral = float(np.sum((f[1:] + f[:-1]) * np.diff(t)) / 2.0)
    r_eff = math.expm1(lam * restart) / lam
    survive = math.exp(-lam * length)
    return (length * survive + integral + (1.0 - survive) * r_eff) / survive


def test_hand_worked_goodput() -> None:
    """M = 1 h, C = 0.1 h, τ = 0.4 h, R = 0: T = M(e^{0.5} − 1) = 0.648721 h, u = 0.4/0.648721 = 0.616595."""
    assert segment_time(0.4 * H, 0.1 * H, 0.0, H) == pytest.approx(0.6487212707 * H, rel=1e-9)
    assert goodput(0.4 * H, 0.1 * H, 0.0, H) == pytest.approx(0.616595, abs=1e-4)
    # a restart of 0.2 h scales T by e^{0.2}: u = 0.616595 / 1.221403 = 0.504825
    assert goodput(0.4 * H, 0.1 * H, 0.2 * H, H) == pytest.approx(0.504825, abs=1e-4)


@pytest.mark.parametrize(("tau", "c", "r", "lam"), [(3 * H, 360.0, 14400.0, 0.01024), (600.0, 60.0, 900.0, 0.5),
                                                    (20 * H, 1800.0, 0.0, 0.02)])
def test_goodput_matches_the_renewal_equation(tau: float, c: float, r: float, lam: float) -> None:
    """u = τ / T(τ) agrees to 1e-4 with T integrated numerically from the renewal equation."""
    lam_s = lam / H
    expected = tau / _renewal_segment_time(tau + c, r, lam_s)
    assert goodput(tau, c, r, 1.0 / lam_s) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(("c", "m"), [(360.0, 351562.5), (60.0, 3600.0), (1800.0, 7200.0), (5.0, 1e7)])
def test_optimal_interval_three_ways(c: float, m: float) -> None:
    """Golden section agrees with the closed form τ* = M(1 + W0(−e^{−(C/M + 1)})) and a brute-force grid."""
    closed = m * (1.0 + float(lambertw(-math.exp(-(c / m + 1.0)), 0).real))
    tau = optimal_interval(c, m)
    assert tau == pytest.approx(closed, rel=1e-5)
    grid = np.linspace(closed * 0.5, closed * 1.5, 20001)
    u = grid / (m * np.expm1((grid + c) / m))
    assert goodput(tau, c, 0.0, m) >= float(u.max()) - 1e-12
    assert float(grid[int(np.argmax(u))]) == pytest.approx(closed, rel=1e-3)


def test_spare_probability_by_hand() -> None:
    """Poisson a = 0.5: P(N < 1) = e^{-0.5} = 0.606531, P(N < 2) = 1.5 e^{-0.5} = 0.909796; none without spares."""
    assert spare_probability(0, 0.5) == 0.0
    assert spare_probability(1, 0.5) == pytest.approx(0.606531, abs=1e-6)
    assert spare_probability(2, 0.5) == pytest.approx(0.909796, abs=1e-6)


def _gang(gpus: int, nodes: int, rate: float = 2e-5, interval: float | None = None) -> Interruptible:
    return Interruptible(gpus=gpus, nodes=nodes, rate_per_gpu_hour=rate, checkpoint=360.0, node_repair=72 * H,
                         restart=900.0, restart_without_spare=4 * H, interval=interval)


def _direct(gpus: int, nodes: int, spares: int, tau: float) -> tuple[float, float]:
    """u and u·n/(n+s) straight from the contract's formulas (no module code)."""
    lam = gpus * 2e-5
    m = H / lam
    a = lam * 72
    p = sum(math.exp(-a) * a ** k / math.factorial(k) for k in range(spares))
    r = p * 900.0 + (1 - p) * 4 * H
    u = tau / (m * math.exp(r / m) * math.expm1((tau + 360.0) / m))
    return u, u * nodes / (nodes + spares)


def test_512_gpu_gang_and_auto_spares() -> None:
    """A 512-GPU gang (64 nodes), 2e-5 per GPU-hour: λ = 0.01024/h, a = 0.737; auto picks 1 spare
    (u·n/(n+s): 0.91708 with none, 0.91971 with one, 0.91813 with two)."""
    g = _gang(512, 64)
    res = evaluate(g, 0)
    assert res.failures_per_hour == pytest.approx(0.01024)
    closed = (H / 0.01024) * (1.0 + float(lambertw(-math.exp(-(360.0 * 0.01024 / H + 1.0)), 0).real))
    assert res.interval_s == pytest.approx(closed, rel=1e-5)
    shares = [_direct(512, 64, s, closed)[1] for s in range(9)]
    assert shares[:3] == pytest.approx([0.91708, 0.91971, 0.91813], abs=1e-4)
    for s in range(9):
        assert evaluate(g, s).per_provisioned_gpu == pytest.approx(shares[s], abs=1e-6)
        assert evaluate(g, s).goodput == pytest.approx(_direct(512, 64, s, closed)[0], abs=1e-6)
    assert auto_spares(g) == int(np.argmax(shares)) == 1
    assert res.lost_gpu_hours_per_day == pytest.approx(512 * 24 * (1 - res.goodput))


def test_auto_spares_none_for_one_node_and_a_given_interval() -> None:
    """One 8-GPU node: a spare costs half the fleet, so none; with an interval given, it is used as is."""
    assert auto_spares(_gang(8, 1)) == 0
    # when a spare cannot shorten the restart, every spare only costs: none is chosen (the fewest)
    same = Interruptible(gpus=512, nodes=64, rate_per_gpu_hour=1e-4, checkpoint=360.0, node_repair=72 * H,
                         restart=900.0, restart_without_spare=900.0)
    assert len({round(evaluate(same, s).goodput, 12) for s in range(9)}) == 1 and auto_spares(same) == 0
    fixed = evaluate(_gang(512, 64, interval=3600.0), 0)
    assert fixed.interval_s == 3600.0
    assert fixed.goodput == pytest.approx(_direct(512, 64, 0, 3600.0)[0], abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(gpus=st.integers(1, 20000), rate=st.floats(1e-7, 1e-3), factor=st.floats(1.01, 10.0),
       spares=st.integers(0, 8))
def test_goodput_falls_as_the_rate_rises(gpus: int, rate: float, factor: float, spares: int) -> None:
    """At its best interval, a gang's goodput falls when GPUs fail more often."""
    nodes = max(1, gpus // 8)
    low = evaluate(_gang(gpus, nodes, rate), spares).goodput
    high = evaluate(_gang(gpus, nodes, rate * factor), spares).goodput
    assert 0.0 <= high <= low <= 1.0


@settings(max_examples=60, deadline=None)
@given(gpus=st.integers(1, 20000), rate=st.floats(1e-7, 1e-3), spares=st.integers(0, 7),
       interval=st.none() | st.floats(60.0, 1e6))
def test_more_spares_never_lower_goodput(gpus: int, rate: float, spares: int, interval: float | None) -> None:
    """One more spare never lowers u (it only shortens the expected restart)."""
    g = _gang(gpus, max(1, gpus // 8), rate, interval)
    assert evaluate(g, spares + 1).goodput >= evaluate(g, spares).goodput - 1e-15
