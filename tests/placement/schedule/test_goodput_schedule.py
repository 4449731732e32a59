"""``capplan schedule`` with the goodput model: a gang with checkpoint runs for duration / u (its expected
completion), and its deadline is met or missed on that time."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy.special import lambertw

from capplan.io.scenario import problem_from_data
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule import schedule

H = 3600


def _scenario(deadline: int | None, checkpoint: bool = True) -> dict[str, Any]:
    train: dict[str, Any] = {"name": "train", "kind": "training", "replicas": 4, "gpus": 8, "duration": "20h",
                             "priority": 5}
    if deadline is not None:
        train["deadline"] = deadline
    if checkpoint:
        train["checkpoint"] = "6m"
    return {"cluster": {"levels": ["node"], "nodes": [{"name_prefix": "n", "count": 4, "gpu": "H100-SXM5-80GB",
                                                       "gpus": 8, "cpu": 128, "memory_gib": 1024}]},
            "interruptions": {"gpu_failure_rate": 1e-4, "restart_without_spare": "1h"},
            "schedule": {"horizon": "3d", "step": "15m"}, "workloads": [train]}


def _expected_wall() -> int:
    """By hand: λ = 32 GPUs × 1e-4 = 0.0032/h, M = 312.5 h, C = 0.1 h, R = 1 h (no spare is held in a
    schedule); τ* = M(1 + W0(−e^{−(C/M + 1)})), u = τ*/(M e^{R/M}(e^{(τ*+C)/M} − 1)) = 0.97184."""
    m, c, r = 312.5, 0.1, 1.0
    tau = m * (1 + float(lambertw(-math.exp(-(c / m + 1)), 0).real))
    u = tau / (m * math.exp(r / m) * math.expm1((tau + c) / m))
    assert u == pytest.approx(0.97184, abs=1e-4)
    return math.ceil(20 * H / u)


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat"])
def test_deadline_missed_on_the_expected_time(strategy: str) -> None:
    """20 h of work due at 20 h 30 m: it fits on its nominal duration but not on its expected 20 h 35 m."""
    wall = _expected_wall()
    assert 20 * H < 20 * H + 30 * 60 < wall
    p = problem_from_data(_scenario(20 * H + 30 * 60))
    s = schedule(p, strategy, time_limit=10)
    assert check_schedule(p, s) == []
    (row,) = s.workloads
    assert not row.deadline_met and row.expected_end_s is None
    assert row.reason is not None and "expected run time" in row.reason
    assert [u.workload for u in s.unscheduled] == ["train"]
    plain = problem_from_data(_scenario(20 * H + 30 * 60, checkpoint=False))
    (met,) = schedule(plain, strategy, time_limit=10).workloads
    assert met.deadline_met and met.end_s == 20 * H and met.expected_end_s is None


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat"])
def test_expected_end_is_start_plus_duration_over_goodput(strategy: str) -> None:
    wall = _expected_wall()
    p = problem_from_data(_scenario(22 * H))
    s = schedule(p, strategy, time_limit=10)
    (row,) = s.workloads
    assert row.deadline_met and row.start_s == 0 and row.expected_end_s == row.end_s == wall
    assert all(a.end_s - a.start_s == wall for a in s.assignments)
    tampered = s.model_copy(update={"workloads": (row.model_copy(update={"expected_end_s": 20 * H}),)})
    assert any("expected_end_s" in v for v in check_schedule(p, tampered))
