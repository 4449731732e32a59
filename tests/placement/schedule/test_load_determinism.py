"""A load spike (the wall clock gone before the model runs) does not change the schedule of a seed."""

from __future__ import annotations

import time

from benchmarks.schedule_fuzz import _fingerprint, generate
from capplan import problem_from_data
from capplan.model.deadline import Deadline
from capplan.placement import PlanOptions
from capplan.placement.schedule import schedule


def test_wall_clock_spent_before_the_model_does_not_drop_it() -> None:
    """Fuzz seed 889 (found by benchmarks/schedule_fuzz.py at load 12): the same seed with the whole limit and
    with its wall clock almost spent (its nominal budget unchanged) gives the same proven schedule; the model
    was skipped before and list scheduling's schedule came back."""
    p = problem_from_data(generate(889))
    quiet = schedule(p, "cpsat", PlanOptions(time_limit=2.0, seed=89))
    spiked = schedule(p, "cpsat", PlanOptions(time_limit=2.0, seed=89,
                                              deadline=Deadline(time.perf_counter() + 0.02, 2.0)))
    assert quiet.strategy == spiked.strategy == "cpsat" and spiked.status == "optimal"
    assert _fingerprint(spiked) == _fingerprint(quiet)
