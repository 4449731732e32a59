"""``capplan report SCENARIO PLAN [-o report.html]`` and ``capplan show SCENARIO PLAN``.

``report`` writes one self-contained HTML page (no network needed) drawing the plan or schedule:
the cluster by level with every GPU and MIG slice, idle and stranded capacity, placed vs bound per
priority, utilisation by GPU model, power per rack, the unplaced workloads with the nodes that came
closest, and cost per hour, per month and per tenant; a schedule adds a timeline. ``show`` prints
the same plan as text, one character per GPU. Exit codes: 0 done, 2 bad input (nothing written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capplan.cli.common import EXIT_OK, add_catalog_option, add_prices_option

if TYPE_CHECKING:
    from capplan.io.report import Prices, Timeline
    from capplan.model.plan import Plan
    from capplan.model.problem import Problem


def write_report(problem: Problem, plan: Plan, output: str | Path, prices: Prices | None,
                 timeline: Timeline | None = None, compare: dict[str, Any] | None = None) -> None:
    """Build the HTML report of ``plan`` and write it to ``output`` atomically (catalog prices when None)."""
    from capplan.io.files import write_text_atomic
    from capplan.io.report import build_report, render_html

    write_text_atomic(output, render_html(build_report(problem, plan, prices, timeline, compare=compare)))


def _compare(args: argparse.Namespace, problem: Problem, plan: Plan, timeline: Timeline | None) -> dict[str, Any]:
    """The ``--compare`` schedule beside the main one (both must be schedules of the scenario)."""
    from capplan.io.files import load_yaml_or_json
    from capplan.io.report import check_matches, read_result
    from capplan.io.report.compare import compare_schedules
    from capplan.model.errors import InputError

    other_data = load_yaml_or_json(args.compare, "schedule to compare")
    other_plan, other = read_result(other_data)
    if timeline is None or other is None:
        raise InputError("--compare", "compares two schedules (capplan schedule output), not plans")
    check_matches(problem, other_plan, other)
    check_schedule_file(problem, other_data, "--compare")
    return compare_schedules(problem, timeline, other, (plan.strategy, other_plan.strategy))


def _load(args: argparse.Namespace) -> tuple[Problem, Plan, Timeline | None]:
    from capplan.io.files import load_yaml_or_json
    from capplan.io.report import check_matches, read_result
    from capplan.io.scenario import load_scenario

    problem = load_scenario(args.scenario, args.catalog)
    data = load_yaml_or_json(args.plan, "plan")
    plan, timeline = read_result(data)
    check_matches(problem, plan, timeline)
    if timeline is not None:
        check_schedule_file(problem, data, "PLAN")
    return problem, plan, timeline


def check_schedule_file(problem: Problem, data: Any, field: str) -> None:
    """Refuse a schedule that breaks a rule of the full schedule validator (every instant, the horizon, the
    summary, the insertion check), naming the first rule broken."""
    from capplan.model.errors import InputError
    from capplan.model.schedule import Schedule
    from capplan.model.validate_schedule import check_schedule

    sch = Schedule.from_data(data)
    violations = check_schedule(problem, sch)
    if violations:
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise InputError(field, f"the schedule breaks a rule: {violations[0]}{more}; check both files with "
                                "`capplan validate`")


def run_report(args: argparse.Namespace) -> int:
    """Run ``capplan report``; return the exit code."""
    from capplan.io.report import load_prices

    problem, plan, timeline = _load(args)
    compare = _compare(args, problem, plan, timeline) if args.compare else None
    write_report(problem, plan, args.output, load_prices(args.prices, problem.catalog), timeline, compare)
    print(f"wrote {args.output} ({len(plan.assignments)} assignments"
          f"{', with timeline' if timeline else ''})", file=sys.stderr)
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    """Run ``capplan show``; return the exit code."""
    from capplan.io.report import build_report, load_prices, render_text

    problem, plan, timeline = _load(args)
    prices = load_prices(args.prices, problem.catalog)
    sys.stdout.write(render_text(build_report(problem, plan, prices, timeline), width=args.width))
    return EXIT_OK


def add_parser(subparsers: Any) -> None:
    """Add the ``report`` and ``show`` commands."""
    p = subparsers.add_parser("report", help="write a self-contained HTML view of a plan or schedule")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("plan", help="plan (or schedule) JSON written by `capplan plan` (or `capplan schedule`)")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    p.add_argument("--compare", metavar="SCHEDULE.json",
                   help="a second schedule of the scenario, drawn beside the first per workload (e.g. --policy kueue "
                        "against the optimum): starts under each and GPU-hours of waiting saved")
    add_prices_option(p)
    add_catalog_option(p)
    p.set_defaults(func=run_report)

    p = subparsers.add_parser("show", help="print a plan or schedule as text: per rack and node, one cell per GPU")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("plan", help="plan (or schedule) JSON")
    p.add_argument("--width", type=int, default=100, help="characters per line before GPUs wrap (default 100)")
    add_prices_option(p)
    add_catalog_option(p)
    p.set_defaults(func=run_show)
