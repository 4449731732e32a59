"""FGD's rounded score with a second-level, coarse tie-break (experimental variants).

FGD's integer score ``trunc(100 * sigmoid(decrease / 1000))`` makes many nodes tie; the
simulator then takes the first tied node in a seed-shuffled order, which spreads near-equal
placements. This policy adds a *coarse* secondary level below the integer score (a few discrete
levels, so the seed-shuffled spreading still decides among most ties).
"""

from __future__ import annotations

import numpy as np

from capplan.bench.policies import FGDPolicy, PolicyContext
from capplan.bench.sim import MILLI, FloatArr, Pod, SimState


class TieBreakFGD(FGDPolicy):
    """FGD plus a coarse secondary score in [0, 0.5) added below the integer FGD score."""

    def __init__(self, ctx: PolicyContext, mode: str = "match", levels: float = 1.0) -> None:
        super().__init__(ctx)
        self.mode = mode
        self.levels = levels
        p = ctx.pods
        gpu = (p.num > 0)
        g = (p.num * p.milli)[gpu] / MILLI
        self.ratio = float(p.cpu[gpu].sum() / max(g.sum(), 1e-9))  # mean CPU (milli) per GPU of demand

    def score(self, state: SimState, pod: Pod) -> FloatArr:
        """FGD's score plus ``0.4 * secondary`` with secondary in [0, 1]."""
        out = super().score(state, pod)
        rows = np.flatnonzero(out >= 0)
        if not len(rows):
            return out
        free = state.gpu_left[rows].sum(axis=1) / MILLI
        cpu = state.cpu_left[rows].astype(np.float64)
        used = pod.num * pod.milli / MILLI
        if self.mode == "match":
            if pod.num:
                want = pod.cpu / max(used, 1e-9)
                have = cpu / np.maximum(free, 1e-3)
                d = np.abs(np.log2((have + 1.0) / (want + 1.0)))
                sec = 1.0 - np.minimum(np.round(d / self.levels) * self.levels, 4.0) / 4.0
            else:
                sec = (free <= 0).astype(np.float64)
        elif self.mode == "keep":
            after_free = free - used
            after_cpu = cpu - pod.cpu
            ok = after_cpu >= self.ratio * after_free
            sec = np.where(after_free <= 1e-9, 1.0, ok * 0.5)
        elif self.mode == "cpuonly":
            sec = (free <= 0).astype(np.float64) if not pod.num else np.zeros(len(rows))
        else:
            raise ValueError(self.mode)
        out[rows] += 0.4 * sec
        return out


def factory(mode: str, levels: float = 1.0):  # type: ignore[no-untyped-def]
    """A policy factory for experiments."""
    return lambda ctx: TieBreakFGD(ctx, mode, levels)
