"""The conformance battery every planning and scheduling strategy must pass.

A strategy added with :func:`capplan.register` proves itself the way scikit-learn's
``check_estimator`` lets an estimator prove itself::

    from capplan.testing import check_strategy

    capplan.register("mine", plan_mine)
    check_strategy("mine")            # raises AssertionError naming the first check that fails

or, one pytest test per check::

    @pytest.mark.parametrize("check", strategy_checks("mine"), ids=lambda c: c.name)
    def test_mine(check):
        check()

The checks build their own small problems (a library user has no ``models/examples``), run the
strategy through :func:`capplan.solve` / :func:`capplan.schedule` (which validate every result) and
check the result again with the independent validator. ``extra`` scenarios (paths or problems) are
checked for a valid result too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.model.schedule import Schedule
from capplan.model.validate import check_plan
from capplan.model.validate_schedule import check_schedule
from capplan.placement import PlanOptions, solve
from capplan.placement.schedule import schedule

#: GPU model of the battery's clusters (in the bundled catalog)
GPU = "H100-SXM5-80GB"
#: the slack a time-limit check allows over the limit: not a speed test, a "does it stop" test
LIMIT_SLACK_S = 15.0


@dataclass(frozen=True)
class Check:
    """One named check of a strategy; calling it runs the check (AssertionError on failure)."""

    name: str
    run: Callable[[], None]

    def __call__(self) -> None:
        self.run()


def cluster(nodes: int, gpus: int = 8) -> dict[str, Any]:
    """Scenario data of two racks of ``nodes // 2`` nodes of ``gpus`` H100s each."""
    return {"levels": ["rack", "node"],
            "racks": [{"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": max(1, nodes // 2), "gpu": GPU,
                                                   "gpus": gpus, "cpu": 128, "memory_gib": 1024}]}
                      for r in (1, 2)]}


def mixed_problem(nodes: int = 4, scale: int = 1) -> Problem:
    """A gang that needs a rack, MIG slices, GPU shares and CPU-only pods at three priorities."""
    return problem_from_data({"cluster": cluster(nodes), "workloads": [
        {"name": "gang", "kind": "training", "replicas": 2, "gpus": 8, "topology": {"required": "rack"},
         "priority": 10, "cpu": 8},
        {"name": "mig", "replicas": 6 * scale, "mig": "2g.20gb", "priority": 5, "cpu": 1},
        {"name": "share", "replicas": 5 * scale, "gpu_fraction": 0.4, "priority": 5, "cpu": 1},
        {"name": "cpu", "replicas": 3, "cpu": 4, "priority": 1}]})


def infeasible_problem() -> Problem:
    """A guaranteed 3 x 8-GPU gang on two 8-GPU nodes, and a small best-effort workload that fits."""
    return problem_from_data({"cluster": cluster(2), "workloads": [
        {"name": "huge", "kind": "training", "replicas": 3, "gpus": 8, "sla": "guaranteed", "priority": 9},
        {"name": "small", "replicas": 2, "gpus": 1, "priority": 1}]})


def timed_problem() -> Problem:
    """One 8-GPU node over 8 hours: B's deadline forces it before A (hand-worked: B at 0, A at 2h)."""
    return problem_from_data({"schedule": {"horizon": "8h", "step": "10m"},
                              "cluster": {"levels": ["rack", "node"], "racks": [
                                  {"name": "r1", "nodes": [{"name_prefix": "n", "count": 1, "gpu": GPU, "gpus": 8,
                                                            "cpu": 128, "memory_gib": 1024}]}]},
                              "workloads": [{"name": "A", "gpus": 8, "duration": "4h"},
                                            {"name": "B", "gpus": 8, "duration": "2h", "deadline": "3h"}]})


