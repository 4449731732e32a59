"""Micro-benchmarks of the foundation's hot paths: loading, greedy planning and validation.

Run: ``python benchmarks/micro_bench.py [--repeat 5]``. Prints a Markdown table of medians (seconds) and ratios;
results are recorded in docs/benchmarks-foundation.md. Needs ../shared/data/alibaba-gpu-v2023 for the trace rows.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from capplan.greedy import plan_greedy
from capplan.planner import PlanOptions
from capplan.scenario import load_scenario
from capplan.traces.alibaba import load_alibaba
from capplan.validate import check_plan

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "data" / "alibaba-gpu-v2023"


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median wall-clock seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for name in ("mixed-fleet", "mig-inference", "training-cluster"):
        path = REPO / "models" / "examples" / f"{name}.yaml"
        p = load_scenario(path)
        plan = plan_greedy(p, PlanOptions())
        rows.append((name, median_time(lambda: load_scenario(path), args.repeat),
                     median_time(lambda: plan_greedy(p, PlanOptions()), args.repeat),
                     median_time(lambda: check_plan(p, plan), args.repeat), plan.metrics["allocation_pct"]))
    if TRACE.exists():
        nodes, pods = TRACE / "openb_node_list_gpu_node.csv", TRACE / "openb_pod_list_default.csv"
        p = load_alibaba(nodes, pods)
        plan = plan_greedy(p, PlanOptions())
        rows.append(("alibaba default (1213 nodes, 8152 pods)", median_time(lambda: load_alibaba(nodes, pods), 1),
                     median_time(lambda: plan_greedy(p, PlanOptions()), max(1, args.repeat // 2)),
                     median_time(lambda: check_plan(p, plan), max(1, args.repeat // 2)), plan.metrics["allocation_pct"]))
    print("| instance | load s | greedy s | validate s | greedy/validate | allocation % |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, load, greedy, val, alloc in rows:
        print(f"| {name} | {load:.3f} | {greedy:.3f} | {val:.3f} | {greedy / val:.1f} | {alloc:.2f} |")


if __name__ == "__main__":
    main()
