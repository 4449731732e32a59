"""The independent validator's goodput checks: one row per placed gang with ``checkpoint``, its numbers,
and its spare nodes (existing, distinct, of the gang's GPU model and size, inside the domain of its
``topology.required`` level, and empty).

Written without planner code; the numbers are recomputed from the contract's formula
(:mod:`capplan.model.goodput`, the model's one home, not planner code).
"""

from __future__ import annotations

import math
from collections import defaultdict

from capplan.model.goodput import Interruptible, auto_spares, evaluate
from capplan.model.plan import Assignment, GoodputRow, Plan
from capplan.model.problem import Problem, Workload

_REL = 1e-6


def check_goodput(p: Problem, plan: Plan, placed: dict[tuple[str, int], Assignment]) -> list[str]:
    """Violations of the goodput rows of ``plan`` (empty when they are right)."""
    v: list[str] = []
    if not plan.goodput and (p.interruptions is None or all(w.checkpoint is None for w in p.workloads)):
        return v  # no row, and none is due: nothing to check
    works = {w.name: w for w in p.workloads}
    mine: dict[str, list[Assignment]] = defaultdict(list)
    for a in placed.values():
        mine[a.workload].append(a)
    rows: dict[str, GoodputRow] = {}
    for r in plan.goodput:
        if r.workload in rows:
            v.append(f"goodput: two rows for {r.workload}")
        rows[r.workload] = r
    for w in p.workloads:
        whole = w.checkpoint is not None and p.interruptions is not None and len(mine[w.name]) == w.replicas
        if whole and w.name not in rows:
            v.append(f"goodput: no row for the placed gang {w.name}, which has checkpoint")
    used = {a.node for a in placed.values()}
    spare_of: dict[str, str] = {}
    for name, r in rows.items():
        found = works.get(name)
        if found is None:
            v.append(f"goodput: row for unknown workload {name}")
            continue
        w = found
        if w.checkpoint is None or p.interruptions is None or len(mine[name]) != w.replicas:
            v.append(f"goodput: row for {name}, which is not a placed gang with checkpoint")
            continue
        v.extend(_spares(p, w, r, mine[name], used, spare_of))
        v.extend(_numbers(p, w, r, mine[name]))
    return v


def _spares(p: Problem, w: Workload, r: GoodputRow, mine: list[Assignment], used: set[str],
            spare_of: dict[str, str]) -> list[str]:
    v: list[str] = []
    nodes = {n.name: n for n in p.cluster.nodes}
    gang = {a.node for a in mine}
    per_node: dict[str, int] = defaultdict(int)
    for a in mine:
        per_node[a.node] += len(a.gpus)
    models = {nodes[n].gpu_model for n in gang if n in nodes}
    level = w.topology.required
    if r.spares != len(r.spare_nodes):
        v.append(f"goodput {w.name}: spares {r.spares} but {len(r.spare_nodes)} spare nodes listed")
    for s in r.spare_nodes:
        node = nodes.get(s)
        if node is None:
            v.append(f"goodput {w.name}: unknown spare node {s!r}")
            continue
        if s in spare_of:
            v.append(f"node {s} is a spare of both {spare_of[s]} and {w.name}")
        spare_of[s] = w.name
        if s in used:
            v.append(f"spare node {s} of {w.name} holds work; spare GPUs stay empty")
        if node.gpu_model not in models or node.gpus < max(per_node.values(), default=0):
            v.append(f"spare node {s} of {w.name} has {node.gpus} x {node.gpu_model}, not a node of the gang's "
                     f"model {sorted(m or '' for m in models)} with {max(per_node.values(), default=0)} GPUs")
        if level is not None:
            idx = p.cluster.levels.index(level)
            want = {nodes[n].path[idx] if idx < len(nodes[n].path) else n for n in gang}
            here = node.path[idx] if idx < len(node.path) else s
            if here not in want:
                v.append(f"spare node {s} of {w.name} is in {level} {here}, outside the gang's {sorted(want)}")
    return v


def _numbers(p: Problem, w: Workload, r: GoodputRow, mine: list[Assignment]) -> list[str]:
    it = p.interruptions
    assert it is not None and w.checkpoint is not None
    nodes = {n.name: n for n in p.cluster.nodes}
    gang = {a.node for a in mine}
    gpus = sum(len(a.gpus) for a in mine)
    rate = max((it.models.get(nodes[n].gpu_model or "", it.gpu_failure_rate) for n in gang),
               default=it.gpu_failure_rate)
    g = Interruptible(gpus=gpus, nodes=len(gang), rate_per_gpu_hour=rate, checkpoint=w.checkpoint,
                      node_repair=it.node_repair, restart=it.restart, restart_without_spare=it.restart_without_spare,
                      interval=None if w.checkpoint_interval is None else float(w.checkpoint_interval))
    v: list[str] = []
    if (r.nodes, r.gpus) != (len(gang), gpus):
        v.append(f"goodput {w.name}: nodes/gpus {(r.nodes, r.gpus)}, the plan has {(len(gang), gpus)}")
    wanted = auto_spares(g) if w.spares == "auto" else w.spares
    if r.spares > wanted:
        v.append(f"goodput {w.name}: {r.spares} spares held, it asks for {wanted}")
    res = evaluate(g, r.spares)
    for field, claimed, truth in (("failure_rate_per_hour", r.failure_rate_per_hour, res.failures_per_hour),
                                  ("checkpoint_interval_s", r.checkpoint_interval_s, res.interval_s),
                                  ("goodput", r.goodput, res.goodput),
                                  ("goodput_per_provisioned_gpu", r.goodput_per_provisioned_gpu,
                                   res.per_provisioned_gpu),
                                  ("lost_gpu_hours_per_day", r.lost_gpu_hours_per_day, res.lost_gpu_hours_per_day)):
        if not math.isclose(claimed, truth, rel_tol=_REL, abs_tol=1e-9):
            v.append(f"goodput {w.name}: {field} {claimed} differs from the recomputed {truth}")
    return v
