"""Benchmark of the reservation planner: 24 monthly periods x 6 GPU models x 4 sites x N scenarios.

Usage::

    python benchmarks/reserve_bench.py --scenarios 10 50 100 200 --threads 2 --time-limit 60

Prints one Markdown table row per scenario count (build time, solve time, sizes, status, gap
to the best bound is HiGHS's own) and checks each plan with the independent checker.
The instance is generated from a fixed seed, so runs are comparable.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time
from typing import Any

import numpy as np

from capplan.reserve.check import check_plan
from capplan.reserve.model import parse_planning
from capplan.reserve.planner import SolveError, solve
from capplan.reserve.problem import build_problem
from capplan.reserve.solver import SolverSettings

MODELS = ["A100-80GB", "H100-SXM5", "H100-NVL", "H200", "B200", "MI300X"]
COST = {
    "A100-80GB": 12000,
    "H100-SXM5": 25000,
    "H100-NVL": 22000,
    "H200": 32000,
    "B200": 45000,
    "MI300X": 20000,
}
LEAD = {"A100-80GB": 2, "H100-SXM5": 3, "H100-NVL": 3, "H200": 5, "B200": 7, "MI300X": 4}
SPEED = {"A100-80GB": 0.5, "H100-SXM5": 1.0, "H100-NVL": 0.9, "H200": 1.4, "B200": 2.2, "MI300X": 1.2}


def instance(scenarios: int, periods: int = 24, seed: int = 7) -> dict[str, Any]:
    """The benchmark planning file as a dict (fixed seed)."""
    rng = np.random.default_rng(seed)
    sites = [
        {
            "name": f"site-{i + 1}",
            "power_kw": kw,
            "rack_units": ru,
            "max_installs_per_period": 256,
            "power_price_per_kwh": 0.1,
            "pue": 1.3,
        }
        for i, (kw, ru) in enumerate([(2500, 2400), (1800, 1600), (1200, 1200), (3000, 2800)])
    ]
    fleet = [
        {"site": "site-1", "model": "A100-80GB", "count": 512, "retire": "2027-10"},
        {"site": "site-2", "model": "H100-SXM5", "count": 768},
        {"site": "site-3", "model": "MI300X", "count": 256},
        {"site": "site-4", "model": "H100-SXM5", "count": 512, "retire": "2028-04"},
    ]
    classes = [
        {
            "name": "pretrain",
            "tier": "prod",
            "gang_size": 64,
            "topology": "site",
            "models": {"H100-SXM5": 1.0, "H200": 1.4, "B200": 2.2},
        },
        {"name": "inference", "tier": "serve", "models": {m: SPEED[m] for m in MODELS}},
        {
            "name": "finetune",
            "tier": "batch",
            "gang_size": 8,
            "models": {"A100-80GB": 0.5, "H100-SXM5": 1.0, "H100-NVL": 0.9, "MI300X": 1.2},
        },
        {"name": "research", "tier": "batch", "models": {"A100-80GB": 0.5, "H100-NVL": 0.9, "MI300X": 1.2}},
    ]
    base = {"pretrain": 700, "inference": 500, "finetune": 300, "research": 200}
    growth = {"pretrain": 0.035, "inference": 0.05, "finetune": 0.03, "research": 0.02}
    scen = []
    for w in range(scenarios):
        dem = {}
        for c, b in base.items():
            g = growth[c] * rng.lognormal(0, 0.4)
            shocks = np.cumsum(rng.normal(0, 0.03, periods))
            path = b * np.exp(g * np.arange(periods) + shocks)
            dem[c] = [round(float(x), 1) for x in path]
        scen.append({"name": f"s{w:03d}", "probability": 1 / scenarios, "demand": dem})
    scen[-1]["probability"] = 1 - (scenarios - 1) / scenarios
    return {
        "name": f"bench-{scenarios}",
        "horizon": {"start": "2027-01", "periods": periods, "period": "month"},
        "sites": sites,
        "fleet": fleet,
        "in_flight": [{"site": "site-4", "model": "H200", "count": 256, "arrival": "2027-04"}],
        "tiers": [
            {"name": "prod", "kind": "guaranteed"},
            {"name": "serve", "kind": "guaranteed", "service_level": 0.95, "penalty_per_gpu_hour": 12},
            {
                "name": "batch",
                "kind": "flexible",
                "penalty_per_gpu_hour": 6,
                "max_deferral_periods": 2,
                "deferral_penalty_per_gpu_hour": 0.8,
            },
        ],
        "classes": classes,
        "options": {
            "purchases": [
                {
                    "model": m,
                    "lead_time": LEAD[m],
                    "unit_cost": COST[m],
                    "lot_size": 8,
                    "supply_cap": 512,
                    "depreciation_periods": 48,
                }
                for m in MODELS
            ],
            "reserved": [
                {"model": "H100-SXM5", "term_periods": 12, "price_per_gpu_hour": 2.2, "block_gpus": 64},
                {"model": "H200", "term_periods": 12, "price_per_gpu_hour": 3.0, "block_gpus": 64},
            ],
            "calendar_blocks": [
                {
                    "model": "H200",
                    "gpus_per_block": 64,
                    "duration_periods": 1,
                    "max_blocks": 6,
                    "price_per_gpu_hour": 3.6,
                }
            ],
            "on_demand": [
                {"model": "H100-SXM5", "price_per_gpu_hour": 4.5, "max_gpus": 512},
                {"model": "H200", "price_per_gpu_hour": 6.0, "max_gpus": 256},
                {"model": "A100-80GB", "price_per_gpu_hour": 2.4, "max_gpus": 512},
            ],
            "spot": [
                {"model": "H100-SXM5", "price_per_gpu_hour": 1.8, "interruption_rate": 0.15, "max_gpus": 256},
                {"model": "A100-80GB", "price_per_gpu_hour": 0.9, "interruption_rate": 0.1, "max_gpus": 256},
            ],
        },
        "scenarios": scen,
    }


def run(n: int, settings: SolverSettings) -> dict[str, Any]:
    """Solve the instance with ``n`` scenarios; return timing and size figures."""
    t0 = time.perf_counter()
    pr = build_problem(parse_planning(instance(n)))
    try:
        plan = solve(pr, settings)
    except SolveError as exc:
        return {
            "scenarios": n,
            "total_s": round(time.perf_counter() - t0, 1),
            "solve_s": "-",
            "status": str(exc),
            "plan": "-",
            "vars": "-",
            "cons": "-",
            "ints": "-",
            "method": settings.method,
            "gap": "-",
            "cost": float("nan"),
            "orders": 0,
            "check": "-",
        }
    total = time.perf_counter() - t0
    bad = check_plan(pr, plan)
    sv = plan.solver
    return {
        "scenarios": n,
        "total_s": round(total, 1),
        "solve_s": sv["runtime_s"],
        "status": sv["status"],
        "plan": plan.status,
        "vars": sv["variables"],
        "cons": sv["constraints"],
        "ints": sv["integer_variables"],
        "method": sv["method"],
        "gap": "-" if sv["gap"] is None else f"{100 * sv['gap']:.2f} %",
        "cost": plan.costs["total"],
        "orders": len(plan.orders),
        "check": "ok" if not bad else bad[0],
    }


def main() -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", type=int, nargs="+", default=[10, 50, 100, 200])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--gap", type=float, default=1e-3)
    ap.add_argument("--method", choices=("auto", "extensive", "decomposition"), default="auto")
    a = ap.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"commit {commit}, {platform.processor() or platform.machine()}, threads {a.threads}, "
        f"time limit {a.time_limit} s, gap {a.gap}, method {a.method}"
    )
    print(
        "| scenarios | wall total (s) | solve (s) | solver status | plan | variables | constraints "
        "| integers | method | proven gap "
        "| expected cost | orders | check |"
    )
    print("|---:|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---|")
    for n in a.scenarios:
        r = run(n, SolverSettings(time_limit=a.time_limit, threads=a.threads, gap=a.gap, method=a.method))
        print(
            f"| {r['scenarios']} | {r['total_s']} | {r['solve_s']} | {r['status']} | {r['plan']} "
            f"| {r['vars']} "
            f"| {r['cons']} | {r['ints']} | {r['method']} | {r['gap']} | {r['cost']:,.0f} | {r['orders']} "
            f"| {r['check']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