def spares_problem() -> Problem:
    """A one-node gang that checkpoints and asks for one hot spare in its rack, and 24 one-GPU replicas below it:
    the spare (the other node of the gang's rack) stays empty, so 16 of the 24 fit (docs/concepts.md, Goodput)."""
    return problem_from_data({"cluster": cluster(4), "interruptions": {"gpu_failure_rate": 2e-5},
                              "workloads": [
                                  {"name": "gang", "kind": "training", "replicas": 1, "gpus": 8, "priority": 10,
                                   "topology": {"required": "rack"}, "checkpoint": "6m", "spares": 1},
                                  {"name": "fill", "replicas": 24, "gpus": 1, "priority": 1}]})


def reality_problem() -> Problem:
    """A running state that breaks rules new placements keep (issue 26): a gang across an H100 and an A100 node,
    two tenants sharing GPU 0 of ``h2`` against tenant isolation; one more 1-GPU service to place."""
    def node(name: str, gpu: str) -> dict[str, Any]:
        return {"name": name, "gpu": gpu, "gpus": 8, "cpu": 64, "memory_gib": 512}

    return problem_from_data({
        "cluster": {"levels": ["node"], "nodes": [node("h1", "H100-SXM5-80GB"), node("h2", "H100-SXM5-80GB"),
                                                  node("a1", "A100-SXM4-80GB")]},
        "workloads": [
            {"name": "job", "kind": "training", "replicas": 2, "gpus": 8, "migratable": True},
            {"name": "sec", "replicas": 1, "gpu_fraction": 0.5, "tenant": "a", "isolation": "tenant"},
            {"name": "pub", "replicas": 1, "gpu_fraction": 0.5, "tenant": "b"},
            {"name": "svc", "replicas": 1, "gpus": 1, "priority": 5}],
        "running": [{"workload": "job", "replica": 0, "node": "h1", "gpus": list(range(8))},
                    {"workload": "job", "replica": 1, "node": "a1", "gpus": list(range(8))},
                    {"workload": "sec", "replica": 0, "node": "h2", "gpus": [0], "fraction": 0.5},
                    {"workload": "pub", "replica": 0, "node": "h2", "gpus": [0], "fraction": 0.5}]})


def presets_problem(reconfigure: str) -> Problem:
    """GPU 7 preset to seven empty 1g.10gb instances, GPUs 0-6 MIG off: three 1g.10gb replicas (they fit GPU 7)
    and one 3g.40gb replica (it needs a GPU re-partitioned, which only ``reconfigure: allowed`` permits)."""
    layout = [{"profile": "1g.10gb", "start": s} for s in range(7)]
    return problem_from_data({
        "reconfigure": reconfigure,
        "cluster": {"levels": ["node"], "nodes": [{
            "name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512,
            "gpu_modes": [{"gpus": list(range(7)), "mode": "whole"}, {"gpus": [7], "mode": "mig", "layout": layout}]}]},
        "workloads": [{"name": "small", "replicas": 3, "mig": "1g.10gb"},
                      {"name": "big", "replicas": 1, "mig": "3g.40gb"}]})


def _load(x: Path | str | Problem) -> Problem:
    return x if isinstance(x, Problem) else load_scenario(x)


# -- placement strategies ------------------------------------------------------------------------------


