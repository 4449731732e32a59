"""The replay protocol: the Alibaba trace in time, with a queue (``capplan bench alibaba --protocol replay``).

Pods arrive at ``creation_time`` and run for their observed run time ``deletion_time -
scheduled_time`` once started; when nothing fits they wait in a queue, and they leave when their
run time has passed after their start *in the simulation*. Which pods take part
(:func:`load_replay`):

* a pod without ``scheduled_time`` (phase Pending: never scheduled in the trace) has no run time
  and is left out (counted in ``excluded_never_scheduled``);
* a pod without ``deletion_time``, or deleted at the last timestamp of the file, was still
  running when the trace ends: its run time is ``trace end - scheduled_time`` (a lower bound;
  counted in ``censored``);
* an empty ``creation_time`` reads as 0 (the loader's rule: the pod arrives at the trace start); a
  run time of 0 counts as 1 s;
* a pod that fits no node of the (possibly reduced) fleet even when it is empty is left out
  (``excluded_never_fits``): it would wait forever under every policy;
* a file without ``scheduled_time`` on any pod (e.g. ``multigpu*``) cannot be replayed (InputError).

The simulator (:class:`Replay`) is event-driven over numpy occupancy arrays (the online
simulator's :class:`~capplan.bench.sim.SimState`): at each instant where something arrives, ends
or a policy asked to be woken, departures are applied first, then arrivals join the queue, then
the policy starts what it decides. Policies (:data:`REPLAY_POLICIES`):

``fifo-bestfit``, ``fifo-fgd``
    Kubernetes-style: the queue in arrival order, each pod placed with the BestFit or FGD scorer of
    :mod:`capplan.bench.policies`. As in kube-scheduler, a pod that does not fit is set aside and
    the pods behind it are still tried (no head-of-line blocking); set-aside pods are retried, in
    arrival order, after a pod ends (kube-scheduler moves them back on cluster events).
``easy-backfill``
    Slurm-style EASY backfill with exact run times: pods start in queue order while they fit; the
    first that does not (the head) gets a reservation: the earliest time at which, releasing the
    running pods of a node in order of their known end times, it fits on that node (the earliest
    node, ties by the seed-shuffled node order). A later pod may start now only if it fits now and
    does not delay that reservation: it ends by the reservation time, or it runs on another node,
    or on the reserved node it also fits beside the head at the reservation time. Placement:
    BestFit.
``capplan-exact``, ``capplan-noisy``
    Every ``replan_every`` seconds (when pods wait and something changed since the last re-plan,
    or a planned start is overdue), :func:`capplan.placement.schedule.schedule` (``heuristic``) is
    called on the waiting queue (workloads with ``duration`` = the run time, release 0) against the
    running set (running replicas with ``ends_in``). Planned pods start at their planned time on
    their planned node and GPUs (retried at later events while that spot is still taken: only
    with noisy estimates). Between re-plans (and right after one, for pods the schedule left out), a
    pod without a planned start starts at once, with BestFit, if it fits into what is free now minus
    what the planned pods that start before its own (believed) end will take: planned pods starting
    after it ends find their room again, so the plan stays feasible. It is retried after each
    departure, in arrival order. ``capplan-exact`` knows the run times;
    ``capplan-noisy`` knows only ``estimate = run time x exp(sigma z)``, ``z`` standard normal from
    ``numpy.random.default_rng(seed)``, rounded to whole seconds (at least 1); a running pod past its
    estimate is expected to run as long again as it has run so far.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from capplan.bench.frag import TypicalPods
from capplan.bench.policies import BestFitPolicy, FGDPolicy, PolicyContext
from capplan.bench.sim import MILLI, BoolArr, Fleet, IntArr, Pod, PodTable, Policy, SimState, _choose, pod_view
from capplan.model.errors import InputError

if TYPE_CHECKING:
    from capplan.io.alibaba import TraceNode, TracePod
    from capplan.model.problem import Problem

REPLAY_POLICIES = ("fifo-bestfit", "fifo-fgd", "easy-backfill", "capplan-exact", "capplan-noisy")
DEFAULT_REPLAN_S = 600.0
DEFAULT_NOISE_SIGMA = 0.5
DEFAULT_REPLAN_LIMIT_S = 2.0
#: Pods waiting longer than this count in ``waiting_over_1h``.
LONG_WAIT_S = 3600
#: The schedule engine's grid may have at most this many steps (capplan.model.timing.ScheduleSpec).
MAX_STEPS = 10_000_000


def shape_of(pods: PodTable, i: int) -> str:
    """The demand shape of pod ``i``: ``cpu-only``, ``share`` (part of one GPU), ``whole-gpu`` or ``multi-gpu``."""
    num, milli = int(pods.num[i]), int(pods.milli[i])
    if num == 0:
        return "cpu-only"
    if milli < MILLI:
        return "share"
    return "whole-gpu" if num == 1 else "multi-gpu"


SHAPES = ("whole-gpu", "share", "multi-gpu", "cpu-only")


@dataclass(frozen=True)
class ReplayTrace:
    """The pods that take part in a replay and the fleet they run on.

    ``pods`` rows, ``trace_pods``, ``arrival`` and ``duration`` are aligned (included pods only,
    in file order); times are seconds from the trace start.
    """

    nodes: tuple[TraceNode, ...]
    fleet: Fleet
    trace_pods: tuple[TracePod, ...]
    pods: PodTable
    arrival: IntArr
    duration: IntArr
    trace_end: int
    counts: dict[str, int]


def fleet_subset(nodes: Sequence[TraceNode], fraction: float, seed: int) -> list[TraceNode]:
    """``round(fraction x N)`` nodes (at least one) drawn without replacement with ``seed``, in file order."""
    if not (0 < fraction <= 1) or not math.isfinite(fraction):
        raise InputError("--fleet-fraction", f"must be in (0, 1], got {fraction}")
    if fraction == 1:
        return list(nodes)
    k = max(1, round(fraction * len(nodes)))
    pick = np.sort(np.random.default_rng(seed).choice(len(nodes), size=k, replace=False))
    return [nodes[int(i)] for i in pick]


def load_replay(nodes: Sequence[TraceNode], pods: Sequence[TracePod], fleet_fraction: float = 1.0,
                seed: int = 0) -> ReplayTrace:
    """Select the pods that take part (see the module docstring) and their arrival and run times.

    Raises
    ------
    InputError
        When no pod has a ``scheduled_time`` (the file has no timestamps), or no pod remains.
    """
    chosen = fleet_subset(nodes, fleet_fraction, seed)
    fleet = Fleet.from_trace(chosen)
    if not any(p.scheduled_time is not None for p in pods):
        raise InputError("--pods", "the replay protocol needs the timestamp columns creation_time, deletion_time "
                                   "and scheduled_time; no pod of this file has a scheduled_time (the multigpu* "
                                   "files have none): use a file with timestamps, e.g. openb_pod_list_default.csv")
    times = [t for p in pods for t in (p.creation_time, p.deletion_time, p.scheduled_time) if t is not None]
    end = max(times)
    counts = {"pods_in_file": len(pods), "excluded_never_scheduled": 0, "excluded_never_fits": 0, "censored": 0}
    keep: list[TracePod] = []
    arrival: list[int] = []
    duration: list[int] = []
    for p in pods:
        if p.scheduled_time is None:
            counts["excluded_never_scheduled"] += 1
            continue
        gone = p.deletion_time
        if gone is None or gone >= end:
            counts["censored"] += 1
            gone = end
        keep.append(p)
        arrival.append(p.creation_time)
        duration.append(max(1, gone - p.scheduled_time))
    table = PodTable.from_trace(keep)
    empty = SimState.empty(fleet)
    masks: dict[int, BoolArr] = {}
    fits = [bool(empty.feasible(pod_view(table, fleet, i, masks)).any()) for i in range(len(keep))]
    counts["excluded_never_fits"] = fits.count(False)
    idx = [i for i, ok in enumerate(fits) if ok]
    if not idx:
        raise InputError("--pods", "no pod of the file can be replayed on this fleet (none was scheduled in the "
                                   "trace, or none fits a node); use more nodes (--fleet-fraction)")
    sel = [keep[i] for i in idx]
    counts["pods_replayed"] = len(sel)
    return ReplayTrace(nodes=tuple(chosen), fleet=fleet, trace_pods=tuple(sel), pods=PodTable.from_trace(sel),
                       arrival=np.array([arrival[i] for i in idx], dtype=np.int64),
                       duration=np.array([duration[i] for i in idx], dtype=np.int64), trace_end=end, counts=counts)


def _shape_key(pv: Pod) -> tuple[int, int, int, int, tuple[str, ...]]:
    return (pv.cpu, pv.mem, pv.num, pv.milli, pv.spec)


class Replay:
    """The event-driven simulation state shared by the policies: occupancy, queue, running pods, records."""

    def __init__(self, tr: ReplayTrace, seed: int, policy: Policy | None = None) -> None:
        self.tr = tr
        self.state = SimState.empty(tr.fleet)
        self.rank: IntArr = np.random.default_rng(seed).permutation(len(tr.fleet.cpu)).astype(np.int64)
        self.scorer = policy
        self.t = 0
        n = len(tr.arrival)
        self.start: IntArr = np.full(n, -1, dtype=np.int64)
        self.where: dict[int, tuple[int, tuple[int, ...]]] = {}
        self.ends: list[tuple[int, int]] = []  # heap of (end, pod)
        self.queue: dict[int, None] = {}  # waiting pods in arrival order
        self._masks: dict[int, BoolArr] = {}
        self._views: dict[int, Pod] = {}
        self.times: list[int] = []
        self.used: list[int] = []

    def view(self, i: int) -> Pod:
        """The :class:`Pod` of pod ``i`` (cached)."""
        pv = self._views.get(i)
        if pv is None:
            pv = self._views[i] = pod_view(self.tr.pods, self.tr.fleet, i, self._masks)
        return pv

    def begin(self, i: int, node: int, gpus: tuple[int, ...]) -> None:
        """Start pod ``i`` now on ``node`` and ``gpus`` (already checked to fit)."""
        pv = self.view(i)
        self.state.apply(pv, node, gpus)
        self._observe(node)
        self.start[i] = self.t
        self.where[i] = (node, gpus)
        del self.queue[i]
        heapq.heappush(self.ends, (self.t + int(self.tr.duration[i]), i))

    def _observe(self, node: int) -> None:
        observe = getattr(self.scorer, "observe", None)
        if observe is not None:
            observe(self.state, node)

    def finish_due(self) -> bool:
        """Apply every departure at or before now; True when one happened."""
        done = False
        while self.ends and self.ends[0][0] <= self.t:
            _, i = heapq.heappop(self.ends)
            node, gpus = self.where.pop(i)
            self.state.apply(self.view(i), node, gpus, sign=-1)
            self._observe(node)
            done = True
        return done

    def place_now(self, i: int, state: SimState | None = None) -> bool:
        """Place pod ``i`` now with the scorer on ``state`` (default: the real one); False if nothing fits."""
        st = state or self.state
        pv = self.view(i)
        ok = st.feasible(pv)
        if not ok.any():
            return False
        assert self.scorer is not None
        node = _choose(self.scorer.score(st, pv), ok, self.rank)
        pick = getattr(self.scorer, "gpus", None)
        gpus = pick(st, pv, node) if pick is not None else _fit_gpus(st.gpu_left[node], pv)
        self.begin(i, node, gpus)
        return True

    def fits_at(self, i: int, node: int, gpus: tuple[int, ...]) -> bool:
        """Whether pod ``i`` fits now on ``node`` with exactly ``gpus``."""
        pv = self.view(i)
        st = self.state
        if st.cpu_left[node] < pv.cpu or st.mem_left[node] < pv.mem:
            return False
        return all(st.gpu_left[node, g] >= pv.milli for g in gpus)


def _fit_gpus(left: IntArr, pv: Pod) -> tuple[int, ...]:
    """The tightest-fitting GPU for a share; the lowest-numbered free GPUs otherwise (``left``: one node)."""
    if not pv.num:
        return ()
    if pv.shares:
        return (int(np.where(left >= pv.milli, left, 10 * MILLI).argmin()),)
    return tuple(int(g) for g in np.flatnonzero(left >= pv.milli)[: pv.num])


def _fits_row(cpu: int, mem: int, left: IntArr, pv: Pod) -> bool:
    if cpu < pv.cpu or mem < pv.mem:
        return False
    if not pv.num:
        return True
    fits = left >= pv.milli
    return bool(fits.any()) if pv.shares else int(fits.sum()) >= pv.num


class ReplayPolicy:
    """Base class: ``dispatch`` starts pods at an event; ``wakeup`` asks for an extra event time."""

    def __init__(self, sim: Replay) -> None:
        self.sim = sim
        self.metrics: dict[str, Any] = {}

    def dispatch(self, departed: bool, arrived: list[int]) -> None:
        """Start what the policy decides now (``departed``: a pod ended; ``arrived``: new pods)."""
        raise NotImplementedError

    def wakeup(self) -> int | None:
        """The next time the policy needs an event (None: only arrivals and departures)."""
        return None


class Fifo(ReplayPolicy):
    """kube-scheduler-like FIFO: arrival order, no head-of-line blocking, retry after departures."""

    def dispatch(self, departed: bool, arrived: list[int]) -> None:
        """Try every waiting pod after a departure, else only the new arrivals, in arrival order."""
        sim = self.sim
        failed: set[tuple[int, int, int, int, tuple[str, ...]]] = set()
        for i in list(sim.queue) if departed else arrived:
            key = _shape_key(sim.view(i))
            if key in failed:  # the state only filled up since this shape failed
                continue
            if not sim.place_now(i):
                failed.add(key)


class EasyBackfill(ReplayPolicy):
    """EASY backfill: a reservation for the queue head; others start only if they do not delay it."""

    def __init__(self, sim: Replay) -> None:
        super().__init__(sim)
        self.head: int | None = None
        self.shadow = 0
        self.node = -1
        self.cpu = 0
        self.mem = 0
        self.gpu: IntArr = np.zeros(0, dtype=np.int64)
        self.metrics = {"backfilled": 0}

    def _reserve(self, h: int) -> None:
        """The head's reservation: earliest (time, node) at which it fits, releasing running pods by end time."""
        sim = self.sim
        pv = sim.view(h)
        st = sim.state
        by_node: dict[int, list[tuple[int, int]]] = {}
        for end, i in sim.ends:
            by_node.setdefault(sim.where[i][0], []).append((end, i))
        best: tuple[int, int, int] | None = None
        for node in (int(x) for x in np.flatnonzero(pv.allowed)):
            cpu, mem, left = int(st.cpu_left[node]), int(st.mem_left[node]), st.gpu_left[node].copy()
            at = None
            if _fits_row(cpu, mem, left, pv):
                at = sim.t
            else:
                for end, i in sorted(by_node.get(node, ())):
                    o = sim.view(i)
                    cpu += o.cpu
                    mem += o.mem
                    for g in sim.where[i][1]:
                        left[g] += o.milli
                    if _fits_row(cpu, mem, left, pv):
                        at = end
                        break
            if at is None:
                continue
            key = (at, int(sim.rank[node]), node)
            if best is None or key < best:
                best = key
                self.cpu, self.mem, self.gpu = cpu, mem, left
        assert best is not None, "the head fits the empty fleet (load_replay), so some node frees room"
        self.head, self.shadow, self.node = h, best[0], best[2]
        gpus = _fit_gpus(self.gpu, pv)  # the head's place at the reservation time
        self.cpu -= pv.cpu
        self.mem -= pv.mem
        for g in gpus:
            self.gpu[g] -= pv.milli

    def _backfill(self, i: int) -> bool:
        """Start ``i`` now if it fits and does not delay the head's reservation."""
        sim = self.sim
        pv = sim.view(i)
        st = sim.state
        ok = st.feasible(pv)
        r = self.node
        late = sim.t + int(sim.tr.duration[i]) > self.shadow
        if late and ok[r]:  # on the reserved node it must also fit beside the head at the reservation time
            ok[r] = _fits_row(min(int(st.cpu_left[r]), self.cpu), min(int(st.mem_left[r]), self.mem),
                              np.minimum(st.gpu_left[r], self.gpu), pv)
        if not ok.any():
            return False
        assert sim.scorer is not None
        node = _choose(sim.scorer.score(st, pv), ok, sim.rank)
        if node == r and late:
            gpus = _fit_gpus(np.minimum(st.gpu_left[r], self.gpu), pv)
            self.cpu -= pv.cpu
            self.mem -= pv.mem
            for g in gpus:
                self.gpu[g] -= pv.milli
        else:
            gpus = _fit_gpus(st.gpu_left[node], pv)
        sim.begin(i, node, gpus)
        self.metrics["backfilled"] += 1
        return True

    def dispatch(self, departed: bool, arrived: list[int]) -> None:
        """After a departure: start the queue in order while it fits, reserve for the head, backfill the rest.
        Otherwise only the arrivals are new: they start, become the head, or backfill."""
        sim = self.sim
        if departed or self.head is None or self.head not in sim.queue:
            self.head = None
            cands = list(sim.queue)
        else:
            cands = arrived
        failed: set[tuple[Any, ...]] = set()
        for i in cands:
            if self.head is None:
                if sim.place_now(i):
                    continue
                self._reserve(i)
                continue
            key = (*_shape_key(sim.view(i)), sim.t + int(sim.tr.duration[i]) > self.shadow)
            if key in failed:
                continue
            if not self._backfill(i):
                failed.add(key)


