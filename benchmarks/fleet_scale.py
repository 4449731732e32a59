"""Issue 4 target (c): synthetic fleets from 1k to 100k GPUs, time, peak memory and gap by size.

Each size runs in a fresh process (so peak RSS is per size) through ``capplan.placement.planner.solve``,
which validates the plan with the independent validator. Prints Markdown rows, writes a JSON
file of the results and a log-log PNG plot (matplotlib, Agg)::

    python benchmarks/fleet_scale.py --gpus 1000 3000 10000 30000 100000 --time-limit 120 \\
        --out docs/benchmarks-fleet-scale.png

The instance generator is :func:`fleet_bench.synthetic` (H100/A100, 8 GPUs per node, 16 nodes
per rack, 8 racks per block, two replicas per GPU: gangs of 8-512 GPUs, MIG, shares, whole GPUs).

MIG packing (issue 15): each row also gives the GPUs (and nodes) the plan's MIG instances hold and
a lower bound on the GPUs those same instances need, per GPU model: the pattern LP "fewest GPUs
whose layouts cover the instances of every profile", over the valid layouts enumerated here from
the catalog's profiles (non-overlapping memory slices at allowed starts, counts, compute slices),
written without the planner's code (:func:`mig_layouts`, :func:`mig_lower_bound`).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).parent))

if TYPE_CHECKING:
    from capplan.model.catalog import GpuModel
    from capplan.model.plan import Plan
    from capplan.model.problem import Problem


def mig_layouts(model: GpuModel) -> list[dict[str, int]]:
    """Every valid set of MIG instances on one GPU of ``model``, as profile -> count (maximal and not)."""
    places = sorted(((pr.name, s, ((1 << pr.memory_slices) - 1) << s, pr.compute_slices, pr.max_count)
                     for pr in model.profiles for s in pr.starts), key=lambda x: (x[1], x[0]))
    found: set[tuple[tuple[str, int], ...]] = set()

    def walk(k: int, used: int, compute: int, counts: dict[str, int]) -> None:
        found.add(tuple(sorted(counts.items())))
        for j in range(k, len(places)):
            name, _, mask, c, most = places[j]
            if used & mask or compute + c > model.compute_slices or counts.get(name, 0) >= most:
                continue
            if model.homogeneous and any(x != name for x in counts):
                continue
            walk(j + 1, used | mask, compute + c, {**counts, name: counts.get(name, 0) + 1})

    walk(0, 0, 0, {})
    return [dict(x) for x in found if x]


def mig_lower_bound(model: GpuModel, instances: Counter[str]) -> float:
    """Fewest GPUs of ``model`` whose valid layouts hold ``instances`` (LP relaxation, rounded up)."""
    from scipy.optimize import linprog

    names = sorted(instances)
    if not names:
        return 0.0
    lays = [lay for lay in mig_layouts(model) if any(lay.get(x, 0) for x in names)]
    a = [[-float(lay.get(x, 0)) for lay in lays] for x in names]
    res = linprog([1.0] * len(lays), A_ub=a, b_ub=[-float(instances[x]) for x in names], bounds=(0, None),
                  method="highs")
    assert res.status == 0, res.message
    return float(math.ceil(res.fun - 1e-6))


def mig_report(p: Problem, plan: Plan) -> dict[str, Any]:
    """GPUs and nodes holding the plan's MIG instances per model, and the LP lower bound per model."""
    model_of = {n.name: p.catalog.get(n.gpu_model).name for n in p.cluster.nodes if n.gpu_model}
    gpus: dict[str, set[tuple[str, int]]] = {}
    nodes: dict[str, set[str]] = {}
    inst: dict[str, Counter[str]] = {}
    for a in plan.assignments:
        if a.mig is None:
            continue
        m = model_of[a.node]
        gpus.setdefault(m, set()).add((a.node, a.gpus[0]))
        nodes.setdefault(m, set()).add(a.node)
        inst.setdefault(m, Counter())[a.mig.profile] += 1
    per = {m: {"gpus": len(gpus[m]), "nodes": len(nodes[m]),
               "lp_gpus": mig_lower_bound(p.catalog.get(m), inst[m]), "instances": dict(inst[m])} for m in sorted(gpus)}
    return {"per_model": per, "gpus": sum(x["gpus"] for x in per.values()),
            "nodes": sum(x["nodes"] for x in per.values()), "lp_gpus": sum(x["lp_gpus"] for x in per.values())}


