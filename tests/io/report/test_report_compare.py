"""``capplan report SCENARIO SCHEDULE --compare OTHER``: Kueue's schedule beside the optimum, per workload."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from capplan.cli.main import main
from capplan.testing.browser import Browser, find_chromium
from tests.io.k8s.test_kueue import run_cli


def _data(html: Path) -> dict[str, Any]:
    m = re.search(r'<script id="report-data" type="application/json">(.*?)</script>', html.read_text(), re.S)
    assert m is not None
    return json.loads(m.group(1))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cmp")
    scen, kueue = run_cli(tmp)
    optimal = tmp / "optimal.json"
    assert main(["schedule", str(scen), "--strategy", "heuristic", "--horizon", "2d", "-q", "-o", str(optimal)]) == 0
    out = tmp / "report.html"
    assert main(["report", str(scen), str(kueue), "--compare", str(optimal), "-o", str(out)]) == 0
    return out


def test_compare_rows_and_savings(compared: Path) -> None:
    """Hand-worked (tests/io/k8s/test_kueue.py): under Kueue tune-a4 (8 GPUs) waits 2 h behind train-a3 in its
    StrictFIFO queue; the optimum starts it at once on team-a's A100 quota: 8 x 2 = 16 GPU-hours saved. The
    others start alike (train-a3 at 2 h, big-b3 at 4 h, infer-b2 now)."""
    c = _data(compared)["compare"]
    assert c["labels"] == ["kueue", "heuristic"]
    rows = {r["name"]: r for r in c["rows"]}
    assert set(rows) == {"team-a/train-a3", "team-a/tune-a4", "team-b/infer-b2", "team-b/big-b3"}
    a4 = rows["team-a/tune-a4"]
    assert (a4["first"][0], a4["second"][0], a4["wait_gpu_h"], a4["saved_gpu_h"]) == (7200, 0, [16.0, 0.0], 16.0)
    assert rows["team-a/train-a3"]["wait_gpu_h"] == [32.0, 32.0]
    assert c["saved_gpu_h"] == 16.0 and c["wait_gpu_h"] == [144.0, 128.0]


def test_compare_needs_two_schedules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scen, kueue = run_cli(tmp_path)
    plan = tmp_path / "plan.json"
    assert main(["plan", str(scen), "--strategy", "greedy", "-q", "-o", str(plan)]) == 0
    assert main(["report", str(scen), str(kueue), "--compare", str(plan), "-o", str(tmp_path / "r.html")]) == 2
    assert "--compare" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


def test_compare_draws_in_a_browser(compared: Path) -> None:
    if find_chromium() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Chromium found")
        pytest.skip("Chromium is not installed")
    with Browser(width=1300, height=900) as b:
        b.open(compared.resolve().as_uri())
        assert b.evaluate("document.documentElement.getAttribute('data-rendered')") == "1"
        assert b.log.errors == []
        assert b.evaluate("document.querySelectorAll('#compare .row').length") == 4
        assert b.evaluate("document.querySelectorAll('#compare i.cmp1').length") == 4
        assert b.evaluate("getComputedStyle(document.getElementById('compare-sec')).display") != "none"
