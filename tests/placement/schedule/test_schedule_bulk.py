"""Replicas in bulk (issue 27, 10^6 CPU replicas): the time-order sweep places identical CPU-only replicas a node at a
time and starts and ends them per (workload, node, instant); the result is the per-replica path's, and a large
instance stops at its limit with honest reasons."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.validate_schedule import check_schedule
from capplan.placement.core.state import ClusterState
from capplan.placement.greedy import GreedyPlacer, place_workload
from capplan.placement.schedule import schedule, sweep
from capplan.placement.schedule.sweep import _place_bulk, schedule_sweep
from tests.placement.schedule.test_schedule_properties import timed_scenario


def _cpu_cluster(cores: list[int], workloads: list[dict[str, Any]], horizon: str = "8h") -> dict[str, Any]:
    return {"schedule": {"horizon": horizon, "step": "1h"},
            "cluster": {"name": "c", "levels": ["rack", "node"], "racks": [{"name": "r1", "nodes": [
                {"name": f"n{k}", "cpu": c, "memory_gib": 4 * c} for k, c in enumerate(cores)]}]},
            "workloads": workloads}


def test_bulk_placement_is_the_placers_replica_by_replica() -> None:
    """Nodes of 4, 8 and 2 cores and 10 replicas of 2 cores: 2 + 4 + 1 = 7 fit, in the placer's order, each node
    filled in one step; the per-replica path (the greedy placer) gives the same nodes in the same order and
    leaves the same free CPU and memory."""
    p = problem_from_data(_cpu_cluster([4, 8, 2], [{"name": "w", "replicas": 10, "cpu": 2, "memory_gib": 1}]))
    w = p.workloads[0]
    bulk_state, one_state = ClusterState(p), ClusterState(p)
    bulk = _place_bulk(GreedyPlacer(p, bulk_state), w, 10)
    one = place_workload(GreedyPlacer(p, one_state), w, 10, [])
    assert [pl.node for pl in bulk] == [pl.node for pl in one]
    assert sorted(pl.node for pl in bulk) == [0, 0, 1, 1, 1, 1, 2]
    assert bulk_state.cpu.tolist() == one_state.cpu.tolist() == [0, 0, 0]
    assert bulk_state.mem.tolist() == one_state.mem.tolist()
    # fewer asked than fit: exactly that many, on the placer's first nodes
    few_state = ClusterState(p)
    few = _place_bulk(GreedyPlacer(p, few_state), w, 3)
    assert [pl.node for pl in few] == [pl.node for pl in one][:3]


def _without_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "_bulk", lambda st, w: False)


def test_sweep_in_bulk_equals_replica_by_replica_on_a_hand_worked_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two nodes of 4 cores, 10 replicas of 1 core for 2 h and 3 replicas of 2 cores for 1 h released at 1 h, over
    8 h on an hourly grid. By hand: 8 one-core replicas start at 0 and fill both nodes until 2 h; the 2-core
    replicas wait until then; at 2 h the two one-core replicas left and the three 2-core ones need 8 cores of
    8 and all start. The bulk and per-replica sweeps give this same schedule, and it is valid."""
    data = _cpu_cluster([4, 4], [{"name": "small", "replicas": 10, "cpu": 1, "memory_gib": 1, "duration": "2h"},
                                 {"name": "big", "replicas": 3, "cpu": 2, "memory_gib": 1, "duration": "1h",
                                  "release": "1h"}])
    p = problem_from_data(data)
    bulk = schedule_sweep(p, 8 * 3600, 3600)
    starts = sorted((a.workload, a.start_s) for a in bulk.assignments)
    assert starts == [("big", 7200)] * 3 + [("small", 0)] * 8 + [("small", 7200)] * 2
    assert check_schedule(p, bulk) == []
    _without_bulk(monkeypatch)
    one = schedule_sweep(p, 8 * 3600, 3600)
    assert one.assignments == bulk.assignments
    assert one.objective == bulk.objective and one.wait_replica_s == bulk.wait_replica_s


@st.composite
def _cpu_scenario(draw: st.DrawFn) -> dict[str, Any]:
    cores = draw(st.lists(st.integers(1, 16), min_size=1, max_size=4))
    workloads = [{"name": f"w{k}", "replicas": draw(st.integers(1, 40)), "cpu": draw(st.sampled_from([0.5, 1, 2, 3])),
                  "memory_gib": draw(st.sampled_from([0, 1, 2])), "duration": draw(st.sampled_from(["1h", "2h", "3h"])),
                  "release": draw(st.sampled_from([0, "1h", "2h"])), "priority": draw(st.sampled_from([0, 10]))}
                 for k in range(draw(st.integers(1, 4)))]
    return _cpu_cluster(cores, workloads, draw(st.sampled_from(["4h", "8h"])))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(_cpu_scenario(), timed_scenario()))
def test_sweep_in_bulk_equals_replica_by_replica(data: dict[str, Any]) -> None:
    """On random CPU-only days and random rich scenarios, the bulk sweep's schedule is the per-replica sweep's,
    and the independent validator accepts it."""
    try:
        p = problem_from_data(data)
    except InputError:
        return
    spec = p.schedule
    horizon, step = (spec.horizon, spec.step) if spec else (8 * 3600, 3600)
    bulk = schedule_sweep(p, horizon, step)
    assert check_schedule(p, bulk) == []
    with pytest.MonkeyPatch.context() as m:
        _without_bulk(m)
        one = schedule_sweep(p, horizon, step)
    assert one.assignments == bulk.assignments
    assert one.unscheduled == bulk.unscheduled


def test_a_large_instance_stops_at_its_limit_with_reasons() -> None:
    """200,000 CPU-only replicas, about twice the cores of the day, at a half-second limit: ``auto`` does not build
    the time model (one job per replica; ``metrics.cpsat_declined`` says why), the sweep stops while what
    follows has time for the replicas started (``metrics.cut_by_time_limit``), and every replica it did not reach
    carries the not-tried reason; the schedule passed the validator (``schedule`` checks it)."""
    data = _cpu_cluster([128] * 200, [
        {"name": f"cpu{k}", "replicas": 20_000, "cpu": 1 + k % 4, "memory_gib": 1, "duration": f"{1 + k % 6}h",
         "release": f"{k}h"} for k in range(10)], horizon="1d")
    p = problem_from_data(data)
    s = schedule(p, "auto", time_limit=0.5)
    assert s.strategy == "heuristic"
    assert "building the time model" in s.metrics["cpsat_declined"]
    assert s.metrics["cut_by_time_limit"] is True
    assert s.status != "optimal"
    assert s.metrics["replicas_scheduled"] < 200_000
    not_tried = [u for u in s.unscheduled if u.reason.startswith("not tried: the time limit ran out")]
    assert not_tried and sum(len(u.replicas) for u in s.unscheduled) == 200_000 - s.metrics["replicas_scheduled"]
    assert "the sweep stopped at" in not_tried[0].reason
