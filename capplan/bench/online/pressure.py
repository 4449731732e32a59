"""Per GPU model: how much of its free capacity the pods tied to it will need, learned online.

A pod with a ``gpu_spec`` accepts some GPU models only. When a flexible pod (one that accepts several
models, e.g. any) takes the last free GPUs of a model that tied pods keep asking for, those tied
pods fail later although other models had room: on traces where most pods are tied to one model
this, not packing, decides how many GPUs stay unallocated at 100% arrived.

:class:`ModelDemand` counts the GPU demand (milli-GPU) that arrived so far (as the policy sees it: the
simulator does not show the policy a pod that fits nowhere, so those are not counted), split into what was tied to
each model (a pod accepting models ``A|B`` counts toward each in proportion to its GPUs) and the
rest. If the future arrivals look like the past, of the next ``F`` milli-GPU to arrive (``F`` = the
free GPU milli of the whole cluster, what it can still take) a fraction ``phi_m`` is tied to model
``m``; the model's **surplus** is ``free_m - phi_m * F``. A flexible pod should use a model with a
surplus of at least what it takes, so the tied pods still find room; only the demand that already
arrived is used. Free capacity counts as far as the node has CPU to feed it (``cpu_per_gpu``): a
GPU whose node has no CPU left is no room for the tied pods, and a CPU-light pod (a share) may
take it even on a short model.
"""

from __future__ import annotations

import numpy as np

from capplan.bench.online.sim import MILLI, BoolArr, Fleet, FloatArr, IntArr, Pod, SimState


class ModelDemand:
    """Demand per GPU model seen so far and each model's surplus for flexible pods.

    Parameters
    ----------
    fleet
        The cluster; the GPU models are those of its GPU nodes.
    cpu_per_gpu
        Milli-CPU per milli-GPU a GPU needs to be usable (0: every free GPU milli counts); see
        :meth:`usable`.
    """

    def __init__(self, fleet: Fleet, cpu_per_gpu: float = 0.0) -> None:
        self.cpu_per_gpu = cpu_per_gpu
        names = sorted({m for m, g in zip(fleet.model, fleet.gpus.tolist(), strict=True) if g})
        self.names = tuple(names)
        index = {m: i for i, m in enumerate(names)}
        # GPU nodes get their model's index; CPU-only nodes an extra index that is never scored
        self.node_model: IntArr = np.array([index.get(m, len(names)) if g else len(names)
                                            for m, g in zip(fleet.model, fleet.gpus.tolist(), strict=True)],
                                           dtype=np.int64)
        self.cap = np.bincount(self.node_model, weights=fleet.gpus * MILLI, minlength=len(names) + 1)[:len(names)]
        self.tied = np.zeros(len(names))  # milli-GPU arrived tied to each model
        self.total = 0.0  # milli-GPU arrived, tied or not
        self.split: dict[tuple[str, ...], FloatArr | None] = {}  # per spec: share of a pod per model (None: any)

    def _split(self, spec: tuple[str, ...]) -> FloatArr | None:
        """Fraction of a ``spec`` pod's demand tied to each model; None when it accepts every model."""
        if spec not in self.split:
            mask = np.array([m in spec for m in self.names], dtype=bool) if spec else np.ones(len(self.names), bool)
            if mask.all() or not mask.any():
                self.split[spec] = None
            else:
                w = np.where(mask, self.cap, 0.0)
                self.split[spec] = w / w.sum()
        return self.split[spec]

    def flexible(self, pod: Pod) -> bool:
        """True when the pod asks for GPUs and accepts more than one model."""
        if not pod.num:
            return False
        return not pod.spec or sum(m in pod.spec for m in self.names) > 1

    def add(self, pod: Pod) -> None:
        """Count one arriving GPU pod (one gang member) toward the demand seen."""
        if not pod.num:
            return
        demand = float(pod.num * pod.milli)
        self.total += demand
        split = self._split(pod.spec)
        if split is not None:
            self.tied += demand * split

    def usable(self, gpu: FloatArr, cpu: FloatArr) -> FloatArr:
        """Free milli-GPU a node can still feed: ``min(free GPU milli, free CPU / cpu_per_gpu)``.

        A GPU on a node whose CPU is gone is no room for the tied pods either, so it is not counted
        (and a pod that only takes such GPUs takes nothing from them).
        """
        if self.cpu_per_gpu <= 0:
            return np.maximum(gpu, 0.0)
        out: FloatArr = np.maximum(np.minimum(gpu, cpu / self.cpu_per_gpu), 0.0)
        return out

    def surplus(self, state: SimState) -> FloatArr:
        """Per model (in ``names`` order): usable free milli-GPU minus what the tied pods are expected to need."""
        gpu = state.gpu_left.sum(axis=1).astype(np.float64)
        free = np.bincount(self.node_model, weights=self.usable(gpu, state.cpu_left.astype(np.float64)),
                           minlength=len(self.names) + 1)[:len(self.names)]
        if self.total <= 0:
            return np.asarray(free, dtype=np.float64)
        out: FloatArr = free - (self.tied / self.total) * free.sum()
        return out

    def short(self, state: SimState, pod: Pod) -> BoolArr | None:
        """Per node: True where a flexible pod would leave its model with less than the tied pods need.

        None when nothing is tied yet or the pod is not flexible (then no node is short).
        """
        if not self.tied.any() or not self.flexible(pod):
            return None
        gpu = state.gpu_left.sum(axis=1).astype(np.float64)
        cpu = state.cpu_left.astype(np.float64)
        taken = self.usable(gpu, cpu) - self.usable(gpu - pod.num * pod.milli, cpu - pod.cpu)
        surplus = np.append(self.surplus(state), np.inf)  # the extra index: CPU-only nodes
        out: BoolArr = (taken > 0) & (surplus[self.node_model] < taken)
        return out
