"""The report's facts: idle and stranded capacity, cost, power, closest nodes, schedules (worked by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from capplan.io.report import (
    HOURS_PER_MONTH,
    build_report,
    check_matches,
    load_prices,
    read_result,
    render_html,
    render_text,
)
from capplan.io.report.occupancy import gpu_views
from capplan.model.errors import InputError
from capplan.model.plan import Assignment, MigSlot, Plan, Unplaced
from capplan.model.problem import Problem
from capplan.model.validate import check_assignments
from tests.conftest import scenario

H100 = "H100-SXM5-80GB"


def _plan(p: Problem, assignments: list[Assignment], unplaced: list[Unplaced] | None = None) -> Plan:
    """A hand-made plan whose assignments the independent validator accepts."""
    assert check_assignments(p, assignments) == []
    return Plan(status="feasible", strategy="hand", assignments=tuple(assignments), unplaced=tuple(unplaced or ()))


def test_free_gpus_are_stranded_when_the_node_cpu_is_gone() -> None:
    """Two 1-GPU replicas use all 4 cores of an 8-GPU node: the other 6 GPUs are stranded by CPU."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 8, "cpu": 4, "memory_gib": 64}],
                 [{"name": "w", "gpus": 1, "replicas": 3, "cpu": 2}])
    plan = _plan(p, [Assignment(workload="w", replica=r, node="n1", gpus=(r,)) for r in range(2)],
                 [Unplaced(workload="w", replicas=(2,), reason="cpu")])
    views = gpu_views(p, plan.assignments)[0]
    assert [v.mode for v in views] == ["whole"] * 2 + ["free"] * 6
    assert all(v.stranded == [(0.0, 1.0, 0.0, 1.0)] and v.reason == "cpu" for v in views[2:])
    d = build_report(p, plan)
    assert d["totals"] == {"gpus": 8, "allocated": 2.0, "idle": 0.0, "stranded": 6.0}


def test_mig_slice_past_every_start_is_stranded() -> None:
    """3g.40gb@0 and 1g.10gb@4 on one H100: slices 5-6 can take a 1g, slice 7 nothing (no 1g starts there)."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 1, "cpu": 64, "memory_gib": 512}],
                 [{"name": "big", "mig": "3g.40gb"}, {"name": "small", "mig": "1g.10gb"}])
    plan = _plan(p, [Assignment(workload="big", replica=0, node="n1", gpus=(0,),
                                mig=MigSlot(profile="3g.40gb", start=0)),
                     Assignment(workload="small", replica=0, node="n1", gpus=(0,),
                                mig=MigSlot(profile="1g.10gb", start=4))])
    v = gpu_views(p, plan.assignments)[0][0]
    assert v.mode == "mig"
    assert [rect for _, rect in v.used] == [(0.0, 0.5, 0.0, 1.0), (0.5, 0.625, 0.0, 1.0)]
    assert v.idle == [(0.625, 0.875, 0.0, 1.0)]
    assert v.stranded == [(0.875, 1.0, 0.0, 1.0)]
    assert v.reason == "shape"
    # 4 of 7 compute slices are in use; the free 3/7 splits 2:1 between idle and stranded slices.
    assert v.alloc == pytest.approx(4 / 7, abs=1e-6)
    assert v.idle_share == pytest.approx(2 / 7, abs=1e-6)
    assert v.stranded_share == pytest.approx(1 / 7, abs=1e-6)


def test_spare_compute_of_a_full_mig_gpu_is_stranded() -> None:
    """Two 3g.40gb instances take all 8 memory slices but 6 of 7 compute slices: 1/7 is stranded."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 1, "cpu": 64, "memory_gib": 512}],
                 [{"name": "w", "mig": "3g.40gb", "replicas": 2}])
    plan = _plan(p, [Assignment(workload="w", replica=r, node="n1", gpus=(0,),
                                mig=MigSlot(profile="3g.40gb", start=4 * r)) for r in range(2)])
    v = gpu_views(p, plan.assignments)[0][0]
    assert (v.idle, v.stranded, v.reason) == ([], [], "shape")
    assert v.alloc + v.stranded_share == pytest.approx(1.0) and v.stranded_share == pytest.approx(1 / 7, abs=1e-6)


