"""``capplan reserve PLANFILE -o DIR``: plan orders and reservations.

Exit codes: 0 plan written and every guaranteed tier met; 3 plan written but a guaranteed tier
cannot be met (the report and ``plan.json`` name the period, site and binding constraint);
2 bad input (nothing written); 1 internal error or no solution within the time limit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from capplan.cli import common
from capplan.cli.common import add_catalog_option
from capplan.model.errors import InputError

# Solver, report and plotting modules (PuLP, highspy, matplotlib) are imported inside `run`,
# so that registering the sub-command costs nothing on other `capplan` commands.

EXIT_OK, EXIT_INTERNAL, EXIT_INPUT, EXIT_UNMET = 0, 1, 2, 3


def add_parser(subparsers: Any) -> None:
    """Register the ``reserve`` sub-command on an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "reserve",
        help="plan GPU purchases and cloud reservations under uncertain demand",
        description="Two-stage stochastic MILP: what to order or reserve, and when. "
        "Writes DIR/plan.json, DIR/report.md, DIR/orders.csv, DIR/costs.csv, DIR/demand_vs_capacity.png and "
        "DIR/cost_breakdown.png.",
    )
    p.add_argument(
        "planfile", nargs="?", metavar="PLANFILE", help="planning file (YAML or JSON), see docs/reservations.md"
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--time-limit", type=common.seconds, default=60.0, metavar="S",
        help="time limit of the whole command, loading, solves, what-ifs and writing included (s, default 60)",
    )
    p.add_argument("--threads", type=common.workers, default=1, help="solver threads (default 1, deterministic)")
    p.add_argument("--gap", type=common.gap, default=1e-4, help="relative MIP gap (default 1e-4)")
    p.add_argument(
        "--method",
        choices=("auto", "extensive", "decomposition"),
        default="auto",
        help="extensive MILP, L-shaped decomposition, or auto (extensive for small scenario sets; on large ones the "
        "extensive form first for a share of the time, then the decomposition; default auto)",
    )
    p.add_argument(
        "--what-if",
        action="extend",
        nargs="+",
        default=[],
        metavar="K=V",
        help="re-solve with a change and report the delta, e.g. lead_time=+2 price.H200=-10%%; "
        "join changes with commas to combine them (arguments may come in any order)",
    )
    add_catalog_option(p)
    p.set_defaults(func=run, output_dir=True)


#: Time ``capplan reserve`` keeps for the report and the charts (capped by this share of the limit): about
#: 0.7 s of CPU for the two charts and the tables on the small example; times the command's wall seconds per
#: CPU second so far (:func:`~capplan.placement.core.budget.slowdown`) on a shared machine.
WRITE_SECONDS, WRITE_SHARE = 1.0, 0.25


def run(args: argparse.Namespace) -> int:
    """Run ``capplan reserve``; returns the exit code (raises :class:`InputError` for bad input).

    ``--time-limit`` bounds the whole command: its deadline starts here (loading, every solve, the
    what-ifs and writing count); the base solve and each what-if share what is left. An interrupt
    (SIGINT) writes nothing: the outputs are written together at the end, or not at all.
    """
    from capplan.model.deadline import Deadline

    deadline = Deadline.start(args.time_limit, "--time-limit")
    cpu_start = time.process_time()
    from dataclasses import replace

    from capplan.io.files import write_files_atomic
    from capplan.model.catalog import load_catalog
    from capplan.placement.core.budget import slowdown
    from capplan.reserve.check import check_plan
    from capplan.reserve.model import load_planning
    from capplan.reserve.planner import SolveError, solve
    from capplan.reserve.problem import build_problem
    from capplan.reserve.report import cost_breakdown_png, demand_capacity_png, markdown_report
    from capplan.reserve.solver import SolverSettings
    from capplan.reserve.tables import costs_csv, orders_csv
    from capplan.reserve.whatif import apply_deltas, parse_whatif, run_whatifs

    _take_planfile(args)
    for i, w in enumerate(args.what_if):
        parse_whatif(w, f"--what-if[{i}]")  # fail on syntax before solving
    catalog = load_catalog(args.catalog)
    pf = load_planning(args.planfile)
    problem = build_problem(pf, catalog)
    for i, w in enumerate(args.what_if):  # and on a change the planning file's bounds refuse
        build_problem(apply_deltas(pf, parse_whatif(w, f"--what-if[{i}]"), catalog), catalog)
    # the report's CPU seconds take longer when other processes share the core (as loading just did)
    keep = WRITE_SECONDS * slowdown(deadline.end - args.time_limit, cpu_start)
    solving = deadline.less(min(keep, WRITE_SHARE * args.time_limit))
    settings = SolverSettings(
        time_limit=args.time_limit, threads=args.threads, gap=args.gap, method=getattr(args, "method", "auto"),
        deadline=solving.share(1 / (1 + len(args.what_if))),
    )
    try:
        plan = solve(problem, settings)
        if args.what_if:
            plan = replace(plan, what_if=run_whatifs(pf, plan, args.what_if, replace(settings, deadline=solving),
                                                     catalog))
    except SolveError as exc:
        common.check_interrupt()  # the solve stopped because of Ctrl-C: "interrupted", not "no solution"
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    common.check_interrupt()  # HiGHS's callbacks swallow Ctrl-C: an interrupted solve's plan is not written
    violations = check_plan(problem, plan)
    if violations:
        print(
            "error: internal: the plan fails the independent check: " + "; ".join(violations[:5]),
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    files = {
        "plan.json": plan.to_json().encode(),
        "report.md": markdown_report(plan, args.planfile).encode(),
        "orders.csv": orders_csv(plan).encode(),
        "costs.csv": costs_csv(plan, pf.currency).encode(),
        "demand_vs_capacity.png": demand_capacity_png(plan),
        "cost_breakdown.png": cost_breakdown_png(plan, pf.currency),
    }
    out = Path(args.output)
    write_files_atomic(out, files, before_commit=common.check_interrupt)
    print(plan.summary(unmet=False))
    for w in plan.what_if:
        print(f"what-if {w['what_if']}: {w['status']}, total cost {w['cost_delta']['total']:+,.0f}")
    if not plan.guaranteed_met:  # each shortfall once, on stderr
        for u in plan.unmet[:5]:
            print(f"unmet: {u.line()}", file=sys.stderr)
        if len(plan.unmet) > 5:
            print(f"... and {len(plan.unmet) - 5} more, see {out / 'plan.json'}", file=sys.stderr)
        return EXIT_UNMET
    return EXIT_OK


def _take_planfile(args: argparse.Namespace) -> None:
    """Recover PLANFILE when ``--what-if K=V ...`` took it (``reserve --what-if K=V PLANFILE -o DIR``).

    ``--what-if`` takes one or more values, so argparse hands it every plain argument that
    follows; a what-if always has ``=``, so the last value without one is the planning file.

    Raises
    ------
    InputError
        When no planning file was given.
    """
    if args.planfile is None:
        loose = [i for i, w in enumerate(args.what_if) if "=" not in w]
        if loose:
            args.planfile = args.what_if.pop(loose[-1])
    if args.planfile is None:
        raise InputError("PLANFILE", "missing: give the planning file, e.g. capplan reserve plan.yaml -o out/")


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m capplan.cli.reserve reserve PLANFILE -o DIR``)."""
    parser = argparse.ArgumentParser(prog="capplan")
    sub = parser.add_subparsers(required=True)
    add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # pragma: no cover - last-resort guard
        print(f"error: internal: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
