"""capplan's online policy: FGD with the usable-GPU loss, and GPU shares packed by a learned plan.

:class:`PackedFGD` is :class:`capplan.bench.online.policies.BalancedFGD` (FGD's integer score, ties broken by
the usable-GPU loss, then by the seed-shuffled node order) with the *GPU* a share goes to chosen by a
packing plan learned from the shares seen so far (:class:`capplan.bench.online.shareplan.SharePlan`, the
cutting-stock LP of their size mix, with the typical pods' shares as a prior). Each (node, GPU)
candidate of a share falls in one of three levels, ranked above FGD's score:

1. a partly used GPU on which the share follows the plan (for example an 810 share beside a
   160, a 320 beside a 650, a 470 beside a 470), so a planned GPU content gets completed;
2. a fully free GPU when the share starts a planned content (every planned size does);
3. anything else (a GPU where the share makes an unplanned mix, or a size too rare to plan).

A planned placement keeps its level only if the node keeps the CPU and memory its planned holes
need afterwards (the *room*: per hole, over the sizes planned into it, the least of each size's
lower quartile of the CPU and memory its shares asked so far), so the GPU can still be completed.
Within a level a share first prefers a node that *keeps feeding shares like it*: after the share,
the node's free CPU and memory per free GPU milli are at least the share's own (+``share_fed``,
50); then FGD's score and the usable-GPU loss choose, as before. The feeding level applies only while
CPU and memory are not the scarcer resources: while the fleet's free CPU and free memory per free GPU milli
are at least what the trace's pods ask per GPU milli (CPU-only pods included; :meth:`PackedFGD.feeding`).
Where the pods ask as much CPU per GPU as the fleet has, the CPU kept beside the heavy shares is CPU the
CPU-only pods need (measured: docs/benchmarks-online.md). CPU-only and whole-GPU pods are
scored as by :class:`BalancedFGD`, less ``room_weight`` (0.4, below one FGD point: a tie-break) on
nodes where they would take the room.
Before the first plan (the first 16 shares) every pod is placed as by :class:`BalancedFGD`.

Above everything else, a GPU pod that accepts several GPU models loses ``model_short`` (1000) on
the nodes of a model that is *short*: whose usable free capacity, less what the pods tied to that
model are expected to need, is smaller than what the pod would take
(:class:`capplan.bench.online.pressure.ModelDemand`, learned from the demand arrived so far). On
traces without ``gpu_spec`` nothing is tied and this never applies.

Information used: the typical pods (as FGD) and the CPU and memory per GPU milli of the trace's pods,
the current occupancy, the sizes, CPU and memory of the shares that arrived so far, and the GPU demand
arrived so far per accepted model; nothing about future arrivals.

Why: at 100% arrived on the Alibaba traces every unallocated GPU is leftover space on GPUs holding
shares (docs/benchmarks-online.md). FGD's fragmentation score judges a share's GPU against the
typical pods one placement at a time; it readily puts a 320 beside a 470 (210 milli left that
only rare small shares fill) or a 230 beside a 650 (120 left) when the plan would put the 320
beside a 650 (30 left) and start a new GPU for the 230. The shares also differ in CPU and memory per
GPU milli (a 470 or 650 share usually asks 12 cores and 47 GB, an 810 share 3 cores and 6 GB; a G2
node offers 12 cores and 48 GB per GPU, a T4 node 52 cores and 256 GB): without the feeding level the
CPU- and memory-heavy shares' planned holes sit on nodes that cannot host their partners, which then
start new GPUs (measured: the same policy with the shares' CPU and memory set to zero left 6 GPUs fewer
unallocated on the default trace; the feeding level recovers most of them, docs/benchmarks-online.md).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from capplan.bench.online.policies import CLIP, BalancedFGD, PolicyContext, as_float, sigmoid_score
from capplan.bench.online.pressure import ModelDemand
from capplan.bench.online.shareplan import SharePlan
from capplan.bench.online.sim import MILLI, FloatArr, IntArr, Pod, SimState

PLANNED_HOLE = 400.0  # level 1: above any FGD score (0..100) plus the loss term (< 1) and level 2
PLANNED_NEW = 200.0  # level 2
PRIOR_PODS = 1000  # the typical pods' shares count as this many pods seen before the first arrival
MODEL_SHORT = 1000.0  # a flexible pod on a model the tied pods will need: below every other level
ROOM_WEIGHT = 0.4  # other pods: taking a node's room for its planned shares costs this (below one FGD point)
ROOM_QUANTILE = 0.25  # the room of a size: this quantile of what its shares asked (0: the least; 0.25 measured better)
SHARE_FED = 50.0  # a share on a node that keeps its CPU and memory per free GPU milli (within a plan level)


def lower_quantile(counts: Counter[int], q: float) -> int:
    """The ``q`` quantile of the values counted in ``counts``, lower value (numpy's ``method="lower"``)."""
    k = int(q * (counts.total() - 1))  # index into the sorted values
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen > k:
            return value
    raise ValueError("lower_quantile of no values")


def typical_shares(ctx: PolicyContext, pods: int = PRIOR_PODS) -> dict[int, int]:
    """The typical pods' GPU shares as counts (size -> round(frequency x ``pods``)), summed over shapes."""
    t = ctx.typical
    out: dict[int, int] = {}
    for milli, num, freq in zip(t.milli.tolist(), t.num.tolist(), t.freq.tolist(), strict=True):
        if num == 1 and 0 < milli < MILLI:
            out[milli] = out.get(milli, 0) + round(freq * pods)
    return out


class PackedFGD(BalancedFGD):
    """:class:`BalancedFGD` whose shares follow a packing plan learned online (see the module).

    Parameters
    ----------
    ctx
        The run's context; only the typical pods are read (FGD's score, the loss, the plan's prior).
    plan
        The share plan (default: a :class:`SharePlan` with the typical pods' shares as its prior,
        first plan after 16 shares).
    room_weight
        Score taken off a CPU-only or whole-GPU pod's node when the pod leaves it less CPU or
        memory than its planned holes need (see :meth:`room`); 0 turns this off.
    model_short
        Score taken off a flexible GPU pod's node whose GPU model is short for the pods tied to it
        (see the module); 0 turns this off.
    share_fed
        Score added, for a share, to the nodes that keep feeding shares like it (see :meth:`feeds`)
        while CPU and memory are not scarcer than GPUs (:meth:`feeding`); below the gap between two
        plan levels; 0 turns this off.
    room_quantile
        The room a planned share size needs: this quantile (lower value) of the CPU and of the memory
        the shares of that size asked so far (0: the least).
    """

    def __init__(self, ctx: PolicyContext, plan: SharePlan | None = None, room_weight: float = ROOM_WEIGHT,
                 model_short: float = MODEL_SHORT, share_fed: float = SHARE_FED,
                 room_quantile: float = ROOM_QUANTILE) -> None:
        super().__init__(ctx)
        self.model_short = model_short
        self.share_fed = share_fed
        self.room_quantile = room_quantile
        self.plan = plan if plan is not None else SharePlan(prior=typical_shares(ctx))
        self.room_weight = room_weight
        self.asked_cpu: dict[int, Counter[int]] = {}  # per share size seen: how often each CPU (milli) was asked
        self.asked_mem: dict[int, Counter[int]] = {}  # and each memory (MiB)
        self.bonus: dict[int, FloatArr] = {}
        self.room_cpu = np.zeros(MILLI + 1)  # per free milli of a GPU: CPU its planned share needs
        self.room_mem = np.zeros(MILLI + 1)
        self.models = ModelDemand(ctx.fleet)  # every free GPU milli counts: measured better than CPU-backed only
        pods = ctx.pods
        asked = float((pods.milli * pods.num).sum())  # GPU milli the trace's pods ask
        self.asks_cpu = float(pods.cpu.sum()) / asked if asked else 0.0  # CPU per GPU milli the pods ask
        self.asks_mem = float(pods.mem.sum()) / asked if asked else 0.0
        self.fed_on = True  # the feeding level applies (:meth:`feeding`)

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """Count an arriving pod (a share re-plans on schedule), score as :class:`BalancedFGD`, then the model level."""
        if pod.shares:
            # counters of ints, one per size, no tuple per pod: few tracked objects, few collector passes;
            # a trace has a handful of distinct requests per size, so the quantile is cheap at a re-plan
            self.asked_cpu.setdefault(pod.milli, Counter())[pod.cpu] += 1
            self.asked_mem.setdefault(pod.milli, Counter())[pod.mem] += 1
            changed = self.plan.add(pod.milli)
            if changed is not None:  # re-planned
                self._replanned(changed)
        self.models.add(pod)
        if pod.shares and (on := self.feeding(state)) != self.fed_on:  # only a share's score reads the level;
            self.fed_on = on  # the cached share scores carry it: drop them
            self.cache.clear()
        out = super().score(state, pod)
        short = self.models.short(state, pod)
        if short is not None and short.any():
            return as_float(out - self.model_short * (short & (out >= 0)))  # infeasible nodes stay at -1
        return out

    def feeding(self, state: SimState) -> bool:
        """Whether the feeding level applies now: the fleet's free CPU and free memory per free GPU milli are at
        least what the trace's pods ask per GPU milli (when CPU runs out before GPUs, the CPU kept for shares'
        partners is taken from the CPU-only pods). A fleet without free GPU milli feeds nothing either way."""
        free = int(state.gpu_left.sum())
        if free <= 0:
            return True
        return (float(state.cpu_left.sum()) >= self.asks_cpu * free
                and float(state.mem_left.sum()) >= self.asks_mem * free)

    def _replanned(self, changed: set[int]) -> None:
        """New plan: rebuild the room tables; drop the cached scores that used what changed."""
        room_cpu, room_mem = np.full(MILLI + 1, np.inf), np.full(MILLI + 1, np.inf)
        need_mem = self.needs(self.asked_mem)
        for milli, cpu in self.needs(self.asked_cpu).items():
            at = self.plan.planned(milli)
            room_cpu[at] = np.minimum(room_cpu[at], cpu)
            room_mem[at] = np.minimum(room_mem[at], need_mem[milli])
        room_cpu[np.isinf(room_cpu)], room_mem[np.isinf(room_mem)] = 0.0, 0.0  # holes no plan fills
        room_cpu[MILLI], room_mem[MILLI] = 0.0, 0.0  # a free GPU is no hole
        if not (np.array_equal(room_cpu, self.room_cpu) and np.array_equal(room_mem, self.room_mem)):
            self.room_cpu, self.room_mem = room_cpu, room_mem
            self.cache.clear()  # every pod's score reads the room
        else:  # only the levels of the changed sizes moved
            for key in [k for k in self.cache if k[2] == 1 and k[3] in changed]:
                del self.cache[key]
        for milli in changed:
            self.bonus.pop(milli, None)

    def needs(self, asked: dict[int, Counter[int]]) -> dict[int, int]:
        """Per share size, the ``room_quantile`` quantile of ``asked`` (CPU or memory per share), lower value."""
        return {milli: lower_quantile(counts, self.room_quantile) for milli, counts in asked.items()}

    def _state_id(self, state: SimState, node: int) -> int:
        """As FGD's, with the free memory: the room check reads it."""
        key = b"%s|%d|%d|" % (state.fleet.model[node].encode(), state.cpu_left[node], state.mem_left[node]) + \
            state.gpu_left[node].tobytes()
        return self.states.setdefault(key, len(self.states))

    def room(self, state: SimState, rows: IntArr) -> tuple[FloatArr, FloatArr]:
        """CPU and memory the planned holes of nodes ``rows`` need, one GPU slot per column.

        A GPU with ``h`` milli free (0 < h < 1000) on which the plan puts some share size needs the
        least, over those sizes, of the lower quartile (``room_quantile``) of the CPU and memory their
        shares asked so far (the share that would complete the GPU); other holes need nothing.
        """
        left = state.gpu_left[rows]
        return self.room_cpu[left], self.room_mem[left]

    def levels(self, milli: int) -> FloatArr:
        """Bonus of a ``milli`` share by the free milli (0..1000) of the GPU it goes to."""
        out = self.bonus.get(milli)
        if out is None:
            planned = self.plan.planned(milli)
            out = np.where(planned, PLANNED_HOLE, 0.0)
            out[-1] = PLANNED_NEW if planned[-1] else 0.0
            self.bonus[milli] = out
        return out

    def rows_score(self, state: SimState, pod: Pod, rows: IntArr) -> tuple[FloatArr, IntArr]:
        """As :meth:`BalancedFGD.rows_score`; for a share, each GPU's FGD score plus its plan level first.

        A planned placement keeps its level only if the node keeps, after it, the CPU and memory
        its planned holes need (the new hole's included), so the GPU can still be completed. Other
        pods lose ``room_weight`` on nodes where they take that room.
        """
        rc, rm = self.room(state, rows)
        cpu_after, mem_after = state.cpu_left[rows] - pod.cpu, state.mem_left[rows] - pod.mem
        if not pod.shares:
            out, gpu = super().rows_score(state, pod, rows)
            took = (cpu_after < rc.sum(axis=1)) | (mem_after < rm.sum(axis=1))
            return out - self.room_weight * took, gpu
        model = self._model(state)
        after = model.after_share(state, pod.cpu, pod.milli, rows)
        sc = np.nan_to_num(sigmoid_score(self.frag[rows][:, None] - after), nan=-1.0)
        left = state.gpu_left[rows]
        rest = np.maximum(left - pod.milli, 0)  # GPUs without room score -1 anyway
        need_cpu = rc.sum(axis=1)[:, None] - rc + self.room_cpu[rest]
        need_mem = rm.sum(axis=1)[:, None] - rm + self.room_mem[rest]
        kept = (cpu_after[:, None] >= need_cpu) & (mem_after[:, None] >= need_mem)
        sc = np.where(sc >= 0, sc + np.where(kept, self.levels(pod.milli)[left], 0.0), sc)
        lost = np.clip(np.round(self.loss(state, pod, rows) * self.steps) / self.steps, -CLIP, CLIP)
        fed = self.share_fed * self.feeds(state, pod, rows) if self.fed_on else 0.0
        return as_float(sc.max(axis=1) + fed + self.weight * (1.0 - (lost + CLIP) / (2 * CLIP))), sc.argmax(axis=1)

    @staticmethod
    def feeds(state: SimState, pod: Pod, rows: IntArr) -> npt.NDArray[np.bool_]:
        """Nodes ``rows`` that keep feeding shares like ``pod``: free CPU and memory per free GPU milli after it
        at least the share's own (``cpu_after / free_after >= pod.cpu / pod.milli``, memory alike).

        Heavy shares (CPU or memory per GPU milli above the node's) go to the nodes that can still host
        their planned partners; light ones qualify almost anywhere, so for them FGD's score decides.
        """
        free = state.gpu_left[rows].sum(axis=1) - pod.milli
        cpu, mem = state.cpu_left[rows] - pod.cpu, state.mem_left[rows] - pod.mem
        out: npt.NDArray[np.bool_] = (cpu * pod.milli >= pod.cpu * free) & (mem * pod.milli >= pod.mem * free)
        return out
