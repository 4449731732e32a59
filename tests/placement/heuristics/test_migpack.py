"""Geometry-aware MIG packing: valid layouts, a hand-worked packing, the layout-aware bound, valid plans."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import GpuModel, load_catalog
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.core.bound import upper_bound
from capplan.placement.core.miglayouts import mig_layouts
from capplan.placement.heuristics import BestFit, FleetState
from capplan.placement.heuristics.placer import FleetPlacer
from capplan.placement.heuristics.run import place

CAT = load_catalog()


def _problem(data: dict[str, Any]) -> Problem:
    return problem_from_data(data, CAT)


def _valid(model: GpuModel, slots: list[tuple[int, int]]) -> bool:
    """The validator's MIG rules for one GPU, restated: starts, overlap, counts, compute, homogeneity."""
    used, compute = 0, 0
    counts: Counter[int] = Counter()
    for pi, s in slots:
        pr = model.profiles[pi]
        mask = ((1 << pr.memory_slices) - 1) << s
        if s not in pr.starts or used & mask:
            return False
        used |= mask
        compute += pr.compute_slices
        counts[pi] += 1
    return (all(c <= model.profiles[pi].max_count for pi, c in counts.items())
            and compute <= model.compute_slices and not (model.homogeneous and len(counts) > 1))


def test_layouts_are_valid_and_maximal() -> None:
    """Every layout passes the GPU rules, no placement can be added, and the A100 mixes are there."""
    for name in ["A100-SXM4-80GB", "H100-SXM5-80GB", "A30-24GB", "MI300X-192GB"]:
        model = CAT.get(name)
        lays = mig_layouts(model)
        assert lays
        for lay in lays:
            assert _valid(model, list(lay.slots))
            assert lay.counts == tuple(sum(1 for p, _ in lay.slots if p == i) for i in range(len(model.profiles)))
            extra = [(pi, s) for pi, pr in enumerate(model.profiles) for s in pr.starts]
            assert not any(_valid(model, [*lay.slots, x]) for x in extra)
    a100 = CAT.get("A100-SXM4-80GB")
    names = [pr.name for pr in a100.profiles]
    mixes = [{names[i]: c for i, c in enumerate(lay.counts) if c} for lay in mig_layouts(a100)]
    assert {"3g.40gb": 1, "2g.20gb": 2} in mixes
    assert {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2} in mixes
    assert {"3g.40gb": 2} in mixes
    assert not any(m.get("3g.40gb") == 2 and len(m) > 1 for m in mixes)  # 3g + 3g hold all 8 memory slices


def _hand_worked() -> Problem:
    """Three one-GPU A100 nodes; MIG work worth 2 GPUs exactly (3g x2, 2g x2, 1g x4), then a one-node gang."""
    nodes = [{"name": f"n{i}", "gpu": "A100-SXM4-80GB", "gpus": 1, "cpu": 64, "memory_gib": 512} for i in range(3)]
    work = [{"name": "big", "mig": "3g.40gb", "replicas": 2, "cpu": 1, "memory_gib": 4, "priority": 100},
            {"name": "mid", "mig": "2g.20gb", "replicas": 2, "cpu": 1, "memory_gib": 4, "priority": 100},
            {"name": "small", "mig": "1g.10gb", "replicas": 4, "cpu": 1, "memory_gib": 4, "priority": 100},
            {"name": "train", "kind": "training", "gpus": 1, "replicas": 1, "cpu": 8, "memory_gib": 64,
             "priority": 50}]
    return _problem({"cluster": {"nodes": nodes}, "workloads": work})


def _mig_gpus(assignments: list[Any]) -> set[tuple[str, int]]:
    return {(a.node, a.gpus[0]) for a in assignments if a.mig is not None}


