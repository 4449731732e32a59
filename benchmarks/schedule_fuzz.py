"""Fuzz campaign for ``schedule``: tiny instances on a grid, an exhaustive oracle, cross-strategy claims, insertion.

Each seed draws a tiny instance (1-2 nodes of 1-2 whole GPUs with 4-8 CPUs, 2-4 workloads of whole GPUs or
CPUs only, 1-2 h runs, releases, deadlines, two priorities, a 3 h horizon on a 1 h grid), schedules it with
``heuristic``, ``cpsat`` and ``auto`` and checks:

- **internal errors**: any exception;
- **invalid**: :func:`capplan.model.validate_schedule.check_schedule` (the insertion check included) finds a
  violation;
- **false claims**: a schedule says ``optimal`` while the exhaustive oracle (every start and node of every
  workload, from the rules alone: per hour and node, GPUs and CPUs) or the other strategy has a better key
  (work per priority, then less demand-weighted wait, more replicas, less unweighted wait), or a bound is below
  the oracle's optimum (at the first level where they differ);
- **overruns**: wall time above 1.1 x limit + 1 s;
- **nondeterminism**: ``cpsat`` and ``auto`` solved again with the same seed give another schedule (run the
  campaign beside a CPU hog, ``--hog``, to check that the default holds at any load).

``python -m benchmarks.schedule_fuzz --first 0 --count 2000`` prints one JSON line per finding and a summary.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import time
import traceback
from typing import Any

HOUR = 3600
H100 = "H100-SXM5-80GB"
LIMIT = 2.0
STRATEGIES = ("heuristic", "cpsat", "auto")


def generate(seed: int) -> dict[str, Any]:
    """One tiny scenario (see the module docstring)."""
    rnd = random.Random(seed)
    sizes = [rnd.choice([1, 2]) for _ in range(rnd.randint(1, 2))]
    nodes = [{"name": f"n{i}", "gpu": H100, "gpus": g, "cpu": rnd.choice([4, 8]), "memory_gib": 256}
             for i, g in enumerate(sizes)]
    most = max(sizes)
    workloads = []
    for i in range(rnd.randint(2, 4)):
        w: dict[str, Any] = {"name": f"w{i}", "duration": rnd.choice([1, 2]) * HOUR, "memory_gib": 1,
                             "release": rnd.choice([0, 0, 1]) * HOUR, "priority": rnd.choice([0, 0, 5]),
                             "cpu": rnd.choice([1, 2, 4])}
        if rnd.random() < 0.75:
            w["gpus"] = rnd.randint(1, most)
        if rnd.random() < 0.3:
            w["deadline"] = w["release"] + w["duration"] + rnd.choice([0, 1]) * HOUR
        workloads.append(w)
    return {"schedule": {"horizon": "3h", "step": "1h"},
            "cluster": {"name": "t", "levels": ["node"], "nodes": nodes}, "workloads": workloads}


Key = tuple[tuple[int, ...], int, int, int]


def _better(a: Key, b: Key) -> bool:
    return (a[0], -a[1], a[2], -a[3]) > (b[0], -b[1], b[2], -b[3])


def oracle(data: dict[str, Any]) -> Key:
    """The best key over every start and node of every workload (one replica each), from the rules only."""
    ws, nodes = data["workloads"], data["cluster"]["nodes"]
    hours = 3
    prios = sorted({w["priority"] for w in ws}, reverse=True)
    options = []
    for w in ws:
        last = min(w.get("deadline", hours * HOUR), hours * HOUR) - w["duration"]
        opts: list[tuple[int, int] | None] = [None]
        opts += [(t, n) for t in range(w["release"], last + 1, HOUR) for n in range(len(nodes))
                 if w.get("gpus", 0) <= nodes[n]["gpus"]]
        options.append(opts)
    best: Key | None = None
    for choice in itertools.product(*options):
        gpus = [[0] * hours for _ in nodes]
        cpus = [[0] * hours for _ in nodes]
        ok = True
        for w, c in zip(ws, choice, strict=True):
            if c is None:
                continue
            t, n = c
            for h in range(t // HOUR, (t + w["duration"]) // HOUR):
                gpus[n][h] += w.get("gpus", 0)
                cpus[n][h] += w["cpu"]
                ok = ok and gpus[n][h] <= nodes[n]["gpus"] and cpus[n][h] <= nodes[n]["cpu"]
        if not ok:
            continue
        run = [(w, c) for w, c in zip(ws, choice, strict=True) if c is not None]
        work = tuple(sum(w.get("gpus", 0) * w["duration"] for w, _ in run if w["priority"] == q) for q in prios)
        cand: Key = (work, sum(w.get("gpus", 0) * (c[0] - w["release"]) for w, c in run), len(run),
                     sum(c[0] - w["release"] for w, c in run))
        if best is None or _better(cand, best):
            best = cand
    assert best is not None
    return best


def _key(s: Any) -> Key:
    return (tuple(round(x * HOUR) for x in s.objective), round(s.wait_gpu_h * HOUR), len(s.assignments),
            s.wait_replica_s or 0)


def _fingerprint(s: Any) -> tuple[Any, ...]:
    """What must not change between two runs with one seed: status, figures, assignments and reasons."""
    return (s.status, s.objective, s.bound, s.wait_gpu_h, tuple(a.model_dump_json() for a in s.assignments),
            tuple(u.model_dump_json() for u in s.unscheduled))


def run_seed(seed: int) -> list[dict[str, Any]]:
    """Schedule seed ``seed`` with both strategies; the findings (empty when all is well)."""
    from capplan import problem_from_data, schedule
    from capplan.model.validate_schedule import check_schedule

    data = generate(seed)
    p = problem_from_data(data)
    best = oracle(data)
    found: list[dict[str, Any]] = []
    got: dict[str, Any] = {}
    for strategy in STRATEGIES:
        t0 = time.perf_counter()
        try:
            s = schedule(p, strategy, time_limit=LIMIT, seed=seed % 100)
        except Exception as exc:
            found.append({"seed": seed, "strategy": strategy, "kind": "internal error",
                          "error": f"{type(exc).__name__}: {exc}"[:300], "trace": traceback.format_exc(limit=3)[-600:]})
            continue
        wall = time.perf_counter() - t0
        got[strategy] = s
        if wall > 1.1 * LIMIT + 1:
            found.append({"seed": seed, "strategy": strategy, "kind": "overrun", "wall": round(wall, 2)})
        bad = check_schedule(p, s)
        if bad:
            found.append({"seed": seed, "strategy": strategy, "kind": "invalid", "violations": bad[:3]})
        key = _key(s)
        if _better(key, best):
            found.append({"seed": seed, "strategy": strategy, "kind": "oracle wrong?", "key": key, "best": best})
        if s.status == "optimal" and _better(best, key):
            found.append({"seed": seed, "strategy": strategy, "kind": "false claim", "key": key, "best": best})
        bound = tuple(round(x * HOUR) for x in s.bound)
        if bound < best[0]:
            found.append({"seed": seed, "strategy": strategy, "kind": "false bound", "bound": bound, "best": best[0]})
        if strategy != "heuristic":
            again = schedule(p, strategy, time_limit=LIMIT, seed=seed % 100)
            if _fingerprint(again) != _fingerprint(s):
                found.append({"seed": seed, "strategy": strategy, "kind": "nondeterministic"})
    for a, b in itertools.permutations(STRATEGIES, 2):
        if a in got and b in got and got[a].status == "optimal" and _better(_key(got[b]), _key(got[a])):
            found.append({"seed": seed, "strategy": a, "kind": "false claim (cross-strategy)"})
    return found


def main(argv: list[str] | None = None) -> None:
    """Run seeds ``first .. first + count - 1``; one JSON line per finding, then a summary line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--hog", action="store_true", help="run a CPU-bound process beside the campaign (determinism "
                                                        "at load)")
    a = ap.parse_args(argv)
    hog = None
    if a.hog:
        import subprocess
        import sys

        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    t0 = time.perf_counter()
    counts: dict[str, int] = {}
    for seed in range(a.first, a.first + a.count):
        for f in run_seed(seed):
            counts[f["kind"]] = counts.get(f["kind"], 0) + 1
            print(json.dumps(f), flush=True)
    load = os.getloadavg()[0]
    if hog is not None:
        hog.terminate()
        hog.wait()
    print(json.dumps({"instances": a.count, "solves": a.count * (2 * len(STRATEGIES) - 1), "hog": a.hog,
                      "findings": counts, "seconds": round(time.perf_counter() - t0, 1), "load1": round(load, 2)}),
          flush=True)


if __name__ == "__main__":
    main()
