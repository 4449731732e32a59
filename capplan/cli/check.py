"""``capplan validate`` (a plan or a schedule, by the independent validator) and ``capplan schema``.

``validate`` prints at most :data:`~capplan.model.errors.MAX_ERRORS` violations (then a count of
the rest), and first says so when the file does not belong to the scenario at all (most of the
workloads or nodes it names are not in it): 258 "unknown replica" lines help nobody.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from capplan.cli import console
from capplan.cli.common import EXIT_INVALID, EXIT_OK, add_catalog_option
from capplan.model.errors import MAX_ERRORS

SCHEMAS = ("plan", "schedule", "scenario")


def add_parser(sub: Any) -> None:
    """Register ``capplan validate`` and ``capplan schema``."""
    p = sub.add_parser("validate", help="check a plan or a schedule against a scenario with the independent validator")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("plan", metavar="FILE", help="plan or schedule JSON (`capplan plan` / `capplan schedule` output)")
    add_catalog_option(p)
    p.set_defaults(func=run_validate)

    p = sub.add_parser("schema", help="print the JSON Schema of the plan, schedule or scenario format")
    p.add_argument("format", nargs="?", choices=SCHEMAS, default="plan",
                   help="plan (default), schedule, or scenario (for editors' YAML language servers)")
    p.set_defaults(func=run_schema)


def foreign(problem: Any, result: Any) -> str:
    """A first line when ``result`` names workloads or nodes the scenario lacks (else ``''``)."""
    names = {a.workload for a in result.assignments} | {u.workload for u in getattr(result, "unplaced", ())}
    names |= {u.workload for u in getattr(result, "unscheduled", ())}
    nodes = {a.node for a in result.assignments}
    unknown_w = sorted(n for n in names if n not in problem.workload_index)
    known_nodes = {n.name for n in problem.cluster.nodes}
    unknown_n = sorted(n for n in nodes if n not in known_nodes)
    if not unknown_w and not unknown_n:
        return ""
    parts = []
    if unknown_w:
        parts.append(f"{len(unknown_w)} of its {len(names)} workloads (e.g. {unknown_w[0]})")
    if unknown_n:
        parts.append(f"{len(unknown_n)} of its {len(nodes)} nodes (e.g. {unknown_n[0]})")
    return (f"this file does not belong to the scenario: {' and '.join(parts)} are not in it; "
            "was it made for another scenario?")


def run_validate(args: argparse.Namespace) -> int:
    """Run ``capplan validate``: exit 0 valid, 4 violations, 2 bad input."""
    from capplan.io.files import load_yaml_or_json
    from capplan.io.report import is_schedule
    from capplan.io.scenario import load_scenario

    problem = load_scenario(args.scenario, args.catalog)
    data = load_yaml_or_json(args.plan, "plan")
    result: Any
    if is_schedule(data):
        from capplan.model.schedule import Schedule
        from capplan.model.validate_schedule import check_schedule

        result, what = Schedule.from_data(data), "schedule"
        violations = check_schedule(problem, result)
    else:
        from capplan.model.plan import Plan
        from capplan.model.validate import check_plan

        result, what = Plan.from_data(data), "plan"
        violations = check_plan(problem, result)
    if not violations:
        console.say(f"{what} is valid ({len(result.assignments)} assignments, status {result.status})")
        return EXIT_OK
    first = foreign(problem, result)
    if first:
        console.say(f"violation: {first}", "error")
    for v in violations[:MAX_ERRORS]:
        console.say(f"violation: {v}", "error")
    if len(violations) > MAX_ERRORS:
        console.say(f"... and {len(violations) - MAX_ERRORS} more violation(s)", "error")
    console.say(f"{what} is INVALID: {len(violations)} violation(s)", "error")
    return EXIT_INVALID


def run_schema(args: argparse.Namespace) -> int:
    """Print a JSON Schema."""
    schema: dict[str, Any]
    if args.format == "schedule":
        from capplan.model.schedule import schedule_json_schema

        schema = schedule_json_schema()
    elif args.format == "scenario":
        from capplan.io.scenario_schema import scenario_json_schema

        schema = scenario_json_schema()
    else:
        from capplan.model.plan import json_schema

        schema = json_schema()
    sys.stdout.write(json.dumps(schema, indent=1) + "\n")
    return EXIT_OK
