"""Assemble a :class:`~capplan.model.schedule.Schedule` from scheduled replicas: objective, bound, status.

Objective (strict priority order, highest first): per priority, the GPU demand x time of the
work that runs to completion by its deadline (by the horizon when there is none); then the
demand-weighted wait, sum of demand x (start - release), over all workloads; then (tie-breaks)
more replicas run, and the unweighted wait, sum of start - release over replicas in seconds (the
only level at which a CPU-only replica's start counts). Deadlines are hard, so every scheduled
replica's work counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from capplan.model.deadline import Deadline
from capplan.model.plan import Status
from capplan.model.problem import Problem, Workload
from capplan.model.schedule import Schedule, TimedAssignment, Unscheduled, WorkloadTiming
from capplan.model.timing import ceil_to
from capplan.model.units import MILLI, UNITS_PER_GPU
from capplan.model.validate_insertion import Insertion, InsertionIndex, insertions
from capplan.placement.core.fleet import Placement, kind_demands, node_kinds
from capplan.placement.schedule.timeline import Item

SECONDS_PER_HOUR = 3600


def gpu_hours(units_seconds: int) -> float:
    """Demand units x seconds to GPU-hours (6 decimals)."""
    return round(units_seconds / UNITS_PER_GPU / SECONDS_PER_HOUR, 6)


def work_units(items: Iterable[Item]) -> dict[int, int]:
    """Demand units x seconds of scheduled work per priority."""
    out: dict[int, int] = defaultdict(int)
    for it in items:
        out[it.w.priority] += it.d.units * (it.end - it.start)
    return out


def wait_units(items: Iterable[Item]) -> int:
    """Demand-weighted wait (units x seconds) of replicas that are not already running."""
    return sum(it.d.units * max(0, it.start - it.w.release) for it in items if not it.running)


def replica_wait_seconds(items: Iterable[Item]) -> int:
    """Unweighted wait (seconds, summed over replicas) of replicas that are not already running: the
    objective's last level, where a replica without GPU demand counts as much as any other."""
    return sum(max(0, it.start - it.w.release) for it in items if not it.running)


def max_units(p: Problem, w: Workload, kinds: list[list[int]] | None = None) -> int:
    """The largest per-replica demand ``w`` can have on any node of the cluster (-1 when none can host it)."""
    return max((d.units for d, _ in kind_demands(p, w, kinds)), default=-1)


def work_windows(p: Problem, horizon: int, step: int) -> list[tuple[int, int, int, int]]:
    """(priority, earliest start, latest end, most work in units x seconds) per replica that could run."""
    running = {a.key for a in p.running}
    ends = {(e.workload, e.replica): e.ends_in for e in p.ends_in}
    out: list[tuple[int, int, int, int]] = []
    kinds = node_kinds(p)
    for w in p.workloads:
        u = max_units(p, w, kinds)
        if u <= 0:
            continue
        start = ceil_to(w.release, step)
        limit = min(w.deadline if w.deadline is not None else horizon, horizon)
        for r in range(w.replicas):
            if (w.name, r) in running:
                end = min(ends.get((w.name, r), horizon), horizon)
                out.append((w.priority, 0, end, u * end))
            elif w.duration is None:
                if start < horizon:
                    out.append((w.priority, start, horizon, u * (horizon - start)))
            elif start + w.duration <= limit:
                out.append((w.priority, start, limit, u * w.duration))
    return out


def _most_volume(items: list[tuple[int, int, int, int]], rate: int, horizon: int) -> int:
    """Most work that fits: work released at or after ``a`` fits in ``rate * (horizon - a)``, and work
    due by ``b`` in ``rate * b`` (two families of energy constraints, each solved exactly, the smaller kept)."""
    tail = 0
    by_release: dict[int, int] = defaultdict(int)
    by_due: dict[int, int] = defaultdict(int)
    for _, a, b, v in items:
        by_release[a] += v
        by_due[b] += v
    for a in sorted(by_release, reverse=True):
        tail = min(tail + by_release[a], rate * (horizon - a))
    head = 0
    for b in sorted(by_due):
        head = min(head + by_due[b], rate * b)
    return min(tail, head)


def window_demand(p: Problem, horizon: int, step: int) -> dict[int, int]:
    """Per priority, the most work (units x seconds) its workloads could do inside their time windows."""
    demand: dict[int, int] = defaultdict(int)
    for q, _, _, v in work_windows(p, horizon, step):
        demand[q] += v
    return demand


