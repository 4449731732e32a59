"""The bound's MIG waste (:func:`capplan.placement.core.domaincap._mig_waste`): hand-worked cases, and never below
the lexicographic optimum (CP-SAT's, when it proves it) at any priority on random MIG fleets of several models."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import load_catalog
from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Problem
from capplan.placement import PlanOptions, solve
from capplan.placement.core.domaincap import joint_cap
from capplan.placement.core.summary import make_plan
from tests.placement.test_bound_domains import test_every_bound_at_least_the_proven_optimum_per_priority as _prop

U = 7000  # demand units per GPU
H100 = "H100-SXM5-80GB"


def _problem(data: dict[str, Any]) -> Problem:
    return problem_from_data(data, load_catalog())


def _node(name: str, model: str = H100, gpus: int = 2) -> dict[str, Any]:
    return {"name": name, "gpu": model, "gpus": gpus, "cpu": 64, "memory_gib": 512}


def _pair(workload: str) -> list[Assignment]:
    """Two 3g.40gb on GPU 0 of n0 (starts 0 and 4)."""
    return [Assignment(workload=workload, replica=r, node="n0", gpus=(0,), mig=MigSlot(profile="3g.40gb", start=4 * r))
            for r in range(2)]


def test_two_3g_instances_lose_a_seventh_of_their_gpu() -> None:
    """Two H100 GPUs. The two 3g.40gb of priority 10 take 8 memory slices and 6/7 of the compute wherever they go
    (one GPU each leaves 4 memory slices of each GPU to nothing else of the plan's work): 1/7 lost. A plan placing
    them and one whole GPU at priority 0 is optimal, and the bound says so: 2 - 6/7 - 1/7 = 1 (it said 8/7)."""
    p = _problem({"cluster": {"nodes": [_node("n0")]},
                  "workloads": [{"name": "big", "mig": "3g.40gb", "replicas": 2, "cpu": 1, "priority": 10},
                                {"name": "whole", "gpus": 1, "replicas": 2, "cpu": 1}]})
    assert joint_cap(p, (10, 0)) == 2 * U
    assert joint_cap(p, (10, 0), forced=(10,)) == 2 * U - 1000
    got = [*_pair("big"), Assignment(workload="whole", replica=0, node="n0", gpus=(1,))]
    plan = make_plan(p, "test", got, [])
    assert plan.bound == (0.857143, 1.0) and plan.gaps == (0.0, 0.0)
    assert solve(p, "cpsat", PlanOptions(time_limit=10)).objective == (0.857143, 1.0)


def test_small_instances_of_the_priorities_fill_beside_them() -> None:
    """Two 2g.20gb of priority 0 (excess 2/8 - 2/7 = -1/28 each) may fill beside a 3g.40gb (3 + 2 + 2 compute
    slices, 4 + 2 + 2 memory slices): the waste claimed is 2/14 - 2/28 = 1/14 of a GPU, not 1/7."""
    p = _problem({"cluster": {"nodes": [_node("n0")]},
                  "workloads": [{"name": "big", "mig": "3g.40gb", "replicas": 2, "cpu": 1, "priority": 10},
                                {"name": "mid", "mig": "2g.20gb", "replicas": 2, "cpu": 1}]})
    assert joint_cap(p, (10, 0), forced=(10,)) == 2 * U - 500
    assert joint_cap(p, (10, 0), forced=(10, 0)) == 2 * U - 500  # both placed: the same sum


def test_guaranteed_mig_is_forced_and_nothing_else() -> None:
    """Guaranteed 3g.40gb (priority 0) are placed by every plan the bound compares with (when the plan places
    them): their waste counts at every priority, so priority 10's whole GPUs get at most 2 - 1/7 (it said 2);
    without a guarantee or a floor nothing is claimed (they may stay out)."""
    work = [{"name": "big", "mig": "3g.40gb", "replicas": 2, "cpu": 1, "sla": "guaranteed"},
            {"name": "whole", "gpus": 1, "replicas": 2, "cpu": 1, "priority": 10}]
    p = _problem({"cluster": {"nodes": [_node("n0")]}, "workloads": work})
    assert joint_cap(p, (10,), guaranteed=True) == 2 * U - 1000
    assert joint_cap(p, (10, 0)) == 2 * U
    got = [*_pair("big"), Assignment(workload="whole", replica=0, node="n0", gpus=(1,))]
    assert make_plan(p, "test", got, []).bound == (1.857143, 0.857143)


def test_memory_light_instances_claim_nothing() -> None:
    """Seven 1g.10gb use 7 of 8 memory slices for the whole GPU's value: no waste (the excess is negative)."""
    p = _problem({"cluster": {"nodes": [_node("n0", gpus=1)]},
                  "workloads": [{"name": "small", "mig": "1g.10gb", "replicas": 7, "cpu": 1, "priority": 10},
                                {"name": "whole", "gpus": 1, "cpu": 1}]})
    assert joint_cap(p, (10, 0), forced=(10,)) == U


@st.composite
def _mig_fleets(draw: st.DrawFn) -> dict[str, Any]:
    """1-3 nodes of 1-2 GPUs of MIG models with different slices (H100, A100-40GB, H200, B200, A30); named
    profiles, ``mig: auto`` by memory and whole GPUs at three priorities, some guaranteed."""
    models = ["H100-SXM5-80GB", "A100-SXM4-40GB", "H200-SXM-141GB", "B200-180GB", "A30-24GB"]
    nodes = [_node(f"n{k}", draw(st.sampled_from(models)), draw(st.integers(1, 2)))
             for k in range(draw(st.integers(1, 3)))]
    catalog = load_catalog()
    work: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        w: dict[str, Any] = {"name": f"w{i}", "cpu": 1, "priority": draw(st.sampled_from([0, 5, 10])),
                             "replicas": draw(st.integers(1, 4))}
        kind = draw(st.sampled_from(["named", "named", "auto", "whole"]))
        if kind == "named":
            model = draw(st.sampled_from(sorted({n["gpu"] for n in nodes})))
            profile = draw(st.sampled_from([x.name for x in catalog.get(model).profiles if "+" not in x.name]))
            w.update(mig=profile, gpu_models=[model])
        elif kind == "auto":
            w.update(mig="auto", gpu_memory_gib=draw(st.sampled_from([5, 10, 20, 40, 70])))
        else:
            w["gpus"] = 1
        if draw(st.integers(0, 4)) == 0:
            w["sla"] = "guaranteed"
        work.append(w)
    return {"cluster": {"nodes": nodes}, "workloads": work}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mig_fleets())
def test_bounds_at_least_the_optimum_with_mig_waste(data: dict[str, Any]) -> None:
    """MIG of several models: every bound (LP, trivial, lexicographic from the greedy plan, the greedy plan's own)
    is at least CP-SAT's proven optimum at every priority."""
    _prop.hypothesis.inner_test(data)  # type: ignore[attr-defined]
