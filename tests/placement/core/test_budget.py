"""The time budgets around a solve: the slowdown a fixed step's CPU seconds are scaled by."""

from __future__ import annotations

import time

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
