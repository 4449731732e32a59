"""On tiny instances, CP-SAT's optimum equals an exhaustive search written independently here.

The search enumerates every concrete placement of every replica (node, GPU indices, MIG start,
share), prunes with the independent validator's resource check and scores leaves with the
objective definition, written here from the contract of docs/concepts.md: guaranteed replicas,
then per priority the placed value (fixed by the workload: GPUs, the share, or the smallest
compute fraction of a fitting MIG profile on an allowed model) and replicas, then least capacity
held (GPU units held, then CPU-only replicas on GPU nodes).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import combinations
from typing import Any

import pytest

from capplan.model.plan import Assignment, MigSlot, Plan
from capplan.model.problem import Problem, Workload
from capplan.model.units import MILLI, UNITS_PER_GPU
from capplan.model.validate import check_assignments
from capplan.placement import solve

from .conftest import ONE_WORKER, node, scenario


def _candidates(p: Problem, wname: str, replica: int) -> list[Assignment]:
    w = p.workload(wname)
    out: list[Assignment] = []
    for n in p.cluster.nodes:
        d = p.can_host(w, n)
        if d is None:
            continue
        if d.kind == "none":
            out.append(Assignment(workload=wname, replica=replica, node=n.name))
        elif d.kind == "whole":
            out.extend(
                Assignment(workload=wname, replica=replica, node=n.name, gpus=c)
                for c in combinations(range(n.gpus), d.gpus)
            )
        elif d.kind == "mig":
            assert d.profile is not None
            out.extend(
                Assignment(
                    workload=wname,
                    replica=replica,
                    node=n.name,
                    gpus=(g,),
                    mig=MigSlot(profile=d.profile.name, start=s),
                )
                for g in range(n.gpus)
                for s in d.profile.starts
            )
        else:
            out.extend(
                Assignment(
                    workload=wname, replica=replica, node=n.name, gpus=(g,), fraction=d.fraction_milli / MILLI
                )
                for g in range(n.gpus)
            )
    return out


def value(p: Problem, w: Workload) -> int:
    """A replica's value in 1/7000 GPU, from the workload and the catalog only."""
    if w.gpus is not None:
        return w.gpus * UNITS_PER_GPU
    if w.gpu_fraction is not None:
        return round(w.gpu_fraction * 1000) * 7
    if w.mig is None:
        return 0
    allowed = [p.catalog.get(m) for m in w.gpu_models] if w.gpu_models else list(p.catalog.models)
    need = (w.gpu_memory_gib or 0) * 1024
    fractions = [pr.compute_slices * UNITS_PER_GPU // m.compute_slices for m in allowed for pr in m.profiles
                 if pr.memory_gib * 1024 >= need and (pr.name == w.mig if w.mig != "auto" else "+" not in pr.name)]
    return min(fractions, default=0)


def held(p: Problem, a: Assignment) -> int:
    """GPU capacity one assignment holds: its GPUs, its share, or its MIG instance's compute slices."""
    n = next(x for x in p.cluster.nodes if x.name == a.node)
    if a.mig is not None:
        model = p.catalog.get(str(n.gpu_model))
        prof = next(pr for pr in model.profiles if pr.name == a.mig.profile)
        return prof.compute_slices * UNITS_PER_GPU // model.compute_slices
    if a.fraction is not None:
        return round(a.fraction * 1000) * 7
    return len(a.gpus) * UNITS_PER_GPU


def key(p: Problem, assignments: list[Assignment] | tuple[Assignment, ...]) -> tuple[int, ...]:
    """Lexicographic objective: guaranteed replicas, then (value, replicas) per priority, highest first,
    then least GPU capacity held and fewest CPU-only replicas on GPU nodes (negated: larger is better)."""
    g = sum(1 for a in assignments if p.workload(a.workload).sla == "guaranteed")
    out = [g]
    for q in p.priorities:
        mine = [a for a in assignments if p.workload(a.workload).priority == q]
        out += [sum(value(p, p.workload(a.workload)) for a in mine), len(mine)]
    gpu_nodes = {n.name for n in p.cluster.nodes if n.gpus}
    cpu_pods = sum(1 for a in assignments if a.node in gpu_nodes and not a.gpus)
    return (*out, -sum(held(p, a) for a in assignments), -cpu_pods)


def _groups_ok(p: Problem, chosen: list[Assignment]) -> bool:
    nodes = {n.name: n for n in p.cluster.nodes}
    for w in p.workloads:
        mine = [a for a in chosen if a.workload == w.name]
        if w.is_gang and 0 < len(mine) < w.replicas:
            return False
        if w.kind == "training" and not w.mixed_models and len({nodes[a.node].gpu_model for a in mine}) > 1:
            return False
        lvl = w.topology.required
        if lvl and len({p.cluster.domain_of(nodes[a.node], lvl) for a in mine}) > 1:
            return False
    return True


