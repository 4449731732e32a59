"""Benchmark metrics: allocation binned by arrived workload, fragmentation, gangs, priorities.

Definitions (also in docs/benchmarks.md):

* ``allocation_pct``: allocated GPU milli / cluster GPU milli x 100 (mean over a bin's records).
* ``unallocated_gpus``: cluster GPUs minus allocated GPUs (fractions count), at the bin's end.
* ``fragmentation_pct``: FGD fragmentation (:mod:`capplan.bench.online.frag`) / cluster GPU milli x 100.
* ``stranded_pct`` (capplan's own fragmentation): idle GPU milli that *no* typical GPU shape can
  use where it is (its GPU has too little free share, or its node lacks the CPU, the GPU model,
  enough fitting GPUs, or the memory of the smallest GPU pod), / cluster GPU milli x 100.
* gangs: pods asking for several GPUs or several members; placed share and rack/block spread.

From a ``Plan`` and its ``Problem`` (:func:`plan_metrics`; any strategy, batch protocol):

* ``mig_compute_pct`` / ``mig_memory_pct``: over GPUs hosting at least one MIG instance in the
  plan, used compute (memory) slices / the models' total compute (memory) slices x 100.
* ``gangs_total`` / ``gangs_placed``: training workloads, and those with every replica placed.
* ``gang_spread_mean``: mean over placed gangs of the number of domains they span at their
  ``topology.preferred`` level, else ``topology.required``, else the outermost level above node.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from capplan.bench.online.frag import TypicalPods, cluster_frag
from capplan.bench.online.sim import MILLI, Fleet, PodTable, SimResult, SimState
from capplan.model.plan import Plan
from capplan.model.problem import Problem

COLUMNS = ("policy", "seed", "arrived_pct", "allocation_pct", "unallocated_gpus", "fragmentation_pct", "seconds")
# Plan-based columns appended to runs.csv after ``bound_pct`` (empty where not applicable).
PLAN_COLUMNS = ("mig_compute_pct", "mig_memory_pct", "gangs_total", "gangs_placed", "gang_spread_mean")


@dataclass
class RunRecord:
    """One row of runs.csv: a (policy, seed, arrived_pct) bin."""

    arrived_pct: int
    allocation_pct: float
    unallocated_gpus: float
    fragmentation_pct: float | None = None
    seconds: float = 0.0


def bin_records(arrived: list[int], used: list[int], capacity_milli: int,
                frag_at: dict[int, float] | None = None) -> list[RunRecord]:
    """Bin per-pod records by arrived workload %, as the FGD authors' analysis does.

    A record's bin is ``round(100 * arrived / capacity)`` (Python rounding); a bin's allocation is
    the mean of its records' allocation (each rounded to 0.01 first); an empty bin borrows the
    records of its neighbours (bin - 1 .. bin + 1). Unallocated GPUs are taken at the bin's last record.
    """
    gpus = capacity_milli / MILLI
    bins = [round(a / capacity_milli * 100) for a in arrived]
    alloc = [round(u / capacity_milli * 100, 2) for u in used]
    by_bin: dict[int, list[int]] = defaultdict(list)
    for k, b in enumerate(bins):
        by_bin[b].append(k)
    out = []
    for b in range(0, 131):
        ks = by_bin.get(b) or sorted(by_bin.get(b - 1, []) + by_bin.get(b + 1, []))
        if not ks:
            continue
        mean = round(sum(alloc[k] for k in ks) / len(ks), 2)
        last = ks[-1]
        out.append(RunRecord(arrived_pct=b, allocation_pct=mean,
                             unallocated_gpus=round(gpus - used[last] / MILLI, 3),
                             fragmentation_pct=None if frag_at is None else frag_at.get(b)))
    return out


def allocation_curve(runs: list[list[dict[str, Any]]]) -> dict[int, float]:
    """Mean allocation % per arrived-% bin over online runs, non-decreasing by construction.

    Online, pods never leave, so a run's allocation cannot fall as workload arrives. Each run's binned rows
    become a step function (a bin without a row takes the last value below it: nothing changed between two
    arrivals) kept non-decreasing, and bins are kept only up to the smallest last bin among the runs, so every
    bin's mean is over the same runs (a mean over different seeds per bin made curves fall).
    """
    steps: list[dict[int, float]] = []
    for rows in runs:
        got = {int(r["arrived_pct"]): float(r["allocation_pct"]) for r in rows}
        if not got:
            return {}
        filled: dict[int, float] = {}
        level = 0.0
        for b in range(min(got), max(got) + 1):
            level = max(level, got.get(b, level))
            filled[b] = level
        steps.append(filled)
    if not steps:
        return {}
    lo = max(min(s) for s in steps)
    hi = min(max(s) for s in steps)
    return {b: round(sum(s[b] for s in steps) / len(steps), 4) for b in range(lo, hi + 1)}


def stranded_milli(fleet: Fleet, pods: PodTable, state: SimState, typical: TypicalPods) -> int:
    """Idle GPU milli that no typical GPU shape can use where it sits (capplan's fragmentation)."""
    gpu_rows = pods.num > 0
    min_mem = int(pods.mem[gpu_rows].min()) if gpu_rows.any() else 0
    shapes = np.flatnonzero(typical.milli > 0)
    left = state.gpu_left
    usable = np.zeros(left.shape, dtype=bool)
    for t in shapes:
        fits = left >= typical.milli[t]
        host = typical.access[:, t] & (state.cpu_left >= typical.cpu[t]) & (fits.sum(axis=1) >= typical.num[t])
        usable |= fits & host[:, None]
    usable &= (state.mem_left >= min_mem)[:, None]
    return int(np.where(usable, 0, left).sum())


def final_metrics(fleet: Fleet, pods: PodTable, state: SimState, res: SimResult,
                  typical: TypicalPods) -> dict[str, Any]:
    """End-of-run metrics: allocation, failures, gangs and their spread, per-priority placed GPUs."""
    cap = fleet.total_milli
    placed_by_prio: dict[int, float] = defaultdict(float)
    failed = failed_gpu = 0
    gangs = gangs_placed = 0
    racks: list[int] = []
    blocks: list[int] = []
    for k, i in enumerate(res.order):
        demand = pods.demand_milli(int(i))
        is_gang = bool(pods.replicas[i] > 1 or pods.num[i] > 1)
        gangs += is_gang
        if res.nodes[k]:
            placed_by_prio[int(pods.priority[i])] += demand / MILLI
            if is_gang:
                gangs_placed += 1
                nodes = np.array(res.nodes[k])
                racks.append(len(set(fleet.rack[nodes].tolist())))
                blocks.append(len(set(fleet.block[nodes].tolist())))
        else:
            failed += 1
            failed_gpu += demand
    return {
        "allocation_pct": round(100 * state.used_milli / cap, 3),
        "fragmentation_pct": round(100 * cluster_frag(typical, state)[0] / cap, 3),
        "unallocated_gpus": round((cap - state.used_milli) / MILLI, 3),
        "stranded_pct": round(100 * stranded_milli(fleet, pods, state, typical) / cap, 3),
        "failed_pods": failed,
        "failed_gpus": round(failed_gpu / MILLI, 3),
        "gangs_total": gangs,
        "gangs_placed": gangs_placed,
        "gang_racks_mean": round(float(np.mean(racks)), 3) if racks and fleet.rack.max() >= 0 else None,
        "gang_blocks_mean": round(float(np.mean(blocks)), 3) if blocks and fleet.block.max() >= 0 else None,
        "placed_gpus_by_priority": {str(q): round(v, 3) for q, v in sorted(placed_by_prio.items(), reverse=True)},
    }


def mig_utilisation(problem: Problem, plan: Plan) -> tuple[float | None, float | None]:
    """(compute %, memory %) of slices used on GPUs hosting a MIG instance in ``plan``; None if none.

    Each GPU hosting at least one MIG instance contributes its model's ``compute_slices`` and
    ``memory_slices`` to the totals, and each instance its profile's slices to the used counts.
    """
    used_c: dict[tuple[str, int], int] = defaultdict(int)
    used_m: dict[tuple[str, int], int] = defaultdict(int)
    for a in plan.assignments:
        if a.mig is None:
            continue
        model = problem.gpu_model(problem.cluster.nodes[problem.cluster.node_index[a.node]])
        if model is None:
            continue
        prof = next(p for p in model.profiles if p.name == a.mig.profile)
        for g in a.gpus:
            used_c[(a.node, g)] += prof.compute_slices
            used_m[(a.node, g)] += prof.memory_slices
    if not used_c:
        return None, None
    tot_c = tot_m = 0
    for node_name, _ in used_c:
        model = problem.gpu_model(problem.cluster.nodes[problem.cluster.node_index[node_name]])
        assert model is not None
        tot_c += model.compute_slices
        tot_m += model.memory_slices
    return (round(100 * sum(used_c.values()) / tot_c, 2), round(100 * sum(used_m.values()) / tot_m, 2))


def gang_metrics(problem: Problem, plan: Plan) -> tuple[int, int, float | None]:
    """(gangs total, gangs placed, mean domains spanned by placed gangs or None).

    A gang is a ``training`` workload; it is placed when all its replicas are assigned. Its
    spread is the number of distinct domains of its ``preferred`` level (else ``required``, else
    the outermost level above node) that host its replicas. None when no gang is placed or the
    cluster has no level above node and the gang names none.
    """
    cluster = problem.cluster
    nodes_of: dict[str, set[str]] = defaultdict(set)
    count: dict[str, int] = defaultdict(int)
    for a in plan.assignments:
        nodes_of[a.workload].add(a.node)
        count[a.workload] += 1
    default = cluster.levels[0] if len(cluster.levels) > 1 else None
    total = placed = 0
    spans: list[int] = []
    for w in problem.workloads:
        if w.kind != "training":
            continue
        total += 1
        if count.get(w.name, 0) < w.replicas:
            continue
        placed += 1
        level = w.topology.preferred or w.topology.required or default
        if level is not None:
            spans.append(len({cluster.domain_of(cluster.nodes[cluster.node_index[n]], level)
                              for n in nodes_of[w.name]}))
    return total, placed, (round(float(np.mean(spans)), 3) if spans else None)


def plan_metrics(problem: Problem, plan: Plan) -> dict[str, Any]:
    """The :data:`PLAN_COLUMNS` values of ``plan`` (None where not applicable)."""
    mig_c, mig_m = mig_utilisation(problem, plan)
    total, placed, spread = gang_metrics(problem, plan)
    return {"mig_compute_pct": mig_c, "mig_memory_pct": mig_m, "gangs_total": total,
            "gangs_placed": placed, "gang_spread_mean": spread}
