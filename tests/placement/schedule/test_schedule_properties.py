"""Properties of every schedule strategy: valid on random scenarios, exact on tiny ones, deterministic."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.errors import InputError
from capplan.model.problem import Problem
from capplan.model.validate_schedule import assert_valid_schedule, check_schedule
from capplan.placement.core.options import PlanOptions
from capplan.placement.greedy import plan_greedy
from capplan.placement.schedule import schedule
from capplan.placement.schedule.exact import relaxation, schedule_cpsat, unsupported
from capplan.placement.schedule.sweep import schedule_sweep
from tests.strategies_gen import scenario_data

HOUR = 3600


@st.composite
def timed_scenario(draw: st.DrawFn) -> dict[str, Any]:
    """A random rich scenario with durations, releases, deadlines and some running replicas that end."""
    data = draw(scenario_data())
    horizon = draw(st.sampled_from([4, 8, 24]))
    data["schedule"] = {"horizon": f"{horizon}h", "step": draw(st.sampled_from(["30m", "1h"]))}
    for w in data["workloads"]:
        if draw(st.integers(0, 4)):
            w["duration"] = draw(st.sampled_from(["30m", "1h", "2h", "3h"]))
            if draw(st.booleans()):
                w["release"] = draw(st.sampled_from([0, "1h", "90m"]))
            if draw(st.booleans()):
                dur = {"30m": 1800, "1h": 3600, "2h": 7200, "3h": 10800}[w["duration"]]
                release = {0: 0, "1h": 3600, "90m": 5400}[w.get("release", 0)]
                w["deadline"] = release + dur + draw(st.sampled_from([0, 1800, 3 * HOUR]))
    return data


def _with_running(data: dict[str, Any], pick: list[bool], ends: list[int]) -> dict[str, Any] | None:
    """Make some replicas of a greedy plan of ``data`` running, some with ``ends_in``."""
    try:
        p = problem_from_data(data)
    except InputError:
        return None
    plan = plan_greedy(p, PlanOptions(time_limit=5))
    running = []
    gangs = {w.name for w in p.workloads if w.is_gang}
    chosen: dict[str, bool] = {}  # a gang runs whole or not at all (its first replica's draw decides)
    for a, keep, end in zip(plan.assignments, pick, ends, strict=False):
        if a.workload in gangs:
            keep = chosen.setdefault(a.workload, keep)
            end = 0  # and runs to the horizon: its replicas end together
        if keep:
            e = a.model_dump(mode="json", exclude_none=True)
            if end:
                e["ends_in"] = end
            running.append(e)
    whole = [e for e in running if e["workload"] not in gangs or sum(
        1 for x in running if x["workload"] == e["workload"]) == p.workload(e["workload"]).replicas]
    return dict(data, running=whole)


def running_problem(data: dict[str, Any], pick: list[bool], ends: list[int]) -> Problem | None:
    """The problem of ``data`` with some replicas running (:func:`_with_running`), or None when the random
    scenario is rejected at the edge (e.g. a deadline the workload cannot meet)."""
    full = _with_running(data, pick, ends)
    if full is None:
        return None
    try:
        return problem_from_data(full)
    except InputError:
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_scenario(), st.lists(st.booleans(), min_size=8, max_size=8),
       st.lists(st.sampled_from([0, 1800, 5000, 4 * HOUR]), min_size=8, max_size=8))
def test_every_strategy_schedule_passes_the_validator(data: dict[str, Any], pick: list[bool], ends: list[int]) -> None:
    p = running_problem(data, pick, ends)
    if p is None:
        return
    spec = p.schedule
    assert spec is not None
    sweep = schedule_sweep(p, spec.horizon, spec.step)  # the large-problem pass, on small problems
    assert check_schedule(p, sweep) == []
    for strategy in ("heuristic", "cpsat", "auto"):
        s = schedule(p, strategy, time_limit=2)  # raises PlanValidationError if invalid
        assert check_schedule(p, s) == []
        assert len(s.workloads) == len(p.workloads)
        placed = {(a.workload, a.replica) for a in s.assignments}
        listed = {(u.workload, r) for u in s.unscheduled for r in u.replicas}
        assert placed.isdisjoint(listed)
        assert len(placed) + len(listed) == sum(w.replicas for w in p.workloads)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timed_scenario(), st.lists(st.booleans(), min_size=8, max_size=8),
       st.lists(st.sampled_from([0, 1800, 5000, 4 * HOUR]), min_size=8, max_size=8))
def test_neighbourhood_search_schedule_passes_the_validator(data: dict[str, Any], pick: list[bool],
                                                            ends: list[int]) -> None:
    """The time-window / domain search (the path of large whole-GPU problems), forced on small ones."""
    p = running_problem(data, pick, ends)
    if p is None:
        return
    spec = p.schedule
    assert spec is not None
    if unsupported(p) is not None:
        return
    s = schedule_cpsat(p, spec.horizon, spec.step, 1.0, lns=True)
    assert check_schedule(p, s) == []


def test_same_seed_same_schedule() -> None:
    data = {"schedule": {"horizon": "12h", "step": "30m"},
            "cluster": {"levels": ["rack", "node"], "racks": [
                {"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": 2, "gpu": "H100-SXM5-80GB",
                                             "gpus": 8, "cpu": 64, "memory_gib": 512}]} for r in range(2)]},
            "workloads": [{"name": f"w{i}", "gpus": 1 + i % 4, "replicas": 1 + i % 3, "duration": f"{1 + i % 5}h",
                           "release": f"{i % 3}h", "priority": 10 * (i % 2),
                           **({"kind": "training"} if i % 4 == 0 else {})} for i in range(8)]}
    p = problem_from_data(data)
    for strategy in ("heuristic", "cpsat"):
        a = schedule(p, strategy, time_limit=10, seed=3).model_copy(update={"solve_seconds": 0.0, "metrics": {}})
        b = schedule(p, strategy, time_limit=10, seed=3).model_copy(update={"solve_seconds": 0.0, "metrics": {}})
        assert a.to_json() == b.to_json()
    spec = p.schedule
    assert spec is not None
    a, b = (schedule_cpsat(p, spec.horizon, spec.step, 3.0, seed=3, lns=True).model_copy(
        update={"solve_seconds": 0.0, "metrics": {}}) for _ in range(2))
    assert a.strategy == "cpsat-lns" and a.to_json() == b.to_json()


# ------------------------------------------------------------------ exhaustive search on tiny instances
def _tiny(seed: int, tenants: bool = False) -> dict[str, Any]:
    rnd = random.Random(seed)
    nodes = [{"name": f"n{i}", "gpu": "H100-SXM5-80GB", "gpus": 2, "cpu": 64, "memory_gib": 256} for i in range(2)]
    workloads = []
    for i in range(rnd.randint(3, 4)):
        w: dict[str, Any] = {"name": f"w{i}", "gpus": rnd.choice([1, 2]), "duration": rnd.choice([1, 2, 3]) * HOUR,
                             "release": rnd.choice([0, 0, 1]) * HOUR, "priority": rnd.choice([0, 0, 5])}
        if rnd.random() < 0.3:
            w["deadline"] = w["release"] + w["duration"] + rnd.choice([0, 1]) * HOUR
        if tenants:
            w["tenant"] = rnd.choice(["a", "b"])
            if rnd.random() < 0.5:
                w["isolation"] = "node"
        workloads.append(w)
    return {"schedule": {"horizon": "4h", "step": "1h"}, "cluster": {"name": "t", "levels": ["node"], "nodes": nodes},
            "workloads": workloads}


def _exhaustive(data: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    """Best (work per priority, highest first; wait) over every start and node of every workload.

    Written from the problem statement only: at every hour each node has 2 GPUs, and a node that
    runs a workload with node isolation runs only its tenant's workloads in that hour.
    """
    ws = data["workloads"]
    prios = sorted({w["priority"] for w in ws}, reverse=True)
    options = []
    for w in ws:
        last = min(w.get("deadline", 4 * HOUR), 4 * HOUR) - w["duration"]
        opts: list[tuple[int, int] | None] = [None]
        opts += [(t, n) for t in range(w["release"], last + 1, HOUR) for n in range(2)]
        options.append(opts)
    best: tuple[tuple[int, ...], int] | None = None
    for choice in itertools.product(*options):
        use = [[0] * 4 for _ in range(2)]
        who: list[list[set[str]]] = [[set() for _ in range(4)] for _ in range(2)]
        alone: list[list[bool]] = [[False] * 4 for _ in range(2)]
        ok = True
        for w, c in zip(ws, choice, strict=True):
            if c is None:
                continue
            t, n = c
            for h in range(t // HOUR, (t + w["duration"]) // HOUR):
                use[n][h] += w["gpus"]
                who[n][h].add(w.get("tenant", "default"))
                alone[n][h] = alone[n][h] or w.get("isolation") == "node"
                ok = ok and use[n][h] <= 2 and not (alone[n][h] and len(who[n][h]) > 1)
        if not ok:
            continue
        work = tuple(sum(w["gpus"] * w["duration"] for w, c in zip(ws, choice, strict=True)
                         if c is not None and w["priority"] == q) for q in prios)
        wait = sum(w["gpus"] * (c[0] - w["release"]) for w, c in zip(ws, choice, strict=True) if c is not None)
        if best is None or (work, -wait) > (best[0], -best[1]):
            best = (work, wait)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(12))
def test_cpsat_equals_exhaustive_search_on_tiny_instances(seed: int) -> None:
    data = _tiny(seed, tenants=seed % 2 == 1)
    p = problem_from_data(data)
    s = schedule(p, "cpsat", time_limit=10)
    work, wait = _exhaustive(data)
    assert s.status == "optimal"
    assert s.objective == tuple(round(x / HOUR, 6) for x in work)
    assert s.wait_gpu_h == round(wait / HOUR, 6)
    h = schedule(p, "heuristic")
    assert (h.objective, -h.wait_gpu_h) <= (s.objective, -s.wait_gpu_h)
    # the energy relaxation bounds the highest priority's work from above
    r = relaxation(p, 4 * HOUR, HOUR)
    got = r.level(p.priorities[0], {}, 5.0)
    assert got is None or got >= work[0] * 7000


@pytest.mark.parametrize("seed", range(6))
def test_neighbourhood_search_equals_exhaustive_search_on_tiny_instances(seed: int) -> None:
    """Every neighbourhood of a tiny instance frees most of it: the search reaches the optimal work."""
    data = _tiny(seed, tenants=seed % 2 == 1)
    p = problem_from_data(data)
    s = assert_valid_schedule(p, schedule_cpsat(p, 4 * HOUR, HOUR, 2.0, lns=True))
    work, _ = _exhaustive(data)
    assert s.strategy == "cpsat-lns"
    assert s.objective == tuple(round(x / HOUR, 6) for x in work)