def strategy_checks(name: str, extra: Iterable[Path | str | Problem] = (), *, time_limit: float = 10.0,
                    seed: int = 3) -> list[Check]:
    """The checks of placement strategy ``name`` (registered in :data:`capplan.STRATEGIES`).

    Parameters
    ----------
    name
        A registered strategy name.
    extra
        Further scenarios (paths or problems) on which the strategy must return a valid plan.
    time_limit, seed
        Settings of every solve (one worker, so results are deterministic).

    Returns
    -------
    list of Check
        Valid plans, determinism for a seed, empty and infeasible problems, the time limit, the JSON
        round trip, the objective's definition, hot-spare nodes held for a gang, a running state that breaks
        rules (it stays, nothing fails) and preset MIG instances used before any GPU is reconfigured.
    """
    opts = PlanOptions(time_limit=time_limit, seed=seed, workers=1)
    scenarios = list(extra)

    def valid() -> None:
        for p in [mixed_problem(), *(_load(x) for x in scenarios)]:
            plan = solve(p, name, opts)
            assert check_plan(p, plan) == [], f"{name}: invalid plan"
            assert plan.priorities == p.priorities, f"{name}: priorities {plan.priorities} != {p.priorities}"

    def deterministic() -> None:
        p = mixed_problem()
        a, b = solve(p, name, opts), solve(p, name, opts)
        assert a.assignments == b.assignments, f"{name}: two runs with seed {seed} placed differently"
        assert a.objective == b.objective and a.unplaced == b.unplaced, f"{name}: two runs differ"

    def empty() -> None:
        plan = solve(problem_from_data({"cluster": cluster(2), "workloads": []}), name, opts)
        assert plan.assignments == () and plan.unplaced == (), f"{name}: a plan for no workloads is not empty"
        assert plan.status == "optimal", f"{name}: an empty plan is {plan.status}, not optimal"

    def infeasible() -> None:
        plan = solve(infeasible_problem(), name, opts)
        assert plan.status == "infeasible", f"{name}: status {plan.status} for an unplaceable guaranteed gang"
        un = {u.workload: u for u in plan.unplaced}
        assert "huge" in un and un["huge"].reason, f"{name}: the unplaceable gang has no reason"
        assert sum(a.workload == "small" for a in plan.assignments) == 2, f"{name}: what fits was not placed"

    def limit() -> None:
        p = mixed_problem(nodes=32, scale=20)
        t0 = time.perf_counter()
        plan = solve(p, name, PlanOptions(time_limit=2, seed=0, workers=1))
        took = time.perf_counter() - t0
        assert took < 2 + LIMIT_SLACK_S, f"{name}: a 2 s limit took {took:.1f} s"
        assert check_plan(p, plan) == [], f"{name}: invalid plan at a 2 s limit"

    def round_trip() -> None:
        plan = solve(mixed_problem(), name, opts)
        assert Plan.from_json(plan.to_json()) == plan, f"{name}: the plan does not survive its JSON"

    def objective() -> None:
        p = mixed_problem()
        plan = solve(p, name, opts)
        per = {w.name: sum(1 for a in plan.assignments if a.workload == w.name) for w in p.workloads}
        want = (8.0 * per["gang"], 2 / 7 * per["mig"] + 0.4 * per["share"], 0.0)
        assert all(abs(a - b) < 1e-6 for a, b in zip(plan.objective, want, strict=True)), \
            f"{name}: objective {plan.objective} is not the values placed {want}"
        assert abs(plan.metrics["value_placed"] - sum(plan.objective)) < 1e-6, f"{name}: value_placed differs"
        assert per["gang"] in (0, 2), f"{name}: a gang placed in part"
        assert per["cpu"] == 3, f"{name}: CPU-only pods left out of an empty cluster"

    def spares() -> None:
        p = spares_problem()
        plan = solve(p, name, opts)
        assert check_plan(p, plan) == [], f"{name}: invalid plan with a hot spare"
        rows = {r.workload: r for r in plan.goodput}
        assert "gang" in rows and len(rows["gang"].spare_nodes) == 1, f"{name}: the gang's spare is not held"
        rack = {a.node[:2] for a in plan.assignments if a.workload == "gang"}
        assert {n[:2] for n in rows["gang"].spare_nodes} == rack, f"{name}: the spare is outside the gang's rack"
        assert sum(a.workload == "fill" for a in plan.assignments) == 16, f"{name}: lower priority took the spare"

    def reality() -> None:
        p = reality_problem()
        for allow in (False, True):
            plan = solve(p, name, PlanOptions(time_limit=time_limit, seed=seed, workers=1, allow_migration=allow,
                                              allow_preemption=allow))
            assert check_plan(p, plan) == [], f"{name}: invalid plan over a running state that breaks rules"
            kept = {a.key: a.node for a in plan.assignments}
            assert kept.get(("job", 0)) == "h1" and kept.get(("job", 1)) == "a1", f"{name}: the running gang moved"
            assert kept.get(("svc", 0)) == "h2", f"{name}: the service was not placed on h2"

    def presets() -> None:
        for reconf, placed, changed in (("forbidden", 3, 0), ("allowed", 4, 1)):
            p = presets_problem(reconf)
            plan = solve(p, name, opts)
            assert check_plan(p, plan) == [], f"{name}: invalid plan with presets ({reconf})"
            assert len(plan.assignments) == placed, f"{name}: {len(plan.assignments)} placed with {reconf}"
            assert plan.metrics["gpus_reconfigured"] == changed, f"{name}: reconfigured GPUs with {reconf}"
            if reconf == "forbidden":  # allowed: the 1g replicas may join the re-partitioned GPU (1 change either way)
                assert {a.gpus[0] for a in plan.assignments if a.workload == "small"} == {7}, \
                    f"{name}: the 1g.10gb replicas left GPU 7's preset instances"

    return [Check(f"{name}:{fn.__name__}", fn)
            for fn in (valid, deterministic, empty, infeasible, limit, round_trip, objective, spares, reality,
                       presets)]


