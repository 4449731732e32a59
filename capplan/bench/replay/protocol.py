"""The replay protocol: the Alibaba trace in time, with a queue (``capplan bench alibaba --protocol replay``).

Pods arrive at ``creation_time`` and run for their observed run time ``deletion_time -
scheduled_time`` once started; when nothing fits they wait in a queue, and they leave when their
run time has passed after their start *in the simulation*. Which pods take part
(:func:`load_replay`):

* a pod without ``scheduled_time`` (phase Pending: never scheduled in the trace) has no run time
  and is left out (counted in ``excluded_never_scheduled``);
* a pod without ``deletion_time``, or deleted at the last timestamp of the file, was still
  running when the trace ends: its run time is ``trace end - scheduled_time`` (a lower bound;
  counted in ``censored``);
* an empty ``creation_time`` reads as 0 (the loader's rule: the pod arrives at the trace start); a
  run time of 0 counts as 1 s;
* a pod that fits no node of the (possibly reduced) fleet even when it is empty is left out
  (``excluded_never_fits``): it would wait forever under every policy;
* a file without ``scheduled_time`` on any pod (e.g. ``multigpu*``) cannot be replayed (InputError).

The protocol is three modules: :mod:`capplan.bench.replay.sim` (the pod selection and the simulator
state), :mod:`capplan.bench.replay.policies` (the policies) and this one (the event loop, the run
and its metrics; it re-exports the other two's public names). The simulator
(:class:`~capplan.bench.replay.sim.Replay`) is event-driven over numpy occupancy arrays (the online
simulator's :class:`~capplan.bench.online.sim.SimState`): at each instant where something arrives, ends
or a policy asked to be woken, departures are applied first, then arrivals join the queue, then
the policy starts what it decides. Policies (:data:`REPLAY_POLICIES`):

``fifo-bestfit``, ``fifo-fgd``
    Kubernetes-style: the queue in arrival order, each pod placed with the BestFit or FGD scorer of
    :mod:`capplan.bench.online.policies`. As in kube-scheduler, a pod that does not fit is set aside and
    the pods behind it are still tried (no head-of-line blocking); set-aside pods are retried, in
    arrival order, after a pod ends (kube-scheduler moves them back on cluster events).
``easy-backfill``
    Slurm-style EASY backfill with exact run times: pods start in queue order while they fit; the
    first that does not (the head) gets a reservation: the earliest time at which, releasing the
    running pods of a node in order of their known end times, it fits on that node (the earliest
    node, ties by the seed-shuffled node order). A later pod may start now only if it fits now and
    does not delay that reservation: it ends by the reservation time, or it runs on another node,
    or on the reserved node it also fits beside the head at the reservation time. Placement:
    BestFit.
``capplan-exact``, ``capplan-noisy``
    Every ``replan_every`` seconds (when pods wait and something changed since the last re-plan,
    or a planned start is overdue), :func:`capplan.placement.schedule.schedule` (``heuristic``) is
    called on the waiting queue (workloads with ``duration`` = the run time, release 0) against the
    running set (running replicas with ``ends_in``). Planned pods start at their planned time on
    their planned node and GPUs. When room frees before the plan expected it (a pod ended before its
    estimate) or a planned pod's spot is still taken at its planned time (a pod ran past its
    estimate), planned pods, in planned order, start at once where they fit beside the rest of the
    plan (their planned spot if free until their believed end, else BestFit), before pods that
    arrived since the re-plan. Between re-plans (and right after one, for pods the schedule left out), a
    pod without a planned start starts at once, with BestFit, if it fits into what is free now minus
    what the planned pods that start before its own (believed) end will take: planned pods starting
    after it ends find their room again, so the plan stays feasible. It is retried after each
    departure, in arrival order. ``capplan-exact`` knows the run times;
    ``capplan-noisy`` knows only ``estimate = run time x exp(sigma z)``, ``z`` standard normal from
    ``numpy.random.default_rng(seed)``, rounded to whole seconds (at least 1); a running pod past its
    estimate is expected to run as long again as it has run so far.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from capplan.bench.online.frag import TypicalPods
from capplan.bench.online.policies import BestFitPolicy, FGDPolicy, PolicyContext
from capplan.bench.online.sim import MILLI, IntArr, PodTable, Policy
from capplan.bench.replay.policies import MAX_STEPS, Capplan, EasyBackfill, Fifo, ReplayPolicy
from capplan.bench.replay.sim import Replay, ReplayTrace, fleet_subset, load_replay
from capplan.model.errors import InputError

if TYPE_CHECKING:
    from capplan.model.problem import Problem

__all__ = [
    "DEFAULT_NOISE_SIGMA",
    "DEFAULT_REPLAN_LIMIT_S",
    "DEFAULT_REPLAN_S",
    "LONG_WAIT_S",
    "MAX_STEPS",
    "REPLAY_POLICIES",
    "SHAPES",
    "Capplan",
    "EasyBackfill",
    "Fifo",
    "Replay",
    "ReplayPolicy",
    "ReplayRun",
    "ReplayTrace",
    "cluster_problem",
    "fleet_subset",
    "hourly_allocation",
    "load_replay",
    "replay_metrics",
    "run_replay",
    "shape_of",
    "wait_cdf",
    "wait_stats",
]

REPLAY_POLICIES = ("fifo-bestfit", "fifo-fgd", "easy-backfill", "capplan-exact", "capplan-noisy")
DEFAULT_REPLAN_S = 600.0
DEFAULT_NOISE_SIGMA = 0.5
DEFAULT_REPLAN_LIMIT_S = 2.0
#: Pods waiting longer than this count in ``waiting_over_1h``.
LONG_WAIT_S = 3600


def shape_of(pods: PodTable, i: int) -> str:
    """The demand shape of pod ``i``: ``cpu-only``, ``share`` (part of one GPU), ``whole-gpu`` or ``multi-gpu``."""
    num, milli = int(pods.num[i]), int(pods.milli[i])
    if num == 0:
        return "cpu-only"
    if milli < MILLI:
        return "share"
    return "whole-gpu" if num == 1 else "multi-gpu"


SHAPES = ("whole-gpu", "share", "multi-gpu", "cpu-only")

@dataclass
class ReplayRun:
    """One replay: per-pod start times and the allocation over time, plus the policy's counters."""

    policy: str
    seed: int
    start: IntArr
    times: IntArr
    used: IntArr
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)