def test_power_budget_strands_the_free_gpu() -> None:
    """A rack budget of one H100's TDP: with one GPU busy, the node's second GPU is stranded by power."""
    racks = [{"name": "r1", "power_kw": 0.7, "nodes": [{"name": "n1", "gpu": H100, "gpus": 2, "cpu": 8,
                                                        "memory_gib": 64}]}]
    p = scenario([], [{"name": "w", "gpus": 1, "replicas": 2}], racks=racks)
    plan = _plan(p, [Assignment(workload="w", replica=0, node="n1", gpus=(0,))],
                 [Unplaced(workload="w", replicas=(1,), reason="power")])
    v = gpu_views(p, plan.assignments)[0][1]
    assert (v.mode, v.reason, v.stranded_share) == ("free", "power", 1.0)
    d = build_report(p, plan)
    assert d["power"] == [{"level": "rack", "name": "r1", "draw_w": 700, "budget_w": 700}]


def test_a_free_gpu_some_workload_can_use_is_idle() -> None:
    """With room for another replica, a free GPU is idle, not stranded."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 2, "cpu": 8, "memory_gib": 64}],
                 [{"name": "w", "gpus": 1}])
    plan = _plan(p, [Assignment(workload="w", replica=0, node="n1", gpus=(0,))])
    v = gpu_views(p, plan.assignments)[0][1]
    assert (v.idle, v.stranded, v.idle_share) == ([(0.0, 1.0, 0.0, 1.0)], [], 1.0)


def test_shares_fill_from_the_bottom_and_the_rest_is_classified() -> None:
    """Two 0.375 shares stack on one GPU; the free quarter is stranded until a 0.25 share is asked for."""
    nodes = [{"name": "n1", "gpu": H100, "gpus": 1, "cpu": 8, "memory_gib": 64}]
    p = scenario(nodes, [{"name": "s", "gpu_fraction": 0.375, "replicas": 2}])
    plan = _plan(p, [Assignment(workload="s", replica=r, node="n1", gpus=(0,), fraction=0.375) for r in range(2)])
    v = gpu_views(p, plan.assignments)[0][0]
    assert [rect for _, rect in v.used] == [(0.0, 1.0, 0.0, 0.375), (0.0, 1.0, 0.375, 0.75)]
    assert (v.idle, v.stranded, v.reason) == ([], [(0.0, 1.0, 0.75, 1.0)], "shape")
    p2 = scenario(nodes, [{"name": "s", "gpu_fraction": 0.375, "replicas": 2}, {"name": "t", "gpu_fraction": 0.25}])
    v2 = gpu_views(p2, plan.assignments)[0][0]
    assert (v2.idle, v2.stranded, v2.idle_share) == ([(0.0, 1.0, 0.75, 1.0)], [], 0.25)


def _cost_case(tmp_path: Path) -> tuple[Problem, Plan, Path]:
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 2, "cpu": 64, "memory_gib": 512}],
                 [{"name": "a", "mig": "3g.40gb", "tenant": "red"}, {"name": "b", "gpus": 1, "tenant": "blue"},
                  {"name": "c", "mig": "1g.10gb", "tenant": "blue"}])
    plan = _plan(p, [Assignment(workload="a", replica=0, node="n1", gpus=(0,), mig=MigSlot(profile="3g.40gb", start=0)),
                     Assignment(workload="c", replica=0, node="n1", gpus=(0,), mig=MigSlot(profile="1g.10gb", start=4)),
                     Assignment(workload="b", replica=0, node="n1", gpus=(1,))])
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\nprice_per_gpu_hour: {H100-80GB: 7.0}\n", encoding="utf-8")
    return p, plan, prices


def test_cost_splits_allocated_idle_and_stranded_and_shows_back_per_tenant(tmp_path: Path) -> None:
    """At 7/GPU-hour: GPU 1 whole (7), GPU 0 holds 4/7 (4), idle 2/7 (2), stranded 1/7 (1)."""
    p, plan, prices_file = _cost_case(tmp_path)
    prices = load_prices(prices_file, p.catalog)
    assert prices.of(H100) == 7.0 and prices.currency == "EUR"
    cost = build_report(p, plan, prices)["cost"]
    assert cost["per_hour"] == {"allocated": 11.0, "idle": 2.0, "stranded": 1.0, "total": 14.0}
    assert cost["per_month"]["stranded"] == round(1.0 * HOURS_PER_MONTH)
    tenants = {t["tenant"]: t for t in cost["tenants"]}
    assert tenants["red"]["per_hour"] == 3.0 and tenants["red"]["gpus"] == pytest.approx(3 / 7, abs=1e-3)
    assert tenants["blue"]["per_hour"] == 8.0 and tenants["blue"]["gpus"] == pytest.approx(8 / 7, abs=1e-3)


@pytest.mark.parametrize(("text", "field"), [
    ("price_per_gpu_hour: {H100-SXM5-80GB: -1}\n", "price_per_gpu_hour.H100-SXM5-80GB"),
    ("price_per_gpu_hour: {H1OO: 2}\n", "price_per_gpu_hour.H1OO"),
    ("prices: {H100-SXM5-80GB: 2}\n", "price_per_gpu_hour"),
    ("price_per_gpu_hour: {}\nextra: 1\n", "extra"),
])
def test_bad_prices_file_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    """A wrong prices file raises InputError naming the field."""
    f = tmp_path / "p.yaml"
    f.write_text(text, encoding="utf-8")
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 1, "cpu": 8, "memory_gib": 64}], [{"name": "w", "gpus": 1}])
    with pytest.raises(InputError) as exc:
        load_prices(f, p.catalog)
    assert exc.value.path == field


def test_closest_nodes_rank_by_shortfall() -> None:
    """An 8-GPU replica that fits nowhere: the node with 6 free GPUs comes before the one with 2."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 8, "cpu": 64, "memory_gib": 512},
                  {"name": "n2", "gpu": H100, "gpus": 8, "cpu": 64, "memory_gib": 512}],
                 [{"name": "small", "gpus": 1, "replicas": 8}, {"name": "big", "gpus": 8}])
    asg = [Assignment(workload="small", replica=r, node="n1" if r < 2 else "n2", gpus=(r if r < 2 else r - 2,))
           for r in range(8)]
    plan = _plan(p, asg, [Unplaced(workload="big", replicas=(0,), reason="no room")])
    d = build_report(p, plan)
    (u,) = d["unplaced"]
    assert [d["nodes"][i]["name"] for i, _ in u["closest"]] == ["n1", "n2"]
    assert u["closest"][0][1] == "6 of 8 GPUs free"


