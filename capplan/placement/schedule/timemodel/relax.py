"""Relaxations of the CP-SAT time model (:mod:`capplan.placement.schedule.timemodel.model`) whose optima bound
the schedule's work per priority: the pooled model (parts of the cluster as single nodes) and the
energy relaxation (which jobs run, subject to energetic reasoning over time windows)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ortools.sat.python import cp_model

from capplan.placement.schedule.timemodel.data import Busy, Job, NodeCap
from capplan.placement.schedule.timemodel.model import TimeModel
from capplan.placement.schedule.timemodel.stages import one_worker, reduced


def pooled(jobs: list[Job], busy: list[Busy], nodes: list[NodeCap], horizon: int, step: int,
           part: list[int] | None = None, gpus: list[int] | None = None) -> TimeModel:
    """A relaxation of the time model: each part of the cluster (``part[n]`` for node ``n``; default: the
    whole cluster) as one node with every GPU, CPU and MiB of its nodes pooled.

    Every schedule of the real model is one of this model, so its stage bounds are upper bounds of
    the real work per priority; it has one interval per job and part instead of one per job and
    node, and CP-SAT often proves it optimal where the full model stays open. A job's required
    domain and single GPU model are kept where a part lies within one (else dropped, which only
    relaxes). ``gpus[g]``: the most GPUs part ``g`` runs at once (power budgets may allow fewer
    than all). No guaranteed stage, no wait.
    """
    part = part if part is not None else [0] * len(nodes)
    size = max(part, default=-1) + 1
    pool = [NodeCap(gpus=sum(n.gpus for n, g in zip(nodes, part, strict=True) if g == k) if gpus is None else gpus[k],
                    cpu=sum(n.cpu for n, g in zip(nodes, part, strict=True) if g == k),
                    mem=sum(n.mem for n, g in zip(nodes, part, strict=True) if g == k), tdp=0, power=())
            for k in range(size)]
    flat = []
    for jb in jobs:
        parts = sorted({part[n] for n in jb.nodes})
        doms: dict[int, set[str]] = {}
        mods: dict[int, set[str]] = {}
        for k, n in enumerate(jb.nodes):
            if jb.domains:
                doms.setdefault(part[n], set()).add(jb.domains[k])
            if jb.models:
                mods.setdefault(part[n], set()).add(jb.models[k])
        keep_dom = bool(jb.domains) and all(len(v) == 1 for v in doms.values())
        keep_mod = bool(jb.models) and all(len(v) == 1 for v in mods.values())
        flat.append(Job(workload=jb.workload, replicas=jb.replicas, earliest=jb.earliest, latest=jb.latest,
                        duration=jb.duration, nodes=tuple(parts), gpus=jb.gpus, cpu=jb.cpu, mem=jb.mem,
                        units=jb.units, release=jb.release, priority=jb.priority, guaranteed=False,
                        domains=tuple(next(iter(doms[g])) for g in parts) if keep_dom else (),
                        group=jb.group if keep_dom else -1,
                        models=tuple(next(iter(mods[g])) for g in parts) if keep_mod else ()))
    fixed = [Busy(node=part[b.node], gpus=b.gpus, cpu=b.cpu, mem=b.mem, end=b.end, start=b.start) for b in busy]
    return TimeModel(flat, fixed, pool, [], horizon, step, with_wait=False)


@dataclass(frozen=True)
class EnergyItem:
    """One job of the energy relaxation: it runs ``rate`` demand units from a start in ``[earliest, latest]``
    for ``duration`` seconds (None: to the horizon) and adds at most ``work`` to its priority."""

    priority: int
    earliest: int
    latest: int
    duration: int | None
    rate: int
    work: int


class EnergyRelaxation:
    """A 0-1 relaxation of the time model: which jobs run, subject to energetic reasoning.

    Whatever its start, a job that runs occupies at least ``max(0, min(d, b - a, e + d - a, b - l))``
    seconds of a window ``[a, b]`` (``e``/``l``: earliest/latest start, ``d``: duration); the jobs that
    run together, at that minimum, cannot need more than the capacity rate times ``b - a`` in any
    window. Windows run from job starts (earliest and latest) to job ends (earliest and latest),
    thinned to at most ``points`` of each; any subset of windows is a relaxation. The capacity rate
    is pooled over the cluster (demand units; power budgets cap their domains' GPUs).
    """

    def __init__(self, items: list[EnergyItem], fixed: list[tuple[int, int]], capacity: int, horizon: int,
                 points: int = 48) -> None:
        import numpy as np

        self.items = items
        n = len(items)
        e = np.array([it.earliest for it in items], dtype=np.int64)
        lat = np.array([it.latest for it in items], dtype=np.int64)
        svc = np.array([it.duration is None for it in items], dtype=bool)
        d = np.array([it.duration if it.duration is not None else horizon - it.earliest for it in items],
                     dtype=np.int64)
        rate = np.array([it.rate for it in items], dtype=np.int64)
        starts = _thin(sorted({0, *e.tolist(), *lat.tolist()}), points)
        ends = _thin(sorted({horizon, *(e + d).tolist(), *(lat + np.where(svc, 0, d)).tolist()}), points)
        self.rows: list[tuple[list[int], list[int], int]] = []  # item indices, coefficients, right-hand side
        for a in starts:
            for b in ends:
                if b <= a or n == 0:
                    continue
                least = np.minimum(np.minimum(d, b - a), np.minimum(e + d - a, b - lat))
                least = np.where(svc, b - np.maximum(a, lat), least)
                least = np.clip(least, 0, None) * rate
                room = capacity * (b - a) - sum(r * max(0, min(end, b) - a) for r, end in fixed)
                if int(least.sum()) <= room:
                    continue  # never binding
                idx = np.nonzero(least)[0]
                self.rows.append((idx.tolist(), least[idx].tolist(), max(0, room)))

    def level(self, q: int, floors: dict[int, int], time_limit: float, seed: int = 0) -> int | None:
        """An upper bound on priority ``q``'s work given every higher priority ``h`` at least ``floors[h]``;
        None when the relaxation finds no answer in time or the floors cannot all be met."""
        m = cp_model.CpModel()
        use = [j for j, it in enumerate(self.items) if it.priority >= q]
        x = {j: m.new_bool_var(f"e{j}") for j in use}
        for idx, coef, rhs in self.rows:
            terms = [(c, x[j]) for j, c in zip(idx, coef, strict=True) if j in x]
            if terms and sum(c for c, _ in terms) > rhs:
                expr, g = reduced(terms)
                m.add(expr <= rhs // g)
        for h, floor in floors.items():
            terms = [(self.items[j].work, x[j]) for j in use if self.items[j].priority == h]
            if sum(c for c, _ in terms) < floor:
                return None
            if terms and floor > 0:
                expr, g = reduced(terms)
                m.add(expr >= -(-floor // g))
        terms = [(self.items[j].work, x[j]) for j in use if self.items[j].priority == q and self.items[j].work]
        if not terms:
            return 0
        expr, g = reduced(terms)
        m.maximize(expr)
        solver = one_worker(time_limit, seed)
        status = solver.solve(m)
        if status == cp_model.INFEASIBLE:
            return None
        bound = solver.best_objective_bound
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN) or not math.isfinite(bound):
            return None
        return math.floor(bound + 1e-6) * g


def _thin(values: list[int], most: int) -> list[int]:
    """At most ``most`` of ``values`` (sorted), evenly spread, first and last kept."""
    if len(values) <= most:
        return values
    step = (len(values) - 1) / (most - 1)
    return sorted({values[round(i * step)] for i in range(most)})
