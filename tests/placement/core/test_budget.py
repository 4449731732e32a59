"""The time budgets around a solve: the slowdown a fixed step's CPU seconds are scaled by."""

from __future__ import annotations

import time

import pytest

from capplan.placement.core.budget import slowdown


def test_slowdown_is_one_until_a_tenth_of_a_cpu_second() -> None:
    """Too little CPU to tell (a sleep is wall time only): 1.0, not a huge ratio."""
    wall, cpu = time.perf_counter(), time.process_time()
    time.sleep(0.05)
    assert slowdown(wall, cpu) == 1.0


def test_slowdown_counts_wall_seconds_per_cpu_second_within_its_bounds() -> None:
    """A sleep between busy work makes the wall clock run ahead of the CPU clock: the ratio grows, capped."""
    wall, cpu = time.perf_counter(), time.process_time()
    end = time.process_time() + 0.15
    while time.process_time() < end:
        pass
    time.sleep(0.3)  # wall seconds with no CPU: about (0.15 + 0.3) / 0.15 = 3x
    got = slowdown(wall, cpu)
    assert 2.0 <= got <= 8.0
    assert slowdown(wall, cpu, most=1.5) == 1.5


def test_speed_counts_the_share_of_the_core_the_process_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that gets a third of a core (every CPU second takes three wall seconds) is told its loop takes
    about three times as long as on a core of its own: the reserves of the steps after a solve grow with the
    load. A stall (a hundred wall seconds per CPU second) counts as at most ``_MOST_SLOWDOWN``."""
    from capplan.placement.core import budget

    wall = time.perf_counter

    def measured(cpu_per_wall: float) -> float:
        monkeypatch.setattr(budget, "_last", [])
        monkeypatch.setattr(budget.time, "process_time", lambda: wall() * cpu_per_wall)
        return budget.speed()

    own = min(measured(1.0) for _ in range(3))
    assert min(measured(1 / 3) for _ in range(3)) >= 1.5 * own
    assert min(measured(1 / 100) for _ in range(3)) <= 2 * budget._MOST_SLOWDOWN * own
