"""The validator's array screen of GPUs and nodes (``_bulk``, used from ``BULK_ASSIGNMENTS`` assignments on) reports
exactly what the replica-by-replica check (``_plain``) reports, in the same order, on valid and on corrupted plans."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capplan.io.scenario import problem_from_data
from capplan.model.plan import Assignment, MigSlot
from capplan.model.problem import Problem
from capplan.model.validate import check_assignments
from capplan.model.validate_rules import BULK_ASSIGNMENTS, _bulk, _plain
from capplan.placement import PlanOptions
from capplan.placement.greedy import plan_greedy
from tests.strategies_gen import scenario_data

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _corrupt(draw: st.DrawFn, p: Problem, given: list[Assignment]) -> list[Assignment]:
    """``given`` with a few random changes: replicas moved to other nodes and GPUs (maybe out of range), piled
    onto one GPU, their shares or MIG slots changed, replicas of other workloads (other tenants) added."""
    out = list(given)
    nodes = [n.name for n in p.cluster.nodes]
    names = [w.name for w in p.workloads]
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["move", "pile", "share", "slot", "other"]))
        if op == "other" or not out:
            w = p.workload(draw(st.sampled_from(names)))
            out.append(Assignment(workload=w.name, replica=draw(st.integers(0, 3)), node=draw(st.sampled_from(nodes)),
                                  gpus=tuple(draw(st.lists(st.integers(0, 8), max_size=2))),
                                  fraction=w.gpu_fraction))
            continue
        k = draw(st.integers(0, len(out) - 1))
        a = out[k]
        if op == "move":
            out[k] = a.model_copy(update={"node": draw(st.sampled_from(nodes)),
                                          "gpus": tuple(draw(st.lists(st.integers(0, 8), max_size=3)))})
        elif op == "pile":
            out += [a.model_copy(update={"replica": a.replica + 10 + j}) for j in range(draw(st.integers(1, 4)))]
        elif op == "share":
            out[k] = a.model_copy(update={"fraction": draw(st.sampled_from([None, 0.1, 0.5, 0.9, 1.0]))})
        else:
            out[k] = a.model_copy(update={"mig": MigSlot(profile=draw(st.sampled_from(["1g.10gb", "3g.40gb", "CPX"])),
                                                         start=draw(st.integers(0, 7)))})
    return out


@st.composite
def plans(draw: st.DrawFn) -> tuple[Problem, list[Assignment]]:
    """A scenario's greedy plan (valid), its assignments maybe corrupted."""
    data: dict[str, Any] = draw(scenario_data())
    p = problem_from_data(data)
    plan = plan_greedy(p, PlanOptions(time_limit=5))
    return p, _corrupt(draw, p, list(plan.assignments))


@given(plans())
@SETTINGS
def test_bulk_screen_reports_what_the_plain_check_reports(case: tuple[Problem, list[Assignment]]) -> None:
    p, given_ = case
    assert _bulk(p, given_) == _plain(p, given_)


@given(scenario_data())
@SETTINGS
def test_valid_plans_pass_both_ways(data: dict[str, Any]) -> None:
    p = problem_from_data(data)
    given_ = list(plan_greedy(p, PlanOptions(time_limit=5)).assignments)
    assert _bulk(p, given_) == [] == _plain(p, given_)


def test_large_input_takes_the_bulk_path_with_the_same_result() -> None:
    """Over ``BULK_ASSIGNMENTS`` shares, one GPU over-subscribed and one node short of CPU: the same violations."""
    nodes = [{"name": f"n{k}", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 2000, "memory_gib": 2048} for k in range(300)]
    p = problem_from_data({"cluster": {"name": "c", "levels": ["rack", "node"],
                                       "racks": [{"name": "r0", "nodes": nodes}]},
                           "workloads": [{"name": "s", "kind": "shared", "gpu_fraction": 0.5, "cpu": 1,
                                          "replicas": 2 * 8 * 300},
                                         {"name": "big", "cpu": 1990, "replicas": 1}]})
    given_ = [Assignment(workload="s", replica=r, node=f"n{r // 16}", gpus=(r % 16 // 2,), fraction=0.5)
              for r in range(2 * 8 * 300)]
    assert len(given_) >= BULK_ASSIGNMENTS
    assert check_assignments(p, given_) == [] == _plain(p, given_)
    bad = [*given_, given_[2].model_copy(update={"replica": 5000})]
    bad[1] = bad[1].model_copy(update={"node": "n299", "gpus": (9,)})
    bad.append(Assignment(workload="big", replica=0, node="n5"))
    got = check_assignments(p, bad)
    assert got == _plain(p, bad)
    assert any("time-sliced shares sum to 1.500 > 1" in x for x in got)
    assert any("outside 0..7" in x for x in got)
    assert any(x.startswith("node n5: CPU") for x in got)


def test_mig_request_without_a_slot_is_reported_not_raised() -> None:
    """A MIG replica given a GPU but no slot is a shape violation (it used to stop the GPU rules on an assert)."""
    p = problem_from_data({"cluster": {"name": "c", "levels": ["rack", "node"], "racks": [{"name": "r0", "nodes": [
        {"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 1, "cpu": 8, "memory_gib": 64}]}]},
        "workloads": [{"name": "m", "mig": "1g.10gb", "cpu": 1, "replicas": 2}]})
    bad = [Assignment(workload="m", replica=0, node="n1", gpus=(0,), mig=MigSlot(profile="1g.10gb", start=0)),
           Assignment(workload="m", replica=1, node="n1", gpus=(0,))]
    assert _plain(p, bad) == _bulk(p, bad) == ["m[1] on n1: needs one MIG instance on one GPU"]
