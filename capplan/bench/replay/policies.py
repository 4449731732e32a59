"""The replay policies: FIFO, EASY backfill and capplan re-planning (see :mod:`capplan.bench.replay.protocol`).

Each policy is a :class:`ReplayPolicy` acting on the shared :class:`~capplan.bench.replay.sim.Replay`
state: ``dispatch`` starts pods at an event and ``wakeup`` asks for an extra event time.
"""

from __future__ import annotations

import bisect
import heapq
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from capplan.bench.online.sim import MILLI, IntArr, SimState, choose_node
from capplan.bench.replay.sim import Replay, fit_gpus, fits_row, shape_key

if TYPE_CHECKING:
    from capplan.model.problem import Problem

#: The schedule engine's grid may have at most this many steps (capplan.model.timing.ScheduleSpec).
MAX_STEPS = 10_000_000


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
            key = shape_key(sim.view(i))
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
            if fits_row(cpu, mem, left, pv):
                at = sim.t
            else:
                for end, i in sorted(by_node.get(node, ())):
                    o = sim.view(i)
                    cpu += o.cpu
                    mem += o.mem
                    for g in sim.where[i][1]:
                        left[g] += o.milli
                    if fits_row(cpu, mem, left, pv):
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
        gpus = fit_gpus(self.gpu, pv)  # the head's place at the reservation time
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
            ok[r] = fits_row(min(int(st.cpu_left[r]), self.cpu), min(int(st.mem_left[r]), self.mem),
                              np.minimum(st.gpu_left[r], self.gpu), pv)
        if not ok.any():
            return False
        assert sim.scorer is not None
        node = choose_node(sim.scorer.score(st, pv), ok, sim.rank)
        if node == r and late:
            gpus = fit_gpus(np.minimum(st.gpu_left[r], self.gpu), pv)
            self.cpu -= pv.cpu
            self.mem -= pv.mem
            for g in gpus:
                self.gpu[g] -= pv.milli
        else:
            gpus = fit_gpus(st.gpu_left[node], pv)
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
            key = (*shape_key(sim.view(i)), sim.t + int(sim.tr.duration[i]) > self.shadow)
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
        self.first_plan: dict[int, int] = {}  # pod -> the start its first plan gave it
        self.workloads: dict[int, Any] = {}
        self.assignments: dict[int, Any] = {}
        self.metrics = {"replans": 0, "replan_seconds": 0.0, "replan_max_seconds": 0.0, "replan_max_queue": 0,
                        "planned_starts": 0, "early_starts": 0, "fallback_starts": 0, "overdue_retries": 0,
                        "slipped_pods": 0, "slip_seconds": 0, "max_slip_s": 0}

    def wakeup(self) -> int | None:
        """The next planned start, and the next re-plan tick while pods wait."""
        out = [self.due[0][0]] if self.due else []
        if self.sim.queue and (self.changed or self._overdue()):
            tick = -(-(self.sim.t + 1) // self.every) * self.every
            out.append(tick)
        return min(out) if out else None

    def _begin(self, i: int, node: int, gpus: tuple[int, ...]) -> None:
        """Start pod ``i`` now; count how much later than its first planned start it starts (starvation)."""
        self.sim.begin(i, node, gpus)
        first = self.first_plan.pop(i, None)
        if first is not None and self.sim.t > first:
            m = self.metrics
            m["slipped_pods"] += 1
            m["slip_seconds"] += self.sim.t - first
            m["max_slip_s"] = max(m["max_slip_s"], self.sim.t - first)

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
            self.first_plan.setdefault(i, sim.t + a.start_s)
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
        """Re-plan at a tick; start planned pods that are due, or earlier where room freed; start unplanned
        ones by the fallback."""
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
                self._begin(i, node, gpus)
                self.metrics["planned_starts"] += 1
            elif s < sim.t:
                self.metrics["overdue_retries"] += 1
        if self.plan and (departed or self._overdue()):
            self._early()
        cands = [i for i in (sim.queue if departed else arrived) if i not in self.plan]
        if cands:
            self._fallback(cands)

    def _early(self) -> None:
        """Start planned pods now, in planned order, where they fit beside the rest of the plan.

        Room appears before the plan expected it when a pod ends before its estimate (``capplan-noisy``);
        a planned pod whose spot is still taken at its planned time (a pod ran past its estimate) may
        fit elsewhere. Either way the pods of the queue at the last re-plan get that room before pods
        that arrived since (the fallback, run after this). A pod takes its planned node and GPUs if they
        are free until its believed end, else the best fit; the other planned pods keep their room.
        """
        sim = self.sim
        views = _PlanViews(sim, self.plan)
        for i in sorted(self.plan, key=lambda j: (self.plan[j][0], j)):
            _, node, gpus = self.plan[i]
            pv = sim.view(i)
            free = views.beside(sim.t + int(self.known[i]), skip=i)
            if not (free.cpu_left[node] >= pv.cpu and free.mem_left[node] >= pv.mem
                    and all(free.gpu_left[node, g] >= pv.milli for g in gpus)):
                ok = free.feasible(pv)
                if not ok.any():
                    continue
                assert sim.scorer is not None
                node = choose_node(sim.scorer.score(free, pv), ok, sim.rank)
                gpus = fit_gpus(free.gpu_left[node], pv)
            views.start(i, node, gpus)
            del self.plan[i]
            self._begin(i, node, gpus)
            self.metrics["early_starts"] += 1

    def _fallback(self, cands: list[int]) -> None:
        """Start pods without a planned start, in arrival order, where they fit beside the plan.

        A pod that (by the run time the planner believes) ends at ``e`` must fit into what is free
        now minus what the planned pods starting before ``e`` will take; the planned pods starting at
        or after ``e`` find their room again (a sound check for every resource, since use only grows
        when something starts).
        """
        sim = self.sim
        views = _PlanViews(sim, self.plan)
        failed: set[tuple[Any, ...]] = set()
        for i in cands:
            pv = sim.view(i)
            end = sim.t + int(self.known[i])
            key = (*shape_key(pv), views.cut(end))
            if key in failed:
                continue
            free = views.beside(end)
            ok = free.feasible(pv)
            if not ok.any():
                failed.add(key)
                continue
            assert sim.scorer is not None
            node = choose_node(sim.scorer.score(free, pv), ok, sim.rank)
            gpus = fit_gpus(free.gpu_left[node], pv)
            views.start(i, node, gpus)
            self._begin(i, node, gpus)
            self.metrics["fallback_starts"] += 1


class _PlanViews:
    """What is free now minus what the planned pods starting before a time will take, cached per cut.

    ``beside(until)`` subtracts the planned pods whose start is before ``until``; ``start`` records a
    pod starting now (a planned one gives its reserved room back) in every cached view.
    """

    def __init__(self, sim: Replay, plan: dict[int, tuple[int, int, tuple[int, ...]]]) -> None:
        self.sim = sim
        self.plan = plan
        self.starts = sorted((s, i) for i, (s, _, _) in plan.items())
        self.cuts = [s for s, _ in self.starts]
        self.pos = {i: k for k, (_, i) in enumerate(self.starts)}
        self.views: dict[int, SimState] = {}

    def cut(self, until: int) -> int:
        """How many planned starts come before ``until``."""
        return bisect.bisect_left(self.cuts, until)

    def beside(self, until: int, skip: int = -1) -> SimState:
        """The free room beside the planned pods starting before ``until``, ``skip``'s own room given back
        (a copy then; else the cached view, to be changed only through :meth:`start`)."""
        sim = self.sim
        n = self.cut(until)
        free = self.views.get(n)
        if free is None:
            st = sim.state
            free = SimState(fleet=st.fleet, cpu_left=st.cpu_left.copy(), mem_left=st.mem_left.copy(),
                            gpu_left=st.gpu_left.copy(), tags=st.tags.copy())
            for _, j in self.starts[:n]:
                if j in self.plan:
                    _, node, gpus = self.plan[j]
                    free.apply(sim.view(j), node, gpus)
            self.views[n] = free
        if skip in self.plan and self.pos[skip] < n:
            _, node, gpus = self.plan[skip]
            free = SimState(fleet=free.fleet, cpu_left=free.cpu_left.copy(), mem_left=free.mem_left.copy(),
                            gpu_left=free.gpu_left.copy(), tags=free.tags.copy())
            free.apply(self.sim.view(skip), node, gpus, sign=-1)
        return free

    def start(self, i: int, node: int, gpus: tuple[int, ...]) -> None:
        """Pod ``i`` starts now on ``node`` and ``gpus``: it holds them in every view; if it was planned, the
        views that held its planned room give that back (call before removing it from the plan)."""
        pv = self.sim.view(i)
        planned = self.plan.get(i)
        for n, free in self.views.items():
            if planned is not None and self.pos[i] < n:
                free.apply(pv, planned[1], planned[2], sign=-1)
            free.apply(pv, node, gpus)