def exhaustive_best(p: Problem, score: Callable[[Problem, list[Assignment]], tuple[int, ...]] = key) -> tuple[int, ...]:
    """Best ``score`` over all concrete placements (identical replicas enumerated in order).

    Running replicas stay where they run (no preemption or migration): their only candidate is their
    running assignment, and they are always placed.
    """
    running = {a.key: a for a in p.running}
    reps = [(w.name, r) for w in p.workloads for r in range(w.replicas)]
    cands = [[running[(wn, r)]] if (wn, r) in running else _candidates(p, wn, r) for wn, r in reps]
    best: list[tuple[int, ...] | None] = [None]

    def dfs(k: int, chosen: list[Assignment], last: dict[str, int]) -> None:
        if k == len(reps):
            if _groups_ok(p, chosen):
                got = score(p, chosen)
                best[0] = got if best[0] is None else max(best[0], got)
            return
        wn = reps[k][0]
        if reps[k] in running:  # fixed, but checked with what was chosen before it
            trial = [*chosen, running[reps[k]]]
            if not check_assignments(p, trial):
                dfs(k + 1, trial, last)
            return
        lo = last.get(wn, 0)  # identical replicas: candidate indices non-decreasing; -1 once one is unplaced
        dfs(k + 1, chosen, {**last, wn: -1})
        if lo < 0:
            return
        for j in range(lo, len(cands[k])):
            trial = [*chosen, cands[k][j]]
            if not check_assignments(p, trial):
                dfs(k + 1, trial, {**last, wn: j})

    dfs(0, [], {})
    assert best[0] is not None, "the running replicas alone break a group rule"
    return best[0]


def random_tiny(seed: int) -> Problem:
    """A random tiny instance: 2-3 small nodes, 2-3 workloads, at most 5 replicas in all."""
    rnd = random.Random(seed)
    nodes = []
    for i in range(rnd.choice([2, 3])):
        if rnd.random() < 0.5:
            nodes.append(node(f"a{i}", "A30-24GB", gpus=rnd.choice([1, 2]), cpu=rnd.choice([6, 12]), mem=64))
        else:
            nodes.append(
                node(f"h{i}", "H100-SXM5-80GB", gpus=rnd.choice([1, 2]), cpu=rnd.choice([6, 12]), mem=64)
            )
    if rnd.random() < 0.3:  # a CPU-only node: CPU pods belong there (the capacity tie-break)
        nodes.append(node("c", None, cpu=rnd.choice([6, 12]), mem=64))
    ws: list[dict[str, Any]] = []
    left = 5
    for j in range(rnd.choice([2, 3])):
        if left <= 0:
            break
        kind = rnd.choice(["whole", "mig", "frac", "cpu"])
        reps = rnd.randint(1, min(3, left))
        left -= reps
        w: dict[str, Any] = {
            "name": f"w{j}",
            "replicas": reps,
            "priority": rnd.choice([1, 2, 3]),
            "cpu": rnd.choice([1, 2, 4]),
            "tenant": rnd.choice(["x", "y"]),
        }
        if kind == "whole":
            w["gpus"] = rnd.choice([1, 1, 2])
            if reps > 1 and rnd.random() < 0.5:
                w["kind"] = "training"
                if rnd.random() < 0.5:
                    w["topology"] = {"required": rnd.choice(["rack", "node"])}
        elif kind == "mig":
            w["mig"] = rnd.choice(["auto", "1g.6gb", "3g.40gb", "2g.20gb"])
            if w["mig"] == "auto":
                w["gpu_memory_gib"] = rnd.choice([5, 10, 18])
            elif w["mig"] == "1g.6gb":
                w["gpu_models"] = ["A30-24GB"]
            else:
                w["gpu_models"] = ["H100-SXM5-80GB"]
            w["isolation"] = rnd.choice(["none", "none", "tenant"])
        elif kind == "frac":
            w["gpu_fraction"] = rnd.choice([0.3, 0.5, 0.7])
            w["isolation"] = rnd.choice(["none", "tenant"])
            if rnd.random() < 0.5:
                w["gpu_memory_gib"] = rnd.choice([8, 16])
        else:
            w["cpu"] = rnd.choice([3, 5])
            w["isolation"] = rnd.choice(["none", "node"])
        if rnd.random() < 0.2:
            w["sla"] = "guaranteed"
        ws.append(w)
    power = rnd.choice([None, None, 0.9])
    return scenario(nodes, ws, racks=2, power_kw=power)


@pytest.mark.parametrize("seed", range(24))
def test_cpsat_matches_exhaustive_search(seed: int) -> None:
    """CP-SAT proves the same lexicographic optimum the exhaustive search finds, capacity held included."""
    p = random_tiny(seed)
    plan: Plan = solve(p, "cpsat", ONE_WORKER)
    assert key(p, plan.assignments) == exhaustive_best(p)
    if plan.status != "infeasible":
        assert plan.status == "optimal" and plan.gap == 0


@pytest.mark.parametrize("seed", range(12))
def test_every_strategys_bound_covers_the_exhaustive_optimum(seed: int) -> None:
    """Each strategy's bound per priority is at least the lexicographic optimum's placed demand there."""
    import capplan.placement.strategies  # noqa: F401  (registers the built-in strategies)
    from capplan.placement import STRATEGIES, PlanOptions

    p = random_tiny(seed)
    best = exhaustive_best(p)
    opt_gpus = [best[1 + 2 * k] / UNITS_PER_GPU for k in range(len(p.priorities))]
    for name in sorted(STRATEGIES):
        plan = solve(p, name, PlanOptions(time_limit=5, seed=0, workers=1))
        assert len(plan.bound) == len(opt_gpus)
        for b, o in zip(plan.bound, opt_gpus, strict=True):
            assert b >= o - 1e-6, (name, plan.bound, opt_gpus)
