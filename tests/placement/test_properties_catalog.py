"""Property tests over user catalogs: random MIG/partition geometries, every plan and schedule valid.

The built-in GPUs have geometries where free memory slices never outnumber compute slices; a user
catalog (``--catalog FILE``) need not. These tests draw a random partitionable model (compute and
memory slices, profiles with their starts and counts, maybe homogeneous) and a random scenario on it,
and check every strategy's plan and the scheduler's schedule with the independent validator.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.catalog import Catalog, GpuModel, MigProfile, builtin_catalog
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement import STRATEGIES, solve
from capplan.placement.schedule import schedule


@st.composite
def gpu_model(draw: st.DrawFn) -> GpuModel:
    """A partitionable model whose profiles respect only the catalog's own checks."""
    memory = draw(st.sampled_from([4, 8]))
    compute = draw(st.sampled_from([c for c in (2, 4, 7, 8) if c <= memory + 1]))
    profiles = []
    for k in range(draw(st.integers(1, 3))):
        mem = draw(st.sampled_from([m for m in (1, 2, 4, 8) if m <= memory]))
        starts = draw(st.lists(st.sampled_from(list(range(0, memory - mem + 1, mem))), min_size=1, unique=True))
        profiles.append(MigProfile(name=f"p{k}", compute_slices=draw(st.integers(1, compute)), memory_slices=mem,
                                   memory_gib=mem * 5.0, max_count=draw(st.integers(1, len(starts) + 1)),
                                   starts=tuple(sorted(starts))))
    return GpuModel(name="X-CUSTOM", vendor="acme", memory_gib=memory * 5.0, tdp_w=300,
                    partitioning=draw(st.sampled_from(["mig", "partition"])), compute_slices=compute,
                    memory_slices=memory, homogeneous=draw(st.booleans()), profiles=tuple(profiles))


@st.composite
def custom_problem(draw: st.DrawFn) -> Problem:
    """One or two nodes of the drawn model (one maybe preset to MIG) and 1-4 workloads on it."""
    model = draw(gpu_model())
    names = [p.name for p in model.profiles]
    nodes = [{"name": f"n{i}", "gpu": model.name, "gpus": draw(st.sampled_from([1, 2])), "cpu": 16,
              "memory_gib": 64} for i in range(draw(st.integers(1, 2)))]
    if draw(st.booleans()):
        nodes[0]["gpu_modes"] = [{"gpus": [0], "mode": "mig"}]
    workloads: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):
        w: dict[str, Any] = {"name": f"w{i}", "replicas": draw(st.integers(1, 6)), "cpu": 1,
                             "priority": draw(st.sampled_from([0, 10])),
                             "tenant": draw(st.sampled_from(["a", "b"])),
                             "isolation": draw(st.sampled_from(["none", "none", "tenant"]))}
        kind = draw(st.sampled_from(["mig", "mig", "auto", "gpus", "fraction"]))
        if kind == "mig":
            w["mig"] = draw(st.sampled_from(names))
        elif kind == "auto":
            w.update(mig="auto", gpu_memory_gib=draw(st.sampled_from([4, 9, 19])))
        elif kind == "gpus":
            w["gpus"] = 1
        else:
            w.update(kind="shared", gpu_fraction=draw(st.sampled_from([0.25, 0.5])))
        workloads.append(w)
    data = {"cluster": {"name": "c", "nodes": nodes}, "workloads": workloads}
    return problem_from_data(data, builtin_catalog().merged(Catalog(models=(model,))))


QUICK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@QUICK
@given(custom_problem())
def test_greedy_and_heuristic_plans_are_valid(p: Problem) -> None:
    """The constructive planners respect the drawn geometry (compute slices, counts, starts, homogeneity)."""
    for name in ("greedy", "heuristic"):
        plan = solve(p, name, seed=1)  # solve() raises if the validator finds a violation
        assert check_plan(p, plan) == []


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(custom_problem())
def test_every_strategy_plan_is_valid(p: Problem) -> None:
    """Every registered strategy returns a validated plan on a user catalog's geometry."""
    for name in sorted(STRATEGIES):
        assert check_plan(p, solve(p, name, time_limit=2.0, seed=1)) == []


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(custom_problem())
def test_schedules_are_valid(p: Problem) -> None:
    """List scheduling and the time model (where it covers the problem) keep the geometry at every instant."""
    for strategy in ("heuristic", "auto"):
        s = schedule(p, strategy, horizon="2h", step="10m", time_limit=3.0)  # validated before it returns
        assert s.status in ("optimal", "feasible", "infeasible")