def test_plan_of_another_scenario_is_rejected() -> None:
    """A plan naming unknown nodes is bad input, with the validator's words."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 1, "cpu": 8, "memory_gib": 64}], [{"name": "w", "gpus": 1}])
    stray = Assignment(workload="w", replica=0, node="zz", gpus=(0,))
    plan = Plan(status="feasible", strategy="x", assignments=(stray,))
    with pytest.raises(InputError, match="does not fit the scenario"):
        check_matches(p, plan, None)


def _schedule() -> dict[str, Any]:
    return {"status": "feasible", "strategy": "hand", "horizon_s": 7200, "gap": 0.0,
            "assignments": [
                {"workload": "s", "replica": 0, "node": "n1", "gpus": [0], "fraction": 0.5, "start_s": 0,
                 "end_s": 3600},
                {"workload": "s", "replica": 1, "node": "n1", "gpus": [0], "fraction": 0.5, "start_s": 600,
                 "end_s": 4200},
                {"workload": "s", "replica": 2, "node": "n1", "gpus": [0], "fraction": 0.5, "start_s": 3600,
                 "end_s": 7200},
                {"workload": "g", "replica": 0, "node": "n1", "gpus": [1], "start_s": 1800, "end_s": 7200}],
            "workloads": [{"name": "s", "start_s": 0, "end_s": 7200, "wait_s": 0, "deadline_met": True}],
            "unscheduled": []}


def test_schedule_draws_t0_and_stacks_shares_over_time() -> None:
    """At t = 0 only s[0] runs; s[2] reuses the bottom half s[0] left, while s[1] holds the top half."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 2, "cpu": 8, "memory_gib": 64}],
                 [{"name": "s", "gpu_fraction": 0.5, "replicas": 3}, {"name": "g", "gpus": 1}])
    plan, tl = read_result(_schedule())
    assert tl is not None and [a.key for a in plan.assignments] == [("s", 0)]
    check_matches(p, plan, tl)
    d = build_report(p, plan, timeline=tl)
    assert d["plan"]["kind"] == "schedule" and d["schedule"]["horizon_s"] == 7200
    rows = {(d["workloads"][r[0]]["name"], r[1]): r for r in d["assignments"]}
    assert len(rows) == 4
    assert rows[("s", 0)][7:] == [0, 3600, 0.0, 0.5]
    assert rows[("s", 1)][7:] == [600, 4200, 0.5, 1.0]
    assert rows[("s", 2)][7:] == [3600, 7200, 0.0, 0.5]
    assert rows[("g", 0)][7:] == [1800, 7200, 0.0, 1.0]
    assert "timeline-sec" in render_html(d)


