"""The two benchmark protocols: online arrival (FGD paper) and batch planning (pods known up front).

Online, as in the FGD authors' simulator: pods are sorted by name and shuffled with the seed;
then pods drawn uniformly (with replacement) from the original list are appended while the
requested GPU total stays within ``tune`` (1.3) times the cluster's GPU capacity (upstream
compares the running total plus the drawn pod's *per-GPU* milli, and stops at the first draw
that would exceed it). Pods arrive in that order and never leave. After every pod the arrived
GPU demand and the allocated GPU milli are recorded; ``arrived_pct`` bins are the arrived
demand as a whole percentage of capacity, and a bin's allocation is the mean over its records.

Batch: the same pod list (same seed, same inflation) is handed to :func:`capplan.placement.planner.solve`
at once; the plan reports the placed GPUs and the planner's upper bound. On synthetic suites the
recorded pod kinds are used: ``training`` pods become gangs and ``mig`` pods real MIG workloads
(online they stay N/7 shares: the online baselines know no MIG geometry). Results of the two
protocols are never ranked together.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from capplan.bench.metrics import RunRecord, bin_records, final_metrics, plan_metrics
from capplan.bench.online.frag import TypicalPods, cluster_frag
from capplan.bench.online.policies import PolicyContext
from capplan.bench.online.sim import MILLI, Fleet, IntArr, PodTable, SimState, simulate
from capplan.bench.online.table import make_policy
from capplan.model.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from capplan.bench.synthetic import MigRequest
    from capplan.io.alibaba import TracePod
    from capplan.model.plan import Plan
    from capplan.model.problem import Problem

TUNE = 1.3
BINS = range(0, 131)


def online_order(pods: PodTable, capacity_milli: int, seed: int, tune: float = TUNE) -> IntArr:
    """Arrival order (row indices, repeats allowed): shuffled originals, then inflation draws.

    Python's :mod:`random` with ``seed`` replaces Go's ``math/rand``: the procedure is the same,
    the draws differ, which is why results are compared as means over ten seeds.
    """
    rng = random.Random(seed)
    by_name = sorted(range(len(pods.names)), key=lambda i: pods.names[i])
    order = by_name[:]
    rng.shuffle(order)
    total = sum(pods.demand_milli(i) for i in order)
    target = tune * capacity_milli
    while True:
        i = by_name[rng.randrange(len(by_name))]
        # Upstream tests the drawn pod's per-GPU milli (a quirk kept for fidelity); gangs count whole.
        step = int(pods.milli[i]) if pods.replicas[i] == 1 else pods.demand_milli(i)
        if total + step > target:
            break
        total += pods.demand_milli(i)
        order.append(i)
    return np.array(order, dtype=np.int64)


@dataclass
class OnlineRun:
    """One online run: per-bin records and end-of-run metrics."""

    policy: str
    seed: int
    rows: list[RunRecord] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)


def run_online(fleet: Fleet, pods: PodTable, policy: str, seed: int, tune: float = TUNE,
               frag_bins: bool = True) -> OnlineRun:
    """Run ``policy`` online with ``seed`` and bin the results by arrived workload."""
    typical = TypicalPods.from_pods(fleet, pods)
    order = online_order(pods, fleet.total_milli, seed, tune)
    ctx = PolicyContext(fleet=fleet, pods=pods, typical=typical, seed=seed)
    tracemalloc.start()
    t0 = time.perf_counter()
    state, res = simulate(fleet, pods, order, make_policy(policy, ctx), seed)
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    frag_at = _frag_by_bin(fleet, pods, order, res, typical) if frag_bins else {}
    rows = bin_records(res.arrived_milli, res.used_milli, fleet.total_milli, frag_at)
    final = final_metrics(fleet, pods, state, res, typical)
    final.update(seconds=round(seconds, 3), peak_mib=round(peak / 2**20, 2), pods=len(order))
    for r in rows:
        r.seconds = final["seconds"]
    return OnlineRun(policy=policy, seed=seed, rows=rows, final=final)


def _frag_by_bin(fleet: Fleet, pods: PodTable, order: IntArr, res: Any, typical: TypicalPods) -> dict[int, float]:
    """FGD fragmentation (% of capacity) at the last pod of every arrived-% bin, by replay."""
    marks: dict[int, int] = {}
    for k, a in enumerate(res.arrived_milli):
        marks[round(a / fleet.total_milli * 100)] = k
    wanted = {k: b for b, k in marks.items() if b in BINS}
    state = SimState.empty(fleet)
    out: dict[int, float] = {}
    from capplan.bench.online.sim import pod_view

    masks: dict[int, Any] = {}
    for k, i in enumerate(order):
        pod = pod_view(pods, fleet, int(i), masks)
        for node, gpus in zip(res.nodes[k], res.gpus[k], strict=True):
            state.apply(pod, node, gpus)
        if k in wanted:
            frag, _ = cluster_frag(typical, state)
            out[wanted[k]] = 100.0 * frag / fleet.total_milli
    return out


@dataclass
class BatchRun:
    """One batch run: the plan's placed GPUs, bound, time and memory."""

    policy: str
    seed: int
    placed_gpus: float
    bound_gpus: float
    capacity_gpus: float
    demand_gpus: float
    seconds: float
    peak_mib: float
    status: str
    metrics: dict[str, Any]
    plan_metrics: dict[str, Any] = field(default_factory=dict)


