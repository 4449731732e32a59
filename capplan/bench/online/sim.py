"""Fast online placement simulator over trace nodes and pods (the FGD experimental protocol).

State is a handful of numpy arrays: free CPU (milli) and memory (MiB) per node and free milli-GPU
per (node, GPU slot). A pod arrives, the feasible nodes are found with array operations (CPU,
memory, accepted GPU model, a GPU with enough free share or enough fully free GPUs), the policy
scores all nodes at once, the best feasible node wins and the policy picks the GPUs. Ties go to
the first node in a node order shuffled by the run's seed: the authors' simulator renames nodes
with a random numeric prefix and takes the first best node in name order, and only this
tie-break reproduces their published curves (uniform random tie-breaking costs FGD about 5
points, see docs/benchmarks.md). A pod that does not fit on
arrival fails for good; pods never leave. A pod with ``replicas > 1`` is a gang: its members are
placed one after the other and all are rolled back if one does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from capplan.io.alibaba import TraceNode, TracePod

MILLI = 1000
IntArr = npt.NDArray[np.int64]
BoolArr = npt.NDArray[np.bool_]
FloatArr = npt.NDArray[np.float64]
# Pod "affinity" tags for GPU clustering: share, 1, 2, 4, 8 GPUs, other.
N_TAGS = 6


def gpu_tag(num: int, milli: int) -> int:
    """The GPU-clustering tag of a pod shape (-1 for CPU-only pods)."""
    if num == 0:
        return -1
    if milli < MILLI:
        return 0
    return {1: 1, 2: 2, 4: 3, 8: 4}.get(num, 5)


@dataclass(frozen=True)
class Fleet:
    """Static node arrays: capacities, GPU count and model, and optional rack/block ids."""

    names: tuple[str, ...]
    cpu: IntArr
    mem: IntArr
    gpus: IntArr
    model: tuple[str, ...]
    rack: IntArr
    block: IntArr

    @property
    def slots(self) -> int:
        """GPU slots per node in the arrays (the largest GPU count)."""
        return max(1, int(self.gpus.max(initial=0)))

    @property
    def total_milli(self) -> int:
        """Cluster GPU capacity in milli-GPU."""
        return int(self.gpus.sum()) * MILLI

    def model_mask(self, spec: Sequence[str]) -> BoolArr:
        """Nodes with GPUs whose model is in ``spec`` (any GPU node when ``spec`` is empty)."""
        has = self.gpus > 0
        if not spec:
            return has
        allowed = set(spec)
        out: BoolArr = has & np.array([m in allowed for m in self.model], dtype=bool)
        return out

    @classmethod
    def from_trace(cls, nodes: Sequence[TraceNode], rack: Sequence[int] | None = None,
                   block: Sequence[int] | None = None) -> Fleet:
        """Arrays for trace nodes (``rack``/``block``: optional domain ids per node)."""
        n = len(nodes)
        return cls(names=tuple(x.name for x in nodes), cpu=np.array([x.cpu_milli for x in nodes], dtype=np.int64),
                   mem=np.array([x.memory_mib for x in nodes], dtype=np.int64),
                   gpus=np.array([x.gpus for x in nodes], dtype=np.int64),
                   model=tuple(x.model if x.gpus else "" for x in nodes),
                   rack=np.array(rack if rack is not None else [-1] * n, dtype=np.int64),
                   block=np.array(block if block is not None else [-1] * n, dtype=np.int64))


@dataclass(frozen=True)
class PodTable:
    """Static pod arrays; ``specs[spec_id[i]]`` is pod i's accepted models (() = any)."""

    names: tuple[str, ...]
    cpu: IntArr
    mem: IntArr
    num: IntArr
    milli: IntArr
    spec_id: IntArr
    specs: tuple[tuple[str, ...], ...]
    replicas: IntArr
    priority: IntArr

    @classmethod
    def from_trace(cls, pods: Sequence[TracePod], replicas: Sequence[int] | None = None,
                   priority: Sequence[int] | None = None) -> PodTable:
        """Arrays for trace pods (``replicas``: gang sizes, default 1; ``priority``: default 0)."""
        specs: dict[tuple[str, ...], int] = {(): 0}
        sid = [specs.setdefault(p.gpu_spec if p.num_gpu else (), len(specs)) for p in pods]
        n = len(pods)
        return cls(names=tuple(p.name for p in pods), cpu=np.array([p.cpu_milli for p in pods], dtype=np.int64),
                   mem=np.array([p.memory_mib for p in pods], dtype=np.int64),
                   num=np.array([p.num_gpu for p in pods], dtype=np.int64),
                   milli=np.array([p.gpu_milli for p in pods], dtype=np.int64),
                   spec_id=np.array(sid, dtype=np.int64), specs=tuple(specs),
                   replicas=np.array(replicas if replicas is not None else [1] * n, dtype=np.int64),
                   priority=np.array(priority if priority is not None else [0] * n, dtype=np.int64))

    def demand_milli(self, i: int) -> int:
        """Total GPU demand of pod ``i`` in milli-GPU (all gang members)."""
        return int(self.num[i] * self.milli[i] * self.replicas[i])


