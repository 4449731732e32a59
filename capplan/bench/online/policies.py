"""Online placement policies: each scores every node for an arriving pod (higher is better).

A policy is any object with ``score(state, pod) -> ndarray`` (one float per node; the simulator
reads only feasible nodes and breaks ties uniformly at random). Optional methods:
``gpus(state, pod, node) -> tuple[int, ...]`` picks the GPUs on the chosen node (default: the
tightest-fitting GPU for a share, the lowest-numbered free GPUs otherwise) and
``observe(state, node)`` is called after the node's occupancy changed (for caches).

The baselines follow the public descriptions and the FGD authors' simulator
(hkust-adsl/kubernetes-scheduler-simulator), including its integer score truncation, which
decides how often ties (and so random tie-breaks) happen. ``capplan`` is capplan's own
online policy, :class:`capplan.bench.online.packed.PackedFGD` (:class:`BalancedFGD` with GPU shares packed
by a plan learned online; see docs/benchmarks-online.md); ``capplan-balanced`` is
:class:`BalancedFGD` alone, the previous ``capplan`` policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capplan.bench.online.frag import FragModel, TypicalPods
from capplan.bench.online.sim import MILLI, Fleet, FloatArr, IntArr, Pod, PodTable, SimState, best_fit_gpus

MAX_SPEC_CPU = 128_000  # normalisers of the authors' simulator (milli-CPU, milli-GPU)
MAX_SPEC_GPU = 8_000


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may know up front: the fleet, the pods, their typical shapes and a seed."""

    fleet: Fleet
    pods: PodTable
    typical: TypicalPods
    seed: int


def as_float(x: np.ndarray) -> FloatArr:
    return np.asarray(x, dtype=np.float64)


class RandomPolicy:
    """Uniformly random feasible node; a random fitting GPU for shares."""

    def __init__(self, ctx: PolicyContext) -> None:
        self.rng = np.random.default_rng(ctx.seed + 7919)

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """A random real score per node, so the best feasible node is uniform among them.

        Integer scores in [0, 100] would tie on ~1% of a thousand feasible nodes, and ties go to
        the first node in the fixed shuffled order: that packs instead of spreading and placed
        1.8-5.2 points more than the authors' Random (which picks one candidate uniformly).
        """
        return as_float(self.rng.random(len(state.cpu_left)))

    def gpus(self, state: SimState, pod: Pod, node: int) -> tuple[int, ...]:
        """A random GPU with room for a share; lowest-numbered free GPUs otherwise."""
        if pod.shares:
            fit = np.flatnonzero(state.gpu_left[node] >= pod.milli)
            return (int(fit[self.rng.integers(len(fit))]),)
        return best_fit_gpus(state, pod, node)


class FirstFitPolicy:
    """The first feasible node in fleet order."""

    def __init__(self, ctx: PolicyContext) -> None:
        self.order = -np.arange(len(ctx.fleet.cpu), dtype=np.float64)

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """Earlier nodes score higher."""
        return self.order


def _k8s_shares(state: SimState, pod: Pod) -> list[tuple[np.ndarray, np.ndarray]]:
    """(requested after placement, capacity) per resource: CPU, memory and GPU (GPU nodes only)."""
    f = state.fleet
    gpu_cap = f.gpus * MILLI
    gpu_req = gpu_cap - state.gpu_left.sum(axis=1) + pod.num * pod.milli
    return [(f.cpu - state.cpu_left + pod.cpu, f.cpu), (f.mem - state.mem_left + pod.mem, f.mem), (gpu_req, gpu_cap)]


