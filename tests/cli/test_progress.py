"""Progress lines speak user units (GPUs, %, seconds), from every strategy, and never go quiet for long."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from capplan.cli.progress import format_progress
from capplan.placement import PlanOptions, solve
from capplan.placement.core.progress import Heartbeat
from tests.placement.cpsat.test_exhaustive import random_tiny


def test_lines_use_gpus_percent_and_seconds() -> None:
    """No exponent notation, no -0, the gap in %, GPUs named."""
    line = format_progress({"stage": "lns", "elapsed": 3.14159, "objective": [7.320061, -0.0],
                            "bound": [8.0, 1.0], "gap": 0.0849927, "step": 4})
    assert line == "[    3.1 s] lns, placed 7.32 / 0 GPUs per priority, bound 8 / 1 GPUs, gap 8.5%, step 4"
    single = format_progress({"stage": "patterns", "elapsed": 1, "objective": [5999.07], "bound": [5999.66]})
    assert single == "[    1.0 s] patterns, placed 5999.07 GPUs, bound 5999.66 GPUs", single
    one = format_progress({"stage": "cpsat", "elapsed": 0.5, "priority": 100, "objective": 12.0, "bound": 16.0})
    assert one == "[    0.5 s] cpsat, placed 12 GPUs at priority 100, bound 16 GPUs"


@pytest.mark.parametrize("strategy", ["greedy", "cpsat", "heuristic", "lns", "decompose", "patterns"])
def test_every_strategy_reports_in_user_units(strategy: str) -> None:
    """Each strategy's events format without internal values: GPUs never exceed the cluster's GPUs."""
    p = random_tiny(7)
    seen: list[dict[str, Any]] = []
    solve(p, strategy, PlanOptions(time_limit=1.0, workers=1, progress=seen.append))
    gpus = p.cluster.gpus_total
    for e in seen:
        obj = e.get("objective")
        for v in obj if isinstance(obj, list) else [] if obj is None else [obj]:
            assert 0 <= v <= gpus, e
        line = format_progress(e)
        assert "e+" not in line and "-0" not in line and not re.search(r"\d\.\d{3,}", line), line
    if strategy != "greedy":  # greedy is a single quick pass; every other strategy reports its plan
        assert any("objective" in e for e in seen), seen


def test_heartbeat_repeats_the_last_event_during_silence() -> None:
    """A callback wrapped in the heartbeat hears from a silent solve at least every 2 s."""
    got: list[tuple[float, dict[str, Any]]] = []
    t0 = time.perf_counter()
    with Heartbeat(lambda e: got.append((time.perf_counter() - t0, e)), "lns", every=0.2) as beat:
        beat({"stage": "lns", "elapsed": 0.0, "objective": [1.0]})
        time.sleep(1.0)
    assert len(got) >= 2 and got[1][0] >= 0.2  # repeated, and only after the silence
    assert all(e["objective"] == [1.0] for _, e in got) and got[-1][1]["message"] == "still working"
    assert got[-1][1]["elapsed"] > got[0][1]["elapsed"]
