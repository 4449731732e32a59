"""The ``capplan`` command line.

Exit codes (a public contract, see docs/cli.md): 0 success; 3 a plan was written but a
guaranteed workload could not be placed; 2 bad input (nothing written); 1 internal error;
4 ``validate`` found rule violations.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence

from capplan import __version__
from capplan.cli import (
    alibaba,
    bench,
    check,
    common,
    console,
    explain,
    k8s,
    kueue,
    outcome,
    report,
    reserve,
    schedule,
    sweep,
)
from capplan.cli.common import (
    EXIT_GUARANTEE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    add_catalog_option,
    add_prices_option,
)
from capplan.cli.streams import is_broken_pipe, quiet_stderr, stdout_gone
from capplan.io.files import check_output
from capplan.model.errors import InputError, PlanValidationError

log = logging.getLogger("capplan")


def _cmd_plan(args: argparse.Namespace) -> int:
    """``capplan plan``: ``--time-limit`` bounds the whole command (parse, solve, validate, write): its one
    deadline starts here and is handed to ``solve``, which keeps the expected cost of validating and writing."""
    from capplan.model.deadline import Deadline

    deadline = Deadline.start(args.time_limit)
    from capplan.io.files import write_text_atomic
    from capplan.io.scenario import load_scenario
    from capplan.placement import PlanOptions, solve

    problem = load_scenario(args.scenario, args.catalog)
    outcome.warn_time_fields(problem)
    prices = None
    if args.report:
        from capplan.io.report import load_prices

        prices = load_prices(args.prices, problem.catalog)  # bad prices: exit 2 before any work
    elif args.prices:
        raise InputError("--prices", "only used with --report FILE")
    from capplan.cli.progress import stderr_progress

    opts = PlanOptions(time_limit=args.time_limit, deadline=deadline, seed=args.seed,
                       allow_preemption=args.allow_preemption,
                       allow_migration=args.allow_migration, workers=args.workers,
                       progress=stderr_progress(quiet=args.quiet, verbose=args.verbose))
    log.info("scenario loaded; %.2f s of the %g s limit left", deadline.remaining(), args.time_limit)
    plan = solve(problem, args.strategy, opts)
    log.info("plan validated; %.2f s left", deadline.remaining())
    text = plan.to_json()
    if args.output:
        write_text_atomic(args.output, text)
    else:
        sys.stdout.write(text)
    if args.report:
        report.write_report(problem, plan, args.report, prices)
    code = EXIT_GUARANTEE if plan.status == "infeasible" else EXIT_OK
    outcome.print_summary(problem, plan, args.quiet, args.output)
    if args.summary_json:
        outcome.write_summary_json(args.summary_json,
                                   outcome.summary_data(problem, plan, code, args.scenario, args.output))
    log.info("plan written; %.2f s left", deadline.remaining())
    return code


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``capplan`` command."""
    parser = argparse.ArgumentParser(prog="capplan", description="Optimization-based GPU capacity planning.")
    parser.add_argument("--version", action="version", version=f"capplan {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress and details to stderr")
    parser.add_argument("--log-format", choices=console.FORMATS, default="text",
                        help="stderr as text (log lines with time and level) or json (one JSON object per line; "
                             "default text)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="place workloads on a cluster; JSON plan to stdout or -o")
    p.add_argument("scenario", help="scenario file (YAML or JSON)")
    p.add_argument("-o", "--output", help="write the JSON plan here (atomically) instead of stdout")
    p.add_argument("--strategy", default="auto", help=common.strategy_help())
    p.add_argument("--time-limit", type=common.seconds, default=60.0, metavar="S", help="seconds (default 60)")
    p.add_argument("--seed", type=common.seed, default=0, help="random seed (default 0)")
    p.add_argument("--workers", type=common.workers, default=1, help="parallel solver workers (default 1)")
    p.add_argument("--allow-preemption", action="store_true",
                   help="let preemptible running replicas of lower priority be evicted")
    p.add_argument("--allow-migration", action="store_true", help="let migratable running replicas move")
    p.add_argument("-q", "--quiet", action="store_true", help="only the one-line summary on stderr")
    p.add_argument("--summary-json", metavar="FILE",
                   help="also write a run summary for dashboards here (status, gaps, allocation, unplaced "
                        "by reason, wall time; docs/formats.md)")
    p.add_argument("--report", metavar="FILE", help="also write the plan's HTML report here (see `capplan report`)")
    add_prices_option(p)
    add_catalog_option(p)
    p.set_defaults(func=_cmd_plan)

    check.add_parser(sub)

    p = sub.add_parser("catalog", help="list GPU models, or show one model's MIG profiles and placements")
    p.add_argument("model", nargs="?", help="a GPU model or alias: its MIG profiles and placements (default: list all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_catalog_option(p)
    p.set_defaults(func=_cmd_catalog)

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
            with contextlib.suppress(argparse.ArgumentError):
                cmd_parser.add_argument("--log-format", choices=console.FORMATS, default=argparse.SUPPRESS,
                                        help="stderr as text or json lines (default text)")
    return parser


# The command modules, listed explicitly; each imports its heavy modules inside its ``run``.
COMMANDS = (schedule, explain, reserve, bench, k8s, sweep, report)
IMPORT_SOURCES = (alibaba, k8s, kueue)


def _interrupted() -> int:
    """Report the interrupt; return the exit code of the documented "interrupted" path.

    When the KeyboardInterrupt was raised inside Python code that an extension module ran (OR-Tools
    runs some through the C API), CPython marks it "unhandled" although capplan handled it, and at
    exit kills itself with SIGINT instead of returning the exit code; the mark is cleared here.
    """
    console.say("interrupted", "error")
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
    for flag in ("summary_json", "report") if args.command == "plan" else ("summary_json",):
        extra = getattr(args, flag, None)
        if isinstance(extra, str) and extra:
            check_output(extra, "--" + flag.replace("_", "-"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``capplan`` command; return the exit code."""
    console.start()
    with quiet_stderr():  # a log reader that went away drops the diagnostics, not the work
        return _main(argv)


#: The cyclic collector's thresholds while a command runs (Python's default is (700, 10, 10)). A fleet-scale
#: command builds millions of long-lived objects (the scenario, the plan's assignments) and little cyclic
#: garbage: with the default, the collector re-scanned the growing heap in thousands of collections, a sixth of
#: a 100k-GPU plan's CPU time; with these it runs tens of times, and the peak memory is about the same.
COMMAND_GC_THRESHOLDS = (100_000, 50, 100)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with :data:`COMMAND_GC_THRESHOLDS`, restoring the thresholds it found afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(*COMMAND_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _main(argv: Sequence[str] | None) -> int:
    interrupt = common.Interrupt()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, interrupt)
        common.Interrupt.current = interrupt
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        console.start(args.log_format)
        console.configure_logging(args.verbose)
        _check_outputs(args)
        with fewer_collections():
            code: int = args.func(args)
        sys.stdout.flush()  # here, so that a reader that went away is seen by the handler below
        if interrupt.seen:  # the KeyboardInterrupt was swallowed (raised inside a weakref callback, say)
            return _interrupted()
        return code
    except InputError as exc:
        for line in exc.lines():
            console.error(line)
        return EXIT_INPUT
    except PlanValidationError as exc:
        console.say(f"internal error: a planner produced an invalid plan (not written): {exc}", "error")
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:
        if interrupt.seen:
            return _interrupted()
        if is_broken_pipe(exc):  # the reader of stdout went away (`capplan schema | head -1`): not a bug
            return stdout_gone()
        traceback.print_exc()
        console.say("internal error: please report this with the input that caused it", "error")
        return EXIT_INTERNAL
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            common.Interrupt.current = None


if __name__ == "__main__":
    sys.exit(main())