def batch_problem(nodes_data: dict[str, Any], trace_pods: list[TracePod], seed: int, capacity_milli: int,
                  tune: float = TUNE, replicas: list[int] | None = None, priority: list[int] | None = None,
                  kinds: Sequence[str] | None = None,
                  mig: Sequence[MigRequest | None] | None = None) -> tuple[Problem, float]:
    """The batch protocol's problem: the online pod list for ``seed`` as workloads; and its GPU demand.

    Per pod (synthetic suites; same index as ``trace_pods``): ``replicas`` gives the gang size
    and ``priority`` the priority (default 0). With ``kinds``, a pod of kind ``training`` becomes
    a ``training`` workload (all members or none) with that many replicas; without it (older
    callers) a pod with several members or named ``train-*`` does. ``mig`` turns a pod with a
    request into a MIG workload (``mig``: the profile, ``gpu_models``: the models offering it)
    instead of its N/7 GPU share. Alibaba traces pass none of these. Inflation copies of a pod
    are named ``<pod>-tuned-<n>``.
    """
    from capplan.io.alibaba import pod_workload
    from capplan.io.scenario import problem_from_data
    from capplan.model.catalog import load_catalog

    pods = PodTable.from_trace(trace_pods, replicas=replicas, priority=priority)
    order = online_order(pods, capacity_milli, seed, tune)
    seen: dict[str, int] = {}
    workloads = []
    for i in (int(x) for x in order):
        p = trace_pods[i]
        n = seen.get(p.name, 0)
        seen[p.name] = n + 1
        w = pod_workload(p)
        w["name"] = p.name if n == 0 else f"{p.name}-tuned-{n}"
        gang = kinds[i] == "training" if kinds is not None else pods.replicas[i] > 1 or p.name.startswith("train-")
        if gang:
            w.update(kind="training", replicas=int(pods.replicas[i]))
        req = mig[i] if mig is not None else None
        if req is not None:
            for key in ("gpu_fraction", "gpus"):  # a 7g share is a whole GPU in the pod list
                w.pop(key, None)
            w.update(kind="inference", mig=req.profile, gpu_models=list(req.gpu_models))
        if priority is not None:
            w["priority"] = int(pods.priority[i])
        workloads.append(w)
    problem = problem_from_data(dict(nodes_data, workloads=workloads), load_catalog())
    return problem, sum(pods.demand_milli(int(i)) for i in order) / MILLI


def _solve_measured(problem: Problem, strategy: str, time_limit: float, seed: int) -> tuple[Plan, float, float]:
    """Solve in this (fresh) process: the plan, wall seconds and the process's peak RSS in MiB."""
    import resource

    from capplan.placement import PlanOptions, solve

    t0 = time.perf_counter()
    plan = solve(problem, strategy, PlanOptions(time_limit=time_limit, seed=seed))
    seconds = time.perf_counter() - t0
    return plan, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_batch(nodes_data: dict[str, Any], trace_pods: list[TracePod], strategy: str, seed: int,
              capacity_milli: int, time_limit: float = 60.0, tune: float = TUNE,
              replicas: list[int] | None = None, priority: list[int] | None = None,
              kinds: Sequence[str] | None = None, mig: Sequence[MigRequest | None] | None = None) -> BatchRun:
    """Plan the online protocol's pod list (same seed) all at once with capplan strategy ``strategy``.

    The problem is :func:`batch_problem` (same per-pod arguments); the plan comes from
    :func:`capplan.placement.planner.solve`, which validates it.
    """
    problem, demand = batch_problem(nodes_data, trace_pods, seed, capacity_milli, tune, replicas, priority,
                                    kinds, mig)
    # A fresh process per solve: its peak resident memory is the solve's (solver C++ allocations
    # included, which tracemalloc misses), and tracing Python allocations would slow model building
    # several-fold, eating the planners' time limit.
    with mp.get_context("spawn").Pool(1) as pool:
        plan, seconds, peak_mib = pool.apply(_solve_measured, (problem, strategy, time_limit, seed))
    return BatchRun(policy=strategy, seed=seed, placed_gpus=float(sum(plan.objective)),
                    bound_gpus=float(sum(plan.bound)), capacity_gpus=capacity_milli / MILLI, demand_gpus=demand,
                    seconds=round(seconds, 3), peak_mib=round(peak_mib, 2), status=plan.status,
                    metrics={k: v for k, v in plan.metrics.items() if isinstance(v, int | float | str)},
                    plan_metrics=plan_metrics(problem, plan))


def seeds_from(text: str) -> list[int]:
    """Parse ``42-51`` (inclusive range) or ``1,2,5`` (or a mix) into a list of seeds."""
    out: list[int] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        a, sep, b = part.partition("-")
        try:
            out.extend(range(int(a), int(b) + 1) if sep else [int(a)])
        except ValueError:
            raise InputError("--seeds", f"{part!r} is not a seed or a range like 42-51") from None
    if not out:
        raise InputError("--seeds", "no seeds given; use e.g. 42-51")
    return out
