"""The ETA benchmark's pieces: the moving-average estimator, the error metric, the replay's Kueue admission."""

from __future__ import annotations

import math

import numpy as np
import pytest

from capplan.bench.eta import AdmissionRate, error_stats, position_estimate, relative_errors, run_eta
from capplan.bench.replay.kueue import KueueAdmission, QueueSpec, gpu_units
from capplan.bench.replay.sim import load_replay
from capplan.io.alibaba import TraceNode, TracePod


def test_admission_rate_hand_worked() -> None:
    # admissions at 0, 10, 30, 30, 70: intervals 10, 20, 0, 40
    r = AdmissionRate(half_life=1, window=2)  # half-life of one admission: a = 0.5
    assert r.ewma() is None and r.window() is None
    r.add(0)
    assert r.ewma() is None and r.window() is None  # one admission: no interval yet
    for t in (10, 30, 30, 70):
        r.add(t)
    # 10 -> 0.5*20 + 0.5*10 = 15 -> 0.5*0 + 0.5*15 = 7.5 -> 0.5*40 + 0.5*7.5 = 23.75
    assert r.ewma() == pytest.approx(23.75)
    assert r.window() == pytest.approx(20.0)  # the last two intervals: (0 + 40) / 2
    wide = AdmissionRate(half_life=10, window=10)
    for t in (0, 10, 30, 30, 70):
        wide.add(t)
    assert wide.window() == pytest.approx(17.5)  # fewer intervals than the window: all four
    assert wide.alpha == pytest.approx(1 - 0.5 ** 0.1)
    with pytest.raises(ValueError, match="before the previous"):
        wide.add(69)


def test_position_estimate() -> None:
    assert position_estimate(100, 1, 23.75) == pytest.approx(123.75)  # the head waits one interval
    assert position_estimate(100, 3, 23.75) == pytest.approx(171.25)
    with pytest.raises(ValueError, match="1-based"):
        position_estimate(100, 0, 5.0)


def test_relative_errors_hand_worked() -> None:
    est = np.array([150.0, 130.0, math.nan, 700.0])
    actual = np.array([120, 120, 2000, 400])
    arrival = np.array([0, 100, 0, 0])
    # waits 120, 20, 2000, 400: the second waits too little, the third has no estimate
    err = relative_errors(est, actual, arrival, min_wait=50)
    assert err.tolist() == pytest.approx([30 / 120, 300 / 400])
    st = error_stats(err)
    assert st["samples"] == 2
    assert st["median"] == pytest.approx(0.5)
    assert st["p90"] == pytest.approx(0.25 + 0.9 * 0.5)
    assert error_stats(err[:0])["samples"] == 0


def test_gpu_units() -> None:
    # whole GPUs count their number, a share counts one, a CPU-only pod none
    assert gpu_units(np.array([2, 1, 0, 8]), np.array([1000, 300, 0, 1000])).tolist() == [2, 1, 0, 8]


def _trace(pods: list[tuple[int, int, int, int]], model: str = "T4") -> object:
    """One node with 2 GPUs of ``model``; pods (GPUs, arrival, run time, milli per GPU)."""
    node = TraceNode(name="n0", cpu_milli=32000, memory_mib=65536, gpus=2, model=model)
    tps = [TracePod(name=f"p{k}", cpu_milli=1000, memory_mib=1024, num_gpu=g, gpu_milli=m, creation_time=a,
                    scheduled_time=a, deletion_time=a + d) for k, (g, a, d, m) in enumerate(pods)]
    return load_replay([node], tps)


def _replay(strategy: str, gpus: int, pods: list[tuple[int, int, int, int]]) -> list[int]:
    from capplan.bench.online.frag import TypicalPods
    from capplan.bench.online.policies import BestFitPolicy, PolicyContext
    from capplan.bench.replay.protocol import run_events
    from capplan.bench.replay.sim import Replay

    tr = _trace(pods)
    ctx = PolicyContext(fleet=tr.fleet, pods=tr.pods, typical=TypicalPods.from_pods(tr.fleet, tr.pods), seed=0)
    sim = Replay(tr, 0, BestFitPolicy(ctx))
    pol = KueueAdmission(sim, [QueueSpec("q", strategy, gpus)], np.zeros(len(tr.arrival), dtype=np.int64), 60)
    run_events(sim, pol)
    return [int(x) for x in sim.start]


