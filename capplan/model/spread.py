"""Run times believed with a lognormal spread: the expected run times capplan schedules with.

A believed run time ``d`` (an annotation, a default, a user's guess) with spread ``sigma`` stands for a true run
time ``D`` that the belief misses by a lognormal factor: ``d = D exp(sigma z)``, ``z ~ N(0, 1)``
(``--duration-spread``). The point estimates here are **expected values**, so that run times added along a
queue come out right on average (the start of the tenth workload in a queue is a sum of the run times ahead,
and a sum is centred on the sum of the means, not of the medians):

* a workload not started: ``d exp(-sigma^2 / 2)`` (:func:`expected_run_time`). ``d`` itself is ``exp(sigma^2
  / 2)`` times too long on average (``E[exp(sigma z)] = exp(sigma^2 / 2)``); this is the unbiased estimate.
* a workload running for ``elapsed`` seconds (:func:`expected_remaining`): it has not ended, so ``D > elapsed``,
  and the workloads still running are those whose run times were under-believed (survivors). Its remaining
  time is ``E[D | D > elapsed] - elapsed`` with ``log D ~ N(log d - sigma^2, sigma^2)``: the belief about ``D``
  whose mean is the unbiased ``d exp(-sigma^2 / 2)`` above, conditioned on survival. Past the believed end
  (``elapsed >= d``) this is no longer "a minute from now" but grows with how long it has run.

``sigma = 0`` is exact belief: ``d`` and ``d - elapsed``. Either way a running workload ends at least
:data:`MIN_LEFT_S` from now. Pure functions of the configured spread, the believed run time and the elapsed
time: what a live cluster knows.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

#: A running workload is taken to end at least this long (seconds) from now.
MIN_LEFT_S = 60

_N = NormalDist()
#: Past this many standard deviations the normal tails (``erfc``) near underflow; the truncated normal's
#: excess is then exponential (Mills' ratio), see :func:`expected_remaining`.
_TAIL_Z = 30.0


def _upper(x: float) -> float:
    """``Phi(-x)``, the standard normal's upper tail, accurate far into it (``erfc``, no cancellation)."""
    return 0.5 * math.erfc(x / math.sqrt(2))


def check_spread(sigma: float) -> float:
    """``sigma`` if it is a finite number in [0, 3]; ValueError otherwise (3: a factor of 20 either way at 1 sd)."""
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and 0 <= sigma <= 3):
        raise ValueError(f"the spread is the lognormal sigma of the run time, a number in [0, 3]; got {sigma!r}")
    return float(sigma)


def expected_run_time(believed: int, sigma: float) -> int:
    """The expected run time of a workload not started: ``believed x exp(-sigma^2 / 2)``, whole seconds, >= 1.

    Examples
    --------
    >>> expected_run_time(3600, 0.0), expected_run_time(3600, 0.5)
    (3600, 3177)
    """
    sigma = check_spread(sigma)
    if believed <= 0:
        raise ValueError(f"believed run time must be > 0 seconds, got {believed}")
    if sigma == 0:
        return int(believed)
    return max(1, round(believed * math.exp(-sigma * sigma / 2)))


def expected_remaining(believed: int, elapsed: int, sigma: float) -> int:
    """The expected remaining run time (seconds, at least :data:`MIN_LEFT_S`) of a workload running ``elapsed``.

    ``sigma = 0``: ``believed - elapsed``; ``elapsed <= 0`` (not started): ``expected_run_time - elapsed``.
    Otherwise ``E[D | D > elapsed] - elapsed`` for ``log D ~ N(m, s^2)``, ``m = log believed - sigma^2``,
    ``s = sigma``: with ``a = (log elapsed - m) / s``, ``E[D | D > e] = exp(m + s^2 / 2) Phi(s - a) / Phi(-a)``.
    For ``a`` past :data:`_TAIL_Z` the ratio of tails underflows; there ``log D - log e`` given survival is
    nearly exponential with mean ``s / a``, and ``E[D | D > e] = e a / (a - s)`` (Mills' ratio).

    Examples
    --------
    >>> expected_remaining(3600, 600, 0.0), expected_remaining(3600, 7200, 0.0)
    (3000, 60)
    >>> expected_remaining(3600, 0, 0.5) == expected_run_time(3600, 0.5)
    True
    """
    sigma = check_spread(sigma)
    if believed <= 0:
        raise ValueError(f"believed run time must be > 0 seconds, got {believed}")
    if sigma == 0:
        return max(MIN_LEFT_S, int(believed) - int(elapsed))
    m, s = math.log(believed) - sigma * sigma, sigma
    if elapsed <= 0:  # not started yet (a negative elapsed: it starts that far from now)
        return max(MIN_LEFT_S, expected_run_time(believed, sigma) - int(elapsed))
    a = (math.log(elapsed) - m) / s
    total = math.exp(m + s * s / 2) * _upper(a - s) / _upper(a) if a < _TAIL_Z else elapsed * a / (a - s)
    return max(MIN_LEFT_S, round(total - elapsed))


def sample_run_time(believed: int, sigma: float, rng: np.random.Generator) -> int:
    """One draw of the run time of a workload not started, from the belief of :func:`expected_run_time`:
    ``log D ~ N(log believed - sigma^2, sigma^2)`` (mean ``believed exp(-sigma^2 / 2)``), whole seconds, >= 1."""
    sigma = check_spread(sigma)
    if sigma == 0:
        return int(believed)
    return max(1, round(math.exp(math.log(believed) - sigma * sigma + sigma * float(rng.standard_normal()))))


def sample_remaining(believed: int, elapsed: int, sigma: float, rng: np.random.Generator) -> int:
    """One draw of the remaining run time of a workload running ``elapsed`` seconds (at least :data:`MIN_LEFT_S`),
    from the belief of :func:`expected_remaining`: ``log D`` as in :func:`sample_run_time`, given ``D > elapsed``.

    Inverse transform: ``v ~ U(0, 1)``, ``log D`` the quantile with upper tail ``Phi(-a) (1 - v)``; past
    :data:`_TAIL_Z` the excess ``log D - log elapsed`` is exponential with mean ``sigma / a``.
    """
    sigma = check_spread(sigma)
    if sigma == 0 or elapsed <= 0:
        return max(MIN_LEFT_S, sample_run_time(believed, sigma, rng) - int(elapsed))
    m = math.log(believed) - sigma * sigma
    a = (math.log(elapsed) - m) / sigma
    v = float(rng.random())
    if a < _TAIL_Z:
        upper = max(_upper(a) * (1.0 - v), 1e-300)  # P(log D > x) for the draw x
        x = m - sigma * _N.inv_cdf(upper) if upper < 0.5 else m + sigma * _N.inv_cdf(1.0 - upper)
        total = max(math.exp(x), float(elapsed))
    else:
        total = elapsed * math.exp(-(sigma / a) * math.log1p(-v))
    return max(MIN_LEFT_S, round(total - elapsed))
