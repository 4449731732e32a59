"""Goodput of a checkpointing gang under exponential interruptions (Daly 2006): the one home of the formula.

A gang of ``n`` nodes of ``g`` GPUs is interrupted at rate λ = n·g·rate per hour (M = 1/λ, the mean
time between interruptions). With work segments of length τ between checkpoints of cost C and a
restart of R after each interruption, the expected wall time of one segment is

    T(τ) = M·e^{R/M}·(e^{(τ+C)/M} − 1)

and the goodput, the share of wall time that is useful work, is ``u = τ / T(τ)``. The interval τ*
maximising ``u`` does not depend on R (R only scales T); :func:`optimal_interval` finds it by golden
section search on ``log u``, which is unimodal in τ (``τ* < M`` always).

Spare nodes shorten the restart: the gang's nodes in repair at a time are Poisson with mean
``a = λ·T_r`` (T_r the repair time, in hours), an interruption finds a free spare with probability
``p = P(N < s)``, and ``R = p·restart + (1 − p)·restart_without_spare``. Goodput per provisioned GPU
is ``u·n/(n + s)``.

Pure arithmetic on floats (seconds and per-hour rates); no solver, no problem types. Used by
``plan`` (goodput rows, ``spares: auto``), ``schedule`` (expected run times) and ``reserve`` (the
useful share of spot capacity), and by the independent validators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HOUR_S = 3600.0
#: ``spares: auto`` chooses among 0..MAX_AUTO_SPARES spare nodes.
MAX_AUTO_SPARES = 8
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def mtbf_seconds(failures_per_hour: float) -> float:
    """M = 1/λ in seconds (infinite at rate 0)."""
    if failures_per_hour < 0 or not math.isfinite(failures_per_hour):
        raise ValueError(f"an interruption rate must be a finite number >= 0, got {failures_per_hour}")
    return math.inf if failures_per_hour == 0 else HOUR_S / failures_per_hour


def _log_expm1(x: float) -> float:
    """log(e^x − 1) for x > 0, without overflow for large x."""
    return x + math.log1p(-math.exp(-x)) if x > 1.0 else math.log(math.expm1(x))


def segment_time(tau: float, checkpoint: float, restart: float, mtbf: float) -> float:
    """Expected wall time T(τ) of one work segment τ plus its checkpoint, with restarts (seconds).

    Infinite when it overflows a float; ``τ + C`` when there are no interruptions (``mtbf`` infinite).
    """
    if math.isinf(mtbf):
        return tau + checkpoint
    log_t = math.log(mtbf) + restart / mtbf + _log_expm1((tau + checkpoint) / mtbf)
    return math.exp(log_t) if log_t < 700 else math.inf


def log_goodput(tau: float, checkpoint: float, restart: float, mtbf: float) -> float:
    """``log u`` for work segment ``tau``: finite even where ``u`` underflows (seconds throughout)."""
    if tau <= 0:
        return -math.inf
    if math.isinf(mtbf):
        return math.log(tau) - math.log(tau + checkpoint)
    return math.log(tau) - math.log(mtbf) - restart / mtbf - _log_expm1((tau + checkpoint) / mtbf)


def goodput(tau: float, checkpoint: float, restart: float, mtbf: float) -> float:
    """The goodput ``u = τ / T(τ)`` in 0..1 (seconds throughout; ``mtbf`` may be infinite)."""
    return math.exp(log_goodput(tau, checkpoint, restart, mtbf))


def optimal_interval(checkpoint: float, mtbf: float, tol: float = 1e-9) -> float:
    """τ* maximising the goodput, in seconds, by golden-section search on ``log u`` over (0, M].

    ``u`` is unimodal in τ and its maximiser lies below M. Infinite when there are no interruptions.
    ``tol`` is relative to M.
    """
    if checkpoint <= 0:
        raise ValueError(f"the checkpoint cost must be positive, got {checkpoint}")
    if math.isinf(mtbf):
        return math.inf
    lo, hi = 0.0, mtbf
    x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    f1, f2 = log_goodput(x1, checkpoint, 0.0, mtbf), log_goodput(x2, checkpoint, 0.0, mtbf)
    while hi - lo > tol * mtbf:
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + _GOLDEN * (hi - lo)
            f2 = log_goodput(x2, checkpoint, 0.0, mtbf)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - _GOLDEN * (hi - lo)
            f1 = log_goodput(x1, checkpoint, 0.0, mtbf)
    return (lo + hi) / 2.0


def spare_probability(spares: int, mean_in_repair: float) -> float:
    """``P(N < spares)`` for N Poisson with mean ``mean_in_repair``: an interruption finds a free spare."""
    if spares <= 0:
        return 0.0
    term = total = math.exp(-mean_in_repair)
    for k in range(1, spares):
        term *= mean_in_repair / k
        total += term
    return min(1.0, total)


def expected_restart(spares: int, mean_in_repair: float, restart: float, restart_without_spare: float) -> float:
    """R = p·restart + (1 − p)·restart_without_spare, with p from :func:`spare_probability` (seconds)."""
    p = spare_probability(spares, mean_in_repair)
    return p * restart + (1.0 - p) * restart_without_spare


def best_goodput(failures_per_hour: float, checkpoint: float, restart: float) -> float:
    """The goodput at the best checkpoint interval τ* (1 without interruptions), seconds throughout."""
    mtbf = mtbf_seconds(failures_per_hour)
    if math.isinf(mtbf):
        return 1.0
    return goodput(optimal_interval(checkpoint, mtbf), checkpoint, restart, mtbf)


@dataclass(frozen=True)
class Interruptible:
    """What the goodput of one gang depends on (seconds; rates per hour).

    Attributes
    ----------
    gpus
        The gang's GPUs (n·g).
    nodes
        The nodes it runs on (n).
    rate_per_gpu_hour
        Interruptions per GPU-hour.
    checkpoint
        Time to write one checkpoint (C).
    node_repair
        How long a failed node is out (T_r).
    restart, restart_without_spare
        The restart time with a free spare and without one.
    interval
        The work segment between checkpoints; None: the optimum τ*.
    """

    gpus: int
    nodes: int
    rate_per_gpu_hour: float
    checkpoint: float
    node_repair: float
    restart: float
    restart_without_spare: float
    interval: float | None = None

    @property
    def failures_per_hour(self) -> float:
        """λ = n·g·rate."""
        return self.gpus * self.rate_per_gpu_hour

    @property
    def mean_in_repair(self) -> float:
        """a = λ·T_r: the mean number of the gang's nodes in repair."""
        return self.failures_per_hour * self.node_repair / HOUR_S