def energy_bound(p: Problem, horizon: int, step: int, caps: Mapping[int, int] | None = None) -> dict[int, int]:
    """Per-priority upper bound on the work (units x seconds), lexicographically valid.

    The work of the priorities down to ``q`` is at most the most volume their replicas' time windows
    let the GPUs (every GPU at full rate) hold; given the higher priorities at their bounds, the
    rest is left for ``q``. Each level is also at most its demand and at most ``caps[q]`` (e.g. an
    exact model's stage bound, valid given the higher levels at their values).
    """
    windows = work_windows(p, horizon, step)
    rate = p.cluster.gpus_total * UNITS_PER_GPU
    out: dict[int, int] = {}
    higher = 0
    for q in p.priorities:
        mine = [x for x in windows if x[0] >= q]
        b = min(sum(x[3] for x in mine if x[0] == q), _most_volume(mine, rate, horizon) - higher)
        if caps is not None and q in caps:
            b = min(b, caps[q])
        out[q] = max(0, b)
        higher += out[q]
    return out


def lex_key(p: Problem, items: list[Item], step: int) -> tuple[int, ...]:
    """The objective as a tuple to maximise: guaranteed replicas on time, work per priority, minus the
    demand-weighted wait, then the tie-breaks: the replicas that run (as for a plan), minus the unweighted
    wait (:func:`replica_wait_seconds`)."""
    on_time = sum(1 for it in items if not it.running and it.w.sla == "guaranteed"
                  and it.start == ceil_to(it.w.release, step))
    work = work_units(items)
    return (on_time, *(work[q] for q in p.priorities), -wait_units(items), len(items), -replica_wait_seconds(items))


def lex_gap(obj: list[int], bound: list[int]) -> float:
    """Relative gap at the highest priority whose objective is below its bound."""
    for o, b in zip(obj, bound, strict=True):
        if b > o:
            return round((b - o) / b, 6) if b else 0.0
    return 0.0


#: replicas :func:`make_schedule`'s insertion pass adds at most (one per round)
INSERTION_ROUNDS = 50


def make_schedule(p: Problem, strategy: str, items: list[Item], unscheduled: list[Unscheduled], *,
                  horizon: int, step: int, reasons: Mapping[str, str] | None = None,
                  bound: Mapping[int, int] | None = None, proven_optimal: bool = False,
                  seconds: float = 0.0, seed: int = 0, extra_metrics: dict[str, object] | None = None,
                  deadline: Deadline | None = None) -> Schedule:
    """The schedule of ``items``: assignments, workload rows, objective, bound, gap and status.

    Before anything is claimed, the validator's insertion check runs
    (:func:`capplan.model.validate_insertion.insertions`): a replica left out that fits into the
    schedule as it is gets added (nothing else moves, so every level only gains). A schedule that
    needed such an addition was not optimal whatever its proof said, and a bound it met was wrong:
    it is reported ``feasible``, with the bound raised to what the additions reached
    (``metrics.inserted``: how many replicas were added). The check stops at ``deadline``; a schedule
    it did not finish is not claimed optimal unless proven (``metrics.insertion_check: cut``).
    """
    def assemble(items: list[Item], unscheduled: list[Unscheduled], proven: bool) -> Schedule:
        return _assemble(p, strategy, items, unscheduled, horizon=horizon, step=step, reasons=reasons, bound=bound,
                         proven_optimal=proven, seconds=seconds, seed=seed, extra_metrics=extra_metrics)

    s = assemble(items, unscheduled, proven_optimal)
    if not any(u.replicas for u in unscheduled):
        return s
    index = InsertionIndex(p, s.assignments)
    added: list[Insertion] = []
    cut = False
    for _ in range(INSERTION_ROUNDS):
        if deadline is not None and deadline.expired():
            cut = True
            break
        found = insertions(p, s, index=index)  # one at a time: two found against the same schedule may collide
        if not found:
            break
        added += found
        for f in found:
            a = f.assignment
            index.add(TimedAssignment(workload=a.workload, replica=a.replica, node=a.node, gpus=a.gpus, mig=a.mig,
                                      fraction=a.fraction, start_s=f.start_s, end_s=f.end_s))
    if not added and not cut:
        return s
    if added:
        s = assemble(items + [_item(p, f) for f in added], _without(unscheduled, added), False)
    status: Status = "feasible" if s.status == "optimal" else s.status  # an addition, or a claim not checked
    metrics = {**s.metrics, **({"inserted": len(added)} if added else {}),
               **({"insertion_check": "cut"} if cut else {})}
    return s.model_copy(update={"status": status, "metrics": metrics})


