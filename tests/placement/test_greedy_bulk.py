"""Greedy's shortcuts at fleet scale change how the best node is found, never which one.

The screens (power, GPU memory of shares, the nodes kept per demand shape while nothing is released) only drop
nodes where a replica cannot fit, and the bulk fills (whole GPUs, CPU-only pods) place what fitting replica by
replica would: the plan equals the one of a placer without them, which walks every eligible node and places one
replica at a time. The power-aware domain estimate is an upper bound on what a domain can take.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Demand, Workload
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions
from capplan.placement import greedy as greedy_mod
from capplan.placement.core.fit import share_strands
from capplan.placement.core.fleet import Placement
from capplan.placement.core.power import domain_room
from capplan.placement.core.reasons import room_estimate
from capplan.placement.core.state import ClusterState
from capplan.placement.greedy import GreedyPlacer, plan_greedy
from tests.strategies_gen import scenario_data

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class OneByOne(GreedyPlacer):
    """The reference: every eligible node is a candidate (fit decides) and replicas are fitted one at a time
    (shares too: the plain order and one fit per share)."""

    def _screen(self, w: Workload, within: np.ndarray | None) -> np.ndarray:
        idx, _ = self.st.eligible(w)
        return idx if within is None else self._inside(idx, within)

    def _fill_whole(self, w: Workload, d: Demand, i: int, n: int, done: list[Placement]) -> None:
        return None

    def ordered(self, w: Workload, within: np.ndarray | None, prefer: set[str] | None = None) -> Iterator[int]:
        """The plain order (not the kept order of shares, which serves ``within=None``)."""
        return super().ordered(w, np.arange(self.st.n) if within is None else within, prefer)

    def _fill_shares(self, w: Workload, d: Demand, i: int, n: int, done: list[Placement]) -> int:
        """One :meth:`ClusterState.fit` per share (in the first walk, while the share fitted strands nothing)."""
        before = len(done)
        while len(done) < n:
            r = self.st.fit(w, d, i)
            if not isinstance(r, Placement) or (self.keep_room and share_strands(self.st, d, r)):
                break
            self.st.apply(w, d, r)
            done.append(r)
        return len(done) - before


def assert_plan_of_reference(data: dict[str, Any], reference: type[GreedyPlacer],
                             options: PlanOptions | None = None) -> None:
    """Greedy's plan of ``data`` (assignments, reasons, objective) is valid and the one greedy makes with the
    ``reference`` placer (which skips the shortcuts under test), each from its own problem object."""
    opts = options or PlanOptions()
    p = problem_from_data(data)
    fast = plan_greedy(p, opts)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(greedy_mod, "GreedyPlacer", reference)
        slow = plan_greedy(problem_from_data(data), opts)
    assert check_plan(p, fast) == []
    assert fast.model_dump(exclude={"solve_seconds"}) == slow.model_dump(exclude={"solve_seconds"})


@st.composite
def power_scenario(draw: st.DrawFn) -> dict[str, Any]:
    """A random scenario, often with power budgets on every rack and more replicas per workload."""
    data = draw(scenario_data())
    if draw(st.booleans()):
        for rack in data["cluster"]["racks"]:
            rack["power_kw"] = draw(st.sampled_from([0.7, 1.2, 1.4, 1.6, 2.8, 5.6, 10]))  # whole GPUs of 700 W, 400 W
    scale = draw(st.sampled_from([1, 4]))
    for w in data["workloads"]:
        w["replicas"] *= scale
    return data


#: A rack budget that feeds exactly what the first workloads ask (the screen's boundary), then nothing more.
EXACT = {"cluster": {"name": "x", "levels": ["rack", "node"], "racks": [
    {"name": "r0", "power_kw": 2.8, "nodes": [{"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64,
                                               "memory_gib": 256}]},
    {"name": "r1", "power_kw": 1.4, "nodes": [{"name": "n2", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64,
                                               "memory_gib": 256}]}]},
    "workloads": [{"name": "a", "replicas": 3, "gpus": 2, "cpu": 1, "priority": 10},
                  {"name": "b", "replicas": 2, "gpus": 1, "cpu": 1},
                  {"name": "c", "replicas": 4, "cpu": 16, "memory_gib": 8}]}


@SETTINGS
@given(power_scenario())
@example(EXACT)
def test_shortcuts_give_the_plan_of_one_by_one(data: dict[str, Any]) -> None:
    """The greedy plan (assignments, reasons, objective) is the reference placer's, and valid."""
    assert_plan_of_reference(data, OneByOne)


@SETTINGS
@given(power_scenario(), st.integers(0, 5))
def test_domain_room_is_an_upper_bound(data: dict[str, Any], cut: int) -> None:
    """After the greedy plan of the first ``cut`` workloads, no rack takes more replicas of a whole-GPU or
    CPU-only workload than :func:`~capplan.placement.core.power.domain_room` says (placing as many as fit
    there, then undone)."""
    p = problem_from_data(data)
    done = p.replace(workloads=p.workloads[:cut]) if cut < len(p.workloads) else p
    plan = plan_greedy(done, PlanOptions())
    state = ClusterState.with_assignments(p, plan.assignments)
    placer = GreedyPlacer(p, state)
    ids, names = state.domain_ids("rack")
    for w in p.workloads:
        if w.mig is not None or w.gpu_fraction is not None:
            continue
        idx = state.eligible(w)[0]
        if idx.size == 0:
            continue
        room = np.where(state.node_ok(w, idx), room_estimate(state, w, idx), 0)
        est = domain_room(state, w, idx, room, ids, len(names))
        for k in range(len(names)):
            got = placer.place_group(w, 64, idx[ids[idx] == k], False)
            placer.undo(w, got)
            assert len(got) <= est[k], (w.name, names[k])
