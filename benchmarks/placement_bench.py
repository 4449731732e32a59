"""Placement benchmark: greedy vs CP-SAT on generated instances (small and medium), seeds fixed.

Usage::

    python benchmarks/placement_bench.py generate          # writes benchmarks/instances/*.yaml
    python benchmarks/placement_bench.py run [--sizes small medium] [--markdown FILE]

Each (instance, planner) pair runs in a fresh process so that its peak resident memory
(``ru_maxrss``, which includes CP-SAT's C++ allocations) is measured on its own. Targets
(issue 3): small instances proven optimal in under 10 s each; medium instances give a first
valid plan within 2 s and a gap of at most 2% at 60 s. Results go to
``docs/benchmarks-placement.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
INSTANCES = HERE / "instances"
SIZES: dict[str, dict[str, Any]] = {
    "small": dict(racks=2, nodes_per_rack=8, replicas=100, seeds=(1, 2, 3), limit=10.0),
    "medium": dict(racks=16, nodes_per_rack=8, replicas=1500, seeds=(1, 2), limit=60.0),
}
MODELS = [("H100-SXM5-80GB", 224, 2048), ("A100-SXM4-80GB", 128, 1024)]


def generate(size: str, seed: int) -> dict[str, Any]:
    """A scenario mapping: racks of 8-GPU nodes, gangs, MIG, shares, whole GPUs and CPU pods."""
    cfg = SIZES[size]
    rnd = random.Random(seed)
    racks = []
    for r in range(int(cfg["racks"])):
        model, cpu, mem = MODELS[r % len(MODELS)]
        nodes = [
            {"name": f"r{r + 1}n{k + 1}", "gpu": model, "gpus": 8, "cpu": cpu, "memory_gib": mem}
            for k in range(int(cfg["nodes_per_rack"]))
        ]
        if r % 4 == 3:  # a rack with preset MIG GPUs
            nodes[0]["gpu_modes"] = [{"gpus": [0, 1, 2, 3], "mode": "mig"}]
        racks.append({"name": f"r{r + 1}", "power_kw": 8 * 0.7 * int(cfg["nodes_per_rack"]) * 0.85, "nodes": nodes})
    target = int(cfg["replicas"])
    capacity = 8 * int(cfg["racks"]) * int(cfg["nodes_per_rack"])
    ws: list[dict[str, Any]] = []
    n = placed = 0
    demand = 0.0  # GPUs asked for (MIG slices at 1/7, shares at their value)
    kinds = (
        ["gang", "mig", "share", "whole", "gang", "whole", "mig", "cpu"]
        if size == "small"
        else ["gang", "mig", "mig", "share", "whole", "cpu"]
    )
    while placed < target:
        kind = kinds[n % len(kinds)] if n < len(kinds) else rnd.choice(kinds)
        if demand > 1.02 * capacity:
            kind = "cpu"  # the GPUs are (over)booked: fill the replica count with CPU pods
        prio = rnd.choice([1000, 100, 10])
        w: dict[str, Any] = {"name": f"{kind}-{n}", "priority": prio, "tenant": rnd.choice(["a", "b", "c"])}
        scale = 1 if size == "small" else 4
        if kind == "gang":
            reps = rnd.choice([2, 3, 4])
            w.update(
                kind="training",
                replicas=reps,
                gpus=8,
                cpu=32,
                memory_gib=256,
                topology={"required": "rack"} if rnd.random() < 0.6 else {"preferred": "rack"},
            )
            per = 8.0
        elif kind == "mig":
            reps = rnd.randint(4, 12) * scale
            prof = rnd.choice(["1g.10gb", "2g.20gb", "3g.40gb", "auto"])
            w.update(replicas=reps, mig=prof, cpu=2, memory_gib=16)
            if prof == "auto":
                w["gpu_memory_gib"] = rnd.choice([8, 18, 35])
            if rnd.random() < 0.3:
                w["isolation"] = "tenant"
            per = {"1g.10gb": 1, "2g.20gb": 2, "3g.40gb": 3, "auto": 2}[prof] / 7
        elif kind == "share":
            reps = rnd.randint(4, 12) * scale
            frac = rnd.choice([0.25, 0.5])
            w.update(
                kind="shared",
                replicas=reps,
                gpu_fraction=frac,
                gpu_memory_gib=16,
                cpu=1,
                memory_gib=8,
                preemptible=True,
            )
            per = frac
        elif kind == "whole":
            reps = rnd.randint(2, 8) * scale
            w.update(
                replicas=reps,
                gpus=rnd.choice([1, 2, 4] if size == "medium" else [2, 4, 8]),
                cpu=8,
                memory_gib=64,
            )
            per = float(w["gpus"])
        else:
            reps = rnd.randint(2, 6) * scale
            w.update(replicas=reps, cpu=rnd.choice([4, 8]), memory_gib=32)
            per = 0.0
        reps = min(reps, target - placed)
        if kind == "gang" and reps < 2:
            break
        w["replicas"] = reps
        if prio == 1000 and kind in ("mig", "share") and rnd.random() < 0.3:
            w["sla"] = "guaranteed"
        ws.append(w)
        placed += reps
        demand += reps * per
        n += 1
    return {
        "name": f"{size}-{seed}",
        "cluster": {"name": f"{size}-{seed}", "levels": ["rack", "node"], "racks": racks},
        "workloads": ws,
    }


def _write_instances() -> list[Path]:
    INSTANCES.mkdir(exist_ok=True)
    out = []
    for size, cfg in SIZES.items():
        for seed in cfg["seeds"]:
            path = INSTANCES / f"{size}-{seed}.yaml"
            path.write_text(
                f"# generated by benchmarks/placement_bench.py generate ({size}, seed {seed})\n"
                + yaml.safe_dump(generate(size, seed), sort_keys=False),
                encoding="utf-8",
            )
            out.append(path)
    return out


def _one(path: str, planner: str, limit: float, workers: int, q: Any) -> None:
    from capplan.placement.strategies import STRATEGIES, loaded

    loaded(STRATEGIES[planner])  # the strategy's modules (OR-Tools, ...) imported before the clock starts
    from capplan.io.scenario import load_scenario
    from capplan.placement import PlanOptions, solve
    p = load_scenario(path)
    first: list[float] = []
    t0 = time.perf_counter()
    opts = PlanOptions(
        time_limit=limit,
        seed=0,
        workers=workers,
        progress=lambda d: first.append(time.perf_counter() - t0) if not first else None,
    )
    plan = solve(p, planner, opts)
    secs = time.perf_counter() - t0
    q.put(
        {
            "instance": Path(path).stem,
            "planner": planner,
            "status": plan.status,
            "objective": list(plan.objective),
            "bound": list(plan.bound),
            "gap": plan.gap,
            "seconds": round(secs, 2),
            "first_plan_s": round(first[0], 3) if first else round(secs, 3),
            "peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "replicas_placed": plan.metrics.get("replicas_placed"),
            "stages": [(s["name"], s["status"]) for s in plan.metrics.get("cpsat", {}).get("stages", [])],
            "priorities_done_s": plan.metrics.get("cpsat", {}).get("priorities_done_s"),
        }
    )


def run(
    sizes: list[str], workers: int, only: list[str] | None = None, planners: tuple[str, ...] = ("greedy", "cpsat")
) -> list[dict[str, Any]]:
    """Run the planners on every instance of ``sizes`` (or only those named); one fresh process per run."""
    rows = []
    ctx = mp.get_context("spawn")
    for size in sizes:
        cfg = SIZES[size]
        for seed in cfg["seeds"]:
            if only and f"{size}-{seed}" not in only:
                continue
            path = str(INSTANCES / f"{size}-{seed}.yaml")
            for planner in planners:
                q = ctx.Queue()
                proc = ctx.Process(target=_one, args=(path, planner, float(cfg["limit"]), workers, q))
                proc.start()
                row = q.get()
                proc.join()
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], command: str, workers: int) -> str:
    """The dated results table."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE.parent
    ).stdout.strip()
    head = (
        f"Run {time.strftime('%Y-%m-%d')} at commit `{commit}` (plus uncommitted work), machine: 2 cores, "
        f"{workers} CP-SAT worker(s). Command: `{command}`\n\n"
        "| instance | planner | status | objective (GPUs per priority) | bound | gap | seconds | "
        "priorities done s | first plan s | replicas placed | peak MiB |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['instance']} | {r['planner']} | {r['status']} | {r['objective']} | {r['bound']} | "
        f"{r['gap']:.2%} | {r['seconds']} | {r['priorities_done_s'] or '-'} | {r['first_plan_s']} | "
        f"{r['replicas_placed']} | {r['peak_mib']} |\n"
        for r in rows
    )
    return head + body


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=["generate", "run"])
    ap.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=sorted(SIZES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--instances", nargs="+", help="only these instances (e.g. small-2 medium-1)")
    ap.add_argument("--planners", nargs="+", default=["greedy", "cpsat"], choices=["greedy", "cpsat"])
    ap.add_argument("--markdown", help="append the results table to this file")
    args = ap.parse_args(argv)
    if args.action == "generate":
        for path in _write_instances():
            print(path)
        return 0
    rows = run(args.sizes, args.workers, args.instances, tuple(args.planners))
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as fh:
            fh.write(markdown(rows, "python " + " ".join(sys.argv), args.workers) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
