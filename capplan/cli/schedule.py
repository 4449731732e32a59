"""``capplan schedule``: place workloads in space and time over a horizon.

Exit codes as for ``plan``: 0 a schedule was written; 3 it was written but a guaranteed workload
cannot start at its release or meet its deadline; 2 bad input (nothing written); 1 internal error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from capplan.cli import common, console
from capplan.cli.common import EXIT_GUARANTEE, EXIT_OK, add_catalog_option
from capplan.model.errors import InputError


def _time(text: str) -> str:
    """An argparse type: a time such as 90s, 15m, 2h, 3d or integer seconds (checked here)."""
    from capplan.model.timing import parse_seconds

    try:
        value = parse_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return text


#: Seconds the sampled simulations leave for writing the schedule.
WRITE_KEEP = 0.5


def _samples(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--samples is a whole number 0..1000, got {text!r}") from None
    if not 0 <= k <= 1000:
        raise argparse.ArgumentTypeError(f"--samples is a whole number 0..1000, got {text!r}")
    return k


def add_parser(sub: Any) -> None:
    """Register ``capplan schedule``."""
    p = sub.add_parser("schedule", help="place workloads in space and time over a horizon; JSON schedule")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("-o", "--output", metavar="SCHEDULE.json", help="write the JSON schedule here (atomically)")
    p.add_argument("--horizon", type=_time, default=None,
                   help="time horizon, e.g. 24h or 7d (default: the scenario's schedule.horizon, else 7d)")
    p.add_argument("--step", type=_time, default=None,
                   help="grid of start times, e.g. 1m (default: the scenario's schedule.step, else 1m)")
    p.add_argument("--time-limit", type=common.seconds, default=60.0, metavar="S", help="seconds (default 60)")
    p.add_argument("--strategy", choices=("auto", "cpsat", "heuristic"), default="auto",
                   help="auto (exact model when it covers the problem and it is small), cpsat or heuristic "
                        "(default auto)")
    p.add_argument("--policy", choices=("optimal", "kueue"), default="optimal",
                   help="optimal (default): optimise; kueue: simulate Kueue's admission (queueing strategy, quotas, "
                        "topology) to see what Kueue will do")
    p.add_argument("--duration-spread", action="append", default=[], metavar="[QUEUE=]SIGMA",
                   help="with --policy kueue and --samples: the lognormal spread of the believed run times, per "
                        "ClusterQueue or for all (0..3; repeatable)")
    p.add_argument("--samples", type=_samples, default=0, metavar="K",
                   help="with --policy kueue: also K simulations with run times drawn from the spread; each "
                        "workload's median start goes to metrics.kueue_eta_s, which export kueue-eta uses "
                        "(default 0: none)")
    p.add_argument("--seed", type=common.seed, default=0, help="random seed (default 0)")
    p.add_argument("--workers", type=common.workers, default=1, help="parallel solver workers (default 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="only the one-line summary on stderr")
    add_catalog_option(p)
    p.set_defaults(func=run)


def summary(sch: Any) -> str:
    """A readable summary of a schedule (per-priority work, waits, what does not run)."""
    from capplan.model.timing import describe_seconds, format_seconds

    simulated = sch.metrics.get("policy") == "kueue"  # a simulation of Kueue's admission: no search, no gap
    if simulated:
        lines = [f"capplan schedule (kueue): Kueue's admission simulated, not optimised; status {sch.status}, "
                 f"{sch.solve_seconds:.2f}s, horizon {format_seconds(sch.horizon_s)}"]
    else:
        lines = [f"capplan schedule ({sch.strategy}): status {sch.status}, {sch.solve_seconds:.2f}s, "
                 f"gap {sch.gap:.2%}, horizon {format_seconds(sch.horizon_s)}"]
    for q, obj, bnd in zip(sch.priorities, sch.objective, sch.bound, strict=True):
        what = f"no schedule does more than {bnd:g}" if simulated else f"bound {bnd:g}"
        lines.append(f"  priority {q:>6}: {obj:g} GPU-hours of work done ({what})")
    lines.append(f"  demand-weighted wait: {sch.wait_gpu_h:g} GPU-hours")
    if sch.wait_replica_s is not None:
        lines.append(f"  unweighted wait: {sch.wait_replica_s / 3600:g} replica-hours (CPU-only pods too)")
    for row in sch.workloads:
        if row.reason:
            lines.append(f"  {row.name}: {row.reason}")
        elif row.expected_end_s is not None:
            lines.append(f"  {row.name}: expected end {describe_seconds(row.expected_end_s)} (duration / goodput under "
                         "interruptions)")
    shown = {row.name for row in sch.workloads if row.reason}
    for u in sch.unscheduled:
        if u.workload not in shown:
            lines.append(f"  unscheduled {u.workload} x{len(u.replicas)}: {u.reason}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``capplan schedule``; exit code (see the module docstring). ``--time-limit`` bounds the whole
    command: its deadline starts here (loading and writing count) and is handed to ``schedule``."""
    from capplan.model.deadline import Deadline

    deadline = Deadline.start(args.time_limit)
    from capplan.cli.kueue import duration_spread
    from capplan.io.files import write_text_atomic
    from capplan.io.scenario import load_scenario
    from capplan.placement import PlanOptions
    from capplan.placement.schedule import schedule

    spreads = dict(duration_spread(x) for x in args.duration_spread)
    if (args.samples or spreads) and args.policy != "kueue":
        raise InputError("--samples" if args.samples else "--duration-spread",
                         "estimates under a run-time spread simulate Kueue: add --policy kueue")
    if spreads and not args.samples:
        raise InputError("--duration-spread", "is used by the sampled simulations: add --samples K (e.g. 16)")
    problem = load_scenario(args.scenario, args.catalog)
    opts = PlanOptions(time_limit=args.time_limit, deadline=deadline, seed=args.seed, workers=args.workers)
    # the base simulation and the samples share the limit, the samples at most half of it
    first = deadline.less(deadline.remaining() / 2) if args.samples else deadline
    sch = schedule(problem, args.strategy, replace(opts, deadline=first), horizon=args.horizon, step=args.step,
                   policy=args.policy)
    if args.samples:
        from capplan.placement.schedule.eta import median_starts

        starts, ran = median_starts(problem, sch.horizon_s, sch.step_s, spreads, args.samples, args.seed,
                                    deadline.less(WRITE_KEEP))
        sch = sch.model_copy(update={"metrics": {**sch.metrics, "kueue_eta_s": starts, "kueue_eta": {
            "samples": ran, "asked": args.samples, "spreads": spreads, "seed": args.seed}}})
    text = sch.to_json()
    if args.output:
        write_text_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    text = summary(sch)
    console.say(text.splitlines()[0] if args.quiet else text)
    return EXIT_GUARANTEE if sch.status == "infeasible" else EXIT_OK
