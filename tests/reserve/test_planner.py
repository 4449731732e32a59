"""Planner behaviour: unmet guaranteed tiers, determinism, JSON round trip, shipped examples."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from capplan.model.deadline import Deadline
from capplan.reserve.check import check_plan
from capplan.reserve.milp import BuildCut, ReservationModel
from capplan.reserve.model import load_planning, parse_planning
from capplan.reserve.planner import solve
from capplan.reserve.problem import build_problem
from capplan.reserve.result import Plan
from capplan.reserve.solver import SolverSettings
from tests.reserve.conftest import SETTINGS, planning, solved

EXAMPLES = sorted(Path(__file__).parents[2].joinpath("models", "examples").glob("reserve-*.yaml"))


def test_unmet_guaranteed_names_lead_time() -> None:
    """Demand from period 0, lead time 2, no cloud: periods 0-1 are short because of the lead time."""
    d = planning(
        options={"purchases": [{"model": "H100-SXM5", "lead_time": 2, "unit_cost": 10}]},
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": 8}}],
    )
    _, plan = solved(d)
    assert plan.status == "guaranteed_unmet" and not plan.guaranteed_met
    assert [u.period for u in plan.unmet] == ["2027-01", "2027-02"]
    assert all(u.shortfall_gpus == pytest.approx(8, abs=1e-3) for u in plan.unmet)
    assert any("lead time" in b for b in plan.unmet[0].binding)
    # ranked second solve: the shortfall is minimal (16 GPU-periods) and then the order is placed at once
    assert plan.solver["expected_unmet_guaranteed_gpus"] == pytest.approx(16, abs=1e-3)
    assert [o.order_period for o in plan.orders] == ["2027-01"]


def test_unmet_guaranteed_names_site_power() -> None:
    """A 5 kW site holds 7 H100 (700 W); demand 10 leaves 3 short, binding: power at site-1."""
    d = planning(
        periods=1,
        sites=[{"name": "site-1", "power_kw": 5}],
        options={"purchases": [{"model": "H100-SXM5", "lead_time": 0, "unit_cost": 10}]},
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": 10}}],
    )
    _, plan = solved(d)
    (u,) = plan.unmet
    assert u.sites == ("site-1",) and u.shortfall_gpus == pytest.approx(3, abs=1e-3)
    assert any(b.startswith("power at site-1") for b in u.binding)


def test_unmet_guaranteed_names_site_rack_space() -> None:
    """A site with 6 rack units and 1 unit per GPU holds 6 GPUs; demand 10 leaves 4 short: rack space at site-1."""
    d = planning(
        periods=1,
        sites=[{"name": "site-1", "rack_units": 6}],
        options={"purchases": [{"model": "H100-SXM5", "lead_time": 0, "unit_cost": 10}]},
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": 10}}],
    )
    _, plan = solved(d)
    (u,) = plan.unmet
    assert u.sites == ("site-1",) and u.shortfall_gpus == pytest.approx(4, abs=1e-3)
    assert any(b.startswith("rack space at site-1: 6 of 6 units") for b in u.binding)


def test_deterministic_output() -> None:
    """Two solves of the same problem give the same plan (apart from the runtime)."""
    path = EXAMPLES[0]
    a = solve(build_problem(load_planning(path)), SETTINGS).to_dict()
    b = solve(build_problem(load_planning(path)), SETTINGS).to_dict()
    for x in (a, b):
        x["solver"].pop("runtime_s")
    assert a == b


def test_plan_json_round_trip() -> None:
    """Plan.from_json(plan.to_json()) reproduces the plan."""
    _, plan = solved(
        planning(
            options={"on_demand": [{"model": "H100-SXM5", "price_per_gpu_hour": 1}]},
            scenarios=[{"name": "s", "probability": 1, "demand": {"train": 3}}],
        )
    )
    assert Plan.from_json(plan.to_json()) == plan


def test_quantiles_become_weighted_scenarios() -> None:
    """p10/p50/p90 become scenarios with probabilities 0.3/0.4/0.3 (cuts at midpoints)."""
    d = planning(scenarios=None, demand_quantiles={"train": {"p50": 5, "p10": 1, "p90": 9}})
    d.pop("scenarios")
    pr = build_problem(parse_planning(d))
    assert pr.scenario_names == ("p10", "p50", "p90")
    assert pr.probabilities == pytest.approx((0.3, 0.4, 0.3))
    assert pr.demand[2, 0, 0] == 9


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples_solve_and_check(path: Path) -> None:
    """Every shipped example solves and passes the independent checker."""
    pr = build_problem(load_planning(path))
    plan = solve(pr, SETTINGS)
    assert check_plan(pr, plan) == []
    assert plan.solver["status"] == "optimal"


def test_auto_compares_the_methods_by_plan_cost_not_objective() -> None:
    """`auto` keeps the cheaper of the extensive form's and the decomposition's plans by the plan's cost: the raw
    objectives leave out different constants (the installed fleet's power), so on the small example they differ
    from the cost and from each other."""
    from pathlib import Path

    from capplan.model.catalog import load_catalog
    from capplan.reserve.lshaped import solve_decomposition
    from capplan.reserve.milp import ReservationModel
    from capplan.reserve.model import load_planning
    from capplan.reserve.planner import _total, build_plan
    from capplan.reserve.problem import build_problem
    from capplan.reserve.solver import SolverSettings

    example = Path(__file__).resolve().parents[2] / "models" / "examples" / "reserve-small.yaml"
    pr = build_problem(load_planning(example), load_catalog([]))
    s = SolverSettings(time_limit=30, gap=1e-9)
    ext, dec = ReservationModel(pr).solve(s), solve_decomposition(pr, s)
    for raw in (ext, dec):
        assert _total(pr, raw) == build_plan(pr, raw).costs["total"]
    assert abs(ext.objective - _total(pr, ext)) > 1.0
    assert _total(pr, ext) == pytest.approx(_total(pr, dec), rel=1e-6)


def _expired() -> Deadline:
    """A deadline that has already passed (its nominal budget one second)."""
    return Deadline(time.perf_counter() - 1.0, 1.0)


def test_extensive_build_stops_at_the_deadline() -> None:
    """The extensive form's build checks the deadline after each scenario: past it, it stops with ``BuildCut``
    naming how far it got (issue 27: `--method extensive` at 50 scenarios built for seconds past the limit)."""
    pr = build_problem(load_planning(EXAMPLES[-1]))
    n = len(pr.scenario_names)
    assert n > 1
    with pytest.raises(BuildCut, match=f"reached scenario 1 of {n} by the time limit"):
        ReservationModel(pr, deadline=_expired())
    ReservationModel(pr, deadline=Deadline.start(600))  # far from its end: built whole


def test_extensive_cut_while_building_falls_back_to_the_decomposition() -> None:
    """`--method extensive` whose build the limit cuts is solved by the decomposition in what is left (as `auto`
    does), and the plan says so in ``solver.note``; the plan passes the independent check."""
    pr = build_problem(load_planning(EXAMPLES[-1]))
    plan = solve(pr, SolverSettings(time_limit=30, method="extensive", deadline=_expired()))
    assert plan.solver["method"] == "decomposition"
    assert "building the extensive form reached scenario 1" in plan.solver["note"]
    assert "the decomposition solved it instead" in plan.solver["note"]
    assert check_plan(pr, plan) == []
    # without a deadline the asked method solves it and no note is written
    free = solve(pr, SolverSettings(time_limit=30, method="extensive"))
    assert free.solver["method"] == "extensive" and "note" not in free.solver
