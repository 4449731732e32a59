"""The ``capplan`` command line.

Exit codes (a public contract, see docs/cli.md): 0 success; 3 a plan was written but a
guaranteed workload could not be placed; 2 bad input (nothing written); 1 internal error;
4 ``validate`` found rule violations.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from types import FrameType

from capplan import __version__
from capplan.cli import alibaba, bench, common, explain, k8s, kueue, report, reserve, schedule, sweep
from capplan.cli.common import (
    EXIT_GUARANTEE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_OK,
    add_catalog_option,
    add_prices_option,
)
from capplan.io.files import check_output
from capplan.model.errors import InputError, PlanValidationError

log = logging.getLogger("capplan")


def _cmd_plan(args: argparse.Namespace) -> int:
    """``capplan plan``: ``--time-limit`` bounds the whole command (parse, solve, validate, write); the
    solve gets what is left after loading, less the expected cost of writing."""
    started = time.perf_counter()
    from capplan.io.files import write_text_atomic
    from capplan.io.scenario import load_scenario
    from capplan.placement import solve
    from capplan.placement.core.budget import WRITE_COST, reserve
    from capplan.placement.core.options import PlanOptions
    from capplan.placement.core.summary import summary_text
    from capplan.placement.planner import MIN_SOLVE_SECONDS

    problem = load_scenario(args.scenario, args.catalog)
    prices = None
    if args.report:
        from capplan.io.report import load_prices

        prices = load_prices(args.prices, problem.catalog)  # bad prices: exit 2 before any work
    elif args.prices:
        raise InputError("--prices", "only used with --report FILE")
    from capplan.cli.progress import stderr_progress

    left = args.time_limit - (time.perf_counter() - started) - reserve(problem, args.time_limit, WRITE_COST)
    opts = PlanOptions(time_limit=max(MIN_SOLVE_SECONDS, left), seed=args.seed,
                       allow_preemption=args.allow_preemption,
                       allow_migration=args.allow_migration, workers=args.workers,
                       progress=stderr_progress(quiet=args.quiet))
    log.info("scenario loaded at %.2f s; the solve gets %.2f s of the %g s limit",
             time.perf_counter() - started, opts.time_limit, args.time_limit)
    plan = solve(problem, args.strategy, opts)
    log.info("plan validated at %.2f s", time.perf_counter() - started)
    text = plan.to_json()
    if args.output:
        write_text_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    if args.report:
        report.write_report(problem, plan, args.report, prices)
    if not args.quiet:
        print(summary_text(problem, plan), file=sys.stderr)
    log.info("plan written at %.2f s", time.perf_counter() - started)
    return EXIT_GUARANTEE if plan.status == "infeasible" else EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    from capplan.io.files import load_yaml_or_json
    from capplan.io.scenario import load_scenario
    from capplan.model.plan import Plan
    from capplan.model.validate import check_plan

    problem = load_scenario(args.scenario, args.catalog)
    plan = Plan.from_data(load_yaml_or_json(args.plan, "plan"))
    violations = check_plan(problem, plan)
    for v in violations:
        print(f"violation: {v}", file=sys.stderr)
    if violations:
        print(f"plan is INVALID: {len(violations)} violation(s)", file=sys.stderr)
        return EXIT_INVALID
    print(f"plan is valid ({len(plan.assignments)} assignments, status {plan.status})", file=sys.stderr)
    return EXIT_OK


def _cmd_catalog(args: argparse.Namespace) -> int:
    from capplan.model.catalog import load_catalog

    cat = load_catalog(args.catalog)
    if args.model:
        m = cat.get(args.model, "MODEL")
        if args.json:
            print(m.model_dump_json(indent=1))
            return EXIT_OK
        price = "?" if m.price_per_gpu_hour is None else f"{m.price_per_gpu_hour:g}"
        print(f"{m.name} ({m.vendor}): {m.memory_gib or '?'} GiB, TDP {m.tdp_w or '?'} W, "
              f"partitioning {m.partitioning}, price {price} per GPU-hour")
        if m.aliases:
            print(f"  aliases: {', '.join(m.aliases)}")
        if m.profiles:
            print(f"  {m.compute_slices} compute slices, {m.memory_slices} memory slices"
                  + (", one mode per GPU" if m.homogeneous else ""))
            print(f"  {'profile':<12} {'compute':>7} {'mem.sl':>6} {'GiB':>6} {'max':>4}  starts")
            for p in m.profiles:
                print(f"  {p.name:<12} {p.compute_slices:>7} {p.memory_slices:>6} {p.memory_gib:>6g} "
                      f"{p.max_count:>4}  {list(p.starts)}")
        if m.source:
            print(f"  source: {m.source}")
        return EXIT_OK
    if args.json:
        print(json.dumps([m.model_dump(mode="json") for m in cat.models], indent=1))
        return EXIT_OK
    print(f"{'model':<16} {'vendor':<8} {'GiB':>6} {'TDP W':>6} {'$/GPU-h':>7}  partitioning / profiles")
    for m in cat.models:
        profs = ", ".join(p.name for p in m.profiles) if m.profiles else "-"
        mem = f"{m.memory_gib:g}" if m.memory_gib else "?"
        price = "?" if m.price_per_gpu_hour is None else f"{m.price_per_gpu_hour:.2f}"
        print(f"{m.name:<16} {m.vendor:<8} {mem:>6} {m.tdp_w or '?':>6} {price:>7}  {m.partitioning}: {profs}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from capplan.model.plan import json_schema

    print(json.dumps(json_schema(), indent=1))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``capplan`` command."""
    parser = argparse.ArgumentParser(prog="capplan", description="Optimization-based GPU capacity planning.")
    parser.add_argument("--version", action="version", version=f"capplan {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and details to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="place workloads on a cluster; JSON plan to stdout or -o")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("-o", "--output", help="write the JSON plan here (atomically) instead of stdout")
    p.add_argument("--strategy", default="auto", help="planner: auto (by size), greedy, ... (default auto)")
    p.add_argument("--time-limit", type=common.seconds, default=60.0, metavar="S", help="seconds (default 60)")
    p.add_argument("--seed", type=common.seed, default=0, help="random seed (default 0)")
    p.add_argument("--workers", type=common.workers, default=1, help="parallel solver workers (default 1)")
    p.add_argument("--allow-preemption", action="store_true",
                   help="let preemptible running replicas of lower priority be evicted")
    p.add_argument("--allow-migration", action="store_true", help="let migratable running replicas move")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    p.add_argument("--report", metavar="FILE", help="also write the plan's HTML report here (see `capplan report`)")
    add_prices_option(p)
    add_catalog_option(p)
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser("validate", help="check a plan against a scenario with the independent validator")
    p.add_argument("scenario")
    p.add_argument("plan")
    add_catalog_option(p)
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("catalog", help="list GPU models, or show one model's MIG profiles and placements")
    p.add_argument("model", nargs="?")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_catalog_option(p)
    p.set_defaults(func=_cmd_catalog)

    p = sub.add_parser("schema", help="print the JSON Schema of the plan format")
    p.set_defaults(func=_cmd_schema)

    imp = sub.add_parser("import", help="turn a trace or a cluster export into a scenario file")
    imp_sub = imp.add_subparsers(dest="source", required=True, metavar="SOURCE")
    for cmd in COMMANDS:
        cmd.add_parser(sub)
    for src in IMPORT_SOURCES:
        src.add_import_parser(imp_sub)
    for group in (sub, imp_sub):  # -v also after the command (SUPPRESS keeps the value given before it)
        for cmd_parser in group.choices.values():
            with contextlib.suppress(argparse.ArgumentError):  # the command has its own -v
                cmd_parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                        help="log progress and details to stderr")
    return parser


