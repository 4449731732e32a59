"""The objective's last level, the unweighted wait (``wait_replica_s``): hand-worked, validated, exhaustive.

A CPU-only pod has no GPU demand, so neither the work nor the demand-weighted wait sees when it
starts; only the last level (sum over replicas of start - release, seconds) does.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from capplan.io.scenario import problem_from_data
from capplan.model.schedule import Schedule, TimedAssignment, WorkloadTiming
from capplan.model.validate_schedule import assert_valid_schedule, check_schedule
from capplan.placement.schedule import schedule
from capplan.placement.schedule.heuristic import list_schedule
from capplan.placement.schedule.jobs import Jobs, model_inputs
from capplan.placement.schedule.timemodel.model import TimeModel

HOUR = 3600
H100 = "H100-SXM5-80GB"


def _one_node() -> dict[str, Any]:
    """One node with 1 GPU and 4 CPUs. ``cpu`` (CPU-only, 4 CPUs, 1h, priority 10) and ``gpu`` (1 GPU,
    2 CPUs, 1h, priority 0), both released at 0, horizon 4h on a 1h grid: they never run together (6 > 4
    CPUs)."""
    node = {"name": "n", "gpu": H100, "gpus": 1, "cpu": 4, "memory_gib": 64}
    return {"schedule": {"horizon": "4h", "step": "1h"},
            "cluster": {"name": "t", "levels": ["node"], "nodes": [node]},
            "workloads": [{"name": "cpu", "cpu": 4, "memory_gib": 1, "duration": "1h", "priority": 10},
                          {"name": "gpu", "gpus": 1, "cpu": 2, "memory_gib": 1, "duration": "1h"}]}


def _starts(s: Schedule) -> dict[str, int]:
    return {a.workload: a.start_s for a in s.assignments}


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat"])
def test_a_cpu_only_pod_starts_as_early_as_the_higher_levels_allow(strategy: str) -> None:
    """Worked out: priority 10 has no GPU work (``cpu`` has no demand), priority 0's work is 1 GPU-hour
    wherever ``gpu`` runs, and the demand-weighted wait is 0 only with ``gpu`` at 0. So ``gpu`` starts
    at 0, and ``cpu`` at 1h, 2h or 3h ties on every level but the last; the last (the unweighted wait)
    puts it at 1h: wait_replica_s = 3600. (Before that level, list scheduling's first order placed
    priority 10 at its latest start, 3h, and both strategies kept it there.)"""
    p = problem_from_data(_one_node())
    s = schedule(p, strategy, time_limit=10)
    assert _starts(s) == {"gpu": 0, "cpu": HOUR}
    assert s.objective == (0.0, 1.0) and s.wait_gpu_h == 0.0 and s.wait_replica_s == HOUR
    assert s.status == "optimal" and check_schedule(p, s) == []
    assert '"wait_replica_s": 3600' in s.to_json()


def test_the_cpsat_stage_moves_a_cpu_only_pod_its_hint_puts_late() -> None:
    """The time model alone, hinted with list scheduling's late-priority schedule (``cpu`` at 3h): its
    last stage, the unweighted wait, moves ``cpu`` to 1h and keeps ``gpu`` at 0."""
    p = problem_from_data(_one_node())
    horizon, step = 4 * HOUR, HOUR
    late = list_schedule(p, horizon, step, late_above=0)
    assert {it.w.name: it.start for it in late} == {"gpu": 0, "cpu": 3 * HOUR}
    jobs = Jobs(p, horizon, step)
    caps, budgets, busy = model_inputs(p, horizon)
    sol = TimeModel(jobs.jobs, busy, caps, budgets, horizon, step).solve(jobs.hint(late), 5.0, 0, 1)
    assert sol is not None
    got = {it.w.name: it.start for it in jobs.decode(sol)}
    assert got == {"gpu": 0, "cpu": HOUR}
    assert [name for name, *_ in sol.stages][-1] == "replica wait"
    assert sol.stages[-1][1] == HOUR and sol.stages[-1][3] == "optimal"


def _hand_schedule(cpu_start: int, wait_replica_s: int | None) -> Schedule:
    """The schedule of :func:`_one_node` with ``gpu`` at 0 and ``cpu`` at ``cpu_start``, written by hand."""
    rows = (WorkloadTiming(name="cpu", start_s=cpu_start, end_s=cpu_start + HOUR, wait_s=cpu_start,
                           deadline_met=True),
            WorkloadTiming(name="gpu", start_s=0, end_s=HOUR, wait_s=0, deadline_met=True))
    return Schedule(status="optimal", strategy="hand", objective=(0.0, 1.0), bound=(0.0, 1.0), priorities=(10, 0),
                    wait_gpu_h=0.0, wait_replica_s=wait_replica_s, horizon_s=4 * HOUR, step_s=HOUR,
                    assignments=(TimedAssignment(workload="cpu", replica=0, node="n", start_s=cpu_start,
                                                 end_s=cpu_start + HOUR),
                                 TimedAssignment(workload="gpu", replica=0, node="n", gpus=(0,), start_s=0,
                                                 end_s=HOUR)),
                    workloads=rows)


def test_the_validator_recomputes_the_unweighted_wait() -> None:
    p = problem_from_data(_one_node())
    assert check_schedule(p, _hand_schedule(2 * HOUR, 2 * HOUR)) == []
    assert any("wait_replica_s 3600 differs from the recomputed 7200" in v
               for v in check_schedule(p, _hand_schedule(2 * HOUR, HOUR)))
    # schedules written before the field existed leave it out: nothing to check
    assert check_schedule(p, _hand_schedule(2 * HOUR, None)) == []
    assert "wait_replica_s" not in _hand_schedule(2 * HOUR, None).to_json()


def test_running_replicas_do_not_wait() -> None:
    """A running replica (start 0, ends in 2h) counts no wait; a second replica released at 30m that
    fits beside it at once (1h grid: 1h) waits 30 min."""
    data = _one_node()
    data["cluster"]["nodes"][0].update(gpus=2, cpu=8)
    data["workloads"] = [{"name": "g", "gpus": 1, "cpu": 1, "memory_gib": 1, "replicas": 2, "duration": "1h",
                          "release": "30m"}]
    data["running"] = [{"workload": "g", "replica": 0, "node": "n", "gpus": [0], "ends_in": "2h"}]
    p = problem_from_data(data)
    for strategy in ("heuristic", "cpsat"):
        s = schedule(p, strategy, time_limit=5)
        assert sorted((a.replica, a.start_s) for a in s.assignments) == [(0, 0), (1, HOUR)]
        assert s.wait_replica_s == HOUR - 30 * 60


# ------------------------------------------------------------------ exhaustive search with CPU-only pods
def _tiny(seed: int) -> dict[str, Any]:
    """Two nodes of 2 GPUs and 8 CPUs; 3-4 workloads, some CPU-only, whose CPUs bind."""
    rnd = random.Random(seed)
    nodes = [{"name": f"n{i}", "gpu": H100, "gpus": 2, "cpu": 8, "memory_gib": 256} for i in range(2)]
    workloads = []
    for i in range(rnd.randint(3, 4)):
        w: dict[str, Any] = {"name": f"w{i}", "duration": rnd.choice([1, 2]) * HOUR, "memory_gib": 1,
                             "release": rnd.choice([0, 0, 1]) * HOUR, "priority": rnd.choice([0, 0, 5])}
        if i == 0 or rnd.random() < 0.4:
            w["cpu"] = rnd.choice([4, 6, 8])
        else:
            w.update(gpus=rnd.choice([1, 2]), cpu=rnd.choice([2, 4]))
        if rnd.random() < 0.25:
            w["deadline"] = w["release"] + w["duration"] + rnd.choice([0, 1]) * HOUR
        workloads.append(w)
    return {"schedule": {"horizon": "3h", "step": "1h"},
            "cluster": {"name": "t", "levels": ["node"], "nodes": nodes}, "workloads": workloads}


def _exhaustive(data: dict[str, Any]) -> tuple[tuple[int, ...], int, int, int]:
    """Best (GPU-seconds per priority, highest first; demand-weighted wait; replicas; unweighted wait) over
    every start and node of every workload, from the rules only: at every hour each node has 2 GPUs and 8
    CPUs."""
    ws = data["workloads"]
    hours = 3
    prios = sorted({w["priority"] for w in ws}, reverse=True)
    options = []
    for w in ws:
        last = min(w.get("deadline", hours * HOUR), hours * HOUR) - w["duration"]
        opts: list[tuple[int, int] | None] = [None]
        opts += [(t, n) for t in range(w["release"], last + 1, HOUR) for n in range(2)]
        options.append(opts)
    best: tuple[tuple[int, ...], int, int, int] | None = None
    for choice in itertools.product(*options):
        gpus = [[0] * hours for _ in range(2)]
        cpus = [[0] * hours for _ in range(2)]
        ok = True
        for w, c in zip(ws, choice, strict=True):
            if c is None:
                continue
            t, n = c
            for h in range(t // HOUR, (t + w["duration"]) // HOUR):
                gpus[n][h] += w.get("gpus", 0)
                cpus[n][h] += w["cpu"]
                ok = ok and gpus[n][h] <= 2 and cpus[n][h] <= 8
        if not ok:
            continue
        run = [(w, c) for w, c in zip(ws, choice, strict=True) if c is not None]
        work = tuple(sum(w.get("gpus", 0) * w["duration"] for w, _ in run if w["priority"] == q) for q in prios)
        wait = sum(w.get("gpus", 0) * (c[0] - w["release"]) for w, c in run)
        flat = sum(c[0] - w["release"] for w, c in run)
        cand = (work, wait, len(run), flat)
        if best is None or (work, -wait, len(run), -flat) > (best[0], -best[1], best[2], -best[3]):
            best = cand
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(10))
def test_cpsat_equals_exhaustive_search_with_cpu_only_pods(seed: int) -> None:
    data = _tiny(seed)
    p = problem_from_data(data)
    s = assert_valid_schedule(p, schedule(p, "cpsat", time_limit=10))
    work, wait, replicas, flat = _exhaustive(data)
    assert s.status == "optimal"
    assert s.objective == tuple(round(x / HOUR, 6) for x in work)
    assert s.wait_gpu_h == round(wait / HOUR, 6)
    assert len(s.assignments) == replicas and s.wait_replica_s == flat
    h = schedule(p, "heuristic")
    key = (s.objective, -s.wait_gpu_h, len(s.assignments), -(s.wait_replica_s or 0))
    assert (h.objective, -h.wait_gpu_h, len(h.assignments), -(h.wait_replica_s or 0)) <= key


@pytest.mark.parametrize("strategy", ["heuristic", "cpsat"])
def test_same_seed_same_schedule_with_cpu_only_pods(strategy: str) -> None:
    p = problem_from_data(_tiny(3))
    a, b = (schedule(p, strategy, time_limit=5, seed=7).model_copy(update={"solve_seconds": 0.0, "metrics": {}})
            for _ in range(2))
    assert a.to_json() == b.to_json() and a.wait_replica_s is not None
