"""Online scheduling: one workload at a time, no lookahead, valid and deterministic."""

from __future__ import annotations

from pathlib import Path

from capplan.online import OnlineScheduler
from capplan.plan import Plan
from capplan.scenario import load_scenario
from capplan.summary import make_plan
from capplan.validate import check_plan

EXAMPLES = Path(__file__).parents[1] / "models" / "examples"


def _run(score: str) -> tuple[list, list]:  # type: ignore[type-arg]
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    sched = OnlineScheduler(p.replace(workloads=p.workloads, running=()), score=score)  # type: ignore[arg-type]
    placed, failed = [], []
    for w in p.workloads:
        got = sched.schedule(w)
        if got is None:
            failed.append(w.name)
        else:
            placed += got
    return placed, failed


def test_online_result_is_a_valid_plan() -> None:
    """Everything scheduled online forms a plan the independent validator accepts."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    for score in ("fgd", "bestfit"):
        placed, _ = _run(score)
        placed_keys = {a.key for a in placed}
        from capplan.plan import Unplaced

        unplaced = [Unplaced(workload=w.name, replicas=tuple(r for r in range(w.replicas)
                                                              if (w.name, r) not in placed_keys), reason="online")
                    for w in p.workloads if any((w.name, r) not in placed_keys for r in range(w.replicas))]
        plan: Plan = make_plan(p, "online", placed, unplaced)
        assert check_plan(p, plan) == []


def test_online_is_deterministic_and_counts_gpus() -> None:
    """The same arrival order gives the same placements; allocated GPUs add up."""
    a, _ = _run("fgd")
    b, _ = _run("fgd")
    assert a == b and a
