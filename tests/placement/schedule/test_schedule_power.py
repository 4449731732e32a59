"""Power budgets in time: a GPU already in use over part of a window is not free to join.

List scheduling fits a job against the union of everything that runs during its window. A GPU that
some replica uses for part of that window looks "on" in the union, so joining it (a MIG slice or a
share) seemed to add no draw; but at the instants where that replica has ended, the newcomer turns
the GPU on, and the rack's budget may already be spent by other GPUs then.
"""

from __future__ import annotations

from capplan.io.scenario import problem_from_data
from capplan.model.schedule import Unscheduled
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule.heuristic import list_schedule
from capplan.placement.schedule.result import make_schedule

# One A100 node (400 W per busy GPU, GPU 0 preset to MIG) in a rack that feeds one busy GPU. X holds
# a 3g slice of GPU 0 for the first 10 minutes, Y the whole GPU 1 from minute 10 to 20; Z (a 3g slice
# for 15 minutes) may join GPU 0 at minute 0 only if GPU 0 stays the one busy GPU, which it does not
# from minute 10.
DATA = {
    "schedule": {"horizon": "1h", "step": "5m"},
    "cluster": {"name": "c", "levels": ["rack", "node"], "racks": [
        {"name": "r", "power_kw": 0.4,
         "nodes": [{"name": "n", "gpu": "A100-SXM4-80GB", "gpus": 2, "cpu": 32, "memory_gib": 256,
                    "gpu_modes": [{"gpus": [0], "mode": "mig"}]}]}]},
    "workloads": [
        {"name": "x", "mig": "3g.40gb", "duration": "10m", "priority": 100, "cpu": 1},
        {"name": "y", "gpus": 1, "duration": "10m", "release": "10m", "priority": 100, "cpu": 1},
        {"name": "z", "mig": "3g.40gb", "duration": "15m", "priority": 0, "cpu": 1},
    ],
}


def test_a_partly_used_gpu_does_not_dodge_the_budget() -> None:
    """Z waits until minute 20 (when Y ends), and the list schedule passes the validator."""
    p = problem_from_data(DATA)
    items = list_schedule(p, 3600, 300, [p.workload("x"), p.workload("y"), p.workload("z")], None)
    starts = {it.w.name: it.start for it in items}
    assert starts == {"x": 0, "y": 600, "z": 1200}
    placed = {(it.w.name, it.replica) for it in items}
    missing = [Unscheduled(workload=w.name, replicas=(0,), reason="-") for w in p.workloads
               if (w.name, 0) not in placed]
    assert check_schedule(p, make_schedule(p, "heuristic", items, missing, horizon=3600, step=300)) == []
