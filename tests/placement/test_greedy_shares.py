"""Greedy's share path at fleet scale changes how the best node and GPU are found, never which ones.

Shares of one workload are placed on a node in one step (:func:`~capplan.placement.core.fit.fill_shares`), the
candidates of a share shape are kept in best-fit order between workloads (``BestFitOrder._share_order``), and the
unplaced reasons of shares keep what workloads of one shape share (``explain_fast``'s memo). Each is checked
against the plain form on random share-heavy fleets (several tenants, tenant and node isolation, GPU memory,
preset GPU modes, power budgets, running shares): the same placements, order, reasons and plans, all valid.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.placement import PlanOptions
from capplan.placement.core.fit import fill_shares, fit_on_node
from capplan.placement.core.reasons import explain_fast
from capplan.placement.core.state import ClusterState, Placement
from capplan.placement.greedy import GreedyPlacer, place_workload, plan_greedy, workload_order
from tests.placement.test_greedy_bulk import OneByOne, assert_plan_of_reference

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODELS = ["L40S-48GB", "H100-SXM5-80GB", "T4-16GB"]


@st.composite
def share_fleet(draw: st.DrawFn) -> dict[str, Any]:
    """A small fleet of shareable GPUs and many share workloads of a few tenants (some whole-GPU work too)."""
    racks = []
    k = 0
    for r in range(draw(st.integers(1, 2))):
        nodes = []
        for _ in range(draw(st.integers(1, 4))):
            k += 1
            gpus = draw(st.sampled_from([1, 2, 4, 8]))
            e: dict[str, Any] = {"name": f"n{k}", "gpu": draw(st.sampled_from(MODELS)), "gpus": gpus,
                                 "cpu": draw(st.sampled_from([4, 16, 64])),
                                 "memory_gib": draw(st.sampled_from([32, 512]))}
            if gpus > 1 and draw(st.integers(0, 3)) == 0:
                e["gpu_modes"] = [{"gpus": [0], "mode": draw(st.sampled_from(["whole", "shared"]))}]
            nodes.append(e)
        rack: dict[str, Any] = {"name": f"r{r}", "nodes": nodes}
        if draw(st.integers(0, 3)) == 0:
            rack["power_kw"] = draw(st.sampled_from([0.5, 1, 3]))
        racks.append(rack)
    workloads = []
    for i in range(draw(st.integers(2, 12))):
        w: dict[str, Any] = {"name": f"w{i}", "replicas": draw(st.integers(1, 12)),
                             "cpu": draw(st.sampled_from([0.5, 1, 4])), "memory_gib": draw(st.sampled_from([0, 4, 16])),
                             "priority": draw(st.sampled_from([0, 10, 20])),
                             "tenant": draw(st.sampled_from(["a", "b", "c"])),
                             "isolation": draw(st.sampled_from(["none", "none", "none", "tenant", "node"]))}
        if draw(st.integers(0, 5)) == 0:
            w["gpus"] = draw(st.sampled_from([1, 2]))
        else:
            w.update(kind="shared", gpu_fraction=draw(st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5, 0.7])),
                     gpu_memory_gib=draw(st.sampled_from([0, 4, 8, 12, 20, 24])))
            if draw(st.integers(0, 4)) == 0:
                w["gpu_models"] = [draw(st.sampled_from(MODELS))]
        workloads.append(w)
    return {"cluster": {"name": "s", "levels": ["rack", "node"], "racks": racks}, "workloads": workloads}


@SETTINGS
@given(share_fleet(), st.booleans())
def test_share_path_gives_the_plan_of_one_share_at_a_time(data: dict[str, Any], moves: bool) -> None:
    """The greedy plan (assignments, reasons, objective) is the reference placer's, and valid; with part of the
    plan running first (moves and evictions allowed) too."""
    p = problem_from_data(data)
    if moves:
        first = plan_greedy(p, PlanOptions())
        data = {**data, "running": [a.model_dump(exclude_none=True) for a in first.assignments[::2]]}
        for w in data["workloads"]:
            w.update(preemptible=True, migratable=True)
    assert_plan_of_reference(data, OneByOne, PlanOptions(allow_preemption=moves, allow_migration=moves))


@SETTINGS
@given(share_fleet(), st.integers(0, 12), st.integers(1, 30))
def test_fill_shares_is_fit_one_by_one(data: dict[str, Any], cut: int, most: int) -> None:
    """On the occupancy after the first ``cut`` workloads, every share workload's bulk fill of every node gives
    the placements (in order) and the reason of fitting and applying one share at a time."""
    p = problem_from_data(data)
    order = workload_order(p)
    state = ClusterState(p)
    placer = GreedyPlacer(p, state)
    for w in order[:cut]:
        place_workload(placer, w, w.replicas, [])
    for w in p.workloads:
        if w.gpu_fraction is None:
            continue
        for i in state.eligible(w)[0].tolist():
            d = state.demand_at(w, i)
            got, why = fill_shares(state, w, d, i, most)
            mark = state.checkpoint()
            ref: list[Placement] = []
            ref_why = ""
            while len(ref) < most:
                r = fit_on_node(state, w, d, i)
                if not isinstance(r, Placement):
                    ref_why = r
                    break
                state.apply(w, d, r)
                ref.append(r)
            state.rollback(mark)
            assert (got, why) == (ref, ref_why), (w.name, i)


@SETTINGS
@given(share_fleet())
def test_kept_share_order_is_the_plain_order(data: dict[str, Any]) -> None:
    """Before each workload of a greedy pass, the candidates of every share workload from the kept order are
    those of the plain path (screen, keys, per-GPU screen), in the same order."""
    p = problem_from_data(data)
    state = ClusterState(p)
    placer = GreedyPlacer(p, state)
    every = np.arange(state.n)
    shares = [w for w in p.workloads if w.gpu_fraction is not None]
    for w in workload_order(p):
        for s in shares:
            assert placer.candidates(s, None) == placer.candidates(s, every), s.name
        place_workload(placer, w, w.replicas, [])


@SETTINGS
@given(share_fleet(), st.integers(0, 12))
def test_share_reasons_with_memo_are_the_plain_ones(data: dict[str, Any], cut: int) -> None:
    """``explain_fast`` with the memo kept across workloads says what it says without it."""
    p = problem_from_data(data)
    state = ClusterState(p)
    placer = GreedyPlacer(p, state)
    for w in workload_order(p)[:cut]:
        place_workload(placer, w, w.replicas, [])
    memo: dict[object, object] = {}
    for w in p.workloads:
        idx = state.eligible(w)[0]
        for missing in (1, w.replicas):
            assert explain_fast(state, w, missing, idx, None, memo) == explain_fast(state, w, missing, idx), w.name


def test_fill_shares_hand_worked() -> None:
    """An H100 (80 GiB) with GPU 0 at 0.5 and 40 GiB and GPU 1 idle: shares of 0.25 and 30 GiB go to GPU 0 until
    its memory is full (one), then to GPU 1 (two by memory), and the node reports "gpu" after three."""
    data = {"cluster": {"name": "h", "levels": ["node"], "nodes": [
        {"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 2, "cpu": 64, "memory_gib": 256}]},
        "workloads": [{"name": "big", "kind": "shared", "gpu_fraction": 0.5, "gpu_memory_gib": 40, "cpu": 1},
                      {"name": "s", "kind": "shared", "gpu_fraction": 0.25, "gpu_memory_gib": 30, "replicas": 5,
                       "cpu": 1}]}
    p = problem_from_data(data)
    state = ClusterState(p)
    big, s = p.workload("big"), p.workload("s")
    state.apply(big, state.demand_at(big, 0), Placement(node=0, gpus=(0,), fraction_milli=500))
    got, why = fill_shares(state, s, state.demand_at(s, 0), 0, 5)
    assert [pl.gpus for pl in got] == [(0,), (1,), (1,)] and why == "gpu"
    got, why = fill_shares(state, s, state.demand_at(s, 0), 0, 2)
    assert len(got) == 2 and why == ""


def test_share_goes_to_the_gpu_left_tightest_in_both() -> None:
    """An L40S (48 GiB) node: GPU 0 at 0.3 and 40 GiB (memory nearly gone), GPU 1 at 0.6 and 8 GiB. A share of
    0.1 and 4 GiB leaves GPU 0 at 0.6 time and 4 GiB (the larger part: 0.6), GPU 1 at 0.3 and 36 GiB (0.75):
    it takes GPU 0's time, which memory-hungry shares could not use, rather than GPU 1's (the busiest by time)."""
    data = {"cluster": {"name": "h", "levels": ["node"], "nodes": [
        {"name": "n1", "gpu": "L40S-48GB", "gpus": 2, "cpu": 64, "memory_gib": 256}]},
        "workloads": [{"name": "a", "kind": "shared", "gpu_fraction": 0.3, "gpu_memory_gib": 40, "cpu": 1},
                      {"name": "b", "kind": "shared", "gpu_fraction": 0.6, "gpu_memory_gib": 8, "cpu": 1},
                      {"name": "s", "kind": "shared", "gpu_fraction": 0.1, "gpu_memory_gib": 4, "cpu": 1}]}
    p = problem_from_data(data)
    state = ClusterState(p)
    for name, g, f in (("a", 0, 300), ("b", 1, 600)):
        w = p.workload(name)
        state.apply(w, state.demand_at(w, 0), Placement(node=0, gpus=(g,), fraction_milli=f))
    s = p.workload("s")
    r = fit_on_node(state, s, state.demand_at(s, 0), 0)
    assert isinstance(r, Placement) and r.gpus == (0,)
    assert [pl.gpus for pl in fill_shares(state, s, state.demand_at(s, 0), 0, 1)[0]] == [(0,)]


def test_fast_reasons_count_the_gpu_memory_of_shares() -> None:
    """An L40S (48 GiB) whose share of 0.1 and 44 GiB leaves 0.9 of its time and 4 GiB: a share of 0.1 and 8 GiB
    does not fit, and the array form says so as the exact form does (it counted the time alone before)."""
    from capplan.placement.core.reasons import explain

    data = {"cluster": {"name": "l", "levels": ["node"], "nodes": [
        {"name": "n1", "gpu": "L40S-48GB", "gpus": 1, "cpu": 64, "memory_gib": 256}]},
        "workloads": [{"name": "big", "kind": "shared", "gpu_fraction": 0.1, "gpu_memory_gib": 44, "cpu": 1},
                      {"name": "s", "kind": "shared", "gpu_fraction": 0.1, "gpu_memory_gib": 8, "cpu": 1}]}
    p = problem_from_data(data)
    state = ClusterState(p)
    place_workload(GreedyPlacer(p, state), p.workload("big"), 1, [])
    w = p.workload("s")
    idx = state.eligible(w)[0]
    exact = explain(state, w, 1, None)
    assert exact.startswith("GPU capacity") and "on 1 of 1 eligible nodes" in exact
    assert explain_fast(state, w, 1, idx) == exact
    assert explain_fast(state, w, 1, idx, None, {}) == exact


def test_exact_reasons_stop_at_their_node_checks(monkeypatch: Any) -> None:
    """Past ``EXACT_REASON_CHECKS`` node checks the unplaced shapes left get the array form: with a budget of one
    node, the first unplaced shape (one eligible node) is explained exactly, the other by arrays."""
    import capplan.placement.greedy as greedy

    data = {"cluster": {"name": "l", "levels": ["node"], "nodes": [
        {"name": "n1", "gpu": "L40S-48GB", "gpus": 1, "cpu": 64, "memory_gib": 256}]},
        "workloads": [{"name": "big", "kind": "shared", "gpu_fraction": 0.9, "gpu_memory_gib": 8, "cpu": 1,
                       "priority": 9},
                      {"name": "a", "kind": "shared", "gpu_fraction": 0.2, "cpu": 1},
                      {"name": "b", "kind": "shared", "gpu_fraction": 0.3, "cpu": 1}]}
    p = problem_from_data(data)
    calls: list[str] = []
    exact, fast = greedy.explain, greedy.explain_fast
    monkeypatch.setattr(greedy, "explain", lambda *a, **k: calls.append("exact") or exact(*a, **k))
    monkeypatch.setattr(greedy, "explain_fast", lambda *a, **k: calls.append("fast") or fast(*a, **k))
    monkeypatch.setattr(greedy, "EXACT_REASON_CHECKS", 1)
    plan = plan_greedy(p, PlanOptions(time_limit=10))
    assert sorted(u.workload for u in plan.unplaced) == ["a", "b"] and calls == ["exact", "fast"]
    assert all(u.reason.startswith("GPU capacity") for u in plan.unplaced)