PODS = [(1, 0, 100, 1000), (2, 10, 50, 1000), (1, 20, 30, 1000)]


def test_replay_strict_fifo_head_blocks() -> None:
    # p1 (2 GPUs) waits for p0's GPU; under StrictFIFO p2 waits behind it although one GPU is free
    assert _replay("StrictFIFO", 2, PODS) == [0, 100, 150]


def test_replay_best_effort_lets_a_small_pod_pass() -> None:
    assert _replay("BestEffortFIFO", 2, PODS) == [0, 100, 20]


def test_replay_quota_until_a_pod_ends() -> None:
    # quota of one GPU: p1 (a share counts one) waits for p0 to end although the node has a free GPU
    assert _replay("BestEffortFIFO", 1, [(1, 0, 100, 1000), (1, 20, 30, 500)]) == [0, 100]


@pytest.mark.parametrize("model", ["T4", "G2"])
def test_run_eta_exact_on_hand_worked_queue(model: str) -> None:
    # with exact run times and no later arrivals to overtake, capplan's estimate is the start Kueue gives
    # (the ends fall on ticks' minute grid: a running pod is believed to have at least a minute left); also on
    # the trace's undisclosed models (G2: vendor alibaba), which the replay's one GPU quota counts too
    tr = _trace([(1, 0, 1020, 1000), (2, 10, 540, 1000), (1, 20, 300, 1000)], model)
    run = run_eta(tr, [QueueSpec("q", "StrictFIFO", 2)], np.zeros(3, dtype=np.int64), 60, [0.0], seed=0)
    assert run.start.tolist() == [0, 1020, 1560]
    assert len(run.pod) > 0
    est = run.estimates["capplan-s0"]
    assert np.allclose(est, run.start[run.pod])
    # the moving average has no admission interval in the queue before the second admission
    assert np.isnan(run.estimates["ma-ewma"][run.tick < 1020]).all()
    # after p1's admission at 1020 the queue's one interval is 1020 s: p2, first in line, is due one later
    late = run.tick >= 1020
    assert np.allclose(run.estimates["ma-ewma"][late], run.tick[late] + 1020)


def test_spread_estimators_on_a_two_pod_queue() -> None:
    # p0 (1 GPU, 1020 s) runs from 0; p1 (2 GPUs) waits for it under a quota of 2. The estimators told the
    # spread 0.5 of the noisy run times: -expected puts p1's start at p0's expected remaining time given its run
    # so far; -sampled at the median over 3 draws (its middle draw) from default_rng([seed, now]) as
    # capplan schedule --samples draws them (at most a few hundred seconds: one-second steps)
    from capplan.bench.eta import noisy_durations
    from capplan.model.spread import expected_remaining, sample_remaining, sample_run_time

    tr = _trace([(1, 0, 1020, 1000), (2, 10, 540, 1000)])
    runs = [run_eta(tr, [QueueSpec("q", "StrictFIFO", 2)], np.zeros(2, dtype=np.int64), 60, [0.5], seed=7,
                    samples=3) for _ in range(2)]
    run = runs[0]
    assert run.start.tolist() == [0, 1020]
    known = noisy_durations(tr.duration, 0.5, 7)
    assert (run.pod == 1).all() and run.tick.tolist() == list(range(60, 1020, 60))
    for t, exp_, smp in zip(run.tick.tolist(), run.estimates["capplan-s0.5-expected"],
                            run.estimates["capplan-s0.5-sampled"], strict=True):
        assert exp_ == t + expected_remaining(int(known[0]), t, 0.5)
        rng = np.random.default_rng([7, t])
        draws = []
        for _ in range(3):  # schedule --samples' order: every workload's run time, then each running replica's end
            sample_run_time(int(known[0]), 0.5, rng)
            sample_run_time(int(known[1]), 0.5, rng)
            draws.append(sample_remaining(int(known[0]), t, 0.5, rng))
        assert smp == t + sorted(draws)[1]
    # deterministic for the seed
    for name, est in run.estimates.items():
        assert np.array_equal(est, runs[1].estimates[name], equal_nan=True), name
