"""Issue 4 target (c): synthetic fleets from 1k to 100k GPUs, time, peak memory and gap by size.

Each size runs in a fresh process (so peak RSS is per size) through ``capplan.placement.planner.solve``,
which validates the plan with the independent validator. Prints Markdown rows, writes a JSON
file of the results and a log-log PNG plot (matplotlib, Agg)::

    python benchmarks/fleet_scale.py --gpus 1000 3000 10000 30000 100000 --time-limit 120 \\
        --out docs/benchmarks-fleet-scale.png

The instance generator is :func:`fleet_bench.synthetic` (H100/A100, 8 GPUs per node, 16 nodes
per rack, 8 racks per block, two replicas per GPU: gangs of 8-512 GPUs, MIG, shares, whole GPUs).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


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
    t = time.perf_counter()
    plan = solve(p, strategy, PlanOptions(time_limit=time_limit))
    total = time.perf_counter() - t
    return {"gpus": gpus, "nodes": len(p.cluster.nodes), "replicas": sum(w.replicas for w in p.workloads),
            "placed": len(plan.assignments), "strategy": strategy, "status": plan.status, "gap": plan.gap,
            "objective": list(plan.objective), "bound": list(plan.bound), "solve_s": plan.solve_seconds,
            "total_s": round(total, 2), "build_s": round(build, 2),
            "peak_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024, 3)}


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
    print("| GPUs | nodes | replicas | placed | status | gap | solve s | total s | build s | peak GiB | slope |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for g in a.gpus:
        res = subprocess.run([sys.executable, __file__, "--one", str(g), "--strategy", a.strategy,
                              "--time-limit", str(a.time_limit)], capture_output=True, text=True, check=True)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        slope = (f"{math.log(r['total_s'] / rows[-1]['total_s']) / math.log(g / rows[-1]['gpus']):.2f}"
                 if rows else "")
        rows.append(r)
        print(f"| {g} | {r['nodes']} | {r['replicas']} | {r['placed']} | {r['status']} | {r['gap']:.4f} | "
              f"{r['solve_s']:.1f} | {r['total_s']:.1f} | {r['build_s']:.1f} | {r['peak_gib']:.2f} | {slope} |",
              flush=True)
    a.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    plot(rows, a.out)


if __name__ == "__main__":
    main()