class AllocatedPolicy:
    """Kubernetes NodeResourcesLeastAllocated (spread) or MostAllocated (bin pack), equal weights.

    Per resource the integer score is ``(capacity - requested) * 100 // capacity`` (least) or
    ``requested * 100 // capacity`` (most); resources a node lacks (GPU on CPU nodes) are skipped.
    """

    def __init__(self, ctx: PolicyContext, most: bool) -> None:
        self.most = most

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """The weighted mean of the per-resource scores."""
        total = np.zeros(len(state.cpu_left), dtype=np.int64)
        weight = np.zeros_like(total)
        for req, cap in _k8s_shares(state, pod):
            has = cap > 0
            safe = np.where(has, cap, 1)
            part = req * 100 // safe if self.most else (safe - req) * 100 // safe
            total += np.where(has, part, 0)
            weight += has
        return as_float(total // np.maximum(weight, 1))


class BestFitPolicy:
    """Best fit: least (CPU, total GPU) left after placement, normalised by the largest node spec."""

    def __init__(self, ctx: PolicyContext) -> None:
        pass

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """``trunc(100 * (1 - 0.5 cpu_free'/128 - 0.5 gpu_free'/8))``."""
        cpu = (state.cpu_left - pod.cpu) / MAX_SPEC_CPU * 0.5
        gpu = (state.gpu_left.sum(axis=1) - pod.num * pod.milli) / MAX_SPEC_GPU * 0.5
        return as_float(np.trunc((1.0 - (cpu + gpu)) * 100))


class DotProductPolicy:
    """Tetris-style dot product of free (CPU, GPU) and request; the smallest product wins."""

    def __init__(self, ctx: PolicyContext) -> None:
        pass

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """``trunc(100 * (1 - (free . request) / 2))`` with both vectors scaled by the max spec."""
        dot = (state.cpu_left / MAX_SPEC_CPU) * (pod.cpu / MAX_SPEC_CPU) + \
            (state.gpu_left.sum(axis=1) / MAX_SPEC_GPU) * (pod.num * pod.milli / MAX_SPEC_GPU)
        return as_float(np.trunc(100 * (1 - dot / 2)))


class GpuPackingPolicy:
    """GPU packing: prefer partly used GPUs, then free GPUs on used nodes, then empty nodes."""

    def __init__(self, ctx: PolicyContext) -> None:
        pass

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """Three bands (upstream scores): [50,100] shared GPUs, [33,50] used node, [0,33] idle node."""
        n = len(state.cpu_left)
        if not pod.num:
            return np.zeros(n)
        left = state.gpu_left
        full = (left == MILLI).sum(axis=1)
        idle_node = full == state.fleet.gpus
        out = np.maximum(33 - full, full).astype(np.float64)  # idle node
        if pod.shares:
            # The tightest GPU that fits; a fully free one means band 2 (one free GPU used).
            tight = np.where(left >= pod.milli, left, 10 * MILLI).min(axis=1)
            shared = np.maximum(100 - (tight * 100 // MILLI) // 10, 50)
            used = np.where(tight == MILLI, np.maximum(50 - 1, 33), shared)
        else:
            used = np.full(n, float(max(50 - pod.num, 33)))
        return as_float(np.where(idle_node, out, used))


class GpuClusteringPolicy:
    """GPU clustering: put pods of the same GPU shape together, fuller nodes first."""

    def __init__(self, ctx: PolicyContext) -> None:
        pass

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """25 x used share + 75 (only this shape), 50 (mixed with it), 25 (no GPU pods) or 0."""
        n = len(state.cpu_left)
        if not pod.num:
            return np.zeros(n)
        from capplan.bench.online.sim import gpu_tag

        tag = gpu_tag(pod.num, pod.milli)
        base = 25 * (MAX_SPEC_GPU - state.gpu_left.sum(axis=1)) // MAX_SPEC_GPU
        kinds = (state.tags > 0).sum(axis=1)
        mine = state.tags[:, tag] > 0
        band = np.where(mine, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return as_float(base + band)


def sigmoid_score(delta: np.ndarray) -> FloatArr:
    """Upstream's ``int64(sigmoid(delta / 1000) * 100)``."""
    return np.trunc(100.0 / (1.0 + np.exp(-delta / 1000.0)))


class _Scores:
    """Cached scores of one pod shape: per node the score, the chosen GPU and the node version used."""

    __slots__ = ("gpu", "score", "ver")

    def __init__(self, n: int) -> None:
        self.score = np.full(n, -1.0)
        self.gpu = np.zeros(n, dtype=np.int64)
        self.ver = np.full(n, -1, dtype=np.int64)


MAX_SHAPES = 1024  # cached pod shapes per run (the oldest is dropped beyond); a trace has a few hundred


class FGDPolicy:
    """Fragmentation gradient descent: the node (and GPU) whose fragmentation grows least.

    Fragmentation is measured against the workload's typical pod shapes (:mod:`capplan.bench.online.frag`);
    the score is upstream's truncated ``100 * sigmoid(decrease / 1000)``. For a share the GPU is
    the first one reaching the node's best score.

    A node's score depends only on that node's occupancy and the pod's shape, so scores are cached
    per pod shape (CPU, memory, GPU count, milli-GPU, accepted models) together with the version of
    every node they were computed from; ``observe`` bumps the changed node's version and the next
    pod of a shape rescores only the nodes changed since that shape was last scored. Every state
    change must therefore be reported through ``observe`` (the simulator does, rollbacks included).
    Infeasible nodes score -1. The returned scores are a read-only view of the cache.
    """

    def __init__(self, ctx: PolicyContext) -> None:
        self.typical = ctx.typical
        self.model: FragModel | None = None
        self.ver = np.zeros(len(ctx.fleet.cpu), dtype=np.int64)
        self.frag = np.zeros(0)
        self.cache: dict[tuple[int, int, int, int, tuple[str, ...]], _Scores] = {}
        self.last: _Scores | None = None
        self.started = False
        self.states: dict[bytes, int] = {}
        self.sid = np.zeros(0, dtype=np.int64)
        self._model(SimState.empty(ctx.fleet))  # start-up work; redone if the first state is not empty
        self.started = True  # until the first pod: the model above was built for an empty cluster

    def _model(self, state: SimState) -> FragModel:
        if self.model is None or (self.started and not self._is_empty(state)):
            self.started = False
            self.model = FragModel(self.typical, state)
            self.frag = self.model.node_frag(state)
            self.sid = np.array([self._state_id(state, i) for i in range(len(self.ver))], dtype=np.int64)
        return self.model

    @staticmethod
    def _is_empty(state: SimState) -> bool:
        return state.used_milli == 0 and bool((state.cpu_left == state.fleet.cpu).all()) and \
            bool((state.mem_left == state.fleet.mem).all())

    def _state_id(self, state: SimState, node: int) -> int:
        """A number per distinct scoring-relevant node state (model, free CPU, free milli per slot)."""
        # bytes, not a tuple: not tracked by the garbage collector, so the table adds nothing to its pauses
        key = b"%s|%d|" % (state.fleet.model[node].encode(), state.cpu_left[node]) + state.gpu_left[node].tobytes()
        return self.states.setdefault(key, len(self.states))

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """Score every node by the (truncated, squashed) decrease of its fragmentation; -1 if infeasible."""
        self._model(state)
        self.started = False
        key = (pod.cpu, pod.mem, pod.num, pod.milli, pod.spec)
        entry = self.cache.pop(key, None)  # re-inserted last: the dict keeps the least recent first
        if entry is None:
            entry = _Scores(len(self.ver))
            if len(self.cache) >= MAX_SHAPES:
                del self.cache[next(iter(self.cache))]
        self.cache[key] = entry
        dirty = np.flatnonzero(entry.ver != self.ver)
        if len(dirty):
            ok = state.feasible(pod, dirty)
            rows = dirty[ok]
            entry.score[dirty[~ok]] = -1.0
            if len(rows):
                # Nodes in the same state (model, free CPU, free milli per GPU slot) score the same:
                # score one node per state and copy.
                _, first, inv = np.unique(self.sid[rows], return_index=True, return_inverse=True)
                sc, gpu = self.rows_score(state, pod, rows[first])
                entry.score[rows], entry.gpu[rows] = sc[inv], gpu[inv]
            entry.ver[dirty] = self.ver[dirty]
        self.last = entry
        out = entry.score.view()
        out.flags.writeable = False  # the cache itself: callers must not change it
        return out

    def rows_score(self, state: SimState, pod: Pod, rows: IntArr) -> tuple[FloatArr, IntArr]:
        """Scores of the feasible nodes ``rows`` and, for a share, the GPU chosen on each (else 0)."""
        model = self._model(state)
        before = self.frag[rows]
        if pod.shares:
            after = model.after_share(state, pod.cpu, pod.milli, rows)
            sc = np.nan_to_num(sigmoid_score(before[:, None] - after), nan=-1.0)
            return as_float(sc.max(axis=1)), sc.argmax(axis=1)
        return sigmoid_score(before - model.after_whole(state, pod.cpu, pod.num, rows)), np.zeros(len(rows), np.int64)

    def gpus(self, state: SimState, pod: Pod, node: int) -> tuple[int, ...]:
        """The GPU chosen while scoring (shares); lowest-numbered free GPUs otherwise."""
        if pod.shares and self.last is not None:
            return (int(self.last.gpu[node]),)
        return best_fit_gpus(state, pod, node)

    def observe(self, state: SimState, node: int) -> None:
        """Refresh the changed node's per-shape counts and fragmentation; invalidate its cached scores."""
        model = self._model(state)
        rows = np.array([node])
        model.refresh(state, rows)
        self.frag[node] = model.frag_of(state, rows)[0]
        self.sid[node] = self._state_id(state, node)
        self.ver[node] += 1


# --- capplan's online policy -------------------------------------------------------------------
#
# capplan's online policy: FGD's integer score, ties broken by the loss of CPU-backed GPU capacity.
#
# FGD (Weng et al., USENIX ATC 2023) scores a node by ``trunc(100 * sigmoid(decrease / 1000))``
# of its fragmentation against the typical pods; many nodes tie and the simulator takes the
# first tied node in a seed-shuffled order, which spreads near-equal placements (measured: exact
# scores or best-fit tie-breaks lose hundreds of GPUs on the Alibaba trace, see
# docs/benchmarks-online.md). This policy keeps FGD's score and adds a *coarse* second level below it.
#
# The second level is the **usable-GPU loss**. A node's idle GPUs are only usable while it has the
# CPU to feed them: with ``c`` the mean CPU per GPU of the typical GPU pods, a node offers
# ``usable = min(free GPUs, free CPU / c)`` GPUs. Placing a pod that takes ``g`` GPUs and ``p``
# CPU loses ``loss = usable_before - usable_after - g`` of them beyond what the pod itself uses:
# positive when a CPU-heavy pod drains the CPU of a CPU-poor node (G2: 12 vCPU per GPU),
# negative when a CPU-light pod uses GPUs that lacked CPU anyway, zero on CPU-rich nodes. The loss
# is rounded to ``1 / steps`` GPU and clipped to [-2, 2], so most ties stay ties and FGD's
# spreading still decides among them. For CPU-only pods the loss weighs far more (each half-GPU
# step is worth 12.5 FGD points), so it mostly comes first: FGD counts every idle GPU as fragment
# for a CPU-only shape, so its score hardly tells nodes apart for them. Measured: this keeps CPU
# for GPU pods on the CPU-heavy ``cpu250`` trace and changed nothing on ``default`` and
# ``gpushare100`` (seed 42). Only the typical pods (FGD's own knowledge) are used up
# front; everything else is the current occupancy, so there is no lookahead.

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

    def rows_score(self, state: SimState, pod: Pod, rows: IntArr) -> tuple[FloatArr, IntArr]:
        """FGD's integer score plus ``weight * (1 - (rounded clipped loss + 2) / 4)`` (``cpu_weight``: CPU-only)."""
        out, gpu = super().rows_score(state, pod, rows)
        lost = np.clip(np.round(self.loss(state, pod, rows) * self.steps) / self.steps, -CLIP, CLIP)
        w = self.weight if pod.num else self.cpu_weight
        return out + w * (1.0 - (lost + CLIP) / (2 * CLIP)), gpu
