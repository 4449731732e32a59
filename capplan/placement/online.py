"""Online placement: one workload at a time, in arrival order, with no lookahead.

This is how a Kubernetes-style scheduler works (each pod is bound on arrival or fails), so
capplan's scores can be compared with such schedulers on equal terms. The scores are the same
as in batch planning (:mod:`capplan.placement.heuristics`).

Example
-------
>>> sched = OnlineScheduler(problem, score="fgd")           # doctest: +SKIP
>>> for w in arrivals:                                       # doctest: +SKIP
...     placed = sched.schedule(w)   # list of Assignment, or None when it fails for good
"""

from __future__ import annotations

from collections.abc import Iterable

from capplan.model.plan import Assignment
from capplan.model.problem import Problem, Workload
from capplan.placement.core.state import ClusterState
from capplan.placement.heuristics.placer import FleetPlacer
from capplan.placement.heuristics.run import ScoreName, make_scorer


class OnlineScheduler:
    """Places arriving workloads on the cluster of a problem, one at a time.

    Parameters
    ----------
    problem
        Cluster, catalog and running state. Its workloads are not placed; with FGD they
        define the shape mix (the "target workload") unless ``mix`` is given.
    score
        ``fgd`` (fragmentation gradient) or ``bestfit``.
    mix
        Workloads whose demand shapes FGD measures fragmentation against.

    Notes
    -----
    A workload is placed completely or not at all when it is a gang (``kind: training``);
    otherwise as many replicas as fit are placed. Arriving workload names must be unique.
    """

    def __init__(self, problem: Problem, score: ScoreName = "fgd", mix: Iterable[Workload] | None = None) -> None:
        self.problem = problem
        self.state = ClusterState.with_assignments(problem, problem.running)
        ws = list(mix) if mix is not None else list(problem.workloads)
        self.placer = FleetPlacer(self.state, make_scorer(score, problem, self.state, ws))
        self.placed_units = 0

    def schedule(self, w: Workload) -> list[Assignment] | None:
        """Place ``w`` now; returns its assignments, or None when no replica could be placed."""
        got = self.placer.place_workload(w, w.replicas, [])
        if not got:
            return None
        per, _ = self.placer.st.demands(w)
        for c in got:
            d = per[int(self.state.model_id[c.node])]
            self.placed_units += d.units if d is not None else 0
        return [self.state.assignment(w, r, c) for r, c in enumerate(got)]

    def allocated_gpus(self) -> float:
        """GPUs allocated so far (demand units of everything placed by this scheduler, in GPUs)."""
        from capplan.model.units import UNITS_PER_GPU

        return self.placed_units / UNITS_PER_GPU
