"""Micro-benchmarks of the foundation's hot paths: loading, greedy planning and validation.

Run: ``python benchmarks/micro_bench.py [--repeat 5]``. Prints a Markdown table of medians (seconds) and ratios;
results are recorded in docs/benchmarks-foundation.md. Needs ../shared/data/alibaba-gpu-v2023 for the trace rows.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from capplan.io.alibaba import load_alibaba
from capplan.io.scenario import load_scenario
from capplan.model.problem import Problem
from capplan.model.validate import check_plan
from capplan.placement.core.options import PlanOptions
from capplan.placement.greedy import plan_greedy

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
    cases: list[tuple[str, Callable[[], Problem]]] = [
        (name, partial(load_scenario, REPO / "models" / "examples" / f"{name}.yaml"))
        for name in ("mixed-fleet", "mig-inference", "training-cluster")]
    if TRACE.exists():
        cases.append(("alibaba default (1213 nodes, 8152 pods)", partial(
            load_alibaba, TRACE / "openb_node_list_gpu_node.csv", TRACE / "openb_pod_list_default.csv")))
    for name, load in cases:
        p = load()
        plan = plan_greedy(p, PlanOptions())
        rows.append((name, median_time(load, args.repeat), median_time(partial(plan_greedy, p, PlanOptions()),
                                                                       args.repeat),
                     median_time(partial(check_plan, p, plan), args.repeat), plan.metrics["allocation_pct"]))
    print("| instance | load s | greedy s | validate s | greedy/validate | allocation % |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, t_load, greedy, val, alloc in rows:
        print(f"| {name} | {t_load:.3f} | {greedy:.3f} | {val:.3f} | {greedy / val:.1f} | {alloc:.2f} |")


if __name__ == "__main__":
    main()
