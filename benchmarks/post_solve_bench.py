"""Issue 15 target 1: the steps around a solve on one fixed plan (validator, JSON text), by size.

Plans the scenario once with ``--strategy`` (validated), then times the independent validator
(:func:`capplan.model.validate.check_plan`) and :meth:`Plan.to_json` on that plan, ``--repeat``
times each, and prints the medians. Run it from two checkouts back to back to compare::

    python benchmarks/post_solve_bench.py --gpus 100000 --repeat 3
    python benchmarks/post_solve_bench.py --scenario /tmp/capplan-limits/fleet100k.json --plan PLAN.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    """Command line entry."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=100000, help="synthetic fleet size (fleet_bench.synthetic)")
    ap.add_argument("--scenario", help="a scenario file instead of the synthetic fleet")
    ap.add_argument("--strategy", default="heuristic")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plan", help="a plan file to time instead of solving (the same plan for every checkout)")
    a = ap.parse_args()
    from capplan.io.scenario import load_scenario, problem_from_data
    from capplan.model.catalog import load_catalog
    from capplan.model.validate import check_plan
    from capplan.placement import PlanOptions, solve

    if a.scenario:
        p = load_scenario(a.scenario)
    else:
        from fleet_bench import synthetic

        p = problem_from_data(synthetic(a.gpus), load_catalog())
    if a.plan:
        from capplan.model.plan import Plan

        plan = Plan.from_json(Path(a.plan).read_text())
    else:
        plan = solve(p, a.strategy, PlanOptions(time_limit=a.time_limit))
    val, js = [], []
    for _ in range(a.repeat):
        t = time.perf_counter()
        assert check_plan(p, plan) == []
        val.append(time.perf_counter() - t)
        t = time.perf_counter()
        plan.to_json()
        js.append(time.perf_counter() - t)
    print(f"assignments {len(plan.assignments)}: validate median {statistics.median(val):.2f} s "
          f"({', '.join(f'{x:.2f}' for x in val)}), to_json median {statistics.median(js):.2f} s "
          f"({', '.join(f'{x:.2f}' for x in js)})")


if __name__ == "__main__":
    main()
