"""`capplan report`, `capplan show` and `capplan plan --report`: outputs, prices and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capplan.cli.main import main
from capplan.model.catalog import builtin_catalog, load_catalog
from tests.conftest import EXAMPLES

MIXED = str(EXAMPLES / "mixed-fleet.yaml")
TRAINING = str(EXAMPLES / "training-cluster.yaml")


@pytest.fixture
def mixed_plan(tmp_path: Path) -> Path:
    """The mixed-fleet example planned greedily."""
    out = tmp_path / "plan.json"
    assert main(["plan", MIXED, "-o", str(out), "--strategy", "greedy", "-q"]) == 0
    return out


def _data(html: str) -> dict[str, object]:
    body = html.split('<script id="report-data" type="application/json">')[1].split("</script>")[0]
    data: dict[str, object] = json.loads(body)
    return data


def test_report_writes_a_self_contained_page(tmp_path: Path, mixed_plan: Path) -> None:
    """One HTML file naming every node, priced from the catalog (H100 and A100 list prices)."""
    out = tmp_path / "r.html"
    assert main(["report", MIXED, str(mixed_plan), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<script src" not in html and "<link rel=\"stylesheet\"" not in html
    data = _data(html)
    assert {n["name"] for n in data["nodes"]} == {"r1n1", "r1n2", "r2n1", "r2n2", "r2n3", "r2n4"}  # type: ignore[attr-defined]
    prices = {m["name"]: m["price"] for m in data["models"]}  # type: ignore[attr-defined]
    cat = builtin_catalog()
    assert prices == {m: cat.get(m).price_per_gpu_hour for m in ("A100-SXM4-80GB", "H100-SXM5-80GB")}
    total = data["cost"]["per_hour"]["total"]  # type: ignore[index]
    assert total == pytest.approx(16 * prices["H100-SXM5-80GB"] + 32 * prices["A100-SXM4-80GB"], abs=0.02)


def test_prices_file_overrides_the_catalog(tmp_path: Path, mixed_plan: Path) -> None:
    """`--prices` sets the price of the models it names; the others keep the catalog's."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\nprice_per_gpu_hour: {H100-80GB: 2.0}\n", encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", MIXED, str(mixed_plan), "-o", str(out), "--prices", str(prices)]) == 0
    data = _data(out.read_text(encoding="utf-8"))
    assert data["currency"] == "EUR"
    got = {m["name"]: m["price"] for m in data["models"]}  # type: ignore[attr-defined]
    assert got == {"H100-SXM5-80GB": 2.0, "A100-SXM4-80GB": builtin_catalog().get("A100-SXM4-80GB").price_per_gpu_hour}


def test_catalog_file_price_is_used(tmp_path: Path, mixed_plan: Path) -> None:
    """A catalog file that redefines a model with its own price_per_gpu_hour sets the report's price."""
    h100 = builtin_catalog().get("H100-SXM5-80GB").model_dump(mode="json")
    h100["price_per_gpu_hour"] = 1.25
    cat = tmp_path / "cat.yaml"
    cat.write_text(json.dumps({"models": [h100]}), encoding="utf-8")
    assert load_catalog([cat]).get("H100-SXM5-80GB").price_per_gpu_hour == 1.25
    out = tmp_path / "r.html"
    assert main(["report", MIXED, str(mixed_plan), "-o", str(out), "--catalog", str(cat)]) == 0
    assert {m["name"]: m["price"] for m in _data(out.read_text())["models"]}["H100-SXM5-80GB"] == 1.25  # type: ignore[attr-defined]


def test_plan_with_report_writes_both(tmp_path: Path) -> None:
    """`capplan plan --report` writes the plan and its report."""
    plan, page = tmp_path / "p.json", tmp_path / "r.html"
    assert main(["plan", TRAINING, "-o", str(plan), "--strategy", "greedy", "-q", "--report", str(page)]) == 0
    assert plan.exists() and "training-cluster" in page.read_text(encoding="utf-8")


def test_show_prints_racks_nodes_and_cells(mixed_plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One line per node under its rack, one cell per GPU, a legend."""
    assert main(["show", MIXED, str(mixed_plan)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(x.strip().startswith("rack r1") for x in lines)
    r1n1 = next(x for x in lines if x.strip().startswith("r1n1"))
    assert "8/8 in use" in r1n1 and r1n1.split()[2] == "AAAAAAAA"
    assert "legend: A pretrain" in out


def test_bad_prices_exit_2_and_write_nothing(tmp_path: Path, mixed_plan: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A prices file naming an unknown model: exit 2, the error names the field, no report."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("price_per_gpu_hour: {H1000: 2.0}\n", encoding="utf-8")
    out = tmp_path / "r.html"
    assert main(["report", MIXED, str(mixed_plan), "-o", str(out), "--prices", str(prices)]) == 2
    assert "price_per_gpu_hour.H1000" in capsys.readouterr().err and not out.exists()
    plan = tmp_path / "p.json"
    assert main(["plan", MIXED, "-o", str(plan), "-q", "--report", str(out), "--prices", str(prices)]) == 2
    assert not plan.exists() and not out.exists()


def test_plan_of_another_scenario_exit_2(tmp_path: Path, mixed_plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reporting a plan against the wrong scenario is bad input: exit 2, nothing written."""
    out = tmp_path / "r.html"
    assert main(["report", TRAINING, str(mixed_plan), "-o", str(out)]) == 2
    assert "does not fit the scenario" in capsys.readouterr().err and not out.exists()
    assert main(["show", TRAINING, str(mixed_plan)]) == 2


def test_report_and_show_read_a_schedule(tmp_path: Path, mixed_plan: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A schedule file (`capplan schedule` output) gets a timeline; `show` draws t = 0. A plan with times
    pasted on is not a schedule: the full schedule validator refuses it, naming the field."""
    week = str(EXAMPLES / "schedule-week.yaml")
    sched = tmp_path / "schedule.json"
    assert main(["schedule", week, "--strategy", "heuristic", "--time-limit", "10", "-q", "-o", str(sched)]) == 0
    schedule = json.loads(sched.read_text(encoding="utf-8"))
    out = tmp_path / "r.html"
    assert main(["report", week, str(sched), "-o", str(out)]) == 0
    data = _data(out.read_text(encoding="utf-8"))
    assert data["plan"]["kind"] == "schedule"  # type: ignore[index]
    assert data["schedule"]["horizon_s"] == schedule["horizon_s"]  # type: ignore[index]
    assert len(data["assignments"]) == len(schedule["assignments"])  # type: ignore[arg-type]
    assert main(["show", week, str(sched)]) == 0
    assert "schedule" in capsys.readouterr().out.splitlines()[0]
    plan = json.loads(mixed_plan.read_text(encoding="utf-8"))
    for k, a in enumerate(plan["assignments"]):
        a.update(start_s=0 if k % 2 == 0 else 3600, end_s=7200)
    plan["horizon_s"] = 7200
    pasted = tmp_path / "pasted.json"
    pasted.write_text(json.dumps(plan), encoding="utf-8")
    assert main(["report", MIXED, str(pasted), "-o", str(tmp_path / "p.html")]) == 2
    assert not (tmp_path / "p.html").exists()
