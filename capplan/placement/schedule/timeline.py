"""Scheduled replicas over time, and the placement core's occupancy for a time window.

:class:`Timeline` keeps every scheduled replica (node, GPUs, slice or share, start, end) and one
:class:`~capplan.placement.core.state.ClusterState` holding the replicas that overlap a window
``[lo, hi)``. A placement that fits this union fits at every instant of the window, so the
per-instant rules are those of the placement core, not a second copy. The union is exact for
exclusive resources (whole GPUs, MIG memory slices) and conservative for additive ones (CPU,
memory, shares, power, instance counts; for power, :mod:`capplan.placement.core.fit` lets a slice or
share join a GPU in use only while the union's draw is within budget, since that GPU may be on for
only part of the window). Moving the window applies only the difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capplan.model.problem import Demand, Problem, Workload
from capplan.placement.core.state import ClusterState, Placement

_BLOCKED = "blocked"  # a mode no replica asks for
_MODE = {"whole": "whole", "mig": "mig", "fraction": "shared"}


@dataclass(frozen=True)
class Item:
    """One scheduled replica: workload, replica index, demand, placement and ``[start, end)`` seconds."""

    w: Workload
    replica: int
    d: Demand
    pl: Placement
    start: int
    end: int
    running: bool = False


class Timeline:
    """Scheduled replicas, with a scratch occupancy state for one window at a time."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.st = ClusterState(p)
        self.items: list[Item] = []
        self._starts = np.zeros(64, dtype=np.int64)
        self._ends = np.zeros(64, dtype=np.int64)
        self._applied: set[int] = set()
        self._lo, self._hi = 0, 0
        self._mig: dict[tuple[int, int], set[int]] = {}  # MIG items in the window per GPU
        self._saved: dict[tuple[int, int], tuple[int, str | None]] = {}  # GPU -> (mask, mode) while patched
        self._kinds: dict[tuple[int, int], dict[str, int]] = {}  # demand kinds in the window per GPU
        self._special: set[tuple[int, int]] = set()  # GPUs whose union needs _patch
        self.by_workload: dict[str, list[Item]] = {}
        self._removed: set[int] = set()

    # ------------------------------------------------------------------ window
    def _mask(self, k: int) -> int:
        it = self.items[k]
        assert it.pl.slot is not None and it.d.profile is not None
        return ((1 << it.d.profile.memory_slices) - 1) << it.pl.slot.start

    def _unpatch(self) -> None:
        for (i, g), (mask, mode) in self._saved.items():
            st = self.st.gpus[i][g]
            st.mig_mask, st.mode = mask, mode
        nodes = {i for i, _ in self._saved}
        self._saved = {}
        for i in nodes:
            self.st.touch(i)

    def _patch(self) -> None:
        """Fix the union where the state's bookkeeping assumes one instant.

        Two MIG instances on one GPU at different times may overlap: block the union of their
        slices. A GPU used in two modes at different times (whole, then slices) is blocked for
        every mode while both are in the window.
        """
        nodes = set()
        for key in self._special:
            kinds = self._kinds[key]
            migs = self._mig.get(key, ())
            i, g = key
            s = self.st.gpus[i][g]
            self._saved[key] = (s.mig_mask, s.mode)
            if len(kinds) > 1:
                s.mode = _BLOCKED
            union = 0
            for k in migs:
                union |= self._mask(k)
            s.mig_mask |= union
            nodes.add(i)
        for i in nodes:
            self.st.touch(i)

    def _toggle(self, k: int, sign: int) -> None:
        it = self.items[k]
        self.st.apply(it.w, it.d, it.pl, sign)
        node = it.pl.node
        for g in it.pl.gpus:
            key = (node, g)
            kinds = self._kinds.setdefault(key, {})
            kinds[it.d.kind] = kinds.get(it.d.kind, 0) + sign
            if not kinds[it.d.kind]:
                del kinds[it.d.kind]
            if it.d.kind == "mig":
                migs = self._mig.setdefault(key, set())
                if sign > 0:
                    migs.add(k)
                else:
                    migs.discard(k)
            special = len(kinds) > 1 or len(self._mig.get(key, ())) > 1
            if special:
                self._special.add(key)
            else:
                self._special.discard(key)
            s = self.st.gpus[node][g]  # the state keeps the mode of the last replica applied: recompute it
            if s.users and len(kinds) == 1:
                s.mode = _MODE[next(iter(kinds))]

    def window(self, lo: int, hi: int) -> ClusterState:
        """Make the state hold every replica running at some instant of ``[lo, hi)``; return it."""
        n = len(self.items)
        want = set(np.nonzero((self._starts[:n] < hi) & (self._ends[:n] > lo))[0].tolist())
        self._unpatch()
        for k in sorted(self._applied - want, reverse=True):
            self._toggle(k, -1)
        for k in sorted(want - self._applied):
            self._toggle(k, 1)
        self._applied = want
        self._lo, self._hi = lo, hi
        self._patch()
        return self.st

    # --------------------------------------------------------------- mutation
    def add(self, it: Item) -> None:
        """Record a scheduled replica (applied to the state when it overlaps the current window)."""
        k = len(self.items)
        if k == self._starts.size:
            self._starts = np.concatenate([self._starts, np.zeros(k, dtype=np.int64)])
            self._ends = np.concatenate([self._ends, np.zeros(k, dtype=np.int64)])
        self.items.append(it)
        self.by_workload.setdefault(it.w.name, []).append(it)
        self._starts[k], self._ends[k] = it.start, it.end
        if it.start < self._hi and it.end > self._lo:
            self._unpatch()
            self._toggle(k, 1)
            self._applied.add(k)
            self._patch()

    def remove(self, it: Item) -> None:
        """Forget a scheduled replica (taken off the state when it is in the current window)."""
        k = next(i for i in range(len(self.items)) if self.items[i] is it and i not in self._removed)
        if k in self._applied:
            self._unpatch()
            self._toggle(k, -1)
            self._applied.discard(k)
            self._patch()
        self._removed.add(k)
        self._starts[k], self._ends[k] = -1, -1  # an empty interval before time 0: never in a window
        mine = self.by_workload[it.w.name]
        mine.remove(it)
        if not mine:
            del self.by_workload[it.w.name]

    def live(self) -> list[Item]:
        """The scheduled replicas (in the order they were added), without the removed ones."""
        return [it for k, it in enumerate(self.items) if k not in self._removed]

    def starts_between(self, lo: int, hi: int) -> np.ndarray:
        """Sorted distinct start times of scheduled replicas in ``[lo, hi]``."""
        s = self._starts[: len(self.items)]
        return np.unique(s[(s >= lo) & (s <= hi)])

    def ends_after(self, t: int) -> np.ndarray:
        """Sorted distinct end times of scheduled replicas after ``t``."""
        e = self._ends[: len(self.items)]
        return np.unique(e[e > t])