def run_replay(tr: ReplayTrace, policy: str, seed: int, replan_every: float = DEFAULT_REPLAN_S,
               noise_sigma: float = DEFAULT_NOISE_SIGMA, replan_limit: float = DEFAULT_REPLAN_LIMIT_S,
               base: Problem | None = None, estimates: IntArr | None = None) -> ReplayRun:
    """Replay ``tr`` with ``policy`` (one of :data:`REPLAY_POLICIES`).

    Parameters
    ----------
    tr
        The pods and fleet (:func:`load_replay`).
    policy
        ``fifo-bestfit``, ``fifo-fgd``, ``easy-backfill``, ``capplan-exact`` or ``capplan-noisy``.
    seed
        Seeds the tie-breaking node order and the noisy estimates.
    replan_every
        capplan: seconds between re-plans (whole seconds, at least 1).
    noise_sigma
        capplan-noisy: sigma of the lognormal multiplicative noise on run times.
    replan_limit
        capplan: time limit of one re-plan (seconds).
    base
        capplan: the cluster as a :class:`Problem` without workloads (built from ``tr.nodes`` if None).
    estimates
        capplan: the run time (whole seconds, at least 1) the planner believes for each pod, instead of
        the exact one (``capplan-exact``) or the seeded lognormal estimate (``capplan-noisy``).

    Returns
    -------
    ReplayRun
        Every pod's start time (all pods start: each fits the empty fleet) and the allocation steps.
    """
    if policy not in REPLAY_POLICIES:
        raise InputError("--policies", f"unknown replay policy {policy!r}; choose from {', '.join(REPLAY_POLICIES)}")
    ctx = PolicyContext(fleet=tr.fleet, pods=tr.pods, typical=TypicalPods.from_pods(tr.fleet, tr.pods), seed=seed)
    scorer: Policy = FGDPolicy(ctx) if policy == "fifo-fgd" else BestFitPolicy(ctx)
    sim = Replay(tr, seed, scorer)
    pol: ReplayPolicy
    if policy.startswith("fifo"):
        pol = Fifo(sim)
    elif policy == "easy-backfill":
        pol = EasyBackfill(sim)
    else:
        every = int(replan_every)
        if every < 1:
            raise InputError("--replan-every", f"must be at least 1 second, got {replan_every}")
        known = tr.duration
        if estimates is not None:
            known = np.asarray(estimates, dtype=np.int64)
            if known.shape != tr.duration.shape or (known < 1).any():
                raise ValueError("estimates: one run time of at least 1 s per replayed pod")
        elif policy == "capplan-noisy":
            z = np.random.default_rng(seed).standard_normal(len(known))
            known = np.maximum(1, np.rint(known * np.exp(noise_sigma * z))).astype(np.int64)
        if base is None:
            base = cluster_problem(tr)
        pol = Capplan(sim, known, every, replan_limit, seed, base)
    t0, c0 = time.perf_counter(), time.process_time()
    run_events(sim, pol)
    seconds = time.perf_counter() - t0
    m = dict(pol.metrics, cpu_seconds=round(time.process_time() - c0, 3))
    if "replan_seconds" in m:
        m["replan_seconds"] = round(m["replan_seconds"], 3)
        m["replan_max_seconds"] = round(m["replan_max_seconds"], 3)
    return ReplayRun(policy=policy, seed=seed, start=sim.start, times=np.array(sim.times, dtype=np.int64),
                     used=np.array(sim.used, dtype=np.int64), seconds=seconds, metrics=m)


def cluster_problem(tr: ReplayTrace) -> Problem:
    """The replay fleet as a capplan :class:`Problem` without workloads (the base of every re-plan)."""
    from capplan.io.alibaba import trace_data
    from capplan.io.scenario import problem_from_data
    from capplan.model.catalog import load_catalog

    return problem_from_data(trace_data(list(tr.nodes), [], "replay"), load_catalog())


