"""capplan's online policy: FGD's integer score, ties broken by the loss of CPU-backed GPU capacity.

FGD (Weng et al., USENIX ATC 2023) scores a node by ``trunc(100 * sigmoid(decrease / 1000))``
of its fragmentation against the typical pods; many nodes tie and the simulator takes the
first tied node in a seed-shuffled order, which spreads near-equal placements (measured: exact
scores or best-fit tie-breaks lose hundreds of GPUs on the Alibaba trace, see
docs/benchmarks-online.md). This policy keeps FGD's score and adds a *coarse* second level below it.

The second level is the **usable-GPU loss**. A node's idle GPUs are only usable while it has the
CPU to feed them: with ``c`` the mean CPU per GPU of the typical GPU pods, a node offers
``usable = min(free GPUs, free CPU / c)`` GPUs. Placing a pod that takes ``g`` GPUs and ``p``
CPU loses ``loss = usable_before - usable_after - g`` of them beyond what the pod itself uses:
positive when a CPU-heavy pod drains the CPU of a CPU-poor node (G2: 12 vCPU per GPU),
negative when a CPU-light pod uses GPUs that lacked CPU anyway, zero on CPU-rich nodes. The loss
is rounded to ``1 / steps`` GPU and clipped to [-2, 2], so most ties stay ties and FGD's
spreading still decides among them. For CPU-only pods the loss weighs far more (each half-GPU
step is worth 12.5 FGD points), so it mostly comes first: FGD counts every idle GPU as fragment
for a CPU-only shape, so its score hardly tells nodes apart for them. Measured: this keeps CPU
for GPU pods on the CPU-heavy ``cpu250`` trace and changed nothing on ``default`` and
``gpushare100`` (seed 42). Only the typical pods (FGD's own knowledge) are used up
front; everything else is the current occupancy, so there is no lookahead.
"""

from __future__ import annotations

import numpy as np

from capplan.bench.policies import FGDPolicy, PolicyContext
from capplan.bench.sim import MILLI, FloatArr, Pod, SimState

STEPS = 2.0  # the loss is rounded to half a GPU
WEIGHT = 0.4  # below one FGD score point: the second level only reorders FGD's ties
CPU_WEIGHT = 100.0  # CPU-only pods: a half-GPU loss step (12.5 points) outweighs most FGD differences
CLIP = 2.0


def cpu_per_gpu(ctx: PolicyContext) -> float:
    """Mean CPU (milli) per milli-GPU of the typical GPU pods, weighted by frequency (= cores per GPU)."""
    t = ctx.typical
    gpu = t.milli > 0
    want = float((t.freq * t.num * t.milli)[gpu].sum())
    return float((t.freq * t.cpu)[gpu].sum()) / want if want > 0 else 0.0


class BalancedFGD(FGDPolicy):
    """FGD whose ties are broken by the (rounded) usable-GPU loss, then by the seed-shuffled order.

    Parameters
    ----------
    ctx
        The run's context (fleet, pods, typical pods, seed); only the typical pods are read.
    steps
        The loss is rounded to ``1 / steps`` GPU.
    weight
        Scale of the second level; below 1 it only reorders nodes with equal FGD scores.
    cpu_weight
        The same scale for CPU-only pods (FGD scores lie in 0..100).
    """

    def __init__(self, ctx: PolicyContext, steps: float = STEPS, weight: float = WEIGHT,
                 cpu_weight: float = CPU_WEIGHT) -> None:
        super().__init__(ctx)
        self.steps = steps
        self.weight = weight
        self.cpu_weight = cpu_weight
        self.cpu_per_gpu = cpu_per_gpu(ctx)

    def loss(self, state: SimState, pod: Pod, rows: np.ndarray) -> FloatArr:
        """Usable GPUs lost beyond the pod's own, on nodes ``rows`` (GPUs; unrounded)."""
        free = state.gpu_left[rows].sum(axis=1) / MILLI
        cpu = state.cpu_left[rows].astype(np.float64)
        c = self.cpu_per_gpu
        if c <= 0:
            return np.zeros(len(rows))
        used = pod.num * pod.milli / MILLI
        before = np.minimum(free, cpu / (c * MILLI))  # CPU-backed GPUs: c is milli-CPU per milli-GPU
        after = np.minimum(free - used, (cpu - pod.cpu) / (c * MILLI))
        out: FloatArr = before - after - used
        return out

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """FGD's integer score plus ``weight * (1 - (rounded clipped loss + 2) / 4)`` (``cpu_weight``: CPU-only)."""
        out = super().score(state, pod)
        rows = np.flatnonzero(out >= 0)  # FGD marks infeasible nodes with -1
        if len(rows):
            lost = np.clip(np.round(self.loss(state, pod, rows) * self.steps) / self.steps, -CLIP, CLIP)
            w = self.weight if pod.num else self.cpu_weight
            out[rows] += w * (1.0 - (lost + CLIP) / (2 * CLIP))
        return out
