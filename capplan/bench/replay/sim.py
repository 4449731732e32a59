"""The replay simulator: which pods take part, and the event-driven state the policies act on.

:func:`load_replay` selects the pods of a trace (the rules are in :mod:`capplan.bench.replay.protocol`) and their
arrival and run times. :class:`Replay` is event-driven over numpy occupancy arrays (the online
simulator's :class:`~capplan.bench.online.sim.SimState`): it holds the queue, the running pods and their end
times, and the allocation record; the helpers pick GPUs on a node and check a pod against one node's
free resources. The policies are in :mod:`capplan.bench.replay.policies`, the driver and metrics in
:mod:`capplan.bench.replay.protocol`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from capplan.bench.online.sim import (
    MILLI,
    BoolArr,
    Fleet,
    IntArr,
    Pod,
    PodTable,
    Policy,
    SimState,
    choose_node,
    pod_view,
)
from capplan.model.errors import InputError

if TYPE_CHECKING:
    from capplan.io.alibaba import TraceNode, TracePod


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


def shape_key(pv: Pod) -> tuple[int, int, int, int, tuple[str, ...]]:
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
        node = choose_node(self.scorer.score(st, pv), ok, self.rank)
        pick = getattr(self.scorer, "gpus", None)
        gpus = pick(st, pv, node) if pick is not None else fit_gpus(st.gpu_left[node], pv)
        self.begin(i, node, gpus)
        return True

    def fits_at(self, i: int, node: int, gpus: tuple[int, ...]) -> bool:
        """Whether pod ``i`` fits now on ``node`` with exactly ``gpus``."""
        pv = self.view(i)
        st = self.state
        if st.cpu_left[node] < pv.cpu or st.mem_left[node] < pv.mem:
            return False
        return all(st.gpu_left[node, g] >= pv.milli for g in gpus)


def fit_gpus(left: IntArr, pv: Pod) -> tuple[int, ...]:
    """The tightest-fitting GPU for a share; the lowest-numbered free GPUs otherwise (``left``: one node)."""
    if not pv.num:
        return ()
    if pv.shares:
        return (int(np.where(left >= pv.milli, left, 10 * MILLI).argmin()),)
    return tuple(int(g) for g in np.flatnonzero(left >= pv.milli)[: pv.num])


def fits_row(cpu: int, mem: int, left: IntArr, pv: Pod) -> bool:
    if cpu < pv.cpu or mem < pv.mem:
        return False
    if not pv.num:
        return True
    fits = left >= pv.milli
    return bool(fits.any()) if pv.shares else int(fits.sum()) >= pv.num