# The command modules, listed explicitly; each imports its heavy modules inside its ``run``.
COMMANDS = (schedule, explain, reserve, bench, k8s, sweep, report)
IMPORT_SOURCES = (alibaba, k8s, kueue)


class _Interrupt:
    """SIGINT handler: remembers the interrupt, so that an error it causes (a KeyboardInterrupt
    inside an extension module's import becomes an ImportError) still ends as "interrupted"."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        raise KeyboardInterrupt


def _interrupted() -> int:
    """Report the interrupt; return the exit code of the documented "interrupted" path.

    When the KeyboardInterrupt was raised inside Python code that an extension module ran (OR-Tools
    runs some through the C API), CPython marks it "unhandled" although capplan handled it, and at
    exit kills itself with SIGINT instead of returning the exit code; the mark is cleared here.
    """
    print("interrupted", file=sys.stderr)
    try:
        import ctypes

        ctypes.c_int.in_dll(ctypes.pythonapi, "_Py_UnhandledKeyboardInterrupt").value = 0
    except (ImportError, ValueError, AttributeError):  # another interpreter or version: nothing to clear
        pass
    return EXIT_INTERNAL


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output path that cannot be written before any work starts."""
    out = getattr(args, "output", None)
    if out and out != "-":
        check_output(out, "output", directory=getattr(args, "output_dir", False))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``capplan`` command; return the exit code."""
    interrupt = _Interrupt()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, interrupt)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                            format="capplan: %(message)s", stream=sys.stderr)
        _check_outputs(args)
        code: int = args.func(args)
        if interrupt.seen:  # the KeyboardInterrupt was swallowed (raised inside a weakref callback, say)
            return _interrupted()
        return code
    except InputError as exc:
        for line in exc.lines():
            print(f"error: {line}", file=sys.stderr)
        return EXIT_INPUT
    except PlanValidationError as exc:
        print(f"internal error: a planner produced an invalid plan (not written): {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        return _interrupted()
    except Exception:
        if interrupt.seen:
            return _interrupted()
        traceback.print_exc()
        print("internal error: please report this with the input that caused it", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    sys.exit(main())
