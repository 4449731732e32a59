"""The HTML report in a real headless Chromium (Debian's `chromium`), opened from disk.

Outside CI the tests skip when no Chromium is installed; in CI (``CI=true``) a missing browser fails.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from capplan.io.report import build_report, read_result, render_html
from capplan.io.scenario import load_scenario
from capplan.model.plan import Assignment, Plan
from capplan.model.problem import Problem
from capplan.model.validate import check_assignments
from capplan.placement import PlanOptions, solve
from capplan.testing.browser import Browser, find_chromium
from tests.conftest import EXAMPLES, scenario


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module."""
    if find_chromium() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Chromium found: .ci/run installs Debian's `chromium`")
        pytest.skip("Chromium is not installed (apt-get install chromium); CI runs this test")
    with Browser(width=1300, height=900) as b:
        yield b


def _report(tmp: Path, name: str, schedule: dict[str, Any] | None = None) -> tuple[Problem, dict[str, Any], Path]:
    p = load_scenario(EXAMPLES / f"{name}.yaml")
    if schedule is None:
        plan = solve(p, "greedy", PlanOptions(time_limit=10, seed=0))
        data = build_report(p, plan)
    else:
        plan, tl = read_result(schedule)
        data = build_report(p, plan, timeline=tl)
    path = tmp / f"{name}.html"
    path.write_text(render_html(data), encoding="utf-8")
    return p, data, path


def _open(b: Browser, path: Path) -> None:
    b.log.errors.clear()
    b.log.requests.clear()
    b.open(path.resolve().as_uri())
    assert b.evaluate("document.documentElement.getAttribute('data-rendered')") == "1"


def test_report_opens_offline_lists_everything_and_draws(browser: Browser, tmp_path: Path) -> None:
    """No console error, no request but the file itself, every node and placed workload in the DOM, a real image."""
    p, data, path = _report(tmp_path, "mig-inference")
    _open(browser, path)
    assert browser.log.errors == []
    assert browser.log.requests == [path.resolve().as_uri()]
    nodes = browser.evaluate("Array.from(document.querySelectorAll('[data-node]')).map(e => e.dataset.node)")
    assert sorted(nodes) == sorted(n.name for n in p.cluster.nodes)
    placed = sorted({data["workloads"][a[0]]["name"] for a in data["assignments"]})
    legend = browser.evaluate("Array.from(document.querySelectorAll('#legend [data-workload]'))"
                              ".map(e => e.dataset.workload)")
    assert sorted(legend) == placed
    drawn = browser.evaluate("document.querySelectorAll('#map .a').length")
    assert drawn == sum(len(a[3]) for a in data["assignments"])
    png = Image.open(io.BytesIO(browser.screenshot()))
    colours = png.convert("RGB").getcolors(maxcolors=1 << 16) or []
    assert len(colours) > 50  # text, cells in many workload colours, hatching
    background = max(colours)[0] / (png.width * png.height)
    assert background < 0.8


