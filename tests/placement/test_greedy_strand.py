"""Shares in two dimensions: the greedy placer does not strand a GPU's scarcer dimension while it has a choice.

The rule (:class:`~capplan.placement.core.strand.StrandRule`) by hand in both regimes, a hand-worked fleet where
the previous rule (a busy GPU first) left time alone on a GPU whose memory was gone, and a property: on random
share fleets with GPU memory (time or memory the scarcer), greedy plans are valid and, with the plain order as
reference, the same as fitting one share at a time.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions
from capplan.placement.core.state import ClusterState
from capplan.placement.greedy import plan_greedy
from tests.placement.test_greedy_bulk import OneByOne, assert_plan_of_reference

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GIB = 1024


def _fleet(gpus: int, workloads: list[dict[str, Any]], model: str = "L40S-48GB") -> dict[str, Any]:
    return {"cluster": {"name": "s", "levels": ["node"], "nodes": [
        {"name": "n1", "gpu": model, "gpus": gpus, "cpu": 64, "memory_gib": 512}]}, "workloads": workloads}


def _share(name: str, fraction: float, gib: int, replicas: int, priority: int = 0) -> dict[str, Any]:
    return {"name": name, "kind": "shared", "gpu_fraction": fraction, "gpu_memory_gib": gib, "replicas": replicas,
            "cpu": 1, "priority": priority}


#: Two L40S GPUs (48 GiB): two memory-heavy shares (0.1, 24 GiB) at priority 10, six light ones (0.3, 4 GiB) below.
STRANDED = _fleet(2, [_share("heavy", 0.1, 24, 2, priority=10), _share("light", 0.3, 4, 6)])


def test_strand_rule_by_hand_when_time_is_scarcer() -> None:
    """STRANDED asks 2.0 GPUs of time of 2 (1.0) and 72 of 96 GiB (0.75): time is scarcer. The shapes are (0.1,
    24 GiB) and (0.3, 4 GiB): a GPU left with 0.8 and no memory strands (the light share fits by time, none by
    both); one left with 0.9 and 24 GiB does not (both fit); one left with 0.05 and no memory does not (no share
    fits by time: its time is spent); one left with 0.2 and 20 GiB strands (only the heavy one fits by time, and
    it needs 24 GiB)."""
    rule = ClusterState(problem_from_data(STRANDED)).strand
    assert rule.active and rule.time_scarce
    assert rule.strands(0, 800, 0)
    assert not rule.strands(0, 900, 24 * GIB)
    assert not rule.strands(0, 50, 0)
    assert rule.strands(0, 200, 20 * GIB)


def test_strand_rule_by_hand_when_memory_is_scarcer() -> None:
    """Shares of (0.1, 30 GiB) x 3 and (0.5, 8 GiB) x 1 on one L40S: 0.8 of the GPU's time, 98 of 48 GiB of memory:
    memory is scarcer, so what strands is memory left on a GPU whose time is gone. Left with 0.05 and 20 GiB: the
    (0.5, 8) share fits by memory, none by both: strands; with 0.5 and 20 GiB: fits; with 0.05 and 4 GiB: no share
    fits by memory (its memory is spent), so it does not strand."""
    rule = ClusterState(problem_from_data(_fleet(1, [_share("a", 0.1, 30, 3), _share("b", 0.5, 8, 1)]))).strand
    assert rule.active and not rule.time_scarce
    assert rule.strands(0, 50, 20 * GIB)
    assert not rule.strands(0, 500, 20 * GIB)
    assert not rule.strands(0, 50, 4 * GIB)


def test_no_memory_no_strand() -> None:
    """Shares that ask no GPU memory never strand anything: the rule is off (the greedy order is the plain one)."""
    rule = ClusterState(problem_from_data(_fleet(2, [_share("a", 0.3, 0, 4)]))).strand
    assert not rule.active and not rule.strands(0, 700, 0)


def test_memory_heavy_shares_do_not_strand_time() -> None:
    """STRANDED, by hand. The previous rule (a busy GPU first) put the second heavy share beside the first on GPU 0
    (0.2 of its time, all 48 GiB): its 0.8 of time was left with no memory, and the light shares got 3 places
    (GPU 1: 0.9 and 12 GiB), 1.1 GPUs placed. Now the second heavy share would strand GPU 0, and GPU 1 (idle) takes
    it without: each GPU keeps 0.9 and 24 GiB, and takes three light shares (0.9 and 12 GiB more): all 8 placed,
    2.0 GPUs, both GPUs full in time."""
    p = problem_from_data(STRANDED)
    plan = plan_greedy(p, PlanOptions())
    assert check_plan(p, plan) == []
    assert not plan.unplaced and plan.objective == (0.2, 1.8)
    heavy = sorted(a.gpus for a in plan.assignments if a.workload == "heavy")
    assert heavy == [(0,), (1,)]
    light = sorted(a.gpus[0] for a in plan.assignments if a.workload == "light")
    assert light == [0, 0, 0, 1, 1, 1]


@st.composite
def memory_share_fleet(draw: st.DrawFn) -> dict[str, Any]:
    """Shares with GPU memory over one to three GPU models, time or memory the scarcer: memory-heavy and time-heavy
    shapes, tenants (some isolated), some tied to one model, a few whole-GPU workloads, priorities."""
    models = draw(st.lists(st.sampled_from(["L40S-48GB", "H100-SXM5-80GB", "T4-16GB"]), min_size=1, max_size=3,
                           unique=True))
    nodes = [{"name": f"n{k}", "gpu": draw(st.sampled_from(models)), "gpus": draw(st.sampled_from([1, 2, 4, 8])),
              "cpu": draw(st.sampled_from([8, 64])), "memory_gib": 512} for k in range(draw(st.integers(1, 5)))]
    heavy = draw(st.booleans())  # memory the scarcer dimension, most of the time
    workloads: list[dict[str, Any]] = []
    for k in range(draw(st.integers(2, 14))):
        if draw(st.integers(0, 7)) == 0:
            workloads.append({"name": f"g{k}", "gpus": 1, "replicas": draw(st.integers(1, 3)), "cpu": 1,
                              "priority": draw(st.sampled_from([0, 10]))})
            continue
        w = _share(f"w{k}", draw(st.sampled_from([0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7])),
                   draw(st.sampled_from([8, 12, 16, 24, 30] if heavy else [0, 2, 4, 8, 12, 20, 24])),
                   draw(st.integers(1, 12)), priority=draw(st.sampled_from([0, 10, 20])))
        w["tenant"] = draw(st.sampled_from(["a", "b", "c"]))
        if draw(st.integers(0, 4)) == 0:
            w["isolation"] = "tenant"
        if draw(st.integers(0, 4)) == 0:
            w["gpu_models"] = [draw(st.sampled_from(models))]
        workloads.append(w)
    return {"cluster": {"name": "m", "levels": ["node"], "nodes": nodes}, "workloads": workloads}


@SETTINGS
@given(memory_share_fleet())
def test_greedy_plans_with_the_strand_rule_are_valid(data: dict[str, Any]) -> None:
    """Greedy plans of share fleets with GPU memory pass the independent validator, and the fast paths (kept
    share orders, whole-node fills, the screen of the first walk) give the plan of one share fitted at a time."""
    assert_plan_of_reference(data, OneByOne)
