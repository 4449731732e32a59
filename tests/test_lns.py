"""Large-neighbourhood search: valid, never worse than its heuristic start, sub-problems consistent."""

from __future__ import annotations

from pathlib import Path

from capplan.lns import subproblem
from capplan.planner import PlanOptions, solve
from capplan.scenario import load_scenario
from capplan.validate import check_plan

EXAMPLES = Path(__file__).parents[1] / "models" / "examples"


def test_lns_not_worse_than_heuristic() -> None:
    """LNS starts from the heuristic plan and only accepts lexicographic improvements."""
    p = load_scenario(EXAMPLES / "mig-inference.yaml")
    start = solve(p, "heuristic", PlanOptions(time_limit=5))
    plan = solve(p, "lns", PlanOptions(time_limit=6))
    assert check_plan(p, plan) == []
    assert list(plan.objective) >= list(start.objective)
    assert plan.metrics["start_objective"] == list(start.objective)


def test_subproblem_fixes_replicas_of_split_gangs() -> None:
    """A sub-problem on some nodes keeps its replicas free unless a gang also runs elsewhere."""
    p = load_scenario(EXAMPLES / "training-cluster.yaml")
    plan = solve(p, "heuristic")
    nodes = {plan.assignments[0].node}
    sub, back = subproblem(p, list(plan.assignments), nodes, [])
    assert {n.name for n in sub.cluster.nodes} == nodes
    for a in sub.running:
        orig = back[a.key]
        w = p.workload(orig[0])
        assert w.is_gang or w.topology.required or orig in {r.key for r in p.running}
    assert all(back[(w.name, j)][0] == w.name for w in sub.workloads for j in range(w.replicas))
