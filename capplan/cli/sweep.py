"""``capplan sweep``: plan many scenarios (clusters, what-ifs) at once through an executor.

The output folder gets one ``<name>.plan.json`` per scenario, a ``summary.csv`` and a
``manifest.json`` recording each scenario's content hash and settings. All files are written
atomically. A re-run skips scenarios whose plan exists and whose hash (file content, catalogs,
strategy, time limit, seed) is unchanged, so a nightly job can simply run again after a failure.
Exit code: 1 if a scenario hit an internal error, else 2 if one had bad input, else 3 if a plan
left a guaranteed workload unplaced, else 0.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import logging
import signal
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from capplan.cli import common, console
from capplan.cli.common import add_catalog_option
from capplan.model.errors import InputError, PlanValidationError

log = logging.getLogger("capplan.cli.sweep")
#: Exit code after SIGTERM (128 + 15, what a shell reports for a process that SIGTERM ended).
EXIT_TERMINATED = 143
MANIFEST = "manifest.json"
SUMMARY = "summary.csv"
COLUMNS = (
    "scenario",
    "file",
    "status",
    "exit_code",
    "skipped",
    "strategy",
    "objective",
    "gap",
    "solve_seconds",
    "placed",
    "unplaced",
    "evictions",
    "migrations",
    "error",
)


@dataclass(frozen=True)
class Task:
    """One scenario to plan (plain data, so it can be sent to worker processes or Ray)."""

    name: str
    scenario: str
    catalogs: tuple[str, ...]
    strategy: str
    time_limit: float
    seed: int


@dataclass
class Outcome:
    """What planning one scenario produced: the plan text or the error, and summary figures."""

    name: str
    exit_code: int
    status: str = ""
    strategy: str = ""
    objective: str = ""
    gap: float | None = None
    solve_seconds: float | None = None
    placed: int | None = None
    unplaced: int | None = None
    evictions: int | None = None
    migrations: int | None = None
    error: str = ""
    plan_json: str = ""


def plan_task(task: Task) -> Outcome:
    """Plan one scenario; never raises (errors become the outcome's exit code and message).

    The time limit covers the scenario's whole task, as ``capplan plan``'s covers the command: its deadline
    starts here, so loading the scenario and validating the plan count."""
    from capplan.model.deadline import Deadline

    deadline = Deadline.start(task.time_limit)
    from capplan.io.scenario import load_scenario
    from capplan.placement import PlanOptions, solve

    try:
        problem = load_scenario(task.scenario, task.catalogs)
        plan = solve(problem, task.strategy, PlanOptions(time_limit=task.time_limit, deadline=deadline,
                                                         seed=task.seed))
    except InputError as exc:
        return Outcome(task.name, 2, error=str(exc))
    except PlanValidationError as exc:
        return Outcome(task.name, 1, error=f"invalid plan: {exc}")
    except Exception as exc:
        return Outcome(task.name, 1, error=f"{type(exc).__name__}: {exc}; {traceback.format_exc(limit=3)}")
    return Outcome(
        task.name,
        3 if plan.status == "infeasible" else 0,
        status=plan.status,
        strategy=plan.strategy,
        objective=" ".join(f"{x:g}" for x in plan.objective),
        gap=plan.gap,
        solve_seconds=plan.solve_seconds,
        placed=len(plan.assignments),
        unplaced=sum(len(u.replicas) for u in plan.unplaced),
        evictions=len(plan.evictions),
        migrations=len(plan.migrations),
        plan_json=plan.to_json(),
    )


def task_hash(task: Task) -> str | None:
    """Content hash of a task: the scenario's bytes (an overlay's and its bases'), the catalogs' bytes
    and the settings; None when a file cannot be read (the task then fails with the reason)."""
    from capplan.io.overlay import load_scenario_data

    h = hashlib.sha256()
    try:
        files: list[Path] = [*load_scenario_data(task.scenario)[1], *map(Path, task.catalogs)]
        for path in files:
            h.update(path.read_bytes())
    except (InputError, OSError):
        return None
    h.update(json.dumps([task.strategy, task.time_limit, task.seed]).encode())
    return h.hexdigest()


def clean_temporary(out: Path) -> list[Path]:
    """Remove the temporary files an interrupted atomic write may have left in ``out``; return them."""
    gone = []
    for pattern in (".*.plan.json.*.tmp", f".{SUMMARY}.*.tmp", f".{MANIFEST}.*.tmp"):
        for f in out.glob(pattern):
            f.unlink(missing_ok=True)
            gone.append(f)
    return gone


def _retire(out: Path, name: str) -> None:
    """A scenario that now fails keeps no current plan: ``NAME.plan.json`` becomes ``NAME.plan.json.stale``."""
    plan = out / f"{name}.plan.json"
    if plan.exists():
        plan.replace(out / f"{name}.plan.json.stale")


def _names(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        base = Path(p).name.removesuffix(".yaml").removesuffix(".yml").removesuffix(".json")
        name, k = base, 2
        while name in out:
            name, k = f"{base}-{k}", k + 1
        out.append(name)
    return out


def run_sweep(
    scenarios: list[str],
    out_dir: str | Path,
    *,
    strategy: str = "auto",
    time_limit: float = 60.0,
    seed: int = 0,
    catalogs: tuple[str, ...] = (),
    executor: Any = None,
) -> list[dict[str, Any]]:
    """Plan every scenario into ``out_dir``; return the summary rows (also written as CSV).

    ``executor`` is an :class:`~capplan.placement.core.executor.Executor` (default: local processes).
    """
    from capplan.io.files import write_text_atomic
    from capplan.placement.core.executor import LocalExecutor

    out = Path(out_dir)
    if out.is_dir():
        for f in clean_temporary(out):
            log.info("removed %s, left by an interrupted run", f.name)
    manifest_file = out / MANIFEST
    manifest: dict[str, Any] = _read_manifest(manifest_file)
    tasks = [
        Task(n, s, catalogs, strategy, time_limit, seed)
        for n, s in zip(_names(scenarios), scenarios, strict=True)
    ]
    hashes = {t.name: task_hash(t) for t in tasks}
    todo, rows = [], {}
    for t in tasks:
        old = manifest.get(t.name)
        if (hashes[t.name] and old and old.get("hash") == hashes[t.name]
                and (out / f"{t.name}.plan.json").exists()):
            rows[t.name] = {**old["row"], "skipped": True}
            log.info("%s: unchanged, skipped", t.name)
        else:
            todo.append(t)
    t0 = time.perf_counter()
    for o in (executor or LocalExecutor()).map(plan_task, todo):
        if o.plan_json:
            write_text_atomic(out / f"{o.name}.plan.json", o.plan_json)
        row = {k: v for k, v in asdict(o).items() if k != "plan_json"}
        task = next(t for t in todo if t.name == o.name)
        row.update(scenario=o.name, file=task.scenario, skipped=False)
        rows[o.name] = row
        if o.exit_code in (0, 3) and hashes[o.name]:
            manifest[o.name] = {"hash": hashes[o.name], "file": task.scenario, "row": row}
        else:
            manifest.pop(o.name, None)
        if o.exit_code not in (0, 3):
            _retire(out, o.name)
        console.say(f"{o.name}: {o.status or 'error'}{' - ' + o.error.splitlines()[0] if o.error else ''}",
                    "info" if o.exit_code in (0, 3) else "error", scenario=o.name, exit_code=o.exit_code)
        write_text_atomic(manifest_file, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    log.info("planned %d scenario(s) in %.1f s", len(todo), time.perf_counter() - t0)
    ordered = [rows[t.name] for t in tasks]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(ordered)
    write_text_atomic(out / SUMMARY, buf.getvalue())
    write_text_atomic(manifest_file, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return ordered


def _read_manifest(path: Path) -> dict[str, Any]:
    """The previous run's manifest; an unreadable one is treated as absent (everything is planned again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        log.warning("%s is unreadable; planning every scenario again", path)
        return {}
    return data if isinstance(data, dict) else {}


def closing_line(rows: list[dict[str, Any]], out: str) -> str:
    """``5 scenario(s): 3 planned, 1 unchanged, 1 failed -> DIR/summary.csv``."""
    failed = sum(1 for r in rows if int(r["exit_code"]) not in (0, 3))
    unchanged = sum(1 for r in rows if r["skipped"])
    return (f"{len(rows)} scenario(s): {len(rows) - failed - unchanged} planned, {unchanged} unchanged, "
            f"{failed} failed -> {out}/{SUMMARY}")


def sweep_exit_code(rows: list[dict[str, Any]]) -> int:
    """1 if any internal error, else 2 if any bad input, else 3 if any guarantee missed, else 0."""
    codes = {int(r["exit_code"]) for r in rows}
    for c in (1, 2, 3):
        if c in codes:
            return c
    return 0


def add_parser(sub: Any) -> None:
    """Register ``capplan sweep``."""
    p = sub.add_parser("sweep", help="plan many scenarios at once (local processes or Ray)")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO",
                   help="scenario files or what-if overlays (`base: live.yaml` plus edits; docs/cron.md)")
    p.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder for plans, summary.csv, manifest"
    )
    p.add_argument("--strategy", default="auto", help=common.strategy_help() + ", for every scenario")
    p.add_argument(
        "--time-limit", type=common.seconds, default=60.0, metavar="S",
        help="seconds per scenario, its loading and validation included (default 60)"
    )
    p.add_argument("--seed", type=common.seed, default=0, help="random seed, for every scenario (default 0)")
    p.add_argument("--jobs", type=common.workers, default=None, metavar="N", help="parallel scenarios (default: CPUs)")
    p.add_argument(
        "--executor",
        choices=("local", "serial", "ray"),
        default="local",
        help="local processes (default), serial, or ray (pip install 'capplan[ray]')",
    )
    add_catalog_option(p)
    p.set_defaults(func=run, output_dir=True)


class Terminated(BaseException):
    """SIGTERM arrived during a sweep (a BaseException, so that no ``except Exception`` swallows it)."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def run(args: argparse.Namespace) -> int:
    """Run ``capplan sweep``; exit code (see the module docstring).

    SIGTERM: the temporary files are removed, finished plans stay, exit 143 (``terminated``);
    SIGINT: the same cleanup, then the CLI's ``interrupted``, exit 1.
    """
    from capplan.placement.core.executor import make_executor

    if args.jobs is not None and args.jobs <= 0:
        raise InputError("--jobs", "must be at least 1")
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        rows = run_sweep(
            args.scenarios,
            args.output,
            strategy=args.strategy,
            time_limit=args.time_limit,
            seed=args.seed,
            catalogs=tuple(args.catalog),
            executor=make_executor(args.executor, args.jobs),
        )
    except (Terminated, KeyboardInterrupt) as exc:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        if Path(args.output).is_dir():
            clean_temporary(Path(args.output))
        if isinstance(exc, KeyboardInterrupt):
            raise
        console.say("terminated", "error")
        return EXIT_TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    code = sweep_exit_code(rows)
    console.say(closing_line(rows, args.output), "info" if code in (0, 3) else "error")
    return code
