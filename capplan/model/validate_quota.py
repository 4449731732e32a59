"""The validator's quota rule: ClusterQueue quotas per flavor and resource, and cohort lending, at every instant.

Part of the independent validator (see :mod:`capplan.model.quota` for the rule in words): its own
usage bookkeeping from the assignments, no planner code. A plan is one instant; a schedule is swept
in time order (ends before starts at the same second) and checked wherever a replica not in the
running state starts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from capplan.model.plan import Assignment
from capplan.model.problem import Node, Problem, Workload
from capplan.model.quota import MIG_PREFIX, ClusterQueue, QuotaEntry
from capplan.model.units import cores_to_milli, gib_to_mib

#: One replica in time: (start, end, assignment, fresh: not in the running state).
Span = tuple[int, int, Assignment, bool]


def replica_usage(p: Problem, w: Workload, a: Assignment, node: Node) -> dict[str, int]:
    """What one replica requests, by Kubernetes resource name (see :data:`capplan.model.quota.BASE_RESOURCES`)."""
    out: dict[str, int] = {}
    if w.cpu > 0:
        out["cpu"] = cores_to_milli(w.cpu)
    if w.memory_gib > 0:
        out["memory"] = gib_to_mib(w.memory_gib)
    if not a.gpus or node.gpu_model is None:
        return out
    vendor = p.catalog.get(node.gpu_model).vendor
    gpu = f"{vendor}.com/gpu"
    if a.mig is not None and vendor == "nvidia" and node.mig_strategy == "mixed":
        out[MIG_PREFIX + a.mig.profile] = 1
    elif a.mig is not None or a.fraction is not None:
        out[gpu] = 1
    else:
        out[gpu] = len(a.gpus)
    return out


class _Charges:
    """Which quota entry each (queue, resource, node) draws on."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.queues = {q.name: q for q in p.queues}
        self.flavor_nodes = {f.name: (None if f.nodes is None else set(f.nodes)) for f in p.flavors}
        self.nodes = {n.name: n for n in p.cluster.nodes}

    def entry(self, q: ClusterQueue, resource: str, node: str) -> QuotaEntry | None:
        for e in q.quotas:
            if e.resource == resource:
                members = self.flavor_nodes.get(e.flavor)
                if members is None or node in members:
                    return e
        return None

    def of(self, a: Assignment) -> tuple[list[tuple[tuple[str, str, str], int]], str | None]:
        """The (queue, flavor, resource) keys ``a`` charges, with amounts; or the reason it may not run there."""
        w = self.p.workload(a.workload)
        if w.queue is None or a.node not in self.nodes:
            return [], None
        q = self.queues[w.queue]
        out = []
        for res, amt in replica_usage(self.p, w, a, self.nodes[a.node]).items():
            e = self.entry(q, res, a.node)
            if e is None:
                return [], (f"{a.workload}[{a.replica}] on {a.node}: ClusterQueue {q.name} has no quota for "
                            f"{res} in a flavor holding that node")
            out.append(((q.name, e.flavor, res), amt))
        return out, None


def _limits(p: Problem) -> tuple[dict[tuple[str, str, str], int | None], dict[tuple[str, str, str], int],
                                 dict[tuple[str, str, str], int]]:
    """Per key: the queue's own limit (None: none), its guaranteed part (kept from the cohort) and lendable part."""
    own: dict[tuple[str, str, str], int | None] = {}
    kept: dict[tuple[str, str, str], int] = {}
    lend: dict[tuple[str, str, str], int] = {}
    for q in p.queues:
        for e in q.quotas:
            key = (q.name, e.flavor, e.resource)
            own[key] = q.limit(e)
            kept[key] = e.nominal_int - e.lendable
            lend[key] = e.lendable
    return own, kept, lend


def _unit(res: str, v: int) -> str:
    if res == "cpu":
        return f"{v / 1000:g} cores"
    if res == "memory":
        return f"{v / 1024:g} GiB"
    return f"{v} {res}"


def check_quota_spans(p: Problem, spans: Iterable[Span], label: str = "at {t} s: ") -> list[str]:
    """Check the quota rule on replicas running over time; one line per violation (empty when valid).

    ``label`` prefixes each line (``{t}`` is the instant); a plan passes every replica as ``(0, 1, a, fresh)``.
    """
    if not p.queues:
        return []
    charges = _Charges(p)
    own, kept, lend = _limits(p)
    cohort_of = {q.name: q.cohort for q in p.queues}
    members: dict[tuple[str, str, str], list[tuple[str, str, str]]] = defaultdict(list)
    for key in own:
        c = cohort_of[key[0]]
        if c is not None:
            members[(c, key[1], key[2])].append(key)
    v: list[str] = []
    events: dict[int, list[tuple[int, list[tuple[tuple[str, str, str], int]], bool]]] = defaultdict(list)
    for start, end, a, fresh in spans:
        keys, bad = charges.of(a)
        if bad is not None:
            if fresh:
                v.append(label.format(t=start) + bad)
            continue
        if keys:
            events[start].append((1, keys, fresh))
            events[end].append((-1, keys, False))
    usage: dict[tuple[str, str, str], int] = defaultdict(int)
    for t in sorted(events):
        touched: set[tuple[str, str, str]] = set()
        for sign, keys, fresh in sorted(events[t], key=lambda e: e[0]):  # ends first
            for key, amt in keys:
                usage[key] += sign * amt
                if fresh:
                    touched.add(key)
        for key in sorted(touched):
            v.extend(label.format(t=t) + m for m in _at(key, usage, own, kept, lend, cohort_of, members))
    return list(dict.fromkeys(v))


def _at(key: tuple[str, str, str], usage: dict[tuple[str, str, str], int], own: dict[tuple[str, str, str], int | None],
        kept: dict[tuple[str, str, str], int], lend: dict[tuple[str, str, str], int],
        cohort_of: dict[str, str | None], members: dict[tuple[str, str, str], list[tuple[str, str, str]]]) -> list[str]:
    q, flavor, res = key
    use, cap = usage[key], own[key]
    out = []
    if cap is not None and use > cap:
        out.append(f"ClusterQueue {q} uses {_unit(res, use)} of flavor {flavor}, over its quota of {_unit(res, cap)}")
    cohort = cohort_of[q]
    if cohort is not None:
        group = members[(cohort, flavor, res)]
        borrowed = sum(max(0, usage[k] - kept[k]) for k in group)
        pool = sum(lend[k] for k in group)
        if borrowed > pool:
            out.append(f"cohort {cohort} uses {_unit(res, borrowed)} of flavor {flavor} from its shared pool, over "
                       f"the {_unit(res, pool)} its members lend")
    return out


def check_plan_quotas(p: Problem, assignments: Iterable[Assignment]) -> list[str]:
    """The quota rule on a plan (one instant); the running state's replicas count but are not themselves faulted."""
    running = {a.key: a for a in p.running}
    return check_quota_spans(p, ((0, 1, a, running.get(a.key) != a) for a in assignments), label="")
