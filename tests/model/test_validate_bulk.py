"""The validator's array screen of GPUs and nodes (``_bulk``, used from ``BULK_ASSIGNMENTS`` assignments on) reports
exactly what the replica-by-replica check (``_plain``) reports, in the same order, on valid and on corrupted plans."""

from __future__ import annotations

from typing import Any

import pytest
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
        else:  # a slot of the node's model at an allowed start (max counts, one mode per GPU), or any slot
            node = p.cluster.nodes[p.cluster.node_index[a.node]]
            model = p.catalog.get(node.gpu_model) if node.gpu_model else None
            if model is not None and model.profiles and draw(st.booleans()):
                prof = draw(st.sampled_from(model.profiles))
                slot = MigSlot(profile=prof.name, start=draw(st.sampled_from(prof.starts)))
            else:
                slot = MigSlot(profile=draw(st.sampled_from(["1g.10gb", "3g.40gb", "CPX"])),
                               start=draw(st.integers(0, 7)))
            out[k] = a.model_copy(update={"mig": slot})
            if draw(st.booleans()):  # and one more replica on that GPU
                out.append(out[k].model_copy(update={"replica": a.replica + 20}))
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


def _slot(w: str, r: int, profile: str, start: int, node: str = "n1") -> Assignment:
    return Assignment(workload=w, replica=r, node=node, gpus=(0,), mig=MigSlot(profile=profile, start=start))


H100 = {"name": "n1", "gpu": "H100-SXM5-80GB", "gpus": 8, "cpu": 64, "memory_gib": 512}
MI300X = {"name": "n1", "gpu": "MI300X-192GB", "gpus": 8, "cpu": 64, "memory_gib": 512}
PRESET = {**H100, "gpu_modes": [{"gpus": [0], "mode": "mig", "layout": [{"profile": "3g.40gb", "start": 0}]}]}
SHARES = [{"name": "s", "gpu_fraction": 0.5, "replicas": 2, "tenant": "a", "isolation": "tenant"},
          {"name": "t", "gpu_fraction": 0.25, "tenant": "b"}]
CASES = [  # (node, workloads, assignments, a violation it must report)
    (H100, [{"name": "w", "replicas": 2, "mig": "1g.10gb+me"}],
     [_slot("w", 0, "1g.10gb+me", 0), _slot("w", 1, "1g.10gb+me", 1)], "at most 1 allowed"),
    (MI300X, [{"name": "w", "mig": "DPX"}, {"name": "v", "mig": "CPX"}],
     [_slot("w", 0, "DPX", 0), _slot("v", 0, "CPX", 4)], "one partition mode per GPU"),
    (H100, [{"name": "w", "replicas": 2, "mig": "3g.40gb"}],
     [_slot("w", 0, "3g.40gb", 0), _slot("w", 1, "3g.40gb", 0)], "overlaps another"),
    (H100, [{"name": "w", "mig": "3g.40gb"}], [_slot("w", 0, "3g.40gb", 2)], "may not start at 2"),
    (H100, [{"name": "w", "replicas": 2, "mig": "4g.40gb"}, {"name": "v", "mig": "3g.40gb"}],
     [_slot("w", 0, "4g.40gb", 0), _slot("v", 0, "3g.40gb", 4), _slot("w", 1, "1g.10gb", 7)], "compute slices"),
    (PRESET, [{"name": "w", "mig": "3g.40gb"}], [_slot("w", 0, "3g.40gb", 4)], "not in the GPU's preset MIG layout"),
    (H100, SHARES, [Assignment(workload="s", replica=0, node="n1", gpus=(0,), fraction=0.5),
                    Assignment(workload="t", replica=0, node="n1", gpus=(0,), fraction=0.25)], "tenant isolation"),
]


@pytest.mark.parametrize(("node", "works", "given_", "needle"), CASES)
def test_hand_cases_the_same_both_ways(node: dict[str, Any], works: list[dict[str, Any]], given_: list[Assignment],
                                       needle: str) -> None:
    """Each rule of a GPU broken alone (max count, one partition mode, overlap, start, compute slices, preset
    layout, tenant isolation): both ways report it, and the same list."""
    p = problem_from_data({"cluster": {"name": "c", "levels": ["rack", "node"],
                                       "racks": [{"name": "r0", "nodes": [node]}]}, "workloads": works})
    got = _bulk(p, given_)
    assert got == _plain(p, given_)
    assert any(needle in x for x in got), got


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