def run_one(gpus: int, strategy: str, time_limit: float) -> dict[str, Any]:
    """Build, solve (validated) and measure one size in this process."""
    from fleet_bench import synthetic

    from capplan.placement.strategies import STRATEGIES, loaded

    loaded(STRATEGIES[strategy])  # strategy imports outside the timing
    from capplan.io.scenario import problem_from_data
    from capplan.model.catalog import load_catalog
    from capplan.placement import PlanOptions, solve

    t = time.perf_counter()
    p = problem_from_data(synthetic(gpus), load_catalog())
    build = time.perf_counter() - t
    t, cpu = time.perf_counter(), time.process_time()
    plan = solve(p, strategy, PlanOptions(time_limit=time_limit))
    total, cpu = time.perf_counter() - t, time.process_time() - cpu
    peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024, 3)
    gaps = [round((b - o) / b, 5) if b > 0 else 0.0 for o, b in zip(plan.objective, plan.bound, strict=True)]
    return {"gpus": gpus, "nodes": len(p.cluster.nodes), "replicas": sum(w.replicas for w in p.workloads),
            "placed": len(plan.assignments), "strategy": strategy, "status": plan.status, "gap": plan.gap,
            "objective": list(plan.objective), "bound": list(plan.bound), "priority_gaps": gaps,
            "solve_s": plan.solve_seconds, "bound_s": plan.metrics.get("bound_seconds"),
            "total_s": round(total, 2), "total_cpu_s": round(cpu, 2), "build_s": round(build, 2), "peak_gib": peak,
            "mig": mig_report(p, plan)}


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    """Log-log plot of seconds (solve and with validation) against GPUs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["gpus"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(x, [r["total_s"] for r in rows], "o-", label="solve + validation")
    ax.loglog(x, [r["solve_s"] for r in rows], "s--", label="heuristic + bound")
    ref = rows[0]["total_s"]
    ax.loglog(x, [ref * g / x[0] for g in x], ":", color="grey", label="linear from the first point")
    ax.axhline(120, color="red", lw=0.8, label="120 s target")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("seconds")
    ax.set_title("capplan heuristic on synthetic fleets (2 cores)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main() -> None:
    """Command line entry."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, nargs="+", default=[1000, 3000, 10000, 30000, 100000])
    ap.add_argument("--strategy", default="heuristic")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--out", type=Path, default=Path("docs/benchmarks-fleet-scale.png"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run one size, print JSON
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run_one(a.one, a.strategy, a.time_limit)))
        return
    rows: list[dict[str, Any]] = []
    print("| GPUs | nodes | replicas | placed | status | gap | gap per priority | MIG GPUs / LP bound | MIG nodes "
          "| solve s | total s | total CPU s | build s | peak GiB | slope |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for g in a.gpus:
        res = subprocess.run([sys.executable, __file__, "--one", str(g), "--strategy", a.strategy,
                              "--time-limit", str(a.time_limit)], capture_output=True, text=True, check=True)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        slope = (f"{math.log(r['total_s'] / rows[-1]['total_s']) / math.log(g / rows[-1]['gpus']):.2f}"
                 if rows else "")
        rows.append(r)
        mig = r["mig"]
        pg = ", ".join(f"{x:.4f}" for x in r["priority_gaps"])
        print(f"| {g} | {r['nodes']} | {r['replicas']} | {r['placed']} | {r['status']} | {r['gap']:.4f} | {pg} | "
              f"{mig['gpus']} / {mig['lp_gpus']:.0f} | {mig['nodes']} | "
              f"{r['solve_s']:.1f} | {r['total_s']:.1f} | {r['total_cpu_s']:.1f} | {r['build_s']:.1f} | "
              f"{r['peak_gib']:.2f} | {slope} |",
              flush=True)
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    plot(rows, a.out)


if __name__ == "__main__":
    main()
