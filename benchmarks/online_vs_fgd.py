"""capplan's online policy against FGD, per trace file of the Alibaba v2023 family.

For every pod file ``openb_pod_list_*.csv`` present in the data folder (or ``--files``), runs the
online protocol of the FGD paper (``capplan.bench``: seed-shuffled pods, inflation to 130% of GPU
capacity, place on arrival or fail for good) with ``--policies`` (default ``capplan,fgd``: the
first is the candidate, ``fgd`` the same simulator's FGD) over ``--seeds`` and compares the mean
unallocated GPUs at 100% and 130% arrived (allocation binned as in the authors' analysis,
:func:`capplan.bench.metrics.bin_records`). Where the FGD authors published per-run results
(``fgd-expected-results/analysis_allo_discrete.csv``, seeds 42-51), their mean is shown too, and per
seed how many of the candidate's runs beat the published run of the same seed.
A file *wins* when the candidate leaves fewer unallocated GPUs than the simulator's FGD at both
points and, where published, fewer than the published FGD mean.

Runs skip memory tracing (``run_online`` traces allocations, which triples a run's time); the
allocation figures are the same. Each finished run is saved to ``OUT/<file>-<policy>-<seed>.json``
(``file, policy, seed, seconds`` and the allocation % at ``"100"`` and ``"130"``; the format of
``benchmarks/fgd_reproduce.py``); existing files are reused, so an interrupted benchmark resumes
(after changing a policy, use a fresh ``-o``). Results are recorded in docs/benchmarks-online.md.

Usage::

    python benchmarks/online_vs_fgd.py [--files default,cpu250] [--seeds 42-51] [--policies capplan,fgd]
                                       [--jobs 2] [--data DIR] [-o OUT]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "alibaba-gpu-v2023"
POINTS = (100, 130)
PUBLISHED = "06-FGD"
PREFIX = "openb_pod_list_"


def _one(args: tuple[str, str, str, int]) -> dict[str, object]:
    data, file, policy, seed = args
    from capplan.bench.metrics import bin_records
    from capplan.bench.online.frag import TypicalPods
    from capplan.bench.online.policies import PolicyContext
    from capplan.bench.online.sim import Fleet, PodTable, simulate
    from capplan.bench.online.table import make_policy
    from capplan.bench.protocols import online_order
    from capplan.io.alibaba import read_nodes, read_pods

    fleet = Fleet.from_trace(read_nodes(Path(data) / "openb_node_list_gpu_node.csv"))
    pods = PodTable.from_trace(read_pods(Path(data) / f"{PREFIX}{file}.csv"))
    order = online_order(pods, fleet.total_milli, seed)
    ctx = PolicyContext(fleet=fleet, pods=pods, typical=TypicalPods.from_pods(fleet, pods), seed=seed)
    t0 = time.perf_counter()
    _, res = simulate(fleet, pods, order, make_policy(policy, ctx), seed)
    seconds = time.perf_counter() - t0
    alloc = {r.arrived_pct: r.allocation_pct for r in bin_records(res.arrived_milli, res.used_milli,
                                                                     fleet.total_milli, {})}
    return {"file": file, "policy": policy, "seed": seed, "seconds": round(seconds, 3),
            **{str(p): alloc[p] for p in POINTS}}


def published_runs(data: Path) -> dict[str, dict[int, dict[int, float]]]:
    """Published FGD allocation per trace file (short name, e.g. ``cpu250``), point and seed."""
    with open(data / "fgd-expected-results" / "analysis_allo_discrete.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["sc_policy"] == PUBLISHED]
    out: dict[str, dict[int, dict[int, float]]] = {}
    for r in rows:
        per = out.setdefault(r["workload"].removeprefix(PREFIX), {p: {} for p in POINTS})
        for p in POINTS:
            per[p][int(r["seed"])] = float(r[str(p)])
    return out


def published(data: Path) -> dict[str, dict[int, float]]:
    """Published FGD mean allocation at POINTS per trace file (short name, e.g. ``cpu250``)."""
    return {name: {p: statistics.mean(per[p].values()) for p in POINTS}
            for name, per in sorted(published_runs(data).items())}


def present(data: Path) -> list[str]:
    """Short names of the pod files in ``data``: default first, then by name, numbers as numbers."""
    names = [p.name.removeprefix(PREFIX).removesuffix(".csv") for p in data.glob(f"{PREFIX}*.csv")]
    return sorted(names, key=lambda f: (f != "default", re.sub(r"\d+", lambda m: m[0].zfill(6), f)))


def _seeds(text: str) -> list[int]:
    from capplan.bench.protocols import seeds_from

    return seeds_from(text)


def main() -> int:
    """Run the comparison and print a Markdown table; exit 0 when the first policy wins every file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", default="", help="comma-separated short names (default: every pod file present)")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--policies", default="capplan,fgd")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("-o", "--out", type=Path, default=Path("out-online-vs-fgd"))
    args = ap.parse_args()
    pub = published(args.data)
    pub_runs = published_runs(args.data)
    have = present(args.data)
    files = [f.strip() for f in args.files.split(",") if f.strip()] or have
    missing = [f for f in files if f not in have]
    if missing:
        print(f"--files: no pod file for {', '.join(missing)} in {args.data}; choose from {', '.join(have)}",
              file=sys.stderr)
        return 2
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    seeds = _seeds(args.seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(str(args.data), f, p, s) for f in files for p in policies for s in seeds]
    todo = [j for j in jobs if not (args.out / f"{j[1]}-{j[2]}-{j[3]}.json").is_file()]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for res in pool.map(_one, todo):
            path = args.out / f"{res['file']}-{res['policy']}-{res['seed']}.json"
            path.write_text(json.dumps(res))
            print(f"done {path.name}: {res['100']} / {res['130']} ({res['seconds']} s)", file=sys.stderr)
    results = [json.loads((args.out / f"{j[1]}-{j[2]}-{j[3]}.json").read_text()) for j in jobs]
    from capplan.io.alibaba import read_nodes

    gpus = sum(n.gpus for n in read_nodes(args.data / "openb_node_list_gpu_node.csv"))

    def unalloc(alloc: float) -> float:
        return (100 - alloc) * gpus / 100

    def per_seed(f: str, p: str, pt: int) -> dict[int, float]:
        return {int(r["seed"]): unalloc(float(r[str(pt)])) for r in results if r["file"] == f and r["policy"] == p}

    first, base = policies[0], "fgd" if "fgd" in policies[1:] else None
    wins = 0
    print(f"Unallocated GPUs (mean of {len(seeds)} seeds; {gpus} GPUs; lower is better). "
          f"FGD = `fgd` in this simulator; published = the authors' FGD mean (seeds 42-51), where published.\n")
    print("| trace file | policy | unalloc. @100 | % @100 | unalloc. @130 | FGD @100 | FGD @130 | published @100 | "
          "published @130 | seeds better than FGD @100 / @130 | seeds better than published run @100 / @130 | "
          "s/run | win |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in files:
        for p in policies:
            mine = {pt: per_seed(f, p, pt) for pt in POINTS}
            m = {pt: statistics.mean(mine[pt].values()) for pt in POINTS}
            fg = {pt: per_seed(f, base, pt) for pt in POINTS} if base else None
            fm = {pt: statistics.mean(fg[pt].values()) for pt in POINTS} if fg else None
            pm = {pt: unalloc(pub[f][pt]) for pt in POINTS} if f in pub else None
            better = "-" if fg is None or p == base else " / ".join(
                f"{sum(mine[pt][s] < fg[pt][s] for s in seeds)}" for pt in POINTS)
            runs = pub_runs.get(f, {})
            paired = [s for s in seeds if runs and all(s in runs[pt] for pt in POINTS)]
            better_pub = "-" if not paired else " / ".join(
                f"{sum(mine[pt][s] < unalloc(runs[pt][s]) for s in paired)} of {len(paired)}"
                for pt in POINTS)
            win = p != base and all((fm is None or m[pt] < fm[pt]) and (pm is None or m[pt] < pm[pt])
                                    for pt in POINTS)
            wins += win and p == first
            secs = statistics.mean(float(r["seconds"]) for r in results if r["file"] == f and r["policy"] == p)

            def cell(d: dict[int, float] | None, pt: int) -> str:
                return "-" if d is None else f"{d[pt]:.1f}"

            print(f"| {f} | {p} | {m[100]:.1f} | {100 * m[100] / gpus:.2f} | {m[130]:.1f} | {cell(fm, 100)} | "
                  f"{cell(fm, 130)} | {cell(pm, 100)} | {cell(pm, 130)} | {better} | {better_pub} | {secs:.1f} | "
                  f"{'-' if p == base else 'win' if win else 'LOSS'} |")
    print(f"\n{first} wins {wins} of {len(files)} files ({time.perf_counter() - t0:.0f} s wall, "
          f"{args.jobs} processes)")
    return 0 if wins == len(files) else 1


if __name__ == "__main__":
    sys.exit(main())
