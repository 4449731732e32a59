"""LP guidance: send each replica to the kind of node the bound's relaxation put it on.

The relaxation of :mod:`capplan.bound` assigns GPU slots of each item type (replicas with the
same per-GPU demand, CPU and memory) to node types fractionally while respecting each node
type's total GPUs, CPU and memory. Rounding that assignment per item type gives every replica a
target node type; the heuristic tries the target first and falls back to the whole fleet, so
CPU-heavy replicas land on CPU-rich nodes instead of stranding GPUs elsewhere.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from capplan.bound import BinTypes, lp_assignment
from capplan.problem import Problem, Workload


def lp_targets(p: Problem, ws: list[Workload], time_limit: float = 10.0) -> dict[str, np.ndarray]:
    """Workload name -> node indices of its target node type (workloads the LP drops get none).

    Shares are rounded per item type by largest remainder over that item's workloads, in input
    order, so the result is deterministic.
    """
    types = BinTypes.of(p)
    share = lp_assignment(p, ws, time_limit)
    by_item: dict[tuple[tuple[int, float], ...], list[Workload]] = defaultdict(list)
    for w in ws:
        sh = share.get(w.name)
        if sh:
            by_item[tuple(sorted(sh.items()))].append(w)
    nodes = [np.array(x, dtype=np.int64) for x in types.nodes]
    out: dict[str, np.ndarray] = {}
    for key, group in by_item.items():
        total = sum(w.replicas for w in group)
        quotas = [(b, f * total) for b, f in key]
        counts = {b: int(q) for b, q in quotas}
        rest = total - sum(counts.values())
        used = sum(f for _, f in key)
        if used > 1 - 1e-6:  # the LP places all of them: hand out the remainders
            for b, q in sorted(quotas, key=lambda x: (x[1] - int(x[1])), reverse=True)[:rest]:
                counts[b] += 1
        it = iter(group)
        for b, c in sorted(counts.items()):
            left = c
            while left > 0:
                w = next(it, None)
                if w is None:
                    break
                out[w.name] = nodes[b]
                left -= w.replicas
    return out
