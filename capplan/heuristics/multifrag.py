"""Joint-fragmentation online policy (superseded as ``--policies capplan``; kept for comparison).

FGD (Weng et al., ATC'23) scores a node by how much the expected fragmentation of its GPUs
grows; the authors' scheduler squashes that growth through ``trunc(100 * sigmoid(d / 1000))``,
so many nodes tie. This policy adds host memory to the fragmentation (idle GPU capacity the
typical pods cannot use because of GPU share, GPU count, model, CPU *or memory*); with the
module switches below it can keep exact scores and break ties by best fit.

Measured on the default Alibaba trace (docs/benchmarks-fleet.md, docs/benchmarks-online.md):
exact scores and best-fit ties lose hundreds of GPUs to FGD, and the memory term changes
nothing measurable, so :func:`capplan.online.bench_policy` now returns
:class:`capplan.heuristics.online_balance.BalancedFGD` instead. The class still implements the
policy interface of :mod:`capplan.bench.policies` (``score``, ``gpus``, ``observe``).
"""

from __future__ import annotations

import numpy as np

from capplan.bench.frag import FloatArr, FragModel, TypicalPods
from capplan.bench.sim import MILLI, Pod, SimState, best_fit_gpus

_TIE = 0.0  # best-fit tie-break weight; measured worse than random ties on the Alibaba trace (see docs)
_SQUASH = True  # FGD's integer sigmoid score: its random tie-breaks measured better than exact scores


def _squash(delta: np.ndarray) -> np.ndarray:
    """FGD's ``trunc(100 * sigmoid(delta / 1000))`` (or the exact delta when ``_SQUASH`` is off)."""
    if not _SQUASH:
        return delta
    return np.trunc(100.0 / (1.0 + np.exp(-delta / 1000.0)))


class JointFragModel(FragModel):
    """FGD's fragmentation model with host memory as a further resource a typical pod needs.

    ``mem_need[t]`` is the median memory of typical shape ``t``; while a hypothetical placement is
    scored, :attr:`mem_rows` holds the nodes' remaining memory (aligned with the rows scored).
    """

    def __init__(self, typical: TypicalPods, state: SimState, mem_need: np.ndarray) -> None:
        self.mem_need = mem_need
        self.mem_rows: np.ndarray | None = None
        super().__init__(typical, state)

    def _frag(self, cnt: np.ndarray, fsum: np.ndarray, tot: np.ndarray, cpu: np.ndarray,
              access: np.ndarray) -> FloatArr:
        out = super()._frag(cnt, fsum, tot, cpu, access)
        mem = self.mem_rows
        if mem is None or mem.shape[:1] != cpu.shape[:1]:
            return out
        t = self.t
        # Shapes the node could host by GPU and CPU but not by memory: their usable share is lost too.
        hosts = self.gpu_shape & access & (cnt >= t.num) & (cpu[..., None] >= t.cpu)
        short = hosts & (mem[..., None] < self.mem_need)
        extra: FloatArr = (np.where(short, tot[..., None] - fsum, 0) * t.freq).sum(axis=-1)
        return out + extra


class MultiFragPolicy:
    """Scores nodes by the exact growth of joint fragmentation, best fit breaking ties."""

    def __init__(self, typical: TypicalPods, mem_need: np.ndarray) -> None:
        self.typical = typical
        self.mem_need = mem_need
        self.model: JointFragModel | None = None
        self.best_gpu: np.ndarray | None = None

    def _model(self, state: SimState) -> JointFragModel:
        if self.model is None:
            self.model = JointFragModel(self.typical, state, self.mem_need)
        return self.model

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """Minus the fragmentation growth (milli-GPU) of each feasible node, plus a best-fit tie-break."""
        model = self._model(state)
        n = len(state.cpu_left)
        out = np.full(n, -1e18)
        rows = np.flatnonzero(state.feasible(pod))
        if not len(rows):
            return out
        f = state.fleet
        # Memory enters only for whole-GPU pods: share scoring works on (node, GPU) pairs.
        model.mem_rows = None if pod.shares else state.mem_left[rows]
        before = model.frag_of(state, rows)
        fit = ((state.cpu_left[rows] - pod.cpu) / np.maximum(f.cpu[rows], 1)
               + (state.mem_left[rows] - pod.mem) / np.maximum(f.mem[rows], 1))
        if pod.shares:
            after = model.after_share(state, pod.cpu, pod.milli, rows)
            left = np.where(state.gpu_left[rows] >= pod.milli, state.gpu_left[rows] - pod.milli, MILLI)
            sc = _squash(before[:, None] - after) - _TIE * left / MILLI
            sc = np.nan_to_num(sc, nan=-1e18)
            self.best_gpu = np.zeros(n, dtype=np.int64)
            self.best_gpu[rows] = sc.argmax(axis=1)
            out[rows] = sc.max(axis=1) - _TIE * fit
        else:
            model.mem_rows = state.mem_left[rows] - pod.mem
            after = model.after_whole(state, pod.cpu, pod.num, rows)
            out[rows] = _squash(before - after) - _TIE * fit
        model.mem_rows = None
        return out

    def gpus(self, state: SimState, pod: Pod, node: int) -> tuple[int, ...]:
        """The GPU chosen while scoring (shares); lowest-numbered free GPUs otherwise."""
        if pod.shares and self.best_gpu is not None:
            return (int(self.best_gpu[node]),)
        return best_fit_gpus(state, pod, node)

    def observe(self, state: SimState, node: int) -> None:
        """Refresh the cached per-shape counts of the changed node."""
        self._model(state).refresh(state, np.array([node]))


def typical_memory(typical: TypicalPods, cpu: np.ndarray, milli: np.ndarray, num: np.ndarray,
                   mem: np.ndarray) -> np.ndarray:
    """Median memory (MiB) of the pods of each typical shape (matched by CPU, milli-GPU and GPU count)."""
    out = np.zeros(len(typical.freq))
    for j in range(len(out)):
        sel = (cpu == typical.cpu[j]) & (milli == typical.milli[j]) & (num == typical.num[j])
        out[j] = float(np.median(mem[sel])) if sel.any() else 0.0
    return out