@dataclass(frozen=True)
class GoodputResult:
    """The goodput of one gang with a number of spares (see :func:`evaluate`)."""

    spares: int
    failures_per_hour: float
    interval_s: float
    restart_s: float
    spare_probability: float
    goodput: float
    per_provisioned_gpu: float
    lost_gpu_hours_per_day: float


def evaluate(g: Interruptible, spares: int) -> GoodputResult:
    """The goodput of gang ``g`` holding ``spares`` spare nodes.

    ``lost_gpu_hours_per_day`` is the gang's GPUs × 24 h × (1 − u): work the gang's own GPUs lose to
    checkpoints, rework and restarts (the idle spares are a cost, not a loss, and not counted).
    """
    lam = g.failures_per_hour
    mtbf = mtbf_seconds(lam)
    p = spare_probability(spares, g.mean_in_repair)
    restart = p * g.restart + (1.0 - p) * g.restart_without_spare
    tau = g.interval if g.interval is not None else optimal_interval(g.checkpoint, mtbf)
    u = 1.0 if math.isinf(tau) else goodput(tau, g.checkpoint, restart, mtbf)
    share = u * g.nodes / (g.nodes + spares) if g.nodes + spares else 0.0
    return GoodputResult(spares=spares, failures_per_hour=lam, interval_s=tau, restart_s=restart,
                         spare_probability=p, goodput=u, per_provisioned_gpu=share,
                         lost_gpu_hours_per_day=g.gpus * 24.0 * (1.0 - u))


def auto_spares(g: Interruptible, most: int = MAX_AUTO_SPARES) -> int:
    """The spare count in 0..``most`` with the highest goodput per provisioned GPU (fewest on a tie)."""
    best, best_share = 0, evaluate(g, 0).per_provisioned_gpu
    for s in range(1, most + 1):
        share = evaluate(g, s).per_provisioned_gpu
        if share > best_share * (1.0 + 1e-12):
            best, best_share = s, share
    return best
