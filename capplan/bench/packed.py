"""capplan's online policy: FGD with the usable-GPU loss, and GPU shares packed by a learned plan.

:class:`PackedFGD` is :class:`capplan.bench.policies.BalancedFGD` (FGD's integer score, ties broken by
the usable-GPU loss, then by the seed-shuffled node order) with one change for GPU-sharing pods:
the *GPU* a share goes to follows a packing plan learned from the shares seen so far
(:class:`capplan.bench.shareplan.SharePlan`, the cutting-stock LP of their size mix). Each
(node, GPU) candidate of a share falls in one of three levels, ranked above FGD's score:

1. a partly used GPU on which the share follows the plan (for example an 810 share beside a
   160, a 320 beside a 650, a 470 beside a 470), so a planned GPU content gets completed;
2. a fully free GPU when the share starts a planned content (every planned size does);
3. anything else (a GPU where the share makes an unplanned mix, or a size too rare to plan).

Within a level FGD's score and the usable-GPU loss choose, as before; CPU-only and whole-GPU pods
are placed exactly as by :class:`BalancedFGD`. Before the first plan (the first 16 shares)
shares are placed as by :class:`BalancedFGD` too. Information used: the typical pods (as FGD),
the current occupancy and the sizes of the shares that arrived so far; nothing about future
arrivals.

Why: at 100% arrived on the Alibaba traces every unallocated GPU is leftover space on GPUs holding
shares (docs/benchmarks-online.md). FGD's fragmentation score judges a share's GPU against the
typical pods one placement at a time; it readily puts a 320 beside a 470 (210 milli left that
only rare small shares fill) or a 230 beside a 650 (120 left) when the plan would put the 320
beside a 650 (30 left) and start a new GPU for the 230.
"""

from __future__ import annotations

import numpy as np

from capplan.bench.policies import CLIP, BalancedFGD, PolicyContext, _f, _sigmoid_score
from capplan.bench.shareplan import SharePlan
from capplan.bench.sim import MILLI, FloatArr, IntArr, Pod, SimState

PLANNED_HOLE = 400.0  # level 1: above any FGD score (0..100) plus the loss term (< 1) and level 2
PLANNED_NEW = 200.0  # level 2


class PackedFGD(BalancedFGD):
    """:class:`BalancedFGD` whose shares follow a packing plan learned online (see the module).

    Parameters
    ----------
    ctx
        The run's context; only the typical pods are read (by FGD's score and the loss).
    plan
        The share plan (default: a fresh :class:`SharePlan`, first plan after 16 shares).
    """

    def __init__(self, ctx: PolicyContext, plan: SharePlan | None = None, keep_room: bool = True) -> None:
        super().__init__(ctx)
        self.plan = plan if plan is not None else SharePlan()
        self.keep_room = keep_room
        self.need: dict[int, tuple[int, int]] = {}  # per share size seen: least CPU and memory asked
        self.bonus: dict[int, FloatArr] = {}
        self.room_cpu = np.zeros(MILLI + 1)
        self.room_mem = np.zeros(MILLI + 1)

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """Count an arriving share (re-planning on schedule), then score as :class:`BalancedFGD`."""
        if pod.shares:
            cpu, mem = self.need.get(pod.milli, (pod.cpu, pod.mem))
            self.need[pod.milli] = (min(cpu, pod.cpu), min(mem, pod.mem))
            if self.plan.add(pod.milli):
                self._replanned()
        return super().score(state, pod)

    def _replanned(self) -> None:
        """New plan: rebuild the room tables; cached share scores used the old plan."""
        room_cpu, room_mem = np.zeros(MILLI + 1), np.zeros(MILLI + 1)
        if self.keep_room:
            room_cpu[1:], room_mem[1:] = np.inf, np.inf
            for milli, (cpu, mem) in self.need.items():
                at = self.plan.planned(milli)
                room_cpu[at] = np.minimum(room_cpu[at], cpu)
                room_mem[at] = np.minimum(room_mem[at], mem)
            room_cpu[np.isinf(room_cpu)], room_mem[np.isinf(room_mem)] = 0.0, 0.0  # no plan for the rest
        self.room_cpu, self.room_mem = room_cpu, room_mem
        self.bonus.clear()
        for key in [k for k in self.cache if k[2] == 1 and 0 < k[3] < MILLI]:
            del self.cache[key]

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
        """As :meth:`BalancedFGD.rows_score`; for a share, each GPU's FGD score plus its plan level first."""
        if not pod.shares:
            return super().rows_score(state, pod, rows)
        model = self._model(state)
        after = model.after_share(state, pod.cpu, pod.milli, rows)
        sc = np.nan_to_num(_sigmoid_score(self.frag[rows][:, None] - after), nan=-1.0)
        left = state.gpu_left[rows]
        bonus = self.levels(pod.milli)[left]
        rest = np.maximum(left - pod.milli, 0)  # GPUs without room score -1 anyway
        room = ((state.cpu_left[rows] - pod.cpu)[:, None] >= self.room_cpu[rest]) & \
            ((state.mem_left[rows] - pod.mem)[:, None] >= self.room_mem[rest])
        sc = np.where(sc >= 0, sc + np.where(room, bonus, 0.0), sc)
        lost = np.clip(np.round(self.loss(state, pod, rows) * self.steps) / self.steps, -CLIP, CLIP)
        return _f(sc.max(axis=1) + self.weight * (1.0 - (lost + CLIP) / (2 * CLIP))), sc.argmax(axis=1)
