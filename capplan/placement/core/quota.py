"""ClusterQueue quotas in the occupancy state: usage per (queue, flavor, resource) and cohort pools.

The planners' copy of the quota rule (:mod:`capplan.model.quota` states it; the validator has its
own in :mod:`capplan.model.validate_quota`). :class:`QuotaBook` lives on a
:class:`~capplan.placement.core.state.ClusterState`: every applied replica charges its queue's entries,
and :meth:`QuotaBook.room` says whether one more replica of a workload fits on a node. Which entry a
replica charges depends on the node (the first flavor of its queue, per resource, that holds it);
nodes no flavor of the queue covers are not eligible at all (:func:`covered`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from capplan.model.problem import Demand, Problem, Workload
from capplan.model.quota import MIG_PREFIX
from capplan.model.units import MIB_PER_GIB

#: Charges of one replica on one node: (entry index, amount) pairs.
Charges = tuple[tuple[int, int], ...]


def resources_of(p: Problem, w: Workload, d: Demand | None, node: int) -> dict[str, int]:
    """What one replica of ``w`` with demand ``d`` asks of node ``node``, by Kubernetes resource name."""
    out: dict[str, int] = {}
    if w.cpu_milli:
        out["cpu"] = w.cpu_milli
    if w.memory_mib:
        out["memory"] = w.memory_mib
    n = p.cluster.nodes[node]
    if d is None or d.kind == "none" or n.gpu_model is None:
        return out
    vendor = p.catalog.get(n.gpu_model).vendor
    if d.kind == "mig" and d.profile is not None and vendor == "nvidia" and n.mig_strategy == "mixed":
        out[MIG_PREFIX + d.profile.name] = 1
    else:
        out[f"{vendor}.com/gpu"] = d.gpus if d.kind == "whole" else 1
    return out


class QuotaBook:
    """Quota usage while a plan or schedule is built (see the module docstring)."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.queue_id = {q.name: k for k, q in enumerate(p.queues)}
        members = {f.name: (None if f.nodes is None else {p.cluster.node_index[x] for x in f.nodes})
                   for f in p.flavors}
        self.entries: list[tuple[str, str, str]] = []
        cap, kept, lend, group = [], [], [], []
        groups: dict[tuple[str, str, str], int] = {}
        # per queue, per resource: the entries in flavor order with their node sets
        self.rows: list[dict[str, list[tuple[int, set[int] | None]]]] = []
        for q in p.queues:
            rows: dict[str, list[tuple[int, set[int] | None]]] = {}
            for e in q.quotas:
                k = len(self.entries)
                self.entries.append((q.name, e.flavor, e.resource))
                own = q.limit(e)
                cap.append(own if own is not None else 1 << 60)
                kept.append(e.nominal_int - e.lendable)
                lend.append(e.lendable)
                cohort_key = (str(q.cohort), e.flavor, e.resource)
                group.append(-1 if q.cohort is None else groups.setdefault(cohort_key, len(groups)))
                rows.setdefault(e.resource, []).append((k, members[e.flavor]))
            self.rows.append(rows)
        # plain lists: read one element at a time on hot paths, where numpy scalars cost more
        self.cap: list[int] = cap
        self.kept: list[int] = kept
        self.group: list[int] = group
        self.pool: list[int] = [0] * len(groups)
        for k, g in enumerate(group):
            if g >= 0:
                self.pool[g] += lend[k]
        self.usage: list[int] = [0] * len(self.entries)
        self.borrowed: list[int] = [0] * len(groups)
        self._charges: dict[tuple[object, ...], Charges | None] = {}  # by what decides them: queue, asks, node
        self._fits: dict[tuple[Charges, int], bool] = {}  # room per (charges, count) until the usage changes
        self.cohorts = {v: k[0] for k, v in groups.items()}

    def charges(self, w: Workload, d: Demand | None, i: int) -> Charges | None:
        """The entries one replica of ``w`` on node ``i`` charges (empty: no queue), or None: not covered."""
        if w.queue is None:
            return ()
        key = (w.queue, w.cpu_milli, w.memory_mib, d.kind if d else None, d.gpus if d else 0,
               d.profile.name if d is not None and d.profile is not None else None, i)
        if key in self._charges:
            return self._charges[key]
        rows = self.rows[self.queue_id[w.queue]]
        out: list[tuple[int, int]] = []
        res: Charges | None = None
        for name, amt in resources_of(self.p, w, d, i).items():
            k = next((k for k, nodes in rows.get(name, ()) if nodes is None or i in nodes), None)
            if k is None:
                break
            out.append((k, amt))
        else:
            res = tuple(out)
        self._charges[key] = res
        return res

    def _extra(self, k: int, add: int) -> int:
        """How much more of the cohort pool entry ``k`` draws with ``add`` more usage."""
        u, kept = self.usage[k], self.kept[k]
        return max(0, u + add - kept) - max(0, u - kept)

    def room(self, w: Workload, d: Demand | None, i: int, count: int = 1) -> bool:
        """Whether ``count`` more replicas of ``w`` on node ``i`` stay within every quota."""
        ch = self.charges(w, d, i)
        if ch is None:
            return False
        key = (ch, count)
        hit = self._fits.get(key)
        if hit is None:
            hit = self._fits[key] = self._room(ch, count)
        return hit

    def _room(self, ch: Charges, count: int) -> bool:
        usage, cap, group = self.usage, self.cap, self.group
        for k, amt in ch:
            add = amt * count
            if usage[k] + add > cap[k]:
                return False
            g = group[k]
            if g >= 0 and self.borrowed[g] + self._extra(k, add) > self.pool[g]:
                return False
        return True

    def apply(self, w: Workload, d: Demand | None, i: int, count: int) -> None:
        """Charge (``count`` > 0) or release (< 0) ``count`` replicas of ``w`` on node ``i``."""
        ch = self.charges(w, d, i)
        if not ch:
            return
        self._fits.clear()
        for k, amt in ch:
            g = self.group[k]
            if g >= 0:
                self.borrowed[g] += self._extra(k, amt * count)
            self.usage[k] += amt * count

    def mask(self, w: Workload, idx: np.ndarray, demand_of: Sequence[Demand | None], count: int = 1) -> np.ndarray:
        """Mask over ``idx`` (with each node's demand): ``count`` more replicas of ``w`` fit the quotas."""
        if w.queue is None:
            return np.ones(idx.size, dtype=bool)
        return np.array([self.room(w, d, int(i), count) for i, d in zip(idx.tolist(), demand_of, strict=True)],
                        dtype=bool)

    def blocking(self, w: Workload, d_of: dict[int, Demand | None], nodes: Sequence[int], count: int = 1) -> str:
        """A reason naming the quota that keeps ``count`` replicas of ``w`` off every node of ``nodes`` (``""``:
        none). Of the quotas that block, the one of the queue's first flavor is named (the first Kueue tries)."""
        if w.queue is None:
            return ""
        best: tuple[int, int, int] | None = None  # (room, entry, amount)
        seen: set[tuple[int, int]] = set()
        tried: set[Charges] = set()
        for i in nodes:
            ch = self.charges(w, d_of.get(i), i)
            if ch is None or ch in tried:
                continue
            tried.add(ch)
            if self.room(w, d_of.get(i), i, count):
                return ""
            for k, one in ch:
                amt = one * count
                if (k, amt) in seen:
                    continue
                seen.add((k, amt))
                g = int(self.group[k])
                own_left = int(self.cap[k]) - int(self.usage[k])
                pool_left = int(self.pool[g]) - int(self.borrowed[g]) + max(0, int(self.kept[k]) - int(self.usage[k])) \
                    if g >= 0 else 1 << 60
                left = min(own_left, pool_left)
                if left < amt and (best is None or k < best[1]):
                    best = (left, k, amt)
        if best is None:
            return ""
        _, k, amt = best
        q, flavor, res = self.entries[k]
        use, cap, g = int(self.usage[k]), int(self.cap[k]), int(self.group[k])
        if cap < 1 << 60 and use + amt > cap:
            return f"quota: {q} has {_amount(res, use, False)} of {_amount(res, cap)} ({flavor}) in use, needs " \
                   f"{_amount(res, amt)}"
        return (f"quota: {q} has {_amount(res, use)} ({flavor}) in use and its cohort {self.cohorts[g]} "
                f"{_amount(res, int(self.borrowed[g]), False)} of {_amount(res, int(self.pool[g]))} lendable in use, "
                f"needs {_amount(res, amt)}")


def _amount(res: str, v: int, unit: bool = True) -> str:
    """``v`` of resource ``res`` for a message (``unit=False``: the bare number)."""
    if res == "cpu":
        return f"{v / 1000:g}" + (" CPUs" if unit else "")
    if res == "memory":
        return f"{v / MIB_PER_GIB:g}" + (" GiB" if unit else "")
    if not unit:
        return str(v)
    if res.endswith(".com/gpu"):
        return f"{v} GPU" + ("s" if v != 1 else "")
    return f"{v} x {res.removeprefix(MIG_PREFIX)}"

