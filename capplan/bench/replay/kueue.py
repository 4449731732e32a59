"""Kueue's admission as the replay's reality (the ETA benchmark, ``benchmarks/eta_bench.py``).

The replay simulator (:class:`~capplan.bench.replay.sim.Replay`) with an admission policy written
against its numpy state, independently of capplan's ``schedule --policy kueue``
(:mod:`capplan.placement.schedule.kueue`), which is the estimator under test. Pods belong to
ClusterQueues (:class:`QueueSpec`); each queue has a GPU quota (whole GPUs count their number, a
GPU share counts one, a CPU-only pod none: capplan's rule for ``nvidia.com/gpu``) and no cohort.
At every event, after departures and arrivals:

* the queues' pending pods are in Kueue's order (priority, then creation time: here arrival, then
  file order; the trace has no priorities, so all are equal);
* queues take turns by their heads' order, one admission per turn, until none admits more;
* ``StrictFIFO``: only the head may be admitted; ``BestEffortFIFO``: the first pod, in order, that
  fits now;
* a pod is admitted when its queue's GPU usage plus its units stays within the quota and it fits a
  node now; it is placed with BestFit (the replay's scorer) and runs for its observed run time.

Nothing is preempted and nothing is reserved ahead. The admission times per queue are kept
(:attr:`KueueAdmission.admissions`) for the moving-average estimator; a callback sees the state at
every re-plan tick (every ``every`` seconds while pods wait), after that instant's admissions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from capplan.bench.online.sim import MILLI, IntArr
from capplan.bench.replay.policies import ReplayPolicy
from capplan.bench.replay.sim import Replay, shape_key
from capplan.model.quota import Strategy

STRATEGIES = ("StrictFIFO", "BestEffortFIFO")


@dataclass(frozen=True)
class QueueSpec:
    """One ClusterQueue of the replay: its name, queueing strategy and GPU quota (whole GPUs)."""

    name: str
    strategy: Strategy
    gpus: int

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"queue {self.name}: strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.gpus < 0:
            raise ValueError(f"queue {self.name}: GPU quota must be >= 0, got {self.gpus}")


def gpu_units(num: IntArr, milli: IntArr) -> IntArr:
    """Quota units of ``nvidia.com/gpu`` per pod: ``num`` for whole GPUs, 1 for a share, 0 for CPU-only."""
    out: IntArr = np.where(milli >= MILLI, num, np.minimum(num, 1)).astype(np.int64)
    return out


class KueueAdmission(ReplayPolicy):
    """Kueue's admission over the replay state (see the module docstring).

    Parameters
    ----------
    sim
        The replay state (its scorer places admitted pods).
    queues
        The ClusterQueues.
    queue_of
        Per replayed pod, the index of its queue in ``queues``.
    every
        Seconds between re-plan ticks (``on_tick`` is called at each while pods wait).
    on_tick
        Called with the policy at every tick, after that instant's admissions.
    """

    def __init__(self, sim: Replay, queues: Sequence[QueueSpec], queue_of: IntArr, every: int,
                 on_tick: Callable[[KueueAdmission], None] | None = None) -> None:
        super().__init__(sim)
        self.queues = tuple(queues)
        self.queue_of = np.asarray(queue_of, dtype=np.int64)
        self.units = gpu_units(sim.tr.pods.num, sim.tr.pods.milli)
        self.quota = np.array([q.gpus for q in self.queues], dtype=np.int64)
        self.strict = [q.strategy == "StrictFIFO" for q in self.queues]
        self.every = every
        self.on_tick = on_tick
        #: per queue, its pending pods in Kueue's order (arrival, then file order)
        self.pending: list[list[int]] = [[] for _ in self.queues]
        #: per queue, the admission times in order
        self.admissions: list[list[int]] = [[] for _ in self.queues]
        self.last_tick = -1
        self.metrics = {"admissions": 0, "ticks": 0}

    def usage(self) -> IntArr:
        """GPU quota units in use per queue (the running pods)."""
        run = np.fromiter(self.sim.where, dtype=np.int64, count=len(self.sim.where))
        out: IntArr = np.bincount(self.queue_of[run], weights=self.units[run],
                                  minlength=len(self.queues)).astype(np.int64)
        return out

    def wakeup(self) -> int | None:
        """The next re-plan tick while pods wait."""
        if not self.sim.queue:
            return None
        return -(-(self.sim.t + 1) // self.every) * self.every

    def dispatch(self, departed: bool, arrived: list[int]) -> None:
        """Queue the arrivals, admit what Kueue admits now, then call ``on_tick`` at a tick."""
        sim = self.sim
        for i in arrived:  # the loop hands arrivals in (arrival, index) order: Kueue's order
            self.pending[int(self.queue_of[i])].append(i)
        if departed or arrived:
            self._admit_all()
        if sim.queue and sim.t % self.every == 0 and sim.t != self.last_tick:
            self.last_tick = sim.t
            self.metrics["ticks"] += 1
            if self.on_tick is not None:
                self.on_tick(self)

    def _admit_all(self) -> None:
        sim = self.sim
        used = self.usage()
        failed: set[tuple[object, ...]] = set()  # (queue, shape) that did not fit at this instant
        arrival = sim.tr.arrival
        while True:
            heads = sorted((q for q in range(len(self.queues)) if self.pending[q]),
                           key=lambda q: (int(arrival[self.pending[q][0]]), self.pending[q][0]))
            admitted: tuple[int, int] | None = None
            for q in heads:
                cands = self.pending[q][:1] if self.strict[q] else self.pending[q]
                for i in cands:
                    key = (q, *shape_key(sim.view(i)))
                    if key in failed:
                        continue
                    if used[q] + self.units[i] <= self.quota[q] and sim.place_now(i):
                        admitted = (q, i)
                        break
                    failed.add(key)
                if admitted is not None:
                    break
            if admitted is None:
                return
            q, i = admitted
            self.pending[q].remove(i)
            used[q] += self.units[i]
            self.admissions[q].append(sim.t)
            self.metrics["admissions"] += 1
