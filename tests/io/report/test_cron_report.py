"""Issue 28 items 6 and 7: unpriced GPUs in every headline, a schedule's cost over its horizon, and the report's
deep links, colour switch, preset outlines and running marks in a real Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capplan.io.report import build_report, read_result, render_html, render_text
from capplan.io.scenario import load_scenario, problem_from_data
from capplan.model.problem import Problem
from capplan.placement import PlanOptions, solve
from capplan.placement.schedule import schedule
from capplan.testing.browser import Browser, find_chromium
from tests.conftest import EXAMPLES

H100 = 3.99  # the catalog's price per GPU-hour of H100-SXM5-80GB


def _tiny(extra_nodes: list[dict[str, Any]] | None = None) -> Problem:
    """One 8 x H100 node (and ``extra_nodes``); one 2-GPU job of 2 h; a 1-day horizon."""
    nodes = [{"name": "h", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}, *(extra_nodes or [])]
    return problem_from_data({"cluster": {"levels": ["node"], "nodes": nodes},
                              "workloads": [{"name": "job", "gpus": 2, "duration": "2h"}],
                              "schedule": {"horizon": "1d", "step": "1h"}})


def test_unpriced_gpus_in_the_headlines() -> None:
    """GPUs of a model without a price are counted and named in the data and the text view's headline."""
    p = problem_from_data(yaml.safe_load((EXAMPLES / "mixed-fleet.yaml").read_text())
                          | {"workloads": [{"name": "a", "gpus": 1}]})
    from capplan.io.report import Prices

    prices = Prices({"H100-SXM5-80GB": 2.0, "A100-SXM4-80GB": None})
    data = build_report(p, solve(p, "greedy", PlanOptions(time_limit=5)), prices)
    assert data["cost"]["unpriced_gpus"] == 32 and data["cost"]["unpriced_models"] == ["A100-SXM4-80GB"]
    assert "unpriced: 32 GPUs (A100-SXM4-80GB)" in render_text(data).splitlines()[1]


def test_schedule_cost_and_work_over_the_horizon() -> None:
    """Hand-worked: 2 GPUs x 2 h x $3.99 = $15.96 allocated of 8 x 24 h x $3.99 = $766.08; 4 GPU-hours of work
    against the schedule's bound (not the t = 0 snapshot)."""
    p = _tiny()
    sch = schedule(p, "heuristic", time_limit=5)
    plan, tl = read_result(yaml.safe_load(sch.to_json()))
    assert tl is not None
    data = build_report(p, plan, timeline=tl)
    hz = data["cost"]["horizon"]
    assert hz["hours"] == 24 and hz["gpu_hours"] == 4
    assert hz["allocated"] == pytest.approx(2 * 2 * H100) and hz["capacity"] == pytest.approx(8 * 24 * H100)
    assert hz["unallocated"] == pytest.approx(hz["capacity"] - hz["allocated"])
    (row,) = data["priorities"]
    assert row["gpu_hours"] == 4 and row["bound_gpu_hours"] == pytest.approx(sch.bound[0])
    assert "over the horizon (24 h): 4 GPU-hours scheduled, $15.96 allocated of $766.08" in render_text(data)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module."""
    if find_chromium() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Chromium found: .ci/run installs Debian's `chromium`")
        pytest.skip("Chromium is not installed (apt-get install chromium); CI runs this test")
    with Browser(width=1300, height=900) as b:
        yield b


def _write(tmp: Path, p: Problem, name: str) -> Path:
    path = tmp / f"{name}.html"
    path.write_text(render_html(build_report(p, solve(p, "greedy", PlanOptions(time_limit=10)))), encoding="utf-8")
    return path


def test_deep_link_scrolls_after_the_page_is_built(browser: Browser, tmp_path: Path) -> None:
    """report.html#cost-sec opens on the cost section (below the sticky bar), not on a blank band."""
    data = yaml.safe_load((EXAMPLES / "mixed-fleet.yaml").read_text())
    data["cluster"]["blocks"][0]["racks"][1]["nodes"][0]["count"] = 300  # a tall map above the cost section
    path = _write(tmp_path, problem_from_data(data), "tall")
    browser.open(path.resolve().as_uri() + "#cost-sec")
    top = browser.evaluate("document.getElementById('cost-sec').getBoundingClientRect().top")
    nav = browser.evaluate("document.querySelector('nav').getBoundingClientRect().bottom")
    bottom = browser.evaluate("window.scrollY + window.innerHeight >= document.documentElement.scrollHeight - 2")
    assert browser.evaluate("window.scrollY") > 2000, "the map above the section was not built before the scroll"
    assert nav <= top <= (browser.evaluate("window.innerHeight") / 2 if bottom else nav + 60), (top, nav, bottom)


def test_many_workloads_colour_by_group_with_a_short_legend(browser: Browser, tmp_path: Path) -> None:
    """Above a few dozen workloads the map is coloured by priority (or kind, tenant), not one colour each;
    the switch changes it; the legend stays short."""
    data = yaml.safe_load((EXAMPLES / "mixed-fleet.yaml").read_text())
    data["workloads"] = [{"name": f"w{i}", "gpu_fraction": 0.25, "priority": i % 3, "tenant": f"t{i % 2}"}
                         for i in range(60)]
    path = _write(tmp_path, problem_from_data(data), "many")
    browser.open(path.resolve().as_uri())
    assert browser.evaluate("capplanReport.colourBy()") == "p"
    assert browser.evaluate("document.querySelectorAll('#legend .li').length") <= 6
    colours = "new Set([...document.querySelectorAll('#map .a')].map(e => getComputedStyle(e).backgroundColor)).size"
    assert browser.evaluate(colours) == 3
    browser.evaluate("(() => { const s = document.getElementById('colour'); s.value = 't';"
                     "s.dispatchEvent(new Event('change')); })()")
    assert browser.evaluate(colours) == 2 and browser.evaluate("document.body.className") == "by-t"


def test_preset_outlined_and_running_marked(browser: Browser, tmp_path: Path) -> None:
    """GPUs with a preset layout are outlined; replicas that stay where they run are hatched, new ones are not."""
    mig = load_scenario(EXAMPLES / "mig-inference.yaml")
    browser.open(_write(tmp_path, mig, "mig").resolve().as_uri())
    presets = sum(1 for n in mig.cluster.nodes for g in range(n.gpus) if n.mode_of(g) is not None)
    assert presets > 0 and browser.evaluate("document.querySelectorAll('#map .g.preset').length") == presets
    outline = browser.evaluate("getComputedStyle(document.querySelector('#map .g.preset')).outlineStyle")
    assert outline == "dashed"
    week = load_scenario(EXAMPLES / "schedule-week.yaml")
    plan = solve(week, "greedy", PlanOptions(time_limit=10))
    stays = {a.key for a in week.running} & {a.key for a in plan.assignments}
    path = tmp_path / "week.html"
    path.write_text(render_html(build_report(week, plan)), encoding="utf-8")
    browser.open(path.resolve().as_uri())
    runs = browser.evaluate("document.querySelectorAll('#map .a.run').length")
    assert stays and runs >= len(stays)
    assert browser.evaluate("getComputedStyle(document.querySelector('#map .a.run')).backgroundImage") != "none"
    assert browser.evaluate("getComputedStyle(document.querySelector('#map .a.new')).backgroundImage") == "none"
