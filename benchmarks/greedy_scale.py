"""Greedy at fleet scale (issue 25): the isolation/gang/MIG fleet of the issue, timed by strategy.

The fleet: ``gpus`` GPUs on 8-GPU nodes (H100 and A100 racks, 16 nodes per rack, 8 racks per block),
two replicas per GPU: MIG inference at the top priority (a third of it with tenant isolation over 40
tenants), training gangs with a required rack or block, whole-GPU services, time-sliced shares last::

    python benchmarks/greedy_scale.py --gpus 10000 100000 --strategy greedy --time-limit 60

Prints one Markdown row per size: build seconds, solve seconds, wall seconds of ``solve`` (validation
included), replicas placed per priority against the totals, the gap per priority, and whether the time
limit cut the search.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


def fleet(gpus: int, seed: int = 0) -> dict[str, Any]:
    """The scenario data of the issue's fleet (see the module docstring)."""
    rng = random.Random(seed)
    n_nodes = gpus // 8
    blocks: list[dict[str, Any]] = []
    for i in range(n_nodes):
        b, r = i // 128, (i // 16) % 8
        if len(blocks) <= b:
            blocks.append({"name": f"b{b}", "racks": []})
        racks = blocks[b]["racks"]
        if len(racks) <= r:
            racks.append({"name": f"b{b}r{r}", "nodes": []})
        model = "H100-SXM5-80GB" if (i // 16) % 3 else "A100-SXM4-80GB"
        racks[r]["nodes"].append({"name": f"n{i}", "gpu": model, "gpus": 8, "cpu": 192, "memory_gib": 1536})
    work: list[dict[str, Any]] = []
    replicas, budget, k = 0, 2 * gpus, 0
    while replicas < budget:
        x = rng.random()
        k += 1
        w: dict[str, Any]
        if x < 0.25:
            w = {"name": f"mig{k}", "kind": "inference", "replicas": rng.choice([8, 16, 32, 64]),
                 "mig": rng.choice(["1g.10gb", "2g.20gb", "3g.40gb"]), "cpu": 2, "memory_gib": 16,
                 "priority": 1000}
            if rng.random() < 1 / 3:
                w.update(tenant=f"t{rng.randrange(40)}", isolation="tenant")
        elif x < 0.30:
            size = rng.choice([2, 4, 8, 16, 32])
            w = {"name": f"train{k}", "kind": "training", "replicas": size, "gpus": 8, "cpu": 96,
                 "memory_gib": 512, "topology": {"required": "block" if size > 16 else "rack"}, "priority": 100}
        elif x < 0.55:
            w = {"name": f"svc{k}", "replicas": rng.choice([4, 8, 16, 32]), "gpus": rng.choice([1, 2, 4]),
                 "cpu": 8, "memory_gib": 64, "priority": 10}
        else:
            w = {"name": f"share{k}", "kind": "shared", "replicas": rng.choice([8, 16, 32]),
                 "gpu_fraction": rng.choice([0.25, 0.5]), "gpu_memory_gib": 10, "cpu": 2, "memory_gib": 8,
                 "priority": 1, "tenant": f"t{rng.randrange(40)}"}
        replicas += int(w["replicas"])
        work.append(w)
    return {"cluster": {"name": f"greedy-scale-{gpus}", "levels": ["block", "rack", "node"], "blocks": blocks},
            "workloads": work}


def main() -> None:
    """Command line entry."""
    from capplan.io.scenario import problem_from_data
    from capplan.placement import PlanOptions, solve

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[10000])
    ap.add_argument("--strategy", default="greedy")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print("| GPUs | replicas | strategy | limit s | build s | solve s | wall s | placed per priority | gaps | cut |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g in a.gpus:
        t = time.perf_counter()
        p = problem_from_data(fleet(g, a.seed))
        build = time.perf_counter() - t
        t = time.perf_counter()
        plan = solve(p, a.strategy, PlanOptions(time_limit=a.time_limit, seed=a.seed))
        wall = time.perf_counter() - t
        placed = {q: 0 for q in p.priorities}
        for x in plan.assignments:
            placed[p.workload(x.workload).priority] += 1
        totals = {q: sum(w.replicas for w in p.workloads if w.priority == q) for q in p.priorities}
        row = ", ".join(f"{q}: {placed[q]}/{totals[q]}" for q in p.priorities)
        gaps = plan.metrics.get("gaps", getattr(plan, "gaps", None))
        print(f"| {g} | {sum(totals.values())} | {plan.strategy} | {a.time_limit:g} | {build:.1f} | "
              f"{plan.solve_seconds:.2f} | {wall:.2f} | {row} | {gaps} | "
              f"{plan.metrics.get('cut_by_time_limit', '-')} |", flush=True)


if __name__ == "__main__":
    main()