def _item(p: Problem, f: Insertion) -> Item:
    w = p.workload(f.workload)
    a = f.assignment
    i = p.cluster.node_index[a.node]
    d = p.demand_on(w, p.cluster.nodes[i])
    assert d is not None  # the check only tries nodes that can host the workload
    pl = Placement(node=i, gpus=tuple(a.gpus), slot=a.mig,
                   fraction_milli=round(a.fraction * MILLI) if a.fraction is not None else 0)
    return Item(w=w, replica=f.replica, d=d, pl=pl, start=f.start_s, end=f.end_s)


def _without(unscheduled: list[Unscheduled], found: list[Insertion]) -> list[Unscheduled]:
    gone: dict[str, set[int]] = defaultdict(set)
    for f in found:
        gone[f.workload].add(f.replica)
    out = []
    for u in unscheduled:
        if u.workload not in gone:
            out.append(u)
            continue
        left = tuple(r for r in u.replicas if r not in gone[u.workload])
        if left:
            out.append(u.model_copy(update={"replicas": left}))
    return out


def _assemble(p: Problem, strategy: str, items: list[Item], unscheduled: list[Unscheduled], *,
              horizon: int, step: int, reasons: Mapping[str, str] | None = None,
              bound: Mapping[int, int] | None = None, proven_optimal: bool = False,
              seconds: float = 0.0, seed: int = 0, extra_metrics: dict[str, object] | None = None) -> Schedule:
    got = work_units(items)
    obj = [got[q] for q in p.priorities]
    bnd = bound if bound is not None else energy_bound(p, horizon, step)
    bvec = [max(bnd.get(q, 0), o) for q, o in zip(p.priorities, obj, strict=True)]
    reasons = dict(reasons or {})
    by_w: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_w[it.w.name].append(it)
    rows: list[WorkloadTiming] = []
    late = False
    for w in p.workloads:
        mine = by_w.get(w.name, [])
        fresh = [it for it in mine if not it.running] or mine
        start = min((it.start for it in fresh), default=None)
        end = max((it.end for it in mine), default=None)
        limit = w.deadline if w.deadline is not None else horizon
        met = len(mine) == w.replicas and end is not None and end <= limit
        if w.sla == "guaranteed":
            on_time = len(mine) == w.replicas and all(it.start == ceil_to(w.release, step)
                                                      for it in mine if not it.running)
            late = late or not on_time
        rows.append(WorkloadTiming(name=w.name, start_s=start, end_s=end,
                                   wait_s=None if start is None else max(0, start - w.release),
                                   deadline_met=met, reason=reasons.get(w.name)))
    status: Status
    if late:
        status = "infeasible"
    elif proven_optimal or (obj == bvec and not unscheduled and wait_units(items) == 0
                            and replica_wait_seconds(items) == 0):
        # a bound met proves the work levels only; the waits and the replica count are proven by the
        # time model's stages (proven_optimal) or by being at their a-priori best (nothing waits, all run)
        status = "optimal"
    else:
        status = "feasible"
    order = p.workload_index
    assignments = tuple(
        TimedAssignment(workload=it.w.name, replica=it.replica, node=p.cluster.nodes[it.pl.node].name,
                        gpus=it.pl.gpus, mig=it.pl.slot,
                        fraction=it.pl.fraction_milli / MILLI if it.pl.fraction_milli else None,
                        start_s=it.start, end_s=it.end)
        for it in sorted(items, key=lambda it: (order[it.w.name], it.replica)))
    busy = sum(it.d.units * (it.end - it.start) for it in items)
    cap = p.cluster.gpus_total * UNITS_PER_GPU * horizon
    metrics: dict[str, object] = {
        "replicas_scheduled": len(items),
        "replicas_total": sum(w.replicas for w in p.workloads),
        "gpu_time_allocation_pct": round(100 * busy / cap, 2) if cap else 0.0,
    }
    if extra_metrics:
        metrics.update(extra_metrics)
    return Schedule(status=status, strategy=strategy, objective=tuple(gpu_hours(x) for x in obj),
                    bound=tuple(gpu_hours(x) for x in bvec), priorities=p.priorities, gap=lex_gap(obj, bvec),
                    wait_gpu_h=gpu_hours(wait_units(items)), wait_replica_s=replica_wait_seconds(items),
                    horizon_s=horizon, step_s=step,
                    solve_seconds=round(seconds, 4), seed=seed, assignments=assignments,
                    workloads=tuple(rows),
                    unscheduled=tuple(sorted(unscheduled, key=lambda u: order[u.workload])), metrics=metrics)