def check_strategy(name: str, extra: Iterable[Path | str | Problem] = (), **settings: Any) -> None:
    """Run every check of :func:`strategy_checks`; AssertionError names the first that fails."""
    for check in strategy_checks(name, extra, **settings):
        check()


# -- schedule strategies -------------------------------------------------------------------------------


def schedule_checks(name: str, extra: Sequence[Path | str | Problem] = (), *, time_limit: float = 10.0,
                    seed: int = 3) -> list[Check]:
    """The checks of schedule strategy ``name`` (one of :func:`capplan.schedule`'s strategies).

    Returns
    -------
    list of Check
        Valid schedules (a hand-worked deadline case included), determinism for a seed, an empty
        problem, the time limit and the JSON round trip.
    """

    def run(p: Problem, limit: float = time_limit) -> Schedule:
        return schedule(p, name, time_limit=limit, seed=seed, workers=1)

    def valid() -> None:
        for p in [timed_problem(), mixed_problem(), *(_load(x) for x in extra)]:
            s = run(p)
            assert check_schedule(p, s) == [], f"{name}: invalid schedule"

    def hand_worked() -> None:
        s = run(timed_problem())
        starts = {a.workload: a.start_s for a in s.assignments}
        assert starts.get("B") == 0 and starts.get("A") == 7200, f"{name}: starts {starts}, want B 0 and A 7200"

    def deterministic() -> None:
        p = timed_problem()
        a, b = run(p), run(p)
        assert a.assignments == b.assignments and a.objective == b.objective, f"{name}: two runs differ"

    def empty() -> None:
        s = run(problem_from_data({"cluster": cluster(2), "workloads": []}))
        assert s.assignments == () and s.unscheduled == (), f"{name}: a schedule of nothing is not empty"

    def limit() -> None:
        p = mixed_problem(nodes=32, scale=20)
        t0 = time.perf_counter()
        s = run(p, 2.0)
        took = time.perf_counter() - t0
        assert took < 2 + LIMIT_SLACK_S, f"{name}: a 2 s limit took {took:.1f} s"
        assert check_schedule(p, s) == [], f"{name}: invalid schedule at a 2 s limit"

    def round_trip() -> None:
        s = run(timed_problem())
        assert Schedule.from_json(s.to_json()) == s, f"{name}: the schedule does not survive its JSON"

    return [Check(f"{name}:{fn.__name__}", fn)
            for fn in (valid, hand_worked, deterministic, empty, limit, round_trip)]


def check_schedule_strategy(name: str, extra: Sequence[Path | str | Problem] = (), **settings: Any) -> None:
    """Run every check of :func:`schedule_checks`; AssertionError names the first that fails."""
    for check in schedule_checks(name, extra, **settings):
        check()
