"""What ``plan`` tells a person and a dashboard once the plan is written.

- stderr: the summary (per priority, allocation, unpriced GPUs, unplaced work grouped by cause:
  the ten largest causes, then ``... N more causes, see PLAN.json``); with ``-q`` only its first
  line, the one-line headline;
- ``--summary-json FILE``: the same facts as one JSON object (docs/formats.md, "Run summary").
"""

from __future__ import annotations

import json
import logging
from typing import Any

from capplan.cli import console
from capplan.io.files import write_text_atomic
from capplan.io.report.prices import catalog_prices, unpriced_gpus, unpriced_text
from capplan.model.plan import Plan
from capplan.model.problem import Problem
from capplan.placement.core.summary import Cause, gap_text, group_unplaced, plan_gaps, summary_text

log = logging.getLogger("capplan")
#: Version of the ``--summary-json`` layout (a public format).
SUMMARY_FORMAT = 1


def warn_time_fields(p: Problem) -> None:
    """One warning when workloads carry time fields that ``plan`` (one instant) does not use."""
    timed = [w.name for w in p.workloads if w.duration is not None or w.deadline is not None or w.release]
    if timed:
        more = f" and {len(timed) - 3} more" if len(timed) > 3 else ""
        log.warning("%d workload(s) have release/duration/deadline (%s%s); `capplan plan` places them at one "
                    "instant and ignores those fields: use `capplan schedule` to plan over time",
                    len(timed), ", ".join(timed[:3]), more)


def headline(p: Problem, plan: Plan) -> str:
    """The one-line summary (also what ``-q`` keeps)."""
    m = plan.metrics
    unplaced = sum(len(u.replicas) for u in plan.unplaced)
    total = int(m.get("replicas_total", sum(w.replicas for w in p.workloads)))
    return (f"capplan {plan.strategy}: status {plan.status}, {plan.solve_seconds:.2f}s, {gap_text(plan)}; "
            f"{total - unplaced}/{total} replicas placed, {m.get('gpus_allocated', 0):g} of "
            f"{m.get('gpus_total', 0)} GPUs allocated ({m.get('allocation_pct', 0):.2f}%)"
            + (f", {unplaced} unplaced" if unplaced else ""))


def print_summary(p: Problem, plan: Plan, quiet: bool, output: str | None) -> None:
    """The summary on stderr: the headline alone with ``quiet``."""
    if quiet:
        console.say(headline(p, plan))
        return
    hint = output or "the plan's `unplaced`"
    lines = summary_text(p, plan, more_hint=hint).splitlines()
    lines[0] = headline(p, plan)
    unpriced = unpriced_text(*unpriced_gpus(p, catalog_prices(p.catalog)))
    if unpriced:
        lines.insert(2 + len(plan.priorities), f"  {unpriced} (costs count them at 0)")
    console.say("\n".join(lines))


def gaps_per_priority(plan: Plan) -> list[float] | None:
    """The plan's ``gaps`` (relative gap per priority, highest first; recomputed for an older plan file
    without them), None when the plan gives no per-priority bound."""
    return list(plan_gaps(plan)) or None


def _cause(c: Cause) -> dict[str, Any]:
    return {"family": c.family, "reason": c.reason, "replicas": c.replicas, "workloads": c.workloads,
            "examples": list(c.names[:5])}


def summary_data(p: Problem, plan: Plan, exit_code: int, scenario: str, output: str | None) -> dict[str, Any]:
    """The ``--summary-json`` object of a plan (docs/formats.md, "Run summary")."""
    m = plan.metrics
    causes = group_unplaced((u.workload, len(u.replicas), u.reason) for u in plan.unplaced)
    count, models = unpriced_gpus(p, catalog_prices(p.catalog))
    return {
        "format_version": SUMMARY_FORMAT, "command": "plan", "scenario": scenario, "output": output,
        "status": plan.status, "exit_code": exit_code, "strategy": plan.strategy,
        "wall_seconds": round(console.elapsed(), 3), "solve_seconds": plan.solve_seconds,
        "priorities": list(plan.priorities), "objective": list(plan.objective), "bound": list(plan.bound),
        "gap": plan.gap, "gaps": gaps_per_priority(plan),
        "cut_by_time_limit": bool(plan.metrics.get("cut_by_time_limit", False)),
        "allocation": {k: m.get(k) for k in ("gpus_total", "gpus_allocated", "allocation_pct", "cpu_allocation_pct",
                                             "replicas_total", "replicas_placed")},
        "unplaced": {"replicas": sum(c.replicas for c in causes), "workloads": len(plan.unplaced),
                     "by_reason": [_cause(c) for c in causes]},
        "unpriced": {"gpus": count, "models": models},
        "evictions": len(plan.evictions), "migrations": len(plan.migrations),
        "gpus_reconfigured": m.get("gpus_reconfigured", 0), "nodes_to_drain": list(m.get("nodes_to_drain", [])),
        "running_breaks": list(m.get("running_breaks", [])),
    }


def write_summary_json(path: str, data: dict[str, Any]) -> None:
    """Write the run summary atomically."""
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
