"""Bulk placement: exact per-node capacity, batched state updates, valid fleet plans."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.core.state import ClusterState
from capplan.placement.heuristics import BestFit
from capplan.placement.heuristics.bulk import BulkPlacer, bulk_ok
from capplan.placement.heuristics.choose import choose
from capplan.placement.heuristics.run import place


def _problem(data: dict[str, Any]) -> Problem:
    return problem_from_data(data, load_catalog())


def _fleet(racks: int = 3, per_rack: int = 3) -> list[dict[str, Any]]:
    return [{"name": f"r{r}", "nodes": [{"name": f"r{r}n{i}", "gpu": "A100-SXM4-80GB" if r % 2 else "H100-SXM5-80GB",
                                         "gpus": 8, "cpu": 64, "memory_gib": 512} for i in range(per_rack)]}
            for r in range(racks)]


_SHAPES = [{"gpus": 1}, {"gpus": 2}, {"gpus": 8}, {"mig": "1g.10gb"}, {"mig": "3g.40gb"}, {"mig": "2g.20gb"},
           {"kind": "shared", "gpu_fraction": 0.3}, {"kind": "shared", "gpu_fraction": 0.5, "gpu_memory_gib": 30}]


@st.composite
def _mixed(draw: st.DrawFn) -> dict[str, Any]:
    """A small rack fleet with mixed whole/MIG/share workloads and maybe a gang."""
    work = []
    for k in range(draw(st.integers(1, 7))):
        shape = dict(draw(st.sampled_from(_SHAPES)))
        w = {"name": f"w{k}", "replicas": draw(st.integers(1, 40)), "cpu": draw(st.sampled_from([1, 4, 16])),
             "memory_gib": draw(st.sampled_from([1, 32])), "priority": draw(st.sampled_from([0, 10])),
             "tenant": draw(st.sampled_from(["a", "b"])), "isolation": draw(st.sampled_from(["none", "tenant"])),
             **shape}
        if "gpus" in shape and draw(st.booleans()):
            w.update({"kind": "training", "replicas": draw(st.integers(1, 4)), "topology": {"required": "rack"}})
        work.append(w)
    return {"cluster": {"levels": ["rack", "node"], "racks": _fleet(2, 2)}, "workloads": work}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed())
def test_capacity_matches_one_by_one_placement(data: dict[str, Any]) -> None:
    """Per node, bulk capacity equals how many replicas one-by-one placement fits there (after a partial fill)."""
    p = _problem(data)
    w = p.workloads[-1]
    # Fill with the other workloads first; the state's problem differs, its arrays are what matter.
    _, _, placer = place(p.replace(workloads=[x for x in p.workloads if x.name != w.name]))
    part_st = placer.st
    per, idx = part_st.demands(w)
    bulk = BulkPlacer(part_st, BestFit())
    caps = bulk.capacity(w, per, idx)
    for node, cap in zip(idx.tolist(), caps.tolist(), strict=True):
        mark = part_st.checkpoint()
        count = 0
        while count < cap + 2:
            c = choose(part_st, w, BestFit(), np.array([node]))
            if c is None:
                break
            d = per[int(part_st.model_id[node])]
            assert d is not None
            part_st.apply(w, d, c)
            count += 1
        part_st.rollback(mark)
        assert count == cap, (node, count, cap)


def test_apply_many_equals_apply_one_by_one() -> None:
    """Adding replicas of one node in one call leaves the same arrays as adding them one at a time."""
    data = {"cluster": {"nodes": [{"name": "a", "gpu": "A100-SXM4-80GB", "gpus": 4, "cpu": 64, "memory_gib": 256}]},
            "workloads": [{"name": "m", "mig": "1g.10gb", "replicas": 9, "cpu": 1, "tenant": "t",
                           "isolation": "tenant"},
                          {"name": "s", "kind": "shared", "gpu_fraction": 0.25, "replicas": 6, "cpu": 2,
                           "gpu_memory_gib": 10},
                          {"name": "g", "gpus": 1, "replicas": 1, "cpu": 3}]}
    p = _problem(data)
    one, many = ClusterState(p), ClusterState(p)
    bulk = BulkPlacer(many, BestFit())
    for w in p.workloads:
        per, _ = one.demands(w)
        d = per[int(one.model_id[0])]
        assert d is not None
        cs = bulk._node_choices(w, d, 0, w.replicas)
        assert len(cs) == w.replicas
        for c in cs:
            one.apply(w, d, c)
        many.apply_many(w, d, cs)
    for name in ("cpu", "mem", "free_whole", "mode", "users", "used", "frac", "gmem", "mig_mask", "gpu_tenant",
                 "gpu_iso", "prof_count", "node_tenant", "power_free"):
        assert np.array_equal(getattr(one, name), getattr(many, name)), name


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed())
def test_bulk_plans_are_valid_and_gangs_stay_in_one_rack(data: dict[str, Any]) -> None:
    """Heuristic plans on mixed fleets pass the validator; rack gangs are whole and in one rack."""
    p = _problem(data)
    assert bulk_ok(ClusterState(p))
    plan = solve(p, "heuristic", PlanOptions(time_limit=5))
    assert check_plan(p, plan) == []
    for w in p.workloads:
        mine = [a for a in plan.assignments if a.workload == w.name]
        if w.is_gang:
            assert len(mine) in (0, w.replicas)
            assert len({a.node[:2] for a in mine}) <= 1


def test_full_fleet_capacity_is_filled() -> None:
    """1g slices fill every compute slice of a fleet (7 per A100/H100), none left over, rest unplaced."""
    p = _problem({"cluster": {"levels": ["rack", "node"], "racks": _fleet(2, 2)},
                  "workloads": [{"name": "m", "mig": "1g.10gb", "replicas": 250, "cpu": 1, "memory_gib": 1}]})
    plan = solve(p, "heuristic")
    assert len(plan.assignments) == 4 * 8 * 7
    assert plan.unplaced and plan.unplaced[0].replicas == tuple(range(224, 250))