class Pod(NamedTuple):
    """One arriving pod (one gang member), as a policy sees it."""

    row: int
    cpu: int
    mem: int
    num: int
    milli: int
    spec: tuple[str, ...]
    allowed: BoolArr  # nodes whose GPU model the pod accepts (all True for CPU-only pods)

    @property
    def shares(self) -> bool:
        """True for a GPU-sharing pod (a fraction of one GPU)."""
        return self.num == 1 and self.milli < MILLI


@dataclass
class SimState:
    """Mutable occupancy: free CPU, memory and per-GPU milli; pod tags per node (GPU clustering)."""

    fleet: Fleet
    cpu_left: IntArr
    mem_left: IntArr
    gpu_left: IntArr  # (nodes, slots); slots beyond a node's GPU count stay 0
    tags: IntArr  # (nodes, N_TAGS) pods per GPU-clustering tag
    used_milli: int = 0

    @classmethod
    def empty(cls, fleet: Fleet) -> SimState:
        """An empty cluster."""
        slots = np.arange(fleet.slots)[None, :] < fleet.gpus[:, None]
        return cls(fleet=fleet, cpu_left=fleet.cpu.copy(), mem_left=fleet.mem.copy(),
                   gpu_left=np.where(slots, MILLI, 0).astype(np.int64),
                   tags=np.zeros((len(fleet.cpu), N_TAGS), dtype=np.int64))

    def feasible(self, pod: Pod, rows: IntArr | None = None) -> BoolArr:
        """Nodes that can host ``pod`` now (all nodes, or only ``rows``: one entry per row)."""
        if rows is None:
            cpu, mem, gpu, allowed = self.cpu_left, self.mem_left, self.gpu_left, pod.allowed
        else:
            cpu, mem, gpu, allowed = self.cpu_left[rows], self.mem_left[rows], self.gpu_left[rows], pod.allowed[rows]
        ok: BoolArr = (cpu >= pod.cpu) & (mem >= pod.mem)
        if pod.num:
            fits = gpu >= pod.milli
            ok &= allowed & (fits.any(axis=1) if pod.shares else fits.sum(axis=1) >= pod.num)
        return ok

    def apply(self, pod: Pod, node: int, gpus: tuple[int, ...], sign: int = 1) -> None:
        """Take (sign=1) or give back (sign=-1) the pod's resources on ``node``."""
        self.cpu_left[node] -= sign * pod.cpu
        self.mem_left[node] -= sign * pod.mem
        for g in gpus:
            self.gpu_left[node, g] -= sign * pod.milli
        self.used_milli += sign * pod.milli * len(gpus)
        tag = gpu_tag(pod.num, pod.milli)
        if tag >= 0:
            self.tags[node, tag] += sign


