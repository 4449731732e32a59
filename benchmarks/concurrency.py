"""The library from a thread pool: concurrent ``solve()``, ``schedule()`` and reservation solves from a cold start.

A platform service plans several clusters at once from threads. This harness starts a *fresh* interpreter
(``child``: nothing of capplan imported yet), releases 8 threads at one barrier so that their first calls
import the engine at the same moment, and meanwhile writes numbered lines to file descriptor 1 from another
thread. It then solves the same jobs serially and prints one JSON line: every result, concurrent and serial,
and how many numbered lines it wrote. The parent (``trial``) checks that

- no call raised (an import race shows as ``ImportError``/``_DeadlockError``),
- each concurrent result equals the serial one (the jobs are deterministic: fixed seed, one worker,
  instances small enough to finish far inside their limits),
- every numbered line reached the real stdout (nothing redirected file descriptor 1 while the solves ran).

Run ``python -m benchmarks.concurrency --trials 20`` for a campaign; ``tests/placement/test_threads.py``
runs one trial.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
THREADS = 8
_EXAMPLES = ROOT / "models" / "examples"


def _jobs() -> list[tuple[str, str, str]]:
    """(kind, scenario file, strategy) of the 8 jobs: every planner family, the time engine, reservations."""
    return [
        ("plan", "mixed-fleet.yaml", "heuristic"),
        ("plan", "mig-inference.yaml", "patterns"),
        ("plan", "training-cluster.yaml", "cpsat"),
        ("plan", "mixed-fleet.yaml", "greedy"),
        ("plan", "mig-inference.yaml", "lns"),
        ("plan", "training-cluster.yaml", "decompose"),
        ("schedule", "schedule-week.yaml", "heuristic"),
        ("reserve", "reserve-small.yaml", "extensive"),
    ]


def _run(job: tuple[str, str, str]) -> Any:
    """One job's result as plain data (imports happen here, inside the thread, on purpose)."""
    kind, name, strategy = job
    path = _EXAMPLES / name
    if kind == "reserve":
        from capplan.reserve import SolverSettings, build_problem, load_planning, solve

        plan = solve(build_problem(load_planning(path)), SolverSettings(time_limit=20, method=strategy))
        return {"status": plan.status, "cost": round(plan.costs["total"], 4)}
    from capplan import load_scenario, schedule, solve

    p = load_scenario(path)
    if kind == "schedule":
        s = schedule(p, strategy=strategy, time_limit=10, seed=0)
        return {"status": s.status, "objective": list(s.objective),
                "starts": sorted((r.name, r.start_s) for r in s.workloads)}
    from capplan import PlanOptions

    plan = solve(p, strategy, PlanOptions(time_limit=20, seed=0, workers=1))
    return {"status": plan.status, "objective": list(plan.objective),
            "assignments": sorted(a.model_dump_json() for a in plan.assignments)}


def child() -> None:
    """The cold-start run (see the module docstring); prints one JSON line on stdout."""
    jobs = _jobs()
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        while not stop.is_set():
            os.write(1, f"tick {written[0]}\n".encode())
            written[0] += 1
            time.sleep(0.0005)

    def work(i: int) -> None:
        barrier.wait()
        try:
            results[i] = _run(jobs[i])
        except BaseException as exc:  # an import race or solver failure is the finding
            results[i] = {"error": f"{type(exc).__name__}: {exc}"}

    w = threading.Thread(target=writer)
    w.start()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    w.join()
    serial = []
    for job in jobs:
        try:
            serial.append(_run(job))
        except Exception as exc:
            serial.append({"error": f"{type(exc).__name__}: {exc}"})
    sys.stdout.flush()
    print(json.dumps({"jobs": jobs, "concurrent": results, "serial": serial, "ticks": written[0]}), flush=True)


def trial(timeout: float = 300.0) -> dict[str, Any]:
    """One cold interpreter; the findings (empty when the library behaved)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "benchmarks.concurrency", "--child"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    lines = out.stdout.splitlines()
    findings: list[str] = []
    if out.returncode != 0:
        findings.append(f"exit {out.returncode}: {out.stderr.strip()[-300:]}")
    try:
        rec = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        return {"wall": round(wall, 2), "findings": [*findings, "no result line on stdout (stdout lost?)"]}
    ticks = [ln for ln in lines[:-1] if ln.startswith("tick ")]
    if len(ticks) != rec["ticks"]:
        findings.append(f"stdout lost {rec['ticks'] - len(ticks)} of {rec['ticks']} lines written during the solves")
    for job, con, ser in zip(rec["jobs"], rec["concurrent"], rec["serial"], strict=True):
        if "error" in con or "error" in ser:
            findings.append(f"{job}: {con.get('error') or ser.get('error')}")
        elif con != ser:
            findings.append(f"{job}: concurrent result differs from the serial one")
    if "Running HiGHS" in out.stdout:
        findings.append("a solver banner reached stdout")
    return {"wall": round(wall, 2), "findings": findings}


def main(argv: list[str] | None = None) -> None:
    """``--child`` (one cold run) or ``--trials N`` (a campaign; prints one line per trial and a summary)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trials", type=int, default=10)
    a = ap.parse_args(argv)
    if a.child:
        child()
        return
    bad = 0
    for k in range(a.trials):
        r = trial()
        bad += bool(r["findings"])
        print(json.dumps({"trial": k, **r}), flush=True)
    print(f"{a.trials} cold starts x {THREADS} threads: {bad} with findings", flush=True)


if __name__ == "__main__":
    main()