def test_clicking_a_cell_shows_the_replica(browser: Browser, tmp_path: Path) -> None:
    """Hover shows a tooltip and a click pins the details: workload, replica, priority, tenant, profile, start."""
    _, data, path = _report(tmp_path, "mig-inference")
    _open(browser, path)
    k = next(k for k, a in enumerate(data["assignments"]) if a[4])  # a MIG instance
    a = data["assignments"][k]
    w = data["workloads"][a[0]]
    box = browser.evaluate(f"(() => {{ const e = document.querySelector('#map .a[data-a=\"{k}\"]');"
                           "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
                           "return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    browser.mouse("move", *box)
    tip = browser.evaluate("document.getElementById('tip').innerText")
    assert w["name"] in tip
    browser.mouse("click", *box)
    shown = browser.evaluate("getComputedStyle(document.getElementById('details')).display")
    text = browser.evaluate("document.getElementById('details').innerText")
    assert shown == "block"
    for expected in (f"{w['name']} [{a[1]}]", f"priority\t{w['priority']}", data["tenants"][w["tenant"]],
                     f"MIG {a[4]}", f"memory slice {a[5]}"):
        assert expected in text
    # Colour by tenant: the cell takes its tenant's legend colour.
    cell = f"getComputedStyle(document.querySelector('#map .a[data-a=\"{k}\"]')).backgroundColor"
    by_workload = browser.evaluate(cell)
    browser.evaluate("(() => { const s = document.getElementById('colour'); s.value = 't';"
                     "s.dispatchEvent(new Event('change')); })()")
    swatch = browser.evaluate(f"getComputedStyle(document.querySelector('#legend [data-t=\"{w['tenant']}\"] .sw'))"
                              ".backgroundColor")
    assert browser.evaluate(cell) == swatch != by_workload
    assert browser.log.errors == []


def test_schedule_report_draws_a_timeline_row_per_busy_node(browser: Browser, tmp_path: Path) -> None:
    """Given a schedule, the page gains a Gantt with one row per node that runs something."""
    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    plan = solve(p, "greedy", PlanOptions(time_limit=10, seed=0))
    asg = [{**json.loads(a.model_dump_json(exclude_none=True)), "start_s": 3600 * (k % 3), "end_s": 3600 * (k % 3 + 2)}
           for k, a in enumerate(plan.assignments)]
    sched = {"status": "feasible", "strategy": "hand", "horizon_s": 6 * 3600, "assignments": asg, "unscheduled": []}
    _, _, path = _report(tmp_path, "training-cluster", sched)
    _open(browser, path)
    assert browser.log.errors == []
    rows = browser.evaluate("Array.from(document.querySelectorAll('#timeline [data-node-row]'))"
                            ".map(e => e.dataset.nodeRow)")
    assert sorted(rows) == sorted({a.node for a in plan.assignments})
    bars = browser.evaluate("Array.from(document.querySelectorAll('#timeline i.a')).map(e => +e.dataset.a)")
    assert sorted(set(bars)) == list(range(len(asg)))


def test_large_cluster_lists_every_node_and_draws_far_racks_on_demand(browser: Browser, tmp_path: Path) -> None:
    """3,200 GPUs: every node is in the page at once; far racks get their cells when scrolled to."""
    racks = [{"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": 20, "gpu": "H100-SXM5-80GB", "gpus": 8,
                                          "cpu": 64, "memory_gib": 512}]} for r in range(20)]
    p = scenario([], [{"name": "job", "gpus": 8, "replicas": 300}, {"name": "one", "gpus": 1, "replicas": 80}],
                 racks=racks)
    nodes = [n.name for n in p.cluster.nodes]
    asg = [Assignment(workload="job", replica=r, node=nodes[r], gpus=tuple(range(8))) for r in range(300)]
    asg += [Assignment(workload="one", replica=r, node=nodes[300 + r], gpus=(0,)) for r in range(80)]
    plan = Plan(status="feasible", strategy="hand", assignments=tuple(asg))
    assert check_assignments(p, plan.assignments) == []
    path = tmp_path / "big.html"
    path.write_text(render_html(build_report(p, plan)), encoding="utf-8")
    _open(browser, path)
    assert browser.log.errors == []
    listed = browser.evaluate("Array.from(document.querySelectorAll('[data-node]')).map(e => e.dataset.node)")
    assert sorted(listed) == sorted(nodes)
    assert browser.evaluate("document.querySelectorAll('#map .nodes[data-lazy]').length") > 0
    last = nodes[-1]
    browser.evaluate(f"document.querySelector('[data-node=\"{last}\"]').scrollIntoView()")
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert browser.evaluate(f"document.querySelectorAll('[data-node=\"{last}\"] .g').length") == 8
    browser.evaluate("window.capplanReport.drawAll()")
    assert browser.evaluate("document.querySelectorAll('#map .a').length") == 300 * 8 + 80
    assert browser.log.errors == []
