"""GPU fragmentation as defined by FGD (Weng et al., USENIX ATC 2023), vectorised over nodes.

The measure is relative to a *target workload*: the most popular pod shapes ("typical pods") with
their frequencies. For one node and one typical pod shape ``t`` (CPU ``c_t``, ``n_t`` GPUs of
``m_t`` milli-GPU each, accepted models), the node's idle GPU milli counts as fragment when the
node cannot host ``t`` at all (too little CPU, too few GPUs with ``m_t`` free, wrong model, or
``t`` asks no GPU); when it can, only the GPUs with less than ``m_t`` free count. The node's
fragmentation is the frequency-weighted sum over shapes; the cluster's is the sum over nodes.

Typical pods follow the authors' simulator: shapes keyed by (CPU, milli-GPU, GPU count, model
constraint), CPU-only pods included, most frequent first until they cover 95% of all pods, then
renormalised.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capplan.bench.online.sim import MILLI, Fleet, PodTable, SimState

IntArr = npt.NDArray[np.int64]
FloatArr = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TypicalPods:
    """Target pod shapes: per shape CPU (milli), milli-GPU per GPU, GPU count, frequency, node access."""

    cpu: IntArr
    milli: IntArr
    num: IntArr
    freq: FloatArr
    access: npt.NDArray[np.bool_]  # (nodes, shapes): the node's GPU model is accepted

    @classmethod
    def from_pods(cls, fleet: Fleet, pods: PodTable, rows: IntArr | None = None,
                  threshold: float = 0.95) -> TypicalPods:
        """The typical shapes of ``pods`` (all rows, or ``rows``), covering ``threshold`` of them."""
        idx = np.arange(len(pods.cpu)) if rows is None else rows
        count: Counter[tuple[int, int, int, str]] = Counter()
        for i in idx:
            spec = "|".join(pods.specs[pods.spec_id[i]])
            count[(int(pods.cpu[i]), int(pods.milli[i]), int(pods.num[i]), spec)] += int(pods.replicas[i])
        total = sum(count.values())
        # Most frequent first; equal counts ordered by (cpu, milli, num, model) descending, as upstream.
        ranked = sorted(count.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        chosen, cum = [], 0
        for key, n in ranked:
            if cum >= threshold * total:
                break
            chosen.append((key, n))
            cum += n
        freq = np.array([n / cum for _, n in chosen], dtype=np.float64)
        access = np.ones((len(fleet.cpu), len(chosen)), dtype=bool)
        for j, ((_, _, _, spec), _) in enumerate(chosen):
            if spec:
                access[:, j] = fleet.model_mask(tuple(spec.split("|")))
        return cls(cpu=np.array([k[0] for k, _ in chosen], dtype=np.int64),
                   milli=np.array([k[1] for k, _ in chosen], dtype=np.int64),
                   num=np.array([k[2] for k, _ in chosen], dtype=np.int64), freq=freq, access=access)


class FragModel:
    """Per-node fragmentation with cached per-shape counts, updated one node at a time.

    For every node and typical shape it keeps ``cnt`` (GPUs with at least ``m_t`` free) and ``fsum``
    (free milli on GPUs with less than ``m_t`` free); hypothetical placements are evaluated from
    these in closed form, so scoring a pod costs O(nodes x GPUs x shapes) array work.
    """

    def __init__(self, typical: TypicalPods, state: SimState) -> None:
        self.t = typical
        self.gpu_shape = typical.milli > 0  # CPU-only shapes: every idle GPU milli is fragment
        n = len(state.cpu_left)
        self.cnt = np.zeros((n, len(typical.freq)), dtype=np.int64)
        self.fsum = np.zeros_like(self.cnt)
        self.refresh(state, np.arange(n))

    def refresh(self, state: SimState, nodes: IntArr) -> None:
        """Recompute the cached counts of ``nodes`` from the state."""
        left = state.gpu_left[nodes][:, :, None]  # (k, G, 1)
        m = self.t.milli[None, None, :]
        self.cnt[nodes] = (left >= m).sum(axis=1)
        self.fsum[nodes] = np.where(left < m, left, 0).sum(axis=1)

    def _frag(self, cnt: IntArr, fsum: IntArr, tot: IntArr, cpu: IntArr, access: npt.NDArray[np.bool_]) -> FloatArr:
        t = self.t
        hosts = self.gpu_shape & access & (cnt >= t.num) & (cpu[..., None] >= t.cpu)
        part = np.where(hosts, fsum, tot[..., None])
        out: FloatArr = (part * t.freq).sum(axis=-1)
        return out

    def node_frag(self, state: SimState) -> FloatArr:
        """Current fragmentation (milli-GPU) of every node."""
        return self._frag(self.cnt, self.fsum, state.gpu_left.sum(axis=1), state.cpu_left, self.t.access)

    def after_whole(self, state: SimState, cpu: int, k: int, rows: IntArr) -> FloatArr:
        """Fragmentation of nodes ``rows`` after taking ``cpu`` and ``k`` fully free GPUs (k may be 0)."""
        m = self.t.milli
        # A fully free GPU counts towards every GPU shape; once taken it leaves 0 free, no fragment.
        cnt = self.cnt[rows] - k * (m <= MILLI)
        tot = state.gpu_left[rows].sum(axis=1) - k * MILLI
        return self._frag(cnt, self.fsum[rows], tot, state.cpu_left[rows] - cpu, self.t.access[rows])

    def after_share(self, state: SimState, cpu: int, milli: int, rows: IntArr) -> FloatArr:
        """Fragmentation of every (node in ``rows``, GPU) after a ``milli`` share on that GPU.

        GPUs of one node with the same free share give the same result, so each distinct
        (node, free share) pair is evaluated once; entries for GPUs without room are NaN.
        """
        left_rows = state.gpu_left[rows]
        fits = left_rows >= milli
        key = np.where(fits, np.arange(len(rows))[:, None] * (4 * MILLI) + left_rows, -1)
        uniq, inv = np.unique(key, return_inverse=True)
        valid = uniq >= 0
        pair_row, pair_left = uniq[valid] // (4 * MILLI), uniq[valid] % (4 * MILLI)
        m = self.t.milli[None, :]
        left, new = pair_left[:, None], pair_left[:, None] - milli
        cnt = self.cnt[rows][pair_row] - (left >= m) + (new >= m)
        fsum = self.fsum[rows][pair_row] - np.where(left < m, left, 0) + np.where(new < m, new, 0)
        tot = state.gpu_left[rows].sum(axis=1)[pair_row] - milli
        vals = self._frag(cnt, fsum, tot, state.cpu_left[rows][pair_row] - cpu, self.t.access[rows][pair_row])
        full = np.full(len(uniq), np.nan)
        full[valid] = vals
        out: FloatArr = full[inv.reshape(key.shape)]
        return out

    def frag_of(self, state: SimState, rows: IntArr) -> FloatArr:
        """Current fragmentation (milli-GPU) of nodes ``rows``."""
        return self._frag(self.cnt[rows], self.fsum[rows], state.gpu_left[rows].sum(axis=1), state.cpu_left[rows],
                          self.t.access[rows])


def cluster_frag(typical: TypicalPods, state: SimState) -> tuple[float, float]:
    """FGD fragmentation of the whole cluster: (fragment milli-GPU, fragment share of idle GPU milli)."""
    model = FragModel(typical, state)
    frag = float(model.node_frag(state).sum())
    idle = float(state.gpu_left.sum())
    return frag, (frag / idle if idle else 0.0)
