"""What each GPU holds, and which of its free capacity is idle or stranded.

A free piece of a GPU (a whole free GPU, free MIG memory slices, or the unused share of a time-sliced
GPU) is *idle* when one more replica of some workload of the scenario could use it as the cluster
stands after the plan, and *stranded* when none could: the node's CPU or memory is gone, the rack's
power budget is spent, another tenant holds the GPU under isolation, or the free slices or share are
the wrong shape for every profile and fraction asked for. "Some workload" means any workload of the
scenario (the pending ones and growth of the placed ones), one replica at a time; this is the
"target workload" notion of fragmentation studies (FGD, ATC'23).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from capplan.model.catalog import GpuModel
from capplan.model.plan import Assignment
from capplan.model.problem import Demand, Node, Problem, Workload
from capplan.placement.core.fit import gpu_mode_fits, gpu_takes, node_reason
from capplan.placement.core.migslots import mig_starts
from capplan.placement.core.state import WHOLE, ClusterState

#: Why a free piece is stranded, deepest check first reached last (the deepest failure is reported).
STRANDED_TEXT = {
    "model": "no workload may use this GPU model",
    "quota": "the ClusterQueues of every workload that could use it have no quota left here",
    "cpu": "the node's free CPU is too small for every workload that could use it",
    "memory": "the node's free host memory is too small for every workload that could use it",
    "isolation": "isolation: another tenant holds the node or GPU",
    "mode": "the GPU's mode (preset or in use) suits no workload that needs more",
    "count": "too few free GPUs on the node for any whole-GPU workload",
    "power": "the power budget of its rack (or block) is spent",
    "shape": "the free slices or share are too small or misaligned for every MIG profile and share asked for",
}
_DEPTH = {k: i for i, k in enumerate(STRANDED_TEXT)}

#: A rectangle inside a GPU cell: (x0, x1, y0, y1) in [0, 1]; x is the memory-slice axis, y the share.
Rect = tuple[float, float, float, float]


@dataclass
class GpuView:
    """One GPU after the plan: who holds which part, and its idle and stranded parts."""

    node: int
    gpu: int
    mode: str  # free | whole | mig | shared
    used: list[tuple[int, Rect]] = field(default_factory=list)  # (assignment index, rect)
    idle: list[Rect] = field(default_factory=list)
    stranded: list[Rect] = field(default_factory=list)
    reason: str = ""  # key of STRANDED_TEXT when something is stranded
    alloc: float = 0.0  # share of the GPU allocated (compute share for MIG)
    idle_share: float = 0.0
    stranded_share: float = 0.0


@dataclass(frozen=True)
class _Shape:
    """One workload's per-replica demand on one node's model (workloads with equal shapes are merged)."""

    w: Workload
    d: Demand


def _shapes(p: Problem) -> dict[str | None, list[_Shape]]:
    """GPU-demanding workload shapes per GPU model, deduplicated."""
    out: dict[str | None, list[_Shape]] = {}
    models = {n.gpu_model for n in p.cluster.nodes if n.gpus and n.gpu_model}
    for m in sorted(models, key=str):
        seen: set[tuple[object, ...]] = set()
        shapes: list[_Shape] = []
        for w in p.workloads:
            d = p.model_demand(w, m)
            if d is None or d.kind == "none":
                continue
            key = (d.kind, d.gpus, d.profile.name if d.profile else "", d.fraction_milli, d.memory_mib,
                   w.cpu_milli, w.memory_mib, w.tenant, w.isolation)
            if key not in seen:
                seen.add(key)
                shapes.append(_Shape(w, d))
        out[m] = shapes
    return out


class _Classifier:
    """Idle/stranded tests of free pieces against every workload shape (reads a ClusterState)."""

    def __init__(self, p: Problem, st: ClusterState) -> None:
        self.p = p
        self.st = st
        self.shapes = _shapes(p)
        self._whole: dict[int, int] = {}

    # -- node- and GPU-level tests (the planners' own, core/fit); each returns a failure family or "" --
    def _node(self, sh: _Shape, i: int) -> str:
        return node_reason(self.st, sh.w, i)

    def _power(self, i: int, new_gpus: int) -> bool:
        return self.st.power_ok(i, new_gpus)

    def _free_whole(self, i: int) -> int:
        n = self._whole.get(i)
        if n is None:
            n = self._whole[i] = int(self.st.whole_free(np.array([i]))[0].sum())
        return n

    def _gpu(self, sh: _Shape, i: int, g: int) -> str:
        """A slice or share of ``sh`` on GPU ``g`` as it stands ("" or mode / isolation / shape)."""
        why = gpu_takes(self.st, sh.w, sh.d, i, g)
        return "shape" if why == "gpu" else why

    def _mig_slices(self, model: GpuModel, i: int, g: int, sh: _Shape) -> tuple[int, str]:
        """Bit mask of free slices this shape could take on GPU ``g``, or (0, failure family)."""
        why = self._gpu(sh, i, g)
        if why:
            return 0, why
        prof = sh.d.profile
        assert prof is not None
        mask = 0
        for start in mig_starts(self.st, model, i, g, prof):
            mask |= ((1 << prof.memory_slices) - 1) << start
        return mask, ""

    # -- pieces ----------------------------------------------------------------------------------
    def free_gpu(self, i: int, g: int, model: GpuModel) -> str:
        """'' when some shape could use free GPU ``g`` of node ``i``, else the deepest failure."""
        deepest = "model"
        for sh in self.shapes.get(model.name, ()):
            why = self._node(sh, i)
            if not why:
                # Checked in this order: mode, count (whole GPUs), power, then isolation and room.
                if sh.d.kind == "whole":
                    why = ("mode" if not gpu_mode_fits(self.st, i, g, WHOLE)
                           else "count" if self._free_whole(i) < sh.d.gpus
                           else "" if self._power(i, sh.d.gpus) else "power")
                else:
                    why = self._gpu(sh, i, g)
                    if why != "mode" and not self._power(i, 1):
                        why = "power"
            if not why:
                return ""
            if _DEPTH[why] > _DEPTH[deepest]:
                deepest = why
        return deepest

    def mig_free(self, i: int, g: int, model: GpuModel) -> tuple[int, str]:
        """(mask of free slices some shape could use, deepest failure) of a GPU in MIG use."""
        usable = 0
        deepest = "model"
        for sh in self.shapes.get(model.name, ()):
            if sh.d.kind != "mig":
                why = "mode"
            else:
                why = self._node(sh, i)
                if not why:
                    m, why = self._mig_slices(model, i, g, sh)
                    usable |= m
            if why and _DEPTH[why] > _DEPTH[deepest]:
                deepest = why
        return usable, deepest

    def share_free(self, i: int, g: int, model: GpuModel) -> str:
        """'' when some shape could take a share of time-sliced GPU ``g``, else the deepest failure."""
        deepest = "model"
        for sh in self.shapes.get(model.name, ()):
            why = "mode" if sh.d.kind != "fraction" else self._node(sh, i) or self._gpu(sh, i, g)
            if not why:
                return ""
            if _DEPTH[why] > _DEPTH[deepest]:
                deepest = why
        return deepest


def _runs(mask: int, width: int) -> list[tuple[int, int]]:
    """Maximal runs of set bits of ``mask`` below ``width``: (start, end) pairs."""
    out: list[tuple[int, int]] = []
    start = -1
    for b in range(width + 1):
        on = b < width and bool(mask >> b & 1)
        if on and start < 0:
            start = b
        elif not on and start >= 0:
            out.append((start, b))
            start = -1
    return out


def gpu_views(p: Problem, assignments: Sequence[Assignment],
              state: ClusterState | None = None) -> list[list[GpuView]]:
    """Per node, per GPU: the plan's use of each GPU and the idle and stranded remainder.

    Parameters
    ----------
    p
        The problem the assignments belong to.
    assignments
        A valid set of assignments (a plan's, or those active at one instant of a schedule).
    state
        The occupancy with exactly these assignments applied, when the caller has it (read only).

    Returns
    -------
    list of list of GpuView
        ``views[i][g]`` describes GPU ``g`` of node ``p.cluster.nodes[i]``.
    """
    st = state if state is not None else ClusterState.with_assignments(p, list(assignments))
    cls = _Classifier(p, st)
    nodes = p.cluster.nodes
    views = [[GpuView(node=i, gpu=g, mode="free") for g in range(n.gpus)] for i, n in enumerate(nodes)]
    _draw_used(p, assignments, views)
    for i, n in enumerate(nodes):
        model = p.gpu_model(n) if n.gpus else None
        if model is None:
            continue
        for g, v in enumerate(views[i]):
            _classify(cls, model, n, i, g, v)
    return views


def _draw_used(p: Problem, assignments: Sequence[Assignment], views: list[list[GpuView]]) -> None:
    """Fill each view's ``used`` rectangles and allocated share from the assignments."""
    idx = p.cluster.node_index
    fill: dict[tuple[int, int], float] = {}
    for k, a in enumerate(assignments):
        i = idx[a.node]
        model = p.gpu_model(p.cluster.nodes[i])
        for g in a.gpus:
            v = views[i][g]
            if a.mig is not None and model is not None and model.memory_slices:
                prof = model.profile(a.mig.profile)
                ms = model.memory_slices
                v.mode = "mig"
                v.used.append((k, (a.mig.start / ms, (a.mig.start + prof.memory_slices) / ms, 0.0, 1.0)))
                v.alloc += prof.compute_slices / model.compute_slices
            elif a.fraction is not None:
                y0 = fill.get((i, g), 0.0)
                fill[(i, g)] = y0 + a.fraction
                v.mode = "shared"
                v.used.append((k, (0.0, 1.0, y0, y0 + a.fraction)))
                v.alloc += a.fraction
            else:
                v.mode = "whole"
                v.used.append((k, (0.0, 1.0, 0.0, 1.0)))
                v.alloc = 1.0
    for row in views:
        for v in row:
            v.alloc = min(1.0, round(v.alloc, 6))


def _classify(cls: _Classifier, model: GpuModel, n: Node, i: int, g: int, v: GpuView) -> None:
    free = 1.0 - v.alloc
    if v.mode == "free":
        why = cls.free_gpu(i, g, model)
        (v.stranded if why else v.idle).append((0.0, 1.0, 0.0, 1.0))
        v.reason = why
        v.stranded_share, v.idle_share = (1.0, 0.0) if why else (0.0, 1.0)
    elif v.mode == "mig":
        s = cls.st.gpus[i][g]
        ms = model.memory_slices
        free_mask = ~s.mig_mask & ((1 << ms) - 1)
        if not free_mask:  # every memory slice taken: spare compute slices (e.g. 3g + 3g) are stranded
            v.stranded_share = round(max(0.0, free), 6)
            v.reason = "shape" if v.stranded_share else ""
            return
        usable, why = cls.mig_free(i, g, model)
        usable &= free_mask
        stranded = free_mask & ~usable
        v.idle = [(a / ms, b / ms, 0.0, 1.0) for a, b in _runs(usable, ms)]
        v.stranded = [(a / ms, b / ms, 0.0, 1.0) for a, b in _runs(stranded, ms)]
        n_free = bin(free_mask).count("1")
        v.stranded_share = round(free * bin(stranded).count("1") / n_free, 6)
        v.idle_share = round(free - v.stranded_share, 6)
        v.reason = why if stranded else ""
    elif v.mode == "shared" and free > 1e-9:
        why = cls.share_free(i, g, model)
        (v.stranded if why else v.idle).append((0.0, 1.0, v.alloc, 1.0))
        v.reason = why
        v.stranded_share, v.idle_share = (free, 0.0) if why else (0.0, free)
