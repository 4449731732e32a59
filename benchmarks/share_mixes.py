"""Random share mixes built unlike shape c: greedy's per-priority placement, to compare two versions of the planner.

``benchmarks/shapes.py`` shape c is one mix (two GPU models, time the scarcer dimension). The kinds here vary what
a rule for packing time and GPU memory together could be tuned to:

=========  =========================================================================================================
kind       what it is
=========  =========================================================================================================
mem        A100-40GB and H100-80GB; small fractions with 8-36 GiB: memory is the scarcer dimension (2.2x its supply)
one        one GPU model (L40S-48GB), fractions 0.1-0.7 with 0-32 GiB
iso        two models, 20 tenants, half the workloads ``isolation: tenant``
restrict   two models, 60% of the workloads tied to one model (``gpu_models``) that holds their memory
three      T4-16GB, L40S-48GB and H200-141GB; 2-64 GiB (the largest fit the H200 alone): memory slightly scarcer
=========  =========================================================================================================

Four priorities (15, 10, 5, 0), 1-20 replicas a workload, 1.1x the GPUs in time asked (0.9x for ``mem``).

Usage (one process; the planner imported is the one on ``PYTHONPATH``, so two checkouts can be compared)::

    python benchmarks/share_mixes.py run --kinds mem,one,iso,restrict,three --gpus 4000 --seeds 1,2,3 --out A.jsonl
    python benchmarks/share_mixes.py compare OLD.jsonl NEW.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import capplan
from capplan.io.scenario import problem_from_data
from capplan.model.validate import check_plan
from capplan.placement import PlanOptions
from capplan.placement.greedy import plan_greedy

Data = dict[str, Any]
KINDS = ("mem", "one", "iso", "restrict", "three")
_GIB = {"T4-16GB": 16, "L40S-48GB": 48, "H200-SXM-141GB": 141, "A100-SXM4-40GB": 40, "H100-SXM5-80GB": 80}


def mix(kind: str, gpus: int, seed: int) -> Data:
    """Scenario data of one kind (see the module docstring), deterministic for (kind, gpus, seed)."""
    rnd = random.Random(f"{kind}{seed}")
    models = {"one": ["L40S-48GB"], "three": ["T4-16GB", "L40S-48GB", "H200-SXM-141GB"]}.get(
        kind, ["A100-SXM4-40GB", "H100-SXM5-80GB"])
    n, per = gpus // 8, 20
    racks = [{"name": f"r{r}", "nodes": [{"name_prefix": f"r{r}n", "count": min(per, n - r),
                                         "gpu": models[(r // per) % len(models)], "gpus": 8, "cpu": 256,
                                         "memory_gib": 2048}]} for r in range(0, n, per)]
    tenants = 20 if kind == "iso" else 200
    work: list[Data] = []
    value, k = 0.0, 0
    while value < (0.9 if kind == "mem" else 1.1) * gpus:
        k += 1
        if kind == "mem":
            f, mem = rnd.choice([0.05, 0.1, 0.1, 0.2, 0.25]), rnd.choice([8, 12, 16, 20, 30, 36])
        elif kind == "three":
            f, mem = rnd.choice([0.1, 0.2, 0.25, 0.5]), rnd.choice([2, 4, 8, 12, 16, 40, 64])
        else:
            f, mem = rnd.choice([0.1, 0.2, 0.25, 0.3, 0.5, 0.7]), rnd.choice([0, 2, 4, 6, 10, 16, 24, 32])
        reps = rnd.choice([1, 3, 5, 10, 20])
        w: Data = {"name": f"w{k}", "kind": "shared", "gpu_fraction": f, "gpu_memory_gib": mem, "replicas": reps,
                   "cpu": 1, "memory_gib": 4, "tenant": f"t{rnd.randrange(tenants)}",
                   "priority": rnd.choice([0, 5, 10, 15])}
        if rnd.random() < (0.5 if kind == "iso" else 0.05):
            w["isolation"] = "tenant"
        if rnd.random() < (0.6 if kind == "restrict" else 0.1):
            fits = [m for m in models if _GIB[m] >= mem]
            if fits:
                w["gpu_models"] = [rnd.choice(fits)]
        value += f * reps
        work.append(w)
    return {"name": f"mix-{kind}-{gpus}-s{seed}", "cluster": {"name": "m", "levels": ["rack", "node"],
                                                                "racks": racks}, "workloads": work}


def run(kinds: list[str], gpus: int, seeds: list[int], out: Path) -> None:
    """Greedy on every (kind, seed), in this process, one after another; JSON lines appended to ``out``."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(capplan.__file__).parent).stdout.strip() or "unknown"
    for kind in kinds:
        for seed in seeds:
            p = problem_from_data(mix(kind, gpus, seed))
            t0 = time.perf_counter()
            plan = plan_greedy(p, PlanOptions(time_limit=600))
            wall = time.perf_counter() - t0
            rec = {"kind": kind, "gpus": gpus, "seed": seed, "priorities": list(plan.priorities),
                   "objective": list(plan.objective), "seconds": round(wall, 2), "valid": check_plan(p, plan) == [],
                   "load1": round(os.getloadavg()[0], 2), "commit": commit}
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"{kind} s{seed}: {rec['objective']} in {rec['seconds']} s", flush=True)


def compare(old: Path, new: Path) -> str:
    """A Markdown table: per (kind, seed), value placed per priority (highest first) before and after, and which
    is lexicographically better (priorities highest first; equal within 0.01 GPU)."""
    def load(path: Path) -> dict[tuple[str, int, int], Data]:
        return {(r["kind"], r["gpus"], r["seed"]): r for r in map(json.loads, path.read_text().splitlines())}
    a, b = load(old), load(new)
    lines = ["| kind | GPUs | seed | priorities | before | after | after is | valid | s before / after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key], b[key]
        verdict = "same"
        for u, v in zip(x["objective"], y["objective"], strict=True):
            if abs(u - v) > 0.01:
                verdict = "better" if v > u else "WORSE"
                break
        lines.append(f"| {key[0]} | {key[1]:,} | {key[2]} | {'/'.join(map(str, x['priorities']))} | "
                     f"{' / '.join(f'{v:.1f}' for v in x['objective'])} | "
                     f"{' / '.join(f'{v:.1f}' for v in y['objective'])} | {verdict} | {y['valid']} | "
                     f"{x['seconds']} / {y['seconds']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: ``run`` or ``compare``."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--kinds", default=",".join(KINDS))
    r.add_argument("--gpus", type=int, default=4000)
    r.add_argument("--seeds", default="1,2,3")
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "run":
        bad = [k for k in a.kinds.split(",") if k not in KINDS]
        if bad:
            ap.error(f"--kinds: unknown {bad}; choose from {','.join(KINDS)}")
        run(a.kinds.split(","), a.gpus, [int(s) for s in a.seeds.split(",")], a.out)
    else:
        print(compare(a.old, a.new))


if __name__ == "__main__":
    main()