class Capplan(ReplayPolicy):
    """Re-plan the queue against the running set with capplan's schedule engine every ``every`` seconds."""

    def __init__(self, sim: Replay, known: IntArr, every: int, limit: float, seed: int, base: Problem) -> None:
        super().__init__(sim)
        self.known = known  # the run time the planner believes (exact or an estimate)
        self.every = every
        self.limit = limit
        self.seed = seed
        self.base = base
        self.names = [n.name for n in sim.tr.nodes]
        self.node_of = {n: k for k, n in enumerate(self.names)}
        self.plan: dict[int, tuple[int, int, tuple[int, ...]]] = {}  # pod -> (start, node, gpus)
        self.due: list[tuple[int, int]] = []  # heap of (planned start, pod)
        self.changed = True
        self.last_plan = -1
        self.workloads: dict[int, Any] = {}
        self.assignments: dict[int, Any] = {}
        self.metrics = {"replans": 0, "replan_seconds": 0.0, "replan_max_seconds": 0.0, "replan_max_queue": 0,
                        "planned_starts": 0, "fallback_starts": 0, "overdue_retries": 0}

    def wakeup(self) -> int | None:
        """The next planned start, and the next re-plan tick while pods wait."""
        out = [self.due[0][0]] if self.due else []
        if self.sim.queue and (self.changed or self._overdue()):
            tick = -(-(self.sim.t + 1) // self.every) * self.every
            out.append(tick)
        return min(out) if out else None

    def _overdue(self) -> bool:
        return any(s < self.sim.t for s, _, _ in self.plan.values())

    def _workload(self, i: int) -> Any:
        w = self.workloads.get(i)
        if w is None:
            from capplan.io.alibaba import pod_workload
            from capplan.model.problem import Workload

            data = pod_workload(self.sim.tr.trace_pods[i])
            data.update(name=f"p{i}", duration=int(self.known[i]))
            w = self.workloads[i] = Workload.model_validate(data)
        return w

    def _assignment(self, i: int) -> Any:
        a = self.assignments.get(i)
        if a is None:
            from capplan.model.plan import Assignment

            node, gpus = self.sim.where[i]
            pv = self.sim.view(i)
            a = self.assignments[i] = Assignment(workload=f"p{i}", replica=0, node=self.names[node], gpus=gpus,
                                                 fraction=pv.milli / MILLI if pv.shares else None)
        return a

    def _remaining(self, i: int) -> int:
        """The run time pod ``i`` is believed to have left: its estimate minus the time run; once it has
        run past its estimate, as long again as it has run so far (at least 1 s)."""
        ran = self.sim.t - int(self.sim.start[i])
        left = int(self.known[i]) - ran
        return left if left > 0 else max(1, ran)

    def replan(self) -> None:
        """Schedule the whole queue against the running set; the result replaces the previous plan."""
        from capplan.model.timing import RunningEnd
        from capplan.placement.schedule import schedule

        sim = self.sim
        t0 = time.perf_counter()
        self.plan.clear()
        self.due.clear()
        running = [i for _, i in sim.ends]
        ends = {i: self._remaining(i) for i in running}
        queue = list(sim.queue)
        horizon = max(ends.values(), default=0) + sum(int(self.known[i]) for i in queue) + 1
        step = max(1, -(-horizon // MAX_STEPS))
        horizon = -(-horizon // step) * step
        p = self.base.replace(workloads=tuple(self._workload(i) for i in running + queue),
                              running=tuple(self._assignment(i) for i in running),
                              ends_in=tuple(RunningEnd(workload=f"p{i}", replica=0, ends_in=e)
                                            for i, e in ends.items()))
        sched = schedule(p, "heuristic", horizon=horizon, step=step, time_limit=self.limit, seed=self.seed)
        waiting = set(queue)
        for a in sched.assignments:
            i = int(a.workload[1:])
            if i not in waiting:
                continue
            self.plan[i] = (sim.t + a.start_s, self.node_of[a.node], tuple(a.gpus))
            heapq.heappush(self.due, (sim.t + a.start_s, i))
        spent = time.perf_counter() - t0
        m = self.metrics
        m["replans"] += 1
        m["replan_seconds"] += spent
        m["replan_max_seconds"] = max(m["replan_max_seconds"], spent)
        m["replan_max_queue"] = max(m["replan_max_queue"], len(queue))
        self.changed = False
        self.last_plan = sim.t

    def dispatch(self, departed: bool, arrived: list[int]) -> None:
        """Re-plan at a tick; start planned pods that are due; start unplanned ones by the fallback."""
        sim = self.sim
        if departed or arrived:
            self.changed = True
        if sim.queue and sim.t % self.every == 0 and sim.t != self.last_plan and (self.changed or self._overdue()):
            self.replan()
            departed = True  # the whole queue is new to the fallback
        while self.due and self.due[0][0] <= sim.t:
            heapq.heappop(self.due)
        for i, (s, node, gpus) in sorted(self.plan.items(), key=lambda x: (x[1][0], x[0])):
            if s > sim.t:
                break
            if sim.fits_at(i, node, gpus):
                del self.plan[i]
                sim.begin(i, node, gpus)
                self.metrics["planned_starts"] += 1
            elif s < sim.t:
                self.metrics["overdue_retries"] += 1
        cands = [i for i in (sim.queue if departed else arrived) if i not in self.plan]
        if cands:
            self._fallback(cands)

    def _fallback(self, cands: list[int]) -> None:
        """Start pods without a planned start, in arrival order, where they fit beside the plan.

        A pod that (by the run time the planner believes) ends at ``e`` must fit into what is free
        now minus what the planned pods starting before ``e`` will take; the planned pods starting at
        or after ``e`` find their room again (a sound check for every resource, since use only grows
        when something starts).
        """
        sim = self.sim
        st = sim.state
        starts = sorted((s, i) for i, (s, _, _) in self.plan.items())
        cuts = [s for s, _ in starts]
        tried: dict[int, SimState] = {}
        failed: set[tuple[Any, ...]] = set()
        for i in cands:
            pv = sim.view(i)
            n_before = bisect.bisect_left(cuts, sim.t + int(self.known[i]))
            key = (*_shape_key(pv), n_before)
            if key in failed:
                continue
            free = tried.get(n_before)
            if free is None:
                cpu, mem, gpu = st.cpu_left.copy(), st.mem_left.copy(), st.gpu_left.copy()
                for _, j in starts[:n_before]:
                    _, node, gpus = self.plan[j]
                    pj = sim.view(j)
                    cpu[node] -= pj.cpu
                    mem[node] -= pj.mem
                    for g in gpus:
                        gpu[node, g] -= pj.milli
                free = tried[n_before] = SimState(fleet=st.fleet, cpu_left=cpu, mem_left=mem, gpu_left=gpu,
                                                  tags=st.tags.copy())
            ok = free.feasible(pv)
            if not ok.any():
                failed.add(key)
                continue
            assert sim.scorer is not None
            node = _choose(sim.scorer.score(free, pv), ok, sim.rank)
            gpus = _fit_gpus(free.gpu_left[node], pv)
            for other in tried.values():  # the pod now holds these resources in every view
                other.apply(pv, node, gpus)
            sim.begin(i, node, gpus)
            self.metrics["fallback_starts"] += 1


@dataclass
class ReplayRun:
    """One replay: per-pod start times and the allocation over time, plus the policy's counters."""

    policy: str
    seed: int
    start: IntArr
    times: IntArr
    used: IntArr
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)


def run_replay(tr: ReplayTrace, policy: str, seed: int, replan_every: float = DEFAULT_REPLAN_S,
               noise_sigma: float = DEFAULT_NOISE_SIGMA, replan_limit: float = DEFAULT_REPLAN_LIMIT_S,
               base: Problem | None = None) -> ReplayRun:
    """Replay ``tr`` with ``policy`` (one of :data:`REPLAY_POLICIES`).

    Parameters
    ----------
    tr
        The pods and fleet (:func:`load_replay`).
    policy
        ``fifo-bestfit``, ``fifo-fgd``, ``easy-backfill``, ``capplan-exact`` or ``capplan-noisy``.
    seed
        Seeds the tie-breaking node order and the noisy estimates.
    replan_every
        capplan: seconds between re-plans (whole seconds, at least 1).
    noise_sigma
        capplan-noisy: sigma of the lognormal multiplicative noise on run times.
    replan_limit
        capplan: time limit of one re-plan (seconds).
    base
        capplan: the cluster as a :class:`Problem` without workloads (built from ``tr.nodes`` if None).

    Returns
    -------
    ReplayRun
        Every pod's start time (all pods start: each fits the empty fleet) and the allocation steps.
    """
    if policy not in REPLAY_POLICIES:
        raise InputError("--policies", f"unknown replay policy {policy!r}; choose from {', '.join(REPLAY_POLICIES)}")
    ctx = PolicyContext(fleet=tr.fleet, pods=tr.pods, typical=TypicalPods.from_pods(tr.fleet, tr.pods), seed=seed)
    scorer: Policy = FGDPolicy(ctx) if policy == "fifo-fgd" else BestFitPolicy(ctx)
    sim = Replay(tr, seed, scorer)
    pol: ReplayPolicy
    if policy.startswith("fifo"):
        pol = Fifo(sim)
    elif policy == "easy-backfill":
        pol = EasyBackfill(sim)
    else:
        every = int(replan_every)
        if every < 1:
            raise InputError("--replan-every", f"must be at least 1 second, got {replan_every}")
        known = tr.duration
        if policy == "capplan-noisy":
            z = np.random.default_rng(seed).standard_normal(len(known))
            known = np.maximum(1, np.rint(known * np.exp(noise_sigma * z))).astype(np.int64)
        if base is None:
            base = cluster_problem(tr)
        pol = Capplan(sim, known, every, replan_limit, seed, base)
    t0, c0 = time.perf_counter(), time.process_time()
    _loop(sim, pol)
    seconds = time.perf_counter() - t0
    m = dict(pol.metrics, cpu_seconds=round(time.process_time() - c0, 3))
    if "replan_seconds" in m:
        m["replan_seconds"] = round(m["replan_seconds"], 3)
        m["replan_max_seconds"] = round(m["replan_max_seconds"], 3)
    return ReplayRun(policy=policy, seed=seed, start=sim.start, times=np.array(sim.times, dtype=np.int64),
                     used=np.array(sim.used, dtype=np.int64), seconds=seconds, metrics=m)


def cluster_problem(tr: ReplayTrace) -> Problem:
    """The replay fleet as a capplan :class:`Problem` without workloads (the base of every re-plan)."""
    from capplan.io.alibaba import trace_data
    from capplan.io.scenario import problem_from_data
    from capplan.model.catalog import load_catalog

    return problem_from_data(trace_data(list(tr.nodes), [], "replay"), load_catalog())


def _loop(sim: Replay, pol: ReplayPolicy) -> None:
    tr = sim.tr
    order = np.lexsort((np.arange(len(tr.arrival)), tr.arrival))
    k = 0
    n = len(order)
    while k < n or sim.ends or sim.queue:
        nxt = [int(tr.arrival[order[k]])] if k < n else []
        if sim.ends:
            nxt.append(sim.ends[0][0])
        w = pol.wakeup()
        if w is not None:
            nxt.append(w)
        if not nxt:
            raise RuntimeError(f"replay stalled at t={sim.t} with {len(sim.queue)} pods waiting")
        sim.t = max(sim.t, min(nxt))
        departed = sim.finish_due()
        arrived: list[int] = []
        while k < n and tr.arrival[order[k]] <= sim.t:
            i = int(order[k])
            sim.queue[i] = None
            arrived.append(i)
            k += 1
        pol.dispatch(departed, arrived)
        if sim.times and sim.times[-1] == sim.t:
            sim.used[-1] = sim.state.used_milli
        else:
            sim.times.append(sim.t)
            sim.used.append(sim.state.used_milli)


def wait_stats(waits: IntArr) -> dict[str, float | int]:
    """Mean, p50, p95, p99 and max wait (seconds) and the pods waiting over one hour."""
    if not len(waits):
        return {"pods": 0, "mean_wait_s": 0.0, "p50_wait_s": 0.0, "p95_wait_s": 0.0, "p99_wait_s": 0.0,
                "max_wait_s": 0, "waiting_over_1h": 0}
    q = np.percentile(waits, [50, 95, 99])
    return {"pods": len(waits), "mean_wait_s": round(float(waits.mean()), 1), "p50_wait_s": round(float(q[0]), 1),
            "p95_wait_s": round(float(q[1]), 1), "p99_wait_s": round(float(q[2]), 1),
            "max_wait_s": int(waits.max()), "waiting_over_1h": int((waits > LONG_WAIT_S).sum())}


def hourly_allocation(tr: ReplayTrace, run: ReplayRun, bucket: int = 3600) -> list[tuple[int, float]]:
    """Time-weighted mean GPU allocation (% of capacity) per ``bucket`` seconds, from t=0 to the last departure."""
    cap = tr.fleet.total_milli
    t, u = run.times, run.used
    if not len(t) or cap == 0:
        return []
    end = int(t[-1])
    edges = np.arange(0, end + bucket, bucket, dtype=np.int64)
    # cumulative milli-seconds at each change point, then interpolated at the bucket edges
    seg = np.diff(np.append(t, end)) * u
    cum = np.concatenate([[0], np.cumsum(seg)])
    pts = np.append(t, end)

    def area(x: IntArr) -> Any:
        j = np.clip(np.searchsorted(pts, x, side="right") - 1, 0, len(t) - 1)
        before = np.where(x < pts[0], 0, cum[j] + (x - pts[j]) * u[j])
        return np.where(x >= end, cum[-1], before)

    a = area(edges)
    means = np.diff(a) / bucket / cap * 100
    return [(int(e), round(float(m), 3)) for e, m in zip(edges[:-1], means, strict=True)]


def replay_metrics(tr: ReplayTrace, run: ReplayRun) -> dict[str, Any]:
    """The replay's metrics: waits overall and by demand shape, allocation, counters (JSON-ready)."""
    waits = run.start - tr.arrival
    if (run.start < 0).any():
        raise RuntimeError("a pod never started")
    out: dict[str, Any] = dict(wait_stats(waits))
    shapes = np.array([shape_of(tr.pods, i) for i in range(len(waits))])
    out["by_shape"] = {s: wait_stats(waits[shapes == s]) for s in SHAPES}
    cap = tr.fleet.total_milli
    t, u = run.times, run.used
    span = int(t[-1] - t[0]) if len(t) > 1 else 0
    mean_alloc = float((np.diff(t) * u[:-1]).sum() / span / cap * 100) if span and cap else 0.0
    out.update(mean_allocation_pct=round(mean_alloc, 3), peak_allocation_pct=round(100 * float(u.max()) / cap, 3)
               if cap else 0.0, makespan_s=int(t[-1]), seconds=round(run.seconds, 3), nodes=len(tr.nodes),
               gpus=int(tr.fleet.gpus.sum()), **tr.counts, **run.metrics)
    return out


def wait_cdf(waits: IntArr, points: int = 200) -> list[tuple[float, float]]:
    """(wait seconds, fraction of pods waiting at most that) on a log-spaced grid plus 0."""
    if not len(waits):
        return []
    top = max(1.0, float(waits.max()))
    grid = np.concatenate([[0.0], np.geomspace(1.0, top, points)])
    srt = np.sort(waits)
    frac = np.searchsorted(srt, grid, side="right") / len(srt)
    return [(round(float(g), 1), round(float(f), 5)) for g, f in zip(grid, frac, strict=True)]

