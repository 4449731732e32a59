"""Greedy at fleet scale (issue 25): the isolation/gang/MIG fleet of the issue, timed by strategy.

The fleet: ``gpus`` GPUs on 8-GPU nodes (H100 and A100 racks, 16 nodes per rack, 8 racks per block),
two replicas per GPU: MIG inference at the top priority (a third of it with tenant isolation over 40
tenants), training gangs with a required rack or block, whole-GPU services, time-sliced shares last::

    python benchmarks/greedy_scale.py --gpus 10000 100000 --strategy greedy --time-limit 60
    python benchmarks/greedy_scale.py --gpus 10000 --checkout /tmp/before   # another commit's tree

Each size runs in a fresh process. Prints one Markdown row per size: the strategy's seconds, the wall and
CPU seconds of ``solve`` (validation included; CPU seconds are what a quiet machine's wall would be),
replicas placed per priority against the totals, the gap per priority, and whether the time limit cut
the search.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_bench import fleet_blocks


def fleet(gpus: int, seed: int = 0) -> dict[str, Any]:
    """The scenario data of the issue's fleet (see the module docstring)."""
    rng = random.Random(seed)
    blocks = fleet_blocks(gpus)  # the fleet of fleet_bench.synthetic; the work differs
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


def run_one(gpus: int, strategy: str, limit: float, seed: int) -> dict[str, Any]:
    """Build the fleet and plan it through ``solve`` (validation included); the figures of one row."""
    from capplan.io.scenario import problem_from_data
    from capplan.placement import PlanOptions, solve

    t = time.perf_counter()
    p = problem_from_data(fleet(gpus, seed))
    build = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()
    plan = solve(p, strategy, PlanOptions(time_limit=limit, seed=seed))
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    placed = {q: 0 for q in p.priorities}
    for x in plan.assignments:
        placed[p.workload(x.workload).priority] += 1
    totals = {q: sum(w.replicas for w in p.workloads if w.priority == q) for q in p.priorities}
    return {"gpus": gpus, "replicas": sum(totals.values()), "strategy": plan.strategy, "limit": limit,
            "build": round(build, 2), "solve": plan.solve_seconds, "wall": round(wall, 2), "cpu": round(cpu, 2),
            "placed": [placed[q] for q in p.priorities], "totals": [totals[q] for q in p.priorities],
            "priorities": list(p.priorities), "gaps": list(getattr(plan, "gaps", ()) or ()),
            "cut": plan.metrics.get("cut_by_time_limit"), "auto": plan.metrics.get("auto")}


def main() -> None:
    """Command line entry: one fresh process per size (``--checkout``: another source tree's capplan)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[10000])
    ap.add_argument("--strategy", default="greedy")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkout", type=Path, help="run this source tree's capplan (default: this one)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds before a size is stopped")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(run_one(a.child, a.strategy, a.time_limit, a.seed)), flush=True)
        return
    tree = (a.checkout or Path(__file__).parent.parent).resolve()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    print(f"tree {tree}; load {os.getloadavg()[0]:.2f}")
    print("| GPUs | replicas | strategy | limit s | solve s | wall s | CPU s | placed / replicas per priority "
          "| gaps | cut |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g in a.gpus:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(g), "--strategy", a.strategy,
               "--time-limit", str(a.time_limit), "--seed", str(a.seed)]
        try:
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout, check=True)
        except subprocess.TimeoutExpired:
            print(f"| {g} | | {a.strategy} | {a.time_limit:g} | stopped after {a.timeout:g} s | | | | | |", flush=True)
            continue
        except subprocess.CalledProcessError as exc:
            print(f"| {g} | | {a.strategy} | failed: {exc.stderr.strip().splitlines()[-1:]} |", flush=True)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        row = ", ".join(f"{q}: {x}/{n}" for q, x, n in zip(r["priorities"], r["placed"], r["totals"], strict=True))
        gaps = ", ".join(f"{x:.3f}" for x in r["gaps"]) or "-"
        print(f"| {g} | {r['replicas']} | {r['strategy']} | {a.time_limit:g} | {r['solve']:.2f} | {r['wall']:.2f} | "
              f"{r['cpu']:.2f} | {row} | {gaps} | {r['cut'] if r['cut'] is not None else '-'} |", flush=True)


if __name__ == "__main__":
    main()
