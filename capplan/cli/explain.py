"""``capplan explain SCENARIO WORKLOAD``: why one workload is not (fully) placed.

Prints the explanation on stdout (``--json`` for a JSON object). Exit codes: 0 the workload was
explained (placed or not), 2 bad input (unknown workload, bad scenario or option).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from capplan.cli import common
from capplan.cli.common import add_catalog_option
from capplan.model.errors import InputError, suggest


def run(args: argparse.Namespace) -> int:
    """Run the ``explain`` command; return the exit code."""
    from capplan.io.scenario import load_scenario
    from capplan.placement import solve
    from capplan.placement.core.options import PlanOptions
    from capplan.placement.cpsat.explain import explain_workload

    problem = load_scenario(args.scenario, args.catalog)
    if args.workload not in problem.workload_index:
        raise InputError(
            "WORKLOAD", f"unknown workload {args.workload!r}{suggest(args.workload, problem.workload_index)}"
        )
    opts = PlanOptions(
        time_limit=args.time_limit,
        seed=args.seed,
        workers=args.workers,
        allow_preemption=args.allow_preemption,
        allow_migration=args.allow_migration,
    )
    plan = solve(problem, "cpsat", opts)
    ex = explain_workload(problem, args.workload, plan, opts)
    if args.json:
        print(json.dumps(asdict(ex), indent=1))
    else:
        print(f"{ex.workload}: {ex.placed}/{ex.replicas} replicas placed")
        print(f"  {ex.message}")
        if ex.blocking:
            print(f"  blocking constraint families: {', '.join(ex.blocking)}")
    return 0


def add_parser(subparsers: Any) -> None:
    """Add the ``explain`` command."""
    p = subparsers.add_parser("explain", help="explain why one workload is not (fully) placed")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("workload", help="workload name")
    p.add_argument(
        "--time-limit",
        type=common.seconds,
        default=30.0,
        metavar="S",
        help="seconds for the plan and the re-solves together (default 30)",
    )
    p.add_argument("--seed", type=common.seed, default=0, help="random seed (default 0)")
    p.add_argument("--workers", type=common.workers, default=1, help="parallel solver workers (default 1)")
    p.add_argument("--allow-preemption", action="store_true", help="plan with preemption allowed")
    p.add_argument("--allow-migration", action="store_true", help="plan with migration allowed")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    add_catalog_option(p)
    p.set_defaults(func=run)
