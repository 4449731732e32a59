"""The ETA accuracy benchmark: "when will my pod start?" on the Alibaba replay under Kueue (docs/benchmarks-eta.md).

The reality is the replay with Kueue's admission (:mod:`capplan.bench.replay.kueue`, written
against the replay's own state). At every re-plan tick each pending pod gets estimates of its start:

* **capplan**: :func:`capplan.placement.schedule.schedule` with ``policy="kueue"`` on the state at
  that moment (the running pods on their nodes with the run time they are believed to have left,
  the pending pods with the run time the estimator sees, the queues and quotas); the estimate is the
  pod's admission time in that simulation. The run time it sees is the observed one (sigma 0) or
  ``run time x exp(sigma z)``, ``z ~ N(0, 1)`` seeded per pod (at least 1 s); a running pod is believed to
  end at its start plus that run time, at least a minute from now (``capplan import kueue``'s rule for
  admitted Workloads).
* **capplan told the spread** (``capplan-s<sigma>-expected``, ``-sampled``): the same noisy run times, the
  estimator knowing they are off by a lognormal factor of that sigma (:mod:`capplan.model.spread`; what
  ``capplan import kueue --duration-spread`` is told). ``-expected``: one simulation with the expected run
  times and the expected remaining times of the running pods given how long they have run (the import's
  rule). ``-sampled``: ``samples`` simulations with run and remaining times drawn from that belief, and per
  pod the median of its starts (a start is an order statistic and a sum of run times, whose median is not
  the start computed from per-pod point estimates).
* **moving average** (kueue#13159's proposal): ``now + position x mean admission interval``, per
  ClusterQueue, where ``position`` is the pod's 1-based place in its queue's pending list (Kueue's
  order) and the mean interval is taken over the queue's admissions so far, as an exponentially
  weighted moving average (:class:`AdmissionRate`, ``half_life`` admissions) or as the mean of the
  last ``window`` intervals. A queue with fewer than two admissions has no estimate yet.

The error of an estimate is ``|estimate - actual start| / actual wait`` (:func:`relative_errors`),
over the (tick, pod) samples of pods whose wait is over ``min_wait`` (10 minutes).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from capplan.bench.online.sim import MILLI, FloatArr, IntArr
from capplan.bench.replay.kueue import KueueAdmission, QueueSpec
from capplan.bench.replay.policies import MAX_STEPS
from capplan.model.spread import (
    MIN_LEFT_S,
    check_spread,
    expected_remaining,
    expected_run_time,
)

if TYPE_CHECKING:
    from capplan.bench.replay.sim import ReplayTrace
    from capplan.model.problem import Problem
    from capplan.model.quota import Strategy

#: Pods that wait at most this long (seconds) are left out of the error statistics.
MIN_WAIT_S = 600


class AdmissionRate:
    """The mean interval between a queue's admissions, fed their times in order.

    ``ewma()`` is the exponentially weighted moving average of the intervals: the first interval,
    then ``m <- a d + (1 - a) m`` for each next interval ``d`` with ``a = 1 - 2 ** (-1 / half_life)``
    (an interval's weight halves every ``half_life`` admissions). ``window()`` is the plain mean of
    the last ``window`` intervals (fewer while fewer exist). Both are None before two admissions.
    """

    def __init__(self, half_life: float = 10.0, window: int = 20) -> None:
        if not half_life > 0 or window < 1:
            raise ValueError("half_life must be > 0 and window >= 1")
        self.alpha = 1.0 - 2.0 ** (-1.0 / half_life)
        self.size = window
        self.times: list[int] = []
        self._ewma: float | None = None

    def add(self, t: int) -> None:
        """One admission at ``t`` (not before the previous one)."""
        if self.times:
            d = t - self.times[-1]
            if d < 0:
                raise ValueError(f"admission at {t} before the previous one at {self.times[-1]}")
            self._ewma = float(d) if self._ewma is None else self.alpha * d + (1 - self.alpha) * self._ewma
        self.times.append(t)

    def ewma(self) -> float | None:
        """The EWMA of the intervals (None before two admissions)."""
        return self._ewma

    def window(self) -> float | None:
        """The mean of the last ``window`` intervals (None before two admissions)."""
        n = min(self.size, len(self.times) - 1)
        if n < 1:
            return None
        return (self.times[-1] - self.times[-1 - n]) / n  # the intervals telescope


def position_estimate(now: int, position: int, interval: float) -> float:
    """kueue#13159: the start of the pod at 1-based ``position`` in its queue, ``now + position x interval``."""
    if position < 1:
        raise ValueError(f"position is 1-based, got {position}")
    return now + position * interval


def relative_errors(estimate: FloatArr, actual: IntArr, arrival: IntArr, min_wait: int = MIN_WAIT_S) -> FloatArr:
    """``|estimate - actual| / (actual - arrival)`` for the samples whose wait ``actual - arrival`` is over
    ``min_wait``; samples without an estimate (NaN) are dropped."""
    est = np.asarray(estimate, dtype=np.float64)
    wait = np.asarray(actual, dtype=np.float64) - np.asarray(arrival, dtype=np.float64)
    keep = (wait > min_wait) & ~np.isnan(est)
    out: FloatArr = np.abs(est[keep] - np.asarray(actual, dtype=np.float64)[keep]) / wait[keep]
    return out


def error_stats(err: FloatArr) -> dict[str, float | int]:
    """Median and p90 of relative errors, and how many."""
    if not len(err):
        return {"samples": 0, "median": math.nan, "p90": math.nan}
    q = np.percentile(err, [50, 90])
    return {"samples": len(err), "median": round(float(q[0]), 4), "p90": round(float(q[1]), 4)}


def alibaba_queues(tr: ReplayTrace, shares: Sequence[tuple[str, Strategy, float, float]],
                   seed: int) -> tuple[tuple[QueueSpec, ...], IntArr]:
    """ClusterQueues for the replay and each pod's queue.

    ``shares``: per queue (name, strategy, share of the pods, share of the fleet's GPUs as its quota). Pods
    are drawn into queues with ``default_rng(seed)`` by the pod shares; a quota is at least the largest
    number of GPU quota units one of its pods asks for (so that every pod can run).
    """
    from capplan.bench.replay.kueue import gpu_units

    p = np.array([s[2] for s in shares], dtype=np.float64)
    if (p < 0).any() or p.sum() <= 0:
        raise ValueError("queue pod shares must be >= 0 and not all 0")
    queue_of = np.random.default_rng(seed).choice(len(shares), size=len(tr.arrival), p=p / p.sum()).astype(np.int64)
    units = gpu_units(tr.pods.num, tr.pods.milli)
    total = int(tr.fleet.gpus.sum())
    out = []
    for k, (name, strategy, _, frac) in enumerate(shares):
        need = int(units[queue_of == k].max(initial=0))
        out.append(QueueSpec(name, strategy, max(need, round(frac * total))))
    return tuple(out), queue_of


def kueue_problem(tr: ReplayTrace, queues: Sequence[QueueSpec]) -> Problem:
    """The replay fleet as a capplan problem with the queues (one flavor over every node; quotas for GPUs,
    and for CPU and memory at the fleet's totals, so that they never bind)."""
    from capplan.bench.replay.protocol import cluster_problem
    from capplan.model.catalog import Catalog
    from capplan.model.quota import ClusterQueue, Flavor, QuotaEntry

    cpu = int(tr.fleet.cpu.sum()) / MILLI
    mem = int(tr.fleet.mem.sum()) / 1024
    cqs = tuple(ClusterQueue(name=q.name, strategy=q.strategy, quotas=(
        QuotaEntry(flavor="all", resource="cpu", nominal=cpu),
        QuotaEntry(flavor="all", resource="memory", nominal=mem),
        QuotaEntry(flavor="all", resource="nvidia.com/gpu", nominal=q.gpus))) for q in queues)
    base = cluster_problem(tr)
    # The replay's admission counts every GPU under one quota; the trace's undisclosed models (G1-G3, vendor
    # `alibaba` in the catalog) would be asked as `alibaba.com/gpu`, which no quota names, so capplan would
    # never admit a pending pod there nor charge a running one. They are requested as nvidia.com/gpu here.
    models = tuple(m if m.vendor in ("nvidia", "amd") else m.model_copy(update={"vendor": "nvidia"})
                   for m in base.catalog.models)
    return base.replace(catalog=Catalog(models=models), flavors=(Flavor(name="all"),), queues=cqs)


def noisy_durations(duration: IntArr, sigma: float, seed: int) -> IntArr:
    """``duration x exp(sigma z)``, ``z ~ N(0, 1)`` from ``default_rng(seed)``, whole seconds, at least 1."""
    if sigma == 0:
        return np.asarray(duration, dtype=np.int64).copy()
    z = np.random.default_rng(seed).standard_normal(len(duration))
    out: IntArr = np.maximum(1, np.rint(duration * np.exp(sigma * z))).astype(np.int64)
    return out


class CapplanEstimator:
    """capplan's estimate at a tick: ``schedule --policy kueue`` on the state at that moment."""

    def __init__(self, base: Problem, queues: Sequence[QueueSpec], queue_of: IntArr, known: IntArr,
                 spread: float = 0.0, samples: int = 0, seed: int = 0) -> None:
        if samples < 0:
            raise ValueError(f"samples must be >= 0, got {samples}")
        self.base = base
        self.qname = [q.name for q in queues]
        self.queue_of = queue_of
        self.known = known
        self.spread = check_spread(spread)
        self.samples = samples
        self.seed = seed
        self._workloads: dict[int, Any] = {}
        self._assign: dict[int, Any] = {}
        self.seconds = 0.0
        self.calls = 0

    def _workload(self, pol: KueueAdmission, i: int) -> Any:
        w = self._workloads.get(i)
        if w is None:
            from capplan.io.alibaba import pod_workload
            from capplan.model.problem import Workload

            data = pod_workload(pol.sim.tr.trace_pods[i])
            data.update(name=f"p{i}", duration=expected_run_time(int(self.known[i]), self.spread),
                        queue=self.qname[int(self.queue_of[i])],
                        created=int(pol.sim.tr.arrival[i]))
            w = self._workloads[i] = Workload.model_validate(data)
        return w

    def _assignment(self, pol: KueueAdmission, i: int) -> Any:
        a = self._assign.get(i)
        if a is None:
            from capplan.model.plan import Assignment

            node, gpus = pol.sim.where[i]
            pv = pol.sim.view(i)
            a = self._assign[i] = Assignment(workload=f"p{i}", replica=0, node=pol.sim.tr.nodes[node].name,
                                             gpus=gpus, fraction=pv.milli / MILLI if pv.shares else None)
        return a

    def _starts(self, pol: KueueAdmission, running: list[int], queue: list[int], ends: dict[int, int],
                durations: dict[int, int]) -> dict[str, int]:
        """``schedule --policy kueue`` on the tick's state with these remaining and run times: start per name."""
        from capplan.model.timing import RunningEnd
        from capplan.placement.schedule import schedule

        horizon = max(ends.values(), default=0) + sum(durations.values()) + 1
        step = max(1, -(-horizon // MAX_STEPS))
        horizon = -(-horizon // step) * step
        wl = [self._workload(pol, i) for i in running]
        for i in queue:
            w = self._workload(pol, i)
            wl.append(w if w.duration == durations[i] else w.model_copy(update={"duration": durations[i]}))
        p = self.base.replace(workloads=tuple(wl), running=tuple(self._assignment(pol, i) for i in running),
                              ends_in=tuple(RunningEnd(workload=f"p{i}", replica=0, ends_in=e)
                                            for i, e in ends.items()))
        starts: dict[str, int] = schedule(p, horizon=horizon, step=step, policy="kueue").metrics["kueue_starts"]
        return starts

    def _sampled(self, pol: KueueAdmission, running: list[int], queue: list[int], ran: dict[int, int]
                 ) -> dict[int, float]:
        """:func:`~capplan.placement.schedule.eta.median_starts` on the tick's state: workloads with their believed
        run times, running replicas with how long they ran; seeded by ``(seed, now)``."""
        from capplan.model.deadline import Deadline
        from capplan.model.timing import RunningEnd
        from capplan.placement.schedule.eta import median_starts

        sim = pol.sim
        known = {i: int(self.known[i]) for i in (*running, *queue)}
        wl = [self._workload(pol, i).model_copy(update={"duration": known[i]}) for i in (*running, *queue)]
        ends = tuple(RunningEnd(workload=f"p{i}", replica=0, ends_in=max(MIN_LEFT_S, known[i] - ran[i]),
                                elapsed=max(0, ran[i])) for i in running)
        p = self.base.replace(workloads=tuple(wl), running=tuple(self._assignment(pol, i) for i in running),
                              ends_in=ends)
        # drawn run times reach several times the believed ones: a horizon that holds them
        horizon = 4 * (max((e.ends_in for e in ends), default=0) + sum(known[i] for i in queue)) + 1
        step = max(1, -(-horizon // MAX_STEPS))
        horizon = -(-horizon // step) * step
        starts, _ = median_starts(p, horizon, step, {"*": self.spread}, self.samples, (self.seed, sim.t),
                                  Deadline.start(1e9))
        return {i: sim.t + float(v) if (v := starts.get(f"p{i}")) is not None else math.nan for i in queue}

    def estimate(self, pol: KueueAdmission) -> dict[int, float]:
        """Pending pod -> estimated start (seconds from the trace start); NaN when not admitted in the horizon.

        Without samples: one simulation with the expected times (:func:`expected_remaining`,
        :func:`expected_run_time`; the believed ones at spread 0). With ``samples`` K: K simulations with times
        drawn from the same belief (:func:`sample_remaining`, :func:`sample_run_time`;
        ``default_rng([seed, now])``), and per pod the median of its K starts (a start beyond a draw's horizon
        counts as later than any; NaN when that is the median).
        """
        t0 = time.perf_counter()
        sim = pol.sim
        running = [i for _, i in sim.ends]
        queue = [i for q in pol.pending for i in q]
        ran = {i: sim.t - int(sim.start[i]) for i in running}
        if not self.samples:
            # as ``capplan import kueue [--duration-spread]`` does: the expected remaining time given the run so far
            ends = {i: expected_remaining(int(self.known[i]), ran[i], self.spread) for i in running}
            starts = self._starts(pol, running, queue, ends, {i: int(self._workload(pol, i).duration) for i in queue})
            out = {i: sim.t + starts[f"p{i}"] if f"p{i}" in starts else math.nan for i in queue}
        else:  # the command line's estimate (schedule --samples): believed times, elapsed, the same draws
            out = self._sampled(pol, running, queue, ran)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


@dataclass
class EtaRun:
    """The samples of one replay: per (tick, pod), the estimates of each estimator and the actual start."""

    tick: IntArr
    pod: IntArr
    estimates: dict[str, FloatArr]
    start: IntArr
    arrival: IntArr
    metrics: dict[str, Any] = field(default_factory=dict)

    def errors(self, name: str, min_wait: int = MIN_WAIT_S) -> FloatArr:
        """Relative errors of estimator ``name`` over pods waiting more than ``min_wait``."""
        return relative_errors(self.estimates[name], self.start[self.pod], self.arrival[self.pod], min_wait)

    def common(self, min_wait: int = MIN_WAIT_S) -> dict[str, dict[str, float | int]]:
        """Error statistics per estimator over the samples where every estimator has an estimate."""
        have = np.ones(len(self.pod), dtype=bool)
        for est in self.estimates.values():
            have &= ~np.isnan(est)
        sub = {n: np.where(have, e, np.nan) for n, e in self.estimates.items()}
        act, arr = self.start[self.pod], self.arrival[self.pod]
        return {n: error_stats(relative_errors(e, act, arr, min_wait)) for n, e in sub.items()}


def run_eta(tr: ReplayTrace, queues: Sequence[QueueSpec], queue_of: IntArr, every: int, sigmas: Sequence[float],
            seed: int, half_life: float = 10.0, window: int = 20, max_ticks: int | None = None,
            progress: Callable[[str], None] | None = None, every_n: int = 0, spread: bool = True,
            samples: int = 8) -> EtaRun:
    """Replay ``tr`` under Kueue's admission and collect every estimator's estimates at every tick.

    Estimators: ``capplan-s<sigma>`` per sigma in ``sigmas`` (``schedule --policy kueue`` with the run times
    seen with that noise, seeded with ``seed``, taken as exact), with ``spread`` for every sigma > 0 also
    ``capplan-s<sigma>-expected`` and, with ``samples`` > 0, ``capplan-s<sigma>-sampled`` (the same run times, the
    estimator told their spread sigma, :mod:`capplan.model.spread`: one simulation with expected run and remaining
    times; the median start over ``samples`` simulations with times drawn from that belief), ``ma-ewma`` and
    ``ma-window`` (kueue#13159's proposal). After
    ``max_ticks`` ticks with pending pods no more samples are taken (the replay still runs to its end);
    ``progress`` is called with a line of progress every ``every_n`` ticks (0: never).
    """
    from capplan.bench.online.frag import TypicalPods
    from capplan.bench.online.policies import BestFitPolicy, PolicyContext
    from capplan.bench.replay.protocol import run_events
    from capplan.bench.replay.sim import Replay

    ctx = PolicyContext(fleet=tr.fleet, pods=tr.pods, typical=TypicalPods.from_pods(tr.fleet, tr.pods), seed=seed)
    sim = Replay(tr, seed, BestFitPolicy(ctx))
    base = kueue_problem(tr, queues)
    capplan = {}
    for s in sigmas:
        seen_d = noisy_durations(tr.duration, s, seed)
        capplan[f"capplan-s{s:g}"] = CapplanEstimator(base, queues, queue_of, seen_d)
        if spread and s > 0:
            capplan[f"capplan-s{s:g}-expected"] = CapplanEstimator(base, queues, queue_of, seen_d, spread=s)
            if samples:
                capplan[f"capplan-s{s:g}-sampled"] = CapplanEstimator(base, queues, queue_of, seen_d, spread=s,
                                                                      samples=samples, seed=seed)
    rates = [AdmissionRate(half_life, window) for _ in queues]
    seen = [0] * len(queues)
    ticks: list[int] = []
    pods: list[int] = []
    cols: dict[str, list[float]] = {n: [] for n in (*capplan, "ma-ewma", "ma-window")}

    c0 = time.process_time()

    def on_tick(pol: KueueAdmission) -> None:
        if max_ticks is not None and pol.metrics["ticks"] > max_ticks:
            return
        if progress is not None and every_n and pol.metrics["ticks"] % every_n == 0:
            progress(f"tick {pol.metrics['ticks']} t={pol.sim.t} pending={sum(map(len, pol.pending))} "
                     f"cpu={time.process_time() - c0:.0f}s")
        for q, times in enumerate(pol.admissions):
            for t in times[seen[q]:]:
                rates[q].add(t)
            seen[q] = len(times)
        got = {n: est.estimate(pol) for n, est in capplan.items()}
        for q, pend in enumerate(pol.pending):
            ew, wi = rates[q].ewma(), rates[q].window()
            for pos, i in enumerate(pend, start=1):
                ticks.append(pol.sim.t)
                pods.append(i)
                cols["ma-ewma"].append(math.nan if ew is None else position_estimate(pol.sim.t, pos, ew))
                cols["ma-window"].append(math.nan if wi is None else position_estimate(pol.sim.t, pos, wi))
                for n, g in got.items():
                    cols[n].append(g[i])

    pol = KueueAdmission(sim, queues, queue_of, every, on_tick)
    t0 = time.perf_counter()
    run_events(sim, pol)
    if (sim.start < 0).any():
        raise RuntimeError("a pod never started")
    m: dict[str, Any] = dict(pol.metrics, replay_seconds=round(time.perf_counter() - t0, 1))
    for n, est in capplan.items():
        m[f"{n}_calls"] = est.calls
        m[f"{n}_seconds"] = round(est.seconds, 1)
    return EtaRun(tick=np.array(ticks, dtype=np.int64), pod=np.array(pods, dtype=np.int64),
                  estimates={n: np.array(v, dtype=np.float64) for n, v in cols.items()},
                  start=sim.start.copy(), arrival=tr.arrival.copy(), metrics=m)
