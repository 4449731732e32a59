"""Large-neighbourhood search: valid, never worse than its heuristic start, sub-problems consistent."""

from __future__ import annotations

from pathlib import Path

from capplan.io.scenario import load_scenario
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions, solve
from capplan.placement.core.subproblem import neighbourhood as subproblem

EXAMPLES = Path(__file__).parents[2] / "models" / "examples"


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


def test_lns_keeps_required_domain_of_partly_placed_workload() -> None:
    """A rack-bound workload with a replica placed outside the neighbourhood is not offered to it (no split)."""
    from capplan.io.scenario import problem_from_data
    from capplan.placement import solve

    def node(n: str) -> dict[str, object]:
        return {"name": n, "cpu": 8, "memory_gib": 64, "gpu": "H100-SXM5-80GB", "gpus": 1}

    data = {"cluster": {"name": "h", "levels": ["rack", "node"],
                        "racks": [{"name": "r0", "nodes": [node("n1")], "power_kw": 1},
                                  {"name": "r1", "nodes": [node("n2")], "power_kw": 1}]},
            "workloads": [{"name": "w0", "replicas": 2, "cpu": 1, "gpus": 1, "topology": {"required": "rack"},
                           "sla": "guaranteed"}]}
    p = problem_from_data(data)
    for seed in range(4):
        plan = solve(p, "lns", time_limit=2.0, seed=seed)  # raises if the validator finds a split
        assert len(plan.assignments) == 1 and plan.status == "infeasible"


def _sized(nodes: int, replicas: int) -> object:
    """Two priorities (so not ``patterns``) of one-GPU replicas, ``replicas`` in all, on ``nodes`` 8-GPU nodes."""
    from capplan.io.scenario import problem_from_data

    half = replicas // 2
    return problem_from_data({
        "cluster": {"name": "c", "nodes": [{"name_prefix": "n", "count": nodes, "gpu": "H100-SXM5-80GB", "gpus": 8,
                                                          "cpu": 128, "memory_gib": 1024}]},
        "workloads": [{"name": "a", "gpus": 1, "replicas": half, "priority": 10},
                      {"name": "b", "gpus": 1, "replicas": replicas - half, "priority": 0}],
    })


def test_auto_runs_lns_up_to_its_sizes_and_the_heuristic_above() -> None:
    """``auto``'s table: ``lns`` up to 50,000 replicas on up to 2,000 nodes, the heuristic beyond either."""
    from capplan.placement import choose_strategy
    from capplan.placement.strategies import LNS_NODES, LNS_REPLICAS

    assert (LNS_REPLICAS, LNS_NODES) == (50000, 2000)
    assert choose_strategy(_sized(1250, 40000)) == "lns"  # type: ignore[arg-type]
    assert choose_strategy(_sized(2000, 50000)) == "lns"  # type: ignore[arg-type]
    assert choose_strategy(_sized(2000, 50001)) == "heuristic"  # type: ignore[arg-type]
    assert choose_strategy(_sized(2001, 30000)) == "heuristic"  # type: ignore[arg-type]