def test_schedule_with_bad_times_is_bad_input() -> None:
    """A replica ending before it starts or a mistyped row names its field; fields added later are ignored."""
    data = _schedule()
    data["assignments"][1]["end_s"] = 10
    with pytest.raises(InputError) as exc:
        read_result(data)
    assert exc.value.path == "assignments[1].end_s"
    data = _schedule()
    data["workloads"][0]["wait_s"] = "<img src=x onerror=alert(1)>"
    with pytest.raises(InputError) as exc:
        read_result(data)
    assert exc.value.path == "workloads[0].wait_s"
    data = _schedule()
    data["assignments"][0]["note"] = "a field a later scheduler adds"
    data["unscheduled"] = [{"workload": "g", "replicas": [0], "reason": "later", "eta_s": 60}]
    assert read_result(data)[0].unplaced[0].reason == "later"


def test_html_is_self_contained_and_embeds_escaped_data() -> None:
    """No external reference; a workload name with markup cannot end the data script."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 1, "cpu": 8, "memory_gib": 64}],
                 [{"name": "</script><b>x", "gpus": 1}])
    plan = _plan(p, [Assignment(workload="</script><b>x", replica=0, node="n1", gpus=(0,))])
    html = render_html(build_report(p, plan))
    assert html.count("</script>") == 2  # the data script and the drawing script, nothing injected
    for ref in ("http://", "https://", "src=", "@import", "url("):
        assert ref not in html
    data = html.split('<script id="report-data" type="application/json">')[1].split("</script>")[0]
    assert json.loads(data)["workloads"][0]["name"] == "</script><b>x"


def test_text_view_draws_one_cell_per_gpu() -> None:
    """Full GPU: upper case; shared GPU with room: lower case; idle: '.'; stranded: 'x'."""
    p = scenario([{"name": "n1", "gpu": H100, "gpus": 4, "cpu": 8, "memory_gib": 64, "gpu_modes":
                   [{"gpus": [3], "mode": "mig"}]}],
                 [{"name": "w", "gpus": 1}, {"name": "s", "gpu_fraction": 0.5}])
    plan = _plan(p, [Assignment(workload="w", replica=0, node="n1", gpus=(0,)),
                     Assignment(workload="s", replica=0, node="n1", gpus=(1,), fraction=0.5)])
    text = render_text(build_report(p, plan))
    line = next(x for x in text.splitlines() if x.startswith("n1"))
    assert "Ab.x" in line and "2/4 in use" in line
    assert "legend: A w, B s" in text
