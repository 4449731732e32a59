"""The time model's hints and the neighbourhood search's use of the bound, on hand-sized cases.

A CP-SAT call costs time even when it has nothing to find (loading, presolve), so the model skips a
stage whose hint is provably at its best; these tests check that the hint is complete enough for
that (identical jobs out of the model's order, guaranteed jobs on time) and that the search stops
searching levels that are at their bound.
"""

from __future__ import annotations

from capplan.io.scenario import problem_from_data
from capplan.model.problem import Problem
from capplan.model.units import UNITS_PER_GPU
from capplan.model.validate_schedule import check_schedule
from capplan.placement.schedule.heuristic import list_schedule
from capplan.placement.schedule.jobs import Jobs, model_inputs
from capplan.placement.schedule.result import lex_key, make_schedule
from capplan.placement.schedule.timemodel.model import TimeModel
from capplan.placement.schedule.window import WindowSearch, improve

HOUR = 3600


def _problem(workloads: list[dict[str, object]], horizon: str = "4h") -> Problem:
    return problem_from_data({"schedule": {"horizon": horizon, "step": "1h"},
                              "cluster": {"levels": ["rack", "node"], "racks": [
                                  {"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": 1,
                                                               "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64,
                                                               "memory_gib": 512}]} for r in range(2)]},
                              "workloads": workloads})


def _model(p: Problem) -> tuple[Jobs, TimeModel]:
    spec = p.schedule
    assert spec is not None
    jobs = Jobs(p, spec.horizon, spec.step)
    caps, budgets, busy = model_inputs(p, spec.horizon)
    return jobs, TimeModel(jobs.jobs, busy, caps, budgets, spec.horizon, spec.step, with_wait=False)


def test_identical_jobs_hinted_out_of_order_need_no_search() -> None:
    """Two 1-GPU replicas of A (1h) are two identical jobs, ordered by start in the model. A hint with
    replica 1 at 0h and replica 0 at 2h breaks that order as given; put in order it is complete, all
    the work runs (the a-priori most), so the work stage is optimal without a second CP-SAT call."""
    p = _problem([{"name": "A", "gpus": 1, "replicas": 2, "duration": "1h"}])
    jobs, tm = _model(p)
    assert len(jobs.jobs) == 2
    node = 0
    sol = tm.solve(([2 * HOUR, 0], [{node: 1}, {node: 1}], [{}, {}]), 5.0, 0, 1)
    assert sol is not None and tm.solves == 1  # completing the hint; no stage searched
    assert sorted(s for s in sol.starts if s is not None) == [0, 2 * HOUR]
    work = 2 * UNITS_PER_GPU * HOUR
    assert sol.stages == [("priority 0", work, float(work), "optimal")]


def test_guaranteed_job_on_time_in_the_hint_skips_its_stage() -> None:
    """G (guaranteed, 8 GPUs, 1h, release 1h) hinted at 1h is on time: the guaranteed stage and the work
    stage are at their a-priori most in the completed hint, so only the completion calls CP-SAT."""
    p = _problem([{"name": "G", "gpus": 8, "duration": "1h", "release": "1h", "sla": "guaranteed"}])
    _, tm = _model(p)
    sol = tm.solve(([HOUR], [{0: 1}], [{}]), 5.0, 0, 1)
    assert sol is not None and tm.solves == 1
    assert [(name, state) for name, _, _, state in sol.stages] == [("guaranteed", "optimal"),
                                                                    ("priority 0", "optimal")]


def test_search_leaves_levels_at_their_bound_alone() -> None:
    """A (8 GPUs, 2h, priority 10) and B (8 GPUs, 4h, priority 0) on two 8-GPU nodes over 4h: list
    scheduling runs both at 0h, all the work of both priorities (48 GPU-h). With that as the bound,
    the search names both work levels done, every neighbourhood solves the wait stage only, and the
    schedule keeps its work and stays valid."""
    p = _problem([{"name": "A", "gpus": 8, "duration": "2h", "priority": 10},
                  {"name": "B", "gpus": 8, "duration": "4h"}])
    spec = p.schedule
    assert spec is not None
    items = list_schedule(p, spec.horizon, spec.step)
    jobs = Jobs(p, spec.horizon, spec.step)
    inputs = model_inputs(p, spec.horizon)
    key = lex_key(p, items, spec.step)
    bound = {10: key[1], 0: key[2]}
    search = WindowSearch(p, jobs, items, spec.horizon, spec.step, inputs, 0, bound)
    assert search.done() == frozenset({"guaranteed", "priority 10", "priority 0"}) and search.work_done()
    below = WindowSearch(p, jobs, items, spec.horizon, spec.step, inputs, 0, {10: key[1], 0: key[2] + 1})
    assert below.done() == frozenset({"guaranteed", "priority 10"}) and not below.work_done()
    out, metrics = improve(p, jobs, items, spec.horizon, spec.step, 2.0, 0, 1, inputs, bound)
    assert lex_key(p, out, spec.step)[:3] == key[:3]
    assert isinstance(metrics["lns_tried"], int) and metrics["lns_tried"] >= 1
    s = make_schedule(p, "cpsat-lns", out, [], horizon=spec.horizon, step=spec.step)
    assert check_schedule(p, s) == []
