"""The reservation report and chart: one unit per axis and column, backlog shown, sites named."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest

from capplan.reserve.report import (
    COVERAGE_COLUMNS,
    chart_series,
    coverage_table,
    demand_capacity_figure,
    markdown_report,
)
from capplan.reserve.result import Plan
from tests.reserve.conftest import planning, solved

FLEX = {
    "name": "batch",
    "kind": "flexible",
    "penalty_per_gpu_hour": 50,
    "max_deferral_periods": 1,
    "deferral_penalty_per_gpu_hour": 1,
}


def _deferring() -> dict[str, Any]:
    """8 H100 and a flexible class of demand 12, 4, 4: 4 GPUs of period 0 are served in period 1."""
    return planning(
        periods=3,
        tiers=[FLEX],
        classes=[{"name": "train", "tier": "batch", "models": {"H100-SXM5": 1.0}}],
        fleet=[{"site": "site-1", "model": "H100-SXM5", "count": 8}],
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": [12, 4, 4]}}],
    )


def _fast_h200() -> dict[str, Any]:
    """8 H200 doing the work of 1.4 H100 each: 11.2 reference GPUs of capacity for demand 11.2."""
    return planning(
        periods=2,
        classes=[{"name": "train", "tier": "prod", "models": {"H100-SXM5": 1.0, "H200": 1.4}}],
        fleet=[{"site": "site-1", "model": "H200", "count": 8}],
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": 11.2}}],
    )


def test_backlog_explains_served_below_demand() -> None:
    """Served < demand with zero shortfall and loss: the report shows the backlog that balances it."""
    _, plan = solved(_deferring())
    table = coverage_table(plan)
    first, second = table["2027-01", "train"], table["2027-02", "train"]
    assert first["served"] == pytest.approx(8) and first["demand"] == pytest.approx(12)
    assert first["shortfall"] == first["lost"] == 0
    assert first["backlog out"] == pytest.approx(4) and second["backlog in"] == pytest.approx(4)
    assert second["served"] == pytest.approx(8)
    for row in table.values():  # the identity the report states
        balance = row["demand"] + row["backlog in"] - row["shortfall"] - row["lost"] - row["backlog out"]
        assert row["served"] == pytest.approx(balance, abs=1e-6)
    md = markdown_report(plan)
    assert "| period | class | " + " | ".join(COVERAGE_COLUMNS) + " |" in md
    assert "| 2027-01 | train | 12.0 | 0.0 | 8.0 | 0.0 | 0.0 | 0.0 | 4.0 |" in md


def test_chart_keeps_reference_and_physical_gpus_apart() -> None:
    """Fast GPUs meet the demand exactly: the reference-GPU panel shows served = demand, the GPU panel 8."""
    _, plan = solved(_fast_h200())
    cs = chart_series(plan)
    assert np.allclose(cs.prob @ cs.served, [11.2, 11.2]) and np.allclose(cs.prob @ cs.demand, [11.2, 11.2])
    assert np.allclose(cs.own, [8, 8]) and np.allclose(cs.in_use, [8, 8])
    fig = demand_capacity_figure(plan)
    try:
        labels = [ax.get_ylabel() for ax in fig.axes]
        assert labels == ["reference GPUs (demand units)", "physical GPUs"]
        top, bottom = fig.axes
        served = next(line for line in top.get_lines() if line.get_label() == "expected served")
        assert np.allclose(served.get_ydata(), [11.2, 11.2])
        assert all(max(line.get_ydata()) <= 8 + 1e-9 for line in bottom.get_lines())
    finally:
        plt.close(fig)


def test_chart_draws_the_backlog() -> None:
    """A deferring plan gets a backlog band; served + deferred + unmet = demand + backlog carried in."""
    _, plan = solved(_deferring())
    cs = chart_series(plan)
    deferred = cs.prob @ cs.backlog_out
    carried = np.concatenate(([0.0], deferred[:-1]))
    total = cs.prob @ (cs.served + cs.backlog_out + cs.unmet)
    assert np.allclose(total, cs.prob @ cs.demand + carried)
    fig = demand_capacity_figure(plan)
    try:
        assert any("backlog" in str(c.get_label()) for c in fig.axes[0].collections)
    finally:
        plt.close(fig)


def test_unmet_names_the_site_when_the_lead_time_binds() -> None:
    """No site constraint binds (the lead time does): the site the class is served at is named."""
    d = planning(
        sites=[{"name": "north"}, {"name": "south"}],
        options={"purchases": [{"model": "H100-SXM5", "lead_time": 2, "unit_cost": 10, "sites": ["south"]}]},
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": 8}}],
    )
    _, plan = solved(d)
    assert [u.period for u in plan.unmet] == ["2027-01", "2027-02"]
    assert all(u.sites == ("south",) for u in plan.unmet)
    assert "at south" in plan.unmet[0].line()
    again = Plan.from_json(plan.to_json())
    assert again.unmet[0].sites == ("south",)


def test_unmet_without_sites_names_the_cloud() -> None:
    """A planning file without sites serves from the cloud: `unmet[].sites` says so."""
    d = planning(
        periods=2,
        sites=[],
        options={"on_demand": [{"model": "H100-SXM5", "price_per_gpu_hour": 3, "max_gpus": 4}]},
        scenarios=[{"name": "base", "probability": 1, "demand": {"train": 6}}],
    )
    _, plan = solved(d)
    assert plan.unmet and all(u.sites == ("cloud",) for u in plan.unmet)
    assert any("availability cap" in b for b in plan.unmet[0].binding)


def test_charts_leave_the_hosts_matplotlib_alone() -> None:
    """Importing the reservation report and drawing its charts does not switch the host's matplotlib backend
    (it called matplotlib.use("Agg") on import) nor open pyplot figures: a library user's GUI stays as it was."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    example = root / "models" / "examples" / "reserve-small.yaml"
    code = ("import matplotlib; matplotlib.use('svg'); import matplotlib.pyplot as plt\n"
            "from capplan.model.catalog import load_catalog\n"
            "from capplan.reserve.model import load_planning\n"
            "from capplan.reserve.planner import solve\n"
            "from capplan.reserve.problem import build_problem\n"
            "from capplan.reserve.report import cost_breakdown_png, demand_capacity_png\n"
            f"pr = build_problem(load_planning({str(example)!r}), load_catalog([]))\n"
            "plan = solve(pr)\n"
            "assert demand_capacity_png(plan)[:4] == b'\\x89PNG' and cost_breakdown_png(plan)[:4] == b'\\x89PNG'\n"
            "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
            "assert plt.get_fignums() == [], plt.get_fignums()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert res.returncode == 0, res.stderr