def best_fit_gpus(state: SimState, pod: Pod, node: int) -> tuple[int, ...]:
    """The tightest-fitting GPU for a share; the lowest-numbered fully free GPUs otherwise."""
    if not pod.num:
        return ()
    left = state.gpu_left[node]
    if pod.shares:
        return (int(np.where(left >= pod.milli, left, 10 * MILLI).argmin()),)
    return tuple(int(g) for g in np.flatnonzero(left >= pod.milli)[: pod.num])


@dataclass
class SimResult:
    """What happened to each arriving pod (in arrival order)."""

    order: IntArr
    nodes: list[tuple[int, ...]] = field(default_factory=list)  # node per member; () when it failed
    gpus: list[tuple[tuple[int, ...], ...]] = field(default_factory=list)
    arrived_milli: list[int] = field(default_factory=list)  # cumulative GPU demand arrived so far
    used_milli: list[int] = field(default_factory=list)  # GPU milli allocated after the pod


def choose_node(scores: FloatArr, ok: BoolArr, rank: IntArr) -> int:
    cand = np.flatnonzero(ok)
    s = scores[cand]
    best = cand[s == s.max()]
    return int(best[0] if len(best) == 1 else best[rank[best].argmin()])


def place(state: SimState, pod: Pod, policy: Policy, rank: IntArr) -> tuple[int, tuple[int, ...]] | None:
    """Place one pod (one gang member) with ``policy``; return (node, gpus) or None if nothing fits.

    ``rank`` orders the nodes for tie-breaking (lowest rank wins among the best scores).
    """
    ok = state.feasible(pod)
    if not ok.any():
        return None
    node = choose_node(policy.score(state, pod), ok, rank)
    pick = getattr(policy, "gpus", None)
    gpus = pick(state, pod, node) if pick is not None else best_fit_gpus(state, pod, node)
    state.apply(pod, node, gpus)
    observe = getattr(policy, "observe", None)
    if observe is not None:
        observe(state, node)
    return node, gpus


def pod_view(pods: PodTable, fleet: Fleet, i: int, masks: dict[int, BoolArr]) -> Pod:
    """The :class:`Pod` of row ``i`` (``masks`` caches the model masks per spec id)."""
    sid = int(pods.spec_id[i])
    if sid not in masks:
        masks[sid] = fleet.model_mask(pods.specs[sid])
    num = int(pods.num[i])
    allowed = masks[sid] if num else np.ones(len(fleet.cpu), dtype=bool)
    return Pod(i, int(pods.cpu[i]), int(pods.mem[i]), num, int(pods.milli[i]), pods.specs[sid], allowed)


def simulate(fleet: Fleet, pods: PodTable, order: IntArr, policy: Policy, seed: int,
             state: SimState | None = None) -> tuple[SimState, SimResult]:
    """Replay ``pods[order]`` online with ``policy``; ``seed`` shuffles the tie-breaking node order."""
    rank = np.random.default_rng(seed).permutation(len(fleet.cpu)).astype(np.int64)
    state = state or SimState.empty(fleet)
    res = SimResult(order=order)
    masks: dict[int, BoolArr] = {}
    arrived = 0
    for i in order:
        pod = pod_view(pods, fleet, int(i), masks)
        done: list[tuple[int, tuple[int, ...]]] = []
        for _ in range(int(pods.replicas[i])):
            got = place(state, pod, policy, rank)
            if got is None:
                for node, gpus in reversed(done):  # a gang is all or nothing
                    state.apply(pod, node, gpus, sign=-1)
                    observe = getattr(policy, "observe", None)
                    if observe is not None:
                        observe(state, node)
                done = []
                break
            done.append(got)
        arrived += pods.demand_milli(int(i))
        res.nodes.append(tuple(n for n, _ in done))
        res.gpus.append(tuple(g for _, g in done))
        res.arrived_milli.append(arrived)
        res.used_milli.append(state.used_milli)
    return state, res


class Policy(Protocol):
    """Scores nodes for a pod (higher is better); see :mod:`capplan.bench.online.policies` for the optional methods."""

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """One score per node, higher is better."""
        ...
