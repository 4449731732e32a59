"""The quota family of the placement model: ClusterQueue quotas per flavor and resource, cohort pools.

Usage per quota entry (queue, flavor, resource) is linear in the per-node replica counts (each replica
charges the entry its node's flavor gives it, :class:`~capplan.placement.core.quota.QuotaBook`). Where new
replicas may charge an entry, its usage stays within the queue's limit, and inside a cohort each entry's
draw on the pool (``max(0, usage - kept)``, an auxiliary variable) sums to at most what the members lend.
A running state that already exceeds a limit on its own keeps new replicas off that entry (the validator
faults only what starts).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from capplan.placement.core.quota import QuotaBook
from capplan.placement.cpsat.model import PlacementModel

_BIG = 1 << 60


def add_quota(pm: PlacementModel) -> None:
    """Quota per ClusterQueue, flavor and resource, and cohort borrowing, at the plan's instant."""
    p = pm.p
    if not p.queues:
        return
    book = QuotaBook(p)
    nodes = p.cluster.nodes
    new: dict[int, list[Any]] = defaultdict(list)
    kept: dict[int, list[Any]] = defaultdict(list)
    fixed: dict[int, int] = defaultdict(int)  # usage of the running state if all of it stays
    for (wn, i), v in pm.c.items():
        w = p.workload(wn)
        ch = book.charges(w, p.demand_on(w, nodes[i]), i)
        if ch is None:
            pm.m.add(v == 0)
            continue
        for k, amt in ch:
            new[k].append(amt * v)
    for ni in pm.ix.nodes:
        for r in ni.runs:
            for k, amt in book.charges(r.w, r.demand, ni.index) or ():
                kept[k].append(amt * pm.run_keep(r))
                fixed[k] += amt
    usage = {k: sum(new[k], 0) + sum(kept.get(k, []), 0) for k in new}
    for k, use in usage.items():
        cap = int(book.cap[k])
        if cap >= _BIG:
            continue
        if fixed[k] > cap:
            pm.m.add(sum(new[k], 0) == 0)
        else:
            pm.m.add(use <= cap)
    groups: dict[int, list[int]] = defaultdict(list)
    for k in range(len(book.entries)):
        if int(book.group[k]) >= 0:
            groups[int(book.group[k])].append(k)
    for g, keys in groups.items():
        if not any(k in new for k in keys):
            continue
        pool = int(book.pool[g])
        if sum(max(0, fixed[k] - int(book.kept[k])) for k in keys) > pool:
            for k in keys:
                pm.m.add(sum(new[k], 0) == 0)
            continue
        draws = []
        for k in keys:
            total = sum(new.get(k, []), 0) + sum(kept.get(k, []), 0)
            b = pm.m.new_int_var(0, pool, f"borrow{k}")
            pm.m.add(b >= total - int(book.kept[k]))
            draws.append(b)
        pm.m.add(sum(draws, 0) <= pool)