def test_mixed_profiles_share_gpus_and_the_gang_fits() -> None:
    """Hand-worked: identical-profile filling takes 3 GPUs (3g+3g; 2g+2g+1g x3; one 1g) and leaves no
    node for the gang; packed by layouts (3g@4 beside 2g and 1g) the same instances take 2 GPUs."""
    p = _hand_worked()
    order = list(p.workloads)  # the big slices first: the worst case for identical filling
    # Without the packer (as the online scheduler places): one workload's instances per GPU.
    placer = FleetPlacer(FleetState(p), BestFit())
    plain = [placer.st.assignment(w, r, c) for w in order
             for r, c in enumerate(placer.place_workload(w, w.replicas, []))]
    assert len(_mig_gpus(plain)) == 3
    assert not [a for a in plain if a.workload == "train"]
    # With the packer (the heuristic strategy).
    assignments, unplaced, _ = place(p, "bestfit", order=order)
    assert len(_mig_gpus(assignments)) == 2
    assert [a.workload for a in assignments].count("train") == 1
    assert not unplaced
    plan = solve(p, "heuristic", PlanOptions(time_limit=10))
    assert check_plan(p, plan) == []
    assert len(_mig_gpus(list(plan.assignments))) == 2 and not plan.unplaced
    big = [a.mig.start for a in plan.assignments if a.mig is not None and a.mig.profile == "3g.40gb"]
    assert big == [4, 4]  # the start that leaves slices 0-3 to the 2g and 1g instances


def test_bound_counts_mig_geometry() -> None:
    """Two 3g and one 1g on one A100: 7 compute slices, but 3g+3g hold every memory slice, so no plan
    places more than 6/7 of a GPU; the bound prices MIG GPUs by valid layouts and stays below 1 GPU."""
    p = _problem({"cluster": {"nodes": [{"name": "n", "gpu": "A100-SXM4-80GB", "gpus": 1, "cpu": 8,
                                         "memory_gib": 64}]},
                  "workloads": [{"name": "a", "mig": "3g.40gb", "replicas": 2, "cpu": 1, "memory_gib": 1},
                                {"name": "b", "mig": "1g.10gb", "replicas": 1, "cpu": 1, "memory_gib": 1}]})
    b = upper_bound(p).per_priority[0]
    assert 6000 <= b < 7000  # 3g@0 + 3g@4 is a valid plan worth 6000 units


_MODELS = {"A100-SXM4-80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "1g.20gb"],
           "H100-SXM5-80GB": ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"],
           "A30-24GB": ["1g.6gb", "2g.12gb", "4g.24gb"], "MI300X-192GB": ["CPX", "QPX", "DPX"]}


@st.composite
def _mig_heavy(draw: st.DrawFn) -> dict[str, Any]:
    """A small fleet of MIG-capable nodes and mostly MIG workloads of mixed profiles and priorities."""
    nodes = [{"name": f"n{i}", "gpu": draw(st.sampled_from(sorted(_MODELS))), "gpus": draw(st.sampled_from([1, 2, 4])),
              "cpu": draw(st.sampled_from([8, 64])), "memory_gib": draw(st.sampled_from([64, 512]))}
             for i in range(draw(st.integers(1, 5)))]
    work: list[dict[str, Any]] = []
    for k in range(draw(st.integers(1, 8))):
        w: dict[str, Any] = {"name": f"w{k}", "replicas": draw(st.integers(1, 12)),
                             "cpu": draw(st.sampled_from([1, 2])), "memory_gib": draw(st.sampled_from([1, 8])),
                             "priority": draw(st.sampled_from([0, 10, 100])),
                             "tenant": draw(st.sampled_from(["a", "b"])),
                             "isolation": draw(st.sampled_from(["none", "none", "tenant"]))}
        kind = draw(st.integers(0, 9))
        if kind == 0:
            w.update(gpus=1)
            if draw(st.booleans()):
                w.update(kind="training", replicas=draw(st.integers(1, 3)))
        elif kind == 1:
            w.update(mig="auto", gpu_memory_gib=draw(st.sampled_from([5, 10, 30])))
        else:
            model = draw(st.sampled_from(sorted(_MODELS)))
            w.update(mig=draw(st.sampled_from(_MODELS[model])), gpu_models=[model])
        work.append(w)
    return {"cluster": {"nodes": nodes}, "workloads": work}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mig_heavy())
def test_heuristic_mig_plans_are_valid_and_within_the_bound(data: dict[str, Any]) -> None:
    """Heuristic plans of MIG-heavy fleets pass the independent validator and never beat the layout bound."""
    p = _problem(data)
    plan = solve(p, "heuristic", PlanOptions(time_limit=5))
    assert check_plan(p, plan) == []
    bound = upper_bound(p, time_limit=5).per_priority
    for q, placed in zip(p.priorities, plan.objective, strict=True):
        assert placed <= bound[q] / 7000 + 1e-6  # objectives are rounded to 6 decimals