def run_events(sim: Replay, pol: ReplayPolicy) -> None:
    """Run the replay to its end: arrivals, departures and the policy's wake-ups in time order."""
    tr = sim.tr
    order = np.lexsort((np.arange(len(tr.arrival)), tr.arrival))
    k = 0
    n = len(order)
    while k < n or sim.ends or sim.queue:
        nxt = [int(tr.arrival[order[k]])] if k < n else []
        if sim.ends:
            nxt.append(sim.ends[0][0])
        w = pol.wakeup()
        if w is not None:
            nxt.append(w)
        if not nxt:
            raise RuntimeError(f"replay stalled at t={sim.t} with {len(sim.queue)} pods waiting")
        sim.t = max(sim.t, min(nxt))
        departed = sim.finish_due()
        arrived: list[int] = []
        while k < n and tr.arrival[order[k]] <= sim.t:
            i = int(order[k])
            sim.queue[i] = None
            arrived.append(i)
            k += 1
        pol.dispatch(departed, arrived)
        if sim.times and sim.times[-1] == sim.t:
            sim.used[-1] = sim.state.used_milli
        else:
            sim.times.append(sim.t)
            sim.used.append(sim.state.used_milli)


def wait_stats(waits: IntArr) -> dict[str, float | int]:
    """Mean, p50, p95, p99 and max wait (seconds) and the pods waiting over one hour."""
    if not len(waits):
        return {"pods": 0, "mean_wait_s": 0.0, "p50_wait_s": 0.0, "p95_wait_s": 0.0, "p99_wait_s": 0.0,
                "max_wait_s": 0, "waiting_over_1h": 0}
    q = np.percentile(waits, [50, 95, 99])
    return {"pods": len(waits), "mean_wait_s": round(float(waits.mean()), 1), "p50_wait_s": round(float(q[0]), 1),
            "p95_wait_s": round(float(q[1]), 1), "p99_wait_s": round(float(q[2]), 1),
            "max_wait_s": int(waits.max()), "waiting_over_1h": int((waits > LONG_WAIT_S).sum())}


def hourly_allocation(tr: ReplayTrace, run: ReplayRun, bucket: int = 3600) -> list[tuple[int, float]]:
    """Time-weighted mean GPU allocation (% of capacity) per ``bucket`` seconds, from t=0 to the last departure."""
    cap = tr.fleet.total_milli
    t, u = run.times, run.used
    if not len(t) or cap == 0:
        return []
    end = int(t[-1])
    edges = np.arange(0, end + bucket, bucket, dtype=np.int64)
    # cumulative milli-seconds at each change point, then interpolated at the bucket edges
    seg = np.diff(np.append(t, end)) * u
    cum = np.concatenate([[0], np.cumsum(seg)])
    pts = np.append(t, end)

    def area(x: IntArr) -> Any:
        j = np.clip(np.searchsorted(pts, x, side="right") - 1, 0, len(t) - 1)
        before = np.where(x < pts[0], 0, cum[j] + (x - pts[j]) * u[j])
        return np.where(x >= end, cum[-1], before)

    a = area(edges)
    means = np.diff(a) / bucket / cap * 100
    return [(int(e), round(float(m), 3)) for e, m in zip(edges[:-1], means, strict=True)]


def replay_metrics(tr: ReplayTrace, run: ReplayRun) -> dict[str, Any]:
    """The replay's metrics: waits overall and by demand shape, allocation, counters (JSON-ready)."""
    waits = run.start - tr.arrival
    if (run.start < 0).any():
        raise RuntimeError("a pod never started")
    out: dict[str, Any] = dict(wait_stats(waits))
    shapes = np.array([shape_of(tr.pods, i) for i in range(len(waits))])
    out["by_shape"] = {s: wait_stats(waits[shapes == s]) for s in SHAPES}
    cap = tr.fleet.total_milli
    t, u = run.times, run.used
    span = int(t[-1] - t[0]) if len(t) > 1 else 0
    mean_alloc = float((np.diff(t) * u[:-1]).sum() / span / cap * 100) if span and cap else 0.0
    out.update(mean_allocation_pct=round(mean_alloc, 3), peak_allocation_pct=round(100 * float(u.max()) / cap, 3)
               if cap else 0.0, makespan_s=int(t[-1]), seconds=round(run.seconds, 3), nodes=len(tr.nodes),
               gpus=int(tr.fleet.gpus.sum()), **tr.counts, **run.metrics)
    return out


def wait_cdf(waits: IntArr, points: int = 200) -> list[tuple[float, float]]:
    """(wait seconds, fraction of pods waiting at most that) on a log-spaced grid plus 0."""
    if not len(waits):
        return []
    top = max(1.0, float(waits.max()))
    grid = np.concatenate([[0.0], np.geomspace(1.0, top, points)])
    srt = np.sort(waits)
    frac = np.searchsorted(srt, grid, side="right") / len(srt)
    return [(round(float(g), 1), round(float(f), 5)) for g, f in zip(grid, frac, strict=True)]
