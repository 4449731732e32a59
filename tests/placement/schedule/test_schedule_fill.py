"""The final fill: replicas that do not run go where a finished schedule still has room for them."""

from __future__ import annotations

from capplan.placement.schedule.heuristic import ListScheduler, fill
from capplan.placement.schedule.result import lex_key
from tests.placement.schedule.test_schedule_cases import problem, rack


def test_fill_adds_a_replica_the_schedule_left_room_for() -> None:
    """One 8-GPU node, 24 h. A (8 GPUs, 4h) was put at 4h..8h (as a late variant or a search may leave it);
    B (2 x 4 GPUs, 4h, deadline 4h) does not run. Room: 0h..4h is free, so fill starts both B replicas at 0
    and leaves A where it is. Work rises by 8 GPUs x 4h = 32 GPU-hours."""
    p = problem([rack("r1", 1)], [{"name": "A", "gpus": 8, "duration": "4h", "release": "4h"},
                                  {"name": "B", "gpus": 4, "replicas": 2, "duration": "4h", "deadline": "4h"}])
    horizon, step = 24 * 3600, 60
    ls = ListScheduler(p, horizon, step)
    ls.schedule(p.workload("A"))
    before = ls.tl.live()
    assert [(it.w.name, it.start) for it in before] == [("A", 4 * 3600)]
    after = fill(p, horizon, step, before)
    got = sorted((it.w.name, it.replica, it.start, it.end) for it in after)
    assert got == [("A", 0, 14400, 28800), ("B", 0, 0, 14400), ("B", 1, 0, 14400)]
    assert lex_key(p, after, step) > lex_key(p, before, step)


def test_fill_changes_nothing_when_nothing_fits() -> None:
    """One 8-GPU node: A (8 GPUs, 24h service-like job) runs 0..24h; B (1 GPU, 1h) cannot fit anywhere."""
    p = problem([rack("r1", 1)], [{"name": "A", "gpus": 8, "duration": "24h"},
                                  {"name": "B", "gpus": 1, "duration": "1h"}])
    horizon, step = 24 * 3600, 60
    ls = ListScheduler(p, horizon, step)
    ls.schedule(p.workload("A"))
    before = ls.tl.live()
    after = fill(p, horizon, step, before)
    assert sorted((it.w.name, it.start) for it in after) == [("A", 0)]
